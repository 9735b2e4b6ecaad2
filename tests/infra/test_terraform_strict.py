"""The stand-in lets terraform refuse what a real provider would: broken copies of terraform/.

Each test breaks one thing in a copy and expects terraform's own error, so a green
`make terraform-check` means terraform checked references, instance keys, argument names
and types, and unknown values.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from localcloud.terraform_provider.check import Workspace
from tests.infra import terraform_run

pytestmark = [pytest.mark.infra, pytest.mark.timeout(600)]


def broken_copy(tmp_path: Path, file: str, old: str, new: str) -> Path:
    directory = terraform_run.copy_configuration(tmp_path)
    path = directory / file
    text = path.read_text()
    assert old in text, f"{file} no longer holds {old!r}: update this test"
    path.write_text(text.replace(old, new, 1))
    return directory


def test_a_for_each_resource_read_without_its_key_is_refused(
    terraform_workspace: Workspace, tmp_path: Path
) -> None:
    # The dashboard once read the queue's name as if the queue were a single resource.
    directory = broken_copy(
        tmp_path,
        "dashboard.tf",
        "google_cloud_tasks_queue.main[var.queue].name",
        "google_cloud_tasks_queue.main.name",
    )
    output = terraform_run.refused(terraform_workspace.validate(directory))
    assert "Missing resource instance key" in output
    assert 'google_cloud_tasks_queue.main has "for_each" set' in output


def test_a_misspelt_argument_is_refused(terraform_workspace: Workspace, tmp_path: Path) -> None:
    directory = broken_copy(
        tmp_path,
        "pubsub.tf",
        "ack_deadline_seconds = local.notification",
        "ack_deadline_secnds = local.notification",
    )
    output = terraform_run.refused(terraform_workspace.validate(directory))
    assert "Unsupported argument" in output
    assert 'An argument named "ack_deadline_secnds" is not expected here' in output


def test_a_misspelt_argument_in_a_nested_block_is_refused(
    terraform_workspace: Workspace, tmp_path: Path
) -> None:
    directory = broken_copy(
        tmp_path, "tasks.tf", "max_dispatches_per_second =", "max_dispatch_per_second ="
    )
    output = terraform_run.refused(terraform_workspace.validate(directory))
    assert 'An argument named "max_dispatch_per_second" is not expected here' in output


def test_a_value_of_the_wrong_type_is_refused(
    terraform_workspace: Workspace, tmp_path: Path
) -> None:
    directory = broken_copy(
        tmp_path,
        "pubsub.tf",
        'name   = "${var.name_prefix}-${local.topic_name}"\n  labels = var.labels',
        'name   = "${var.name_prefix}-${local.topic_name}"\n  labels = ["gradeq"]',
    )
    output = terraform_run.refused(terraform_workspace.validate(directory))
    assert "Incorrect attribute value type" in output
    assert "map of string required" in output


def test_a_missing_required_argument_is_refused(
    terraform_workspace: Workspace, tmp_path: Path
) -> None:
    directory = broken_copy(tmp_path, "tasks.tf", "  location = var.region\n", "")
    output = terraform_run.refused(terraform_workspace.validate(directory))
    assert "Missing required argument" in output
    assert 'The argument "location" is required' in output


def test_for_each_over_a_value_known_only_after_apply_is_refused(
    terraform_workspace: Workspace, tmp_path: Path
) -> None:
    directory = terraform_run.copy_configuration(tmp_path)
    # A service account's email is computed by the provider: unknown when planning.
    (directory / "broken.tf").write_text(
        'resource "google_pubsub_topic_iam_member" "by_email" {\n'
        '  for_each = toset([google_service_account.main["worker"].email])\n'
        "  topic    = google_pubsub_topic.events.name\n"
        '  role     = "roles/pubsub.viewer"\n'
        '  member   = "serviceAccount:${each.value}"\n'
        "}\n"
    )
    assert terraform_workspace.validate(directory).returncode == 0
    output = terraform_run.refused(terraform_workspace.plan(directory, terraform_run.MINIMAL_VARS))
    assert "Invalid for_each argument" in output
    assert "cannot be determined until apply" in output


def test_a_dependency_cycle_is_refused(terraform_workspace: Workspace, tmp_path: Path) -> None:
    directory = broken_copy(
        tmp_path,
        "main.tf",
        "depends_on = [google_project_service.main]",
        "depends_on = [google_project_service.main, module.worker]",
    )
    output = terraform_run.refused(terraform_workspace.validate(directory))
    assert "Cycle:" in output
