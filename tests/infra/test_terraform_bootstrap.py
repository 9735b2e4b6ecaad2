"""terraform/bootstrap: the state bucket and the image repository, made before the first
apply (docs/deploy.md, "Bootstrap"), and the main configuration's remote state."""

from __future__ import annotations

import re
from typing import Any

import pytest

from localcloud.terraform_provider.check import Workspace
from tests.infra import terraform_run, tfconfig
from tests.infra.tfconfig import REPO, block

pytestmark = [pytest.mark.infra, pytest.mark.timeout(600)]

BOOTSTRAP = terraform_run.TERRAFORM_DIR / "bootstrap"
DEPLOY = REPO / "docs" / "deploy.md"


@pytest.fixture(scope="module")
def bootstrap() -> tfconfig.Terraform:
    return tfconfig.load(BOOTSTRAP)


def _prevents_destroy(body: dict[str, Any]) -> bool:
    lifecycle = block(body, "lifecycle")
    return lifecycle is not None and lifecycle.get("prevent_destroy") is True


def test_the_state_bucket_is_versioned_private_and_never_destroyed(
    bootstrap: tfconfig.Terraform,
) -> None:
    (bucket,) = bootstrap.of_type("google_storage_bucket").values()
    versioning = block(bucket, "versioning")
    assert versioning is not None and versioning["enabled"] is True
    assert bucket["uniform_bucket_level_access"] is True
    assert bucket["public_access_prevention"] == "enforced"
    assert bucket.get("force_destroy") in (None, False)
    assert _prevents_destroy(bucket)
    # Old versions are pruned by count, never the live state.
    rule = block(bucket, "lifecycle_rule", "condition")
    assert rule is not None and rule["with_state"] == "ARCHIVED"


def test_the_image_repository_has_immutable_tags_and_a_cleanup_policy(
    bootstrap: tfconfig.Terraform,
) -> None:
    (repository,) = bootstrap.of_type("google_artifact_registry_repository").values()
    assert repository["format"] == "DOCKER"
    docker = block(repository, "docker_config")
    assert docker is not None and docker["immutable_tags"] is True
    assert repository["cleanup_policy_dry_run"] is False
    policies = {p["action"]: p for p in repository["cleanup_policies"]}
    # The most recent images (the deployed one, those to roll back to) are kept whatever
    # their age; keep policies win over delete policies.
    assert block(policies["KEEP"], "most_recent_versions") is not None
    assert block(policies["DELETE"], "condition") is not None
    assert _prevents_destroy(repository)


def test_every_call_is_billed_to_the_project(bootstrap: tfconfig.Terraform) -> None:
    # The google provider does not read the quota project of Application Default
    # Credentials: without these, calls count against whatever project the credentials
    # name (or are refused when they name none).
    for directory in (terraform_run.TERRAFORM_DIR, BOOTSTRAP):
        text = "\n".join(p.read_text() for p in directory.glob("*.tf"))
        providers = re.findall(r'^provider "([\w-]+)" \{(.*?)^\}', text, re.M | re.S)
        assert providers, directory
        for name, body in providers:
            assert re.search(r"^\s*billing_project\s*=\s*var\.project_id$", body, re.M), name
            assert re.search(r"^\s*user_project_override\s*=\s*true$", body, re.M), name


def test_the_bootstrap_plans_against_the_provider(terraform_workspace: Workspace) -> None:
    planned = terraform_run.plan_json(terraform_workspace, BOOTSTRAP, BOOTSTRAP / "example.tfvars")
    created = {c["address"] for c in planned["resource_changes"]}
    assert {
        "google_storage_bucket.state",
        "google_artifact_registry_repository.images",
    } <= created


def test_the_deploy_docs_make_the_state_remote_before_the_first_apply() -> None:
    text = DEPLOY.read_text()
    bootstrap = text.index("terraform -chdir=terraform/bootstrap apply")
    first_apply = text.index("terraform apply -var-file=gradeq.tfvars")
    assert bootstrap < first_apply
    # A partial backend block: the bucket is the deployment's, given at init.
    backend = re.search(r'backend "gcs" \{\s*\}', text)
    assert backend and backend.start() < first_apply
    init = re.search(r"terraform init -backend-config=(\S+)", text)
    assert init and init.start() < first_apply
    assert "terraform -chdir=bootstrap output -raw backend_config" in text
    # The deployment's own files stay out of the repository.
    ignored = (REPO / ".gitignore").read_text().splitlines()
    assert "terraform/backend.tf" in ignored and "terraform/*.tfbackend" in ignored


def test_the_deploy_docs_push_the_image_and_deploy_it_by_digest() -> None:
    text = DEPLOY.read_text()
    # terraform/bootstrap makes the repository; gcloud no longer does.
    assert "gcloud artifacts repositories create gradeq --repository-format" not in text
    assert "image_summary.fully_qualified_digest" in text
    assert re.search(r"image\s+= \"\$IMAGE\"", text)
