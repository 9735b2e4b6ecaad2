from __future__ import annotations

from typing import Any

import pytest

from localcloud.terraform_provider.check import Workspace
from tests.infra import terraform_run, tfconfig


@pytest.fixture(scope="session")
def tf() -> tfconfig.Terraform:
    return tfconfig.load()


@pytest.fixture(scope="session")
def terraform_workspace(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    """Launchers and a CLI configuration pointing terraform at the provider stand-in."""
    return terraform_run.workspace(tmp_path_factory.mktemp("terraform-standin"))


@pytest.fixture(scope="session")
def production_plan(terraform_workspace: Workspace) -> dict[str, Any]:
    """`terraform show -json` of a plan of terraform/ on an empty state (minimal.tfvars)."""
    return terraform_run.plan_json(
        terraform_workspace, terraform_run.TERRAFORM_DIR, terraform_run.MINIMAL_VARS
    )


@pytest.fixture(scope="session")
def keyed_grader_plan(terraform_workspace: Workspace) -> dict[str, Any]:
    """A second environment's plan: another name_prefix, and a grader that reads an API
    key (tests/infra/tfvars/), so every service reads a secret."""
    return terraform_run.plan_json(
        terraform_workspace,
        terraform_run.TERRAFORM_DIR,
        terraform_run.MINIMAL_VARS,
        terraform_run.KEYED_GRADER_VARS,
        extra=("-var=name_prefix=staging",),
    )
