"""Terraform itself validates, plans and tests terraform/ offline (`make terraform-check`).

The providers are the stand-in of localcloud/terraform_provider, serving the published
schemas of hashicorp/google, google-beta and time (docs/terraform-check.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from localcloud.terraform_provider import check
from localcloud.terraform_provider.check import Workspace
from tests.infra import terraform_run

pytestmark = [pytest.mark.infra, pytest.mark.timeout(600)]


def test_terraform_validates_the_configuration(terraform_workspace: Workspace) -> None:
    result = terraform_workspace.validate(terraform_run.TERRAFORM_DIR)
    assert result.returncode == 0, result.output
    assert "The configuration is valid" in result.stdout


def test_plan_on_an_empty_state_creates_every_resource(production_plan: dict[str, Any]) -> None:
    changes = production_plan["resource_changes"]
    actions = {tuple(change["change"]["actions"]) for change in changes}
    # An empty state: everything is created, except the secrets adopted with import blocks
    # (docs/deploy.md, step 3), which are read and then updated to the configuration.
    assert actions <= {("create",), ("update",), ("no-op",)}, actions
    imported = {c["address"] for c in changes if c["change"].get("importing")}
    assert imported == {
        "google_secret_manager_secret.operator_keys",
        "google_secret_manager_secret.webhook_secret",
    }
    created = [c for c in changes if c["change"]["actions"] == ["create"]]
    assert len(created) + len(imported) == len(changes)
    assert len(changes) >= 80, len(changes)


def test_terraform_test_runs_the_plan_assertions(terraform_workspace: Workspace) -> None:
    result = terraform_workspace.test(terraform_run.TERRAFORM_DIR)
    assert result.returncode == 0, result.output
    assert "0 failed" in result.stdout and "pass" in result.stdout, result.output


def test_the_check_says_what_is_missing_instead_of_passing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setenv("TERRAFORM", "terraform-that-is-not-installed")
    assert check.main(["--work", str(tmp_path)]) == 2
    assert "terraform is not on PATH" in capsys.readouterr().err
