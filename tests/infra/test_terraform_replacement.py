"""What a plan would destroy: today's terraform/ planned over the previous release's state.

The state (tests/infra/release/, see release_state.py) is what applying the previous
release's terraform/ left. The provider stand-in reports a replacement wherever
hashicorp/google 6.50 would (its ForceNew attributes, localcloud/terraform_provider/
provider_facts.json), so a change that would destroy a database, a bucket or a secret
shows here as it would in the real plan: "must be replaced".
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from localcloud.terraform_provider.check import Workspace
from tests.infra import release_state, terraform_run

pytestmark = [pytest.mark.infra, pytest.mark.timeout(600)]

# Resources that hold data or names a deployment cannot get back: destroying one loses
# jobs, uploads, secret values, queued tasks, undelivered events or analytics, or (a
# queue) reserves its name for days.
STATEFUL = (
    "google_firestore_database",
    "google_storage_bucket",
    "google_secret_manager_secret",
    "google_cloud_tasks_queue",
    "google_pubsub_topic",
    "google_pubsub_subscription",
    "google_bigquery_dataset",
    "google_bigquery_table",
    "google_artifact_registry_repository",
)
# prevent_destroy takes only a literal; terraform refuses a plan that destroys such a
# resource, and stops planning what depends on it.
_PREVENT_DESTROY = re.compile(r"(\bprevent_destroy\s*=\s*)true\b")


def _previous_state() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(release_state.STATE_FILE.read_text())
    return loaded


def _without_prevent_destroy(tmp_path: Path) -> Path:
    """A copy of terraform/ whose resources may be destroyed, so a plan shows every loss
    (where `prevent_destroy` would have terraform refuse at the first one)."""
    directory = terraform_run.copy_configuration(tmp_path)
    for path in directory.rglob("*.tf"):
        text = path.read_text()
        path.write_text(_PREVENT_DESTROY.sub(r"\1false", text))
    return directory


def planned_losses(workspace: Workspace, tmp_path: Path, *variables: str) -> dict[str, list[Any]]:
    """Stateful resources of the previous release that a plan of today's terraform/
    destroys or replaces, with the attributes forcing it (`replace_paths`)."""
    state = tmp_path / "previous.tfstate"
    shutil.copy(release_state.STATE_FILE, state)
    directory = _without_prevent_destroy(tmp_path)
    planned = workspace.plan(
        directory, terraform_run.MINIMAL_VARS, extra=(*variables, f"-state={state}")
    )
    assert planned.returncode == 0, planned.output
    shown = workspace.show_json(directory)
    assert shown.returncode == 0, shown.output
    losses = {}
    for change in json.loads(shown.stdout)["resource_changes"]:
        if change["type"] in STATEFUL and "delete" in change["change"]["actions"]:
            losses[change.get("previous_address", change["address"])] = change["change"].get(
                "replace_paths", []
            )
    return losses


def test_the_previous_release_state_is_a_whole_deployment() -> None:
    release = json.loads(release_state.RELEASE_FILE.read_text())
    assert re.fullmatch(r"[0-9a-f]{40}", release["commit"])
    state = _previous_state()
    found = {r["type"] for r in state["resources"] if r["mode"] == "managed"}
    assert set(STATEFUL) - found == {
        "google_artifact_registry_repository"  # made by hand in that release
    }
    (database,) = [r for r in state["resources"] if r["type"] == "google_firestore_database"]
    # Values as a deployment holds them, not only ids.
    attributes = database["instances"][0]["attributes"]
    assert attributes["location_id"] == "europe-west1" and attributes["name"] == "(default)"


def test_the_shipped_configuration_destroys_nothing_stateful_of_the_previous_release(
    terraform_workspace: Workspace, tmp_path: Path
) -> None:
    losses = planned_losses(terraform_workspace, tmp_path)
    assert losses == {}, (
        "a plan over the previous release's state would destroy or replace these "
        f"(attributes forcing it): {losses}"
    )


@pytest.mark.parametrize(
    ("variable", "expected"),
    [
        # The database's location cannot change: a new one is a new, empty database.
        ("-var=firestore_location=eur3", {"google_firestore_database.main": [["location_id"]]}),
        (
            "-var=region=us-central1",
            {
                "google_storage_bucket.uploads": [["location"]],
                'google_cloud_tasks_queue.main["grading"]': [["location"]],
                "google_bigquery_dataset.analytics": [["location"]],
            },
        ),
        (
            "-var=name_prefix=staging",
            {
                "google_pubsub_topic.events": [["name"]],
                "google_pubsub_subscription.notification": [["name"], ["topic"]],
                "google_secret_manager_secret.webhook_secret": [["secret_id"]],
            },
        ),
    ],
)
def test_a_change_of_an_immutable_attribute_plans_a_replacement(
    terraform_workspace: Workspace, tmp_path: Path, variable: str, expected: dict[str, Any]
) -> None:
    losses = planned_losses(terraform_workspace, tmp_path, variable)
    for address, paths in expected.items():
        assert losses.get(address) == paths, (address, losses)
