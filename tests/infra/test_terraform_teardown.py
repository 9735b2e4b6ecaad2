"""Destroying a deployment keeps what must be kept (docs/deploy.md, "Teardown").

Stateful resources carry `prevent_destroy = true`, so neither an apply nor a
`terraform destroy` removes them by accident; `terraform/teardown.sh` is the one
documented way through: it forgets what stays (secrets with their values, the Firestore
database, the uploads bucket, the analytics dataset and tables) and plans the destruction
of the rest. Both are checked with destroy plans against the provider stand-in, on a state
holding every resource a deployment of terraform/examples/minimal.tfvars creates.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from localcloud.terraform_provider.check import Workspace
from tests.infra import terraform_run, tfconfig

pytestmark = [pytest.mark.infra, pytest.mark.timeout(600)]

# The types that hold data or messages: every resource of these carries prevent_destroy.
STATEFUL = (
    "google_firestore_database",
    "google_storage_bucket",
    "google_secret_manager_secret",
    "google_cloud_tasks_queue",
    "google_pubsub_topic",
    "google_pubsub_subscription",
    "google_bigquery_dataset",
)
# What the teardown leaves in the project (forgotten by terraform, never deleted).
KEPT = {
    "google_secret_manager_secret.operator_keys",
    "google_secret_manager_secret.webhook_secret",
    "google_firestore_database.main",
    "google_storage_bucket.uploads",
    "google_bigquery_dataset.analytics",
    "google_bigquery_table.events",
    "google_bigquery_table.events_v1",
}
# What the teardown deletes although it is protected otherwise.
TRANSPORT = ("google_cloud_tasks_queue", "google_pubsub_topic", "google_pubsub_subscription")


def _prevents_destroy(body: dict[str, Any]) -> bool:
    lifecycle = tfconfig.block(body, "lifecycle")
    return lifecycle is not None and lifecycle.get("prevent_destroy") is True


def test_every_stateful_resource_prevents_its_destruction(tf: tfconfig.Terraform) -> None:
    found = 0
    for rtype in STATEFUL:
        for name, body in tf.of_type(rtype).items():
            found += 1
            assert _prevents_destroy(body), f"{rtype}.{name} has no lifecycle.prevent_destroy"
    assert found >= 13
    # The events table holds the analytics rows: protected beside its dataset.
    assert _prevents_destroy(tf.resource("google_bigquery_table", "events"))


def deployed_state(plan: dict[str, Any]) -> dict[str, Any]:
    """A state holding every resource `plan` creates, each known by its id only."""
    resources: dict[tuple[str | None, str, str], dict[str, Any]] = {}
    keys: dict[tuple[str | None, str, str], list[Any]] = defaultdict(list)
    for change in plan["resource_changes"]:
        if change["mode"] != "managed":
            continue
        module = change.get("module_address")
        ident = (module, change["type"], change["name"])
        resource = resources.setdefault(
            ident,
            {
                "mode": "managed",
                "type": change["type"],
                "name": change["name"],
                "provider": f'provider["{change["provider_name"]}"]',
                "instances": [],
                **({"module": module} if module else {}),
            },
        )
        instance: dict[str, Any] = {"schema_version": 0, "attributes": {"id": change["address"]}}
        if "index" in change:
            instance["index_key"] = change["index"]
            keys[ident].append(change["index"])
            resource["each"] = "list" if isinstance(change["index"], int) else "map"
        resource["instances"].append(instance)
    return {
        "version": 4,
        "terraform_version": "1.9.0",
        "serial": 1,
        "lineage": "00000000-0000-0000-0000-000000000001",
        "outputs": {},
        "resources": list(resources.values()),
    }


@pytest.fixture
def deployed(production_plan: dict[str, Any], tmp_path: Path) -> Path:
    """A copy of terraform/ whose local state holds a whole deployment."""
    directory = terraform_run.copy_configuration(tmp_path)
    (directory / "terraform.tfstate").write_text(json.dumps(deployed_state(production_plan)))
    return directory


def _addresses(state: Path) -> set[str]:
    found = set()
    for resource in json.loads(state.read_text())["resources"]:
        prefix = f"{resource['module']}." if "module" in resource else ""
        for instance in resource["instances"]:
            key = instance.get("index_key")
            suffix = "" if key is None else f"[{json.dumps(key)}]"
            found.add(f"{prefix}{resource['type']}.{resource['name']}{suffix}")
    return found


def test_a_plain_destroy_is_refused_for_every_stateful_resource(
    terraform_workspace: Workspace, deployed: Path
) -> None:
    installed = terraform_workspace.modules(deployed)
    assert installed.returncode == 0, installed.output
    result = terraform_workspace.run(
        deployed,
        "plan",
        "-destroy",
        "-no-color",
        "-input=false",
        "-lock=false",
        f"-var-file={deployed / 'examples' / 'minimal.tfvars'}",
    )
    output = " ".join(terraform_run.refused(result).split())
    # Terraform stops at the first protected resources on each path (a subscription before
    # its topic), so not every one is named; the structure test above covers the rest.
    refused = set(re.findall(r"Resource (\S+) has lifecycle\.prevent_destroy set", output))
    stateful = {
        a
        for a in _addresses(deployed / "terraform.tfstate")
        if a.split("[")[0].rsplit(".", 1)[0] in STATEFUL
    }
    assert refused and refused <= stateful, refused
    assert {
        "google_pubsub_subscription.analytics",
        'google_cloud_tasks_queue.main["grading"]',
    } <= refused


def test_the_teardown_keeps_the_data_and_the_secrets_and_destroys_the_rest(
    terraform_workspace: Workspace, deployed: Path
) -> None:
    installed = terraform_workspace.modules(deployed)
    assert installed.returncode == 0, installed.output
    before = _addresses(deployed / "terraform.tfstate")
    assert before >= KEPT
    completed = subprocess.run(
        [
            "bash",
            str(deployed / "teardown.sh"),
            "-no-color",
            "-lock=false",
            "-var-file=examples/minimal.tfvars",
            "-var=deletion_protection=false",
        ],
        env={**terraform_workspace.env, "TERRAFORM": terraform_workspace.terraform},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    # Forgotten, so no plan can delete them; the override file is gone again.
    after = _addresses(deployed / "terraform.tfstate")
    assert after == before - KEPT
    assert not (deployed / "teardown_override.tf").exists()
    shown = terraform_workspace.run(deployed, "show", "-json", "-no-color", "teardown.tfplan")
    assert shown.returncode == 0, shown.output
    changes = {
        c["address"]: c["change"]["actions"] for c in json.loads(shown.stdout)["resource_changes"]
    }
    assert not KEPT & set(changes)
    assert set(changes) == after
    assert all(actions == ["delete"] for actions in changes.values()), changes
    transport = [a for a in changes if a.split("[")[0].rsplit(".", 1)[0] in TRANSPORT]
    assert len(transport) >= 3 + 2 + 3  # the lanes' queues, two topics, three subscriptions
