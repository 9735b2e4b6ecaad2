"""The provider's own checks, through terraform: broken copies of terraform/ are refused.

terraform validates names, types and references itself (test_terraform_strict.py); these
are the refusals hashicorp/google 6.50 makes on its own, from its validators and schema
(localcloud/terraform_provider/provider_facts.json). Each is planned, because a module's
inputs reach its resources only then.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from localcloud.terraform_provider.check import Workspace
from tests.infra import terraform_run
from tests.infra.test_terraform_strict import broken_copy

pytestmark = [pytest.mark.infra, pytest.mark.timeout(600)]


def refused_plan(workspace: Workspace, directory: Path) -> str:
    return terraform_run.refused(workspace.plan(directory, terraform_run.MINIMAL_VARS))


def test_an_unknown_enum_value_is_refused(terraform_workspace: Workspace, tmp_path: Path) -> None:
    directory = broken_copy(
        tmp_path,
        "run.tf",
        'ingress             = "INGRESS_TRAFFIC_INTERNAL_ONLY"',
        'ingress             = "INGRESS_TRAFFIC_NOPE"',
    )
    output = refused_plan(terraform_workspace, directory)
    assert "expected ingress to be one of" in output
    assert "got INGRESS_TRAFFIC_NOPE" in output


def test_a_push_config_beside_a_bigquery_config_is_refused(
    terraform_workspace: Workspace, tmp_path: Path
) -> None:
    directory = broken_copy(
        tmp_path,
        "pubsub.tf",
        "  bigquery_config {",
        '  push_config {\n    push_endpoint = "https://example.com/push"\n  }\n  bigquery_config {',
    )
    output = refused_plan(terraform_workspace, directory)
    assert "Conflicting configuration arguments" in output
    assert '"push_config": conflicts with bigquery_config' in output


def test_a_malformed_service_account_id_is_refused(
    terraform_workspace: Workspace, tmp_path: Path
) -> None:
    directory = broken_copy(
        tmp_path, "iam.tf", '"${var.name_prefix}-tasks"', '"${var.name_prefix}_Tasks"'
    )
    output = refused_plan(terraform_workspace, directory)
    assert '"account_id" ("gradeq_Tasks") must match regex' in output


def test_a_value_for_a_computed_only_attribute_is_refused(
    terraform_workspace: Workspace, tmp_path: Path
) -> None:
    directory = broken_copy(
        tmp_path,
        "storage.tf",
        "  location = var.region\n",
        '  location = var.region\n  url      = "gs://somewhere-else"\n',
    )
    output = refused_plan(terraform_workspace, directory)
    assert "Value for unconfigurable attribute" in output
    assert '"url": computed attributes cannot be set' in output


def test_a_fraction_for_an_integer_is_refused(
    terraform_workspace: Workspace, tmp_path: Path
) -> None:
    directory = broken_copy(
        tmp_path,
        "tasks.tf",
        "max_attempts       = each.value.retry_config.max_attempts",
        "max_attempts       = 8.5",
    )
    output = refused_plan(terraform_workspace, directory)
    assert "Attribute must be a whole number, got 8.5" in output


def test_a_count_on_an_unset_optional_attribute_is_planned(
    terraform_workspace: Workspace, tmp_path: Path
) -> None:
    # kms_key_name is optional and not computed: unset, the provider plans it null, so
    # terraform knows the count when planning.
    directory = terraform_run.copy_configuration(tmp_path)
    (directory / "cmek_audit.tf").write_text(
        'resource "google_pubsub_topic" "cmek_audit" {\n'
        "  count = google_pubsub_topic.events.kms_key_name == null ? 1 : 0\n"
        '  name  = "cmek-audit"\n'
        "}\n"
    )
    plan = terraform_run.plan_json(terraform_workspace, directory, terraform_run.MINIMAL_VARS)
    addresses = {c["address"] for c in plan["resource_changes"]}
    assert "google_pubsub_topic.cmek_audit[0]" in addresses
