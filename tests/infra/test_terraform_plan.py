"""What must hold in production, asserted on terraform's own plan (`terraform show -json`).

The plan is made offline against the provider stand-in (docs/terraform-check.md) on an
empty state, from terraform/examples/minimal.tfvars.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localcloud.terraform_provider.check import Workspace
from shared.config.settings import Settings
from tests.infra import terraform_run, tfconfig
from tests.infra.tfconfig import REPO

pytestmark = [pytest.mark.infra, pytest.mark.timeout(600)]

PUBLIC = {"allUsers", "allAuthenticatedUsers"}
# Services only Google's own callers (Cloud Tasks, Scheduler, Pub/Sub) may reach.
INTERNAL_SERVICES = ("worker", "notification", "analytics", "gradebook")
RUN_IAM = (
    "google_cloud_run_v2_service_iam_member",
    "google_cloud_run_v2_service_iam_binding",
    "google_cloud_run_v2_service_iam_policy",
    "google_cloud_run_service_iam_member",
    "google_cloud_run_service_iam_binding",
)


def _resources(module: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield from module.get("resources", [])
    for child in module.get("child_modules", []):
        yield from _resources(child)


def planned(plan: dict[str, Any], rtype: str) -> dict[str, dict[str, Any]]:
    """Planned values of every resource of one type, by address (modules' included)."""
    resources = _resources(plan["planned_values"]["root_module"])
    return {r["address"]: r["values"] for r in resources if r["type"] == rtype}


def unknown(plan: dict[str, Any], address: str) -> dict[str, Any]:
    """Which attributes of `address` are known only after apply."""
    (change,) = [c for c in plan["resource_changes"] if c["address"] == address]
    after_unknown: dict[str, Any] = change["change"]["after_unknown"]
    return after_unknown


def configured(plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["address"]: r for r in plan["configuration"]["root_module"]["resources"]}


def services(plan: dict[str, Any], roles: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """Cloud Run services whose name ends with one of `roles` (PREFIX-worker, ...)."""
    found = planned(plan, "google_cloud_run_v2_service")
    return {a: v for a, v in found.items() if str(v["name"]).rsplit("-", 1)[-1] in roles}


def test_no_public_invoker_on_the_internal_services(production_plan: dict[str, Any]) -> None:
    internal = {v["name"] for v in services(production_plan, INTERNAL_SERVICES).values()}
    assert {"gradeq-worker", "gradeq-notification"} <= internal
    for rtype in RUN_IAM:
        for address, values in planned(production_plan, rtype).items():
            members = set(values.get("members") or []) | {values.get("member")}
            members |= {str(values.get("policy_data"))}
            if values.get("name") in internal:
                assert not members & PUBLIC, f"{address} lets anyone invoke {values['name']}"


def test_the_internal_services_take_internal_traffic_and_check_the_invoker(
    production_plan: dict[str, Any],
) -> None:
    for address, values in services(production_plan, INTERNAL_SERVICES).items():
        assert values["ingress"] == "INGRESS_TRAFFIC_INTERNAL_ONLY", address
        # Known and false when planned: not left to a provider default.
        assert "invoker_iam_disabled" not in unknown(production_plan, address), address
        assert values["invoker_iam_disabled"] is False, address


def test_the_public_intake_needs_no_all_users_binding(production_plan: dict[str, Any]) -> None:
    # Domain restricted sharing (Google's secure-by-default organisations) refuses allUsers:
    # a public intake turns the invoker check off on the service instead.
    (intake,) = services(production_plan, ("intake",)).values()
    assert production_plan["variables"].get("intake_public", {}).get("value", True) is True
    assert intake["invoker_iam_disabled"] is True
    for rtype in RUN_IAM:
        for address, values in planned(production_plan, rtype).items():
            members = set(values.get("members") or []) | {values.get("member")}
            assert not members & PUBLIC, f"{address} grants {members & PUBLIC}"


def test_every_subscription_never_expires(production_plan: dict[str, Any]) -> None:
    subscriptions = planned(production_plan, "google_pubsub_subscription")
    assert len(subscriptions) >= 3
    for address, values in subscriptions.items():
        # Without it the provider's default deletes a subscription after 31 quiet days.
        assert values["expiration_policy"] == [{"ttl": ""}], address


def test_subscription_filters_are_the_files(production_plan: dict[str, Any]) -> None:
    raw = json.loads((REPO / "shared/config/subscriptions.json").read_text())
    subscriptions = planned(production_plan, "google_pubsub_subscription")
    notification = raw["subscriptions"]["notification"]["filter"]
    assert notification  # the notifier is pushed only the events it has work for
    assert subscriptions["google_pubsub_subscription.notification"]["filter"] == notification
    # Analytics records every event.
    assert subscriptions["google_pubsub_subscription.analytics"].get("filter") in ("", None)


def _secret_ids(values: Any) -> Iterator[str]:
    """Secret ids a service's planned containers read (env value_source.secret_key_ref)."""
    if isinstance(values, list):
        for item in values:
            yield from _secret_ids(item)
    elif isinstance(values, dict):
        for key, value in values.items():
            if key == "secret_key_ref":
                yield from (ref["secret"] for ref in value)
            else:
                yield from _secret_ids(value)


def _base(address: str) -> str:
    """`google_x.name[0]` -> `google_x.name`."""
    return address.split("[", 1)[0]


def _duration_s(text: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600}
    return float(text[:-1]) * units[text[-1]]


@pytest.mark.parametrize("plan_name", ["production_plan", "keyed_grader_plan"])
def test_every_service_that_reads_a_secret_waits_for_its_grant_to_propagate(
    plan_name: str, request: pytest.FixtureRequest
) -> None:
    plan: dict[str, Any] = request.getfixturevalue(plan_name)
    config = configured(plan)
    readers = 0
    secret_address = {
        v["secret_id"]: _base(a) for a, v in planned(plan, "google_secret_manager_secret").items()
    }
    for address, values in services(
        plan, ("intake", "worker", "notification", "analytics", "gradebook")
    ).items():
        # A service is a call of modules/run_service: its account and its waits are the
        # call's inputs and depends_on.
        assert address.startswith("module."), address
        call = plan["configuration"]["root_module"]["module_calls"][address.split(".")[1]]
        secrets = {secret_address[s] for s in _secret_ids(values["template"])}
        if not secrets:
            continue
        readers += 1
        # The account instance (google_service_account.main["worker"]), as grants name it.
        account = {
            r
            for r in call["expressions"]["service_account"]["references"]
            if r.startswith("google_service_account.") and r.endswith("]")
        }
        assert len(account) == 1, call["expressions"]["service_account"]
        waits = [config[a] for a in call.get("depends_on", []) if a.startswith("time_sleep.")]
        for secret in secrets:
            grants = [
                a
                for a, r in config.items()
                if r["type"] == "google_secret_manager_secret_iam_member"
                and secret in r["expressions"]["secret_id"]["references"]
                and account & set(r["expressions"]["member"]["references"])
                and r["expressions"]["role"]["constant_value"]
                == "roles/secretmanager.secretAccessor"
            ]
            assert grants, f"{address} reads {secret} but nothing grants its account access"
            for grant in grants:
                timed = [
                    w
                    for w in waits
                    if grant
                    in w["expressions"].get("triggers", {}).get("references", [])
                    + w.get("depends_on", [])
                    and _duration_s(w["expressions"]["create_duration"]["constant_value"]) >= 60
                ]
                assert timed, (
                    f"{address} may start before {grant} has propagated: it must depend on a "
                    "time_sleep (>= 60s) that waits for the grant"
                )
    # The keyed plan turns LTI on too: the gradebook reads the LTI sealing key.
    assert readers >= (4 if plan_name == "keyed_grader_plan" else 2)


def test_lti_is_off_without_a_tool_url_and_wired_with_one(
    production_plan: dict[str, Any], keyed_grader_plan: dict[str, Any]
) -> None:
    secret = "google_secret_manager_secret.lti_secrets_key[0]"
    off = production_plan
    assert secret not in planned(off, "google_secret_manager_secret")
    for values in services(off, ("intake", "gradebook")).values():
        assert "GRADEQ_LTI_TOOL_URL" not in _plain_env(values)
        assert "staging-lti-secrets-key" not in set(_secret_ids(values["template"]))
    on = keyed_grader_plan  # lti_tool_url set, name_prefix = "staging"
    assert planned(on, "google_secret_manager_secret")[secret]["secret_id"] == (
        "staging-lti-secrets-key"
    )
    # Adopted like the other secrets: created before the apply, imported by it.
    imported = [c for c in on["resource_changes"] if c["address"] == secret]
    assert imported and imported[0]["change"].get("importing"), imported
    for values in services(on, ("intake", "gradebook")).values():
        assert _plain_env(values)["GRADEQ_LTI_TOOL_URL"] == "https://grading.school.example"
        assert "staging-lti-secrets-key" in set(_secret_ids(values["template"]))
    for values in services(on, ("worker", "notification")).values():
        assert "staging-lti-secrets-key" not in set(_secret_ids(values["template"]))


# Resources whose name would clash between two environments in one project.
ENVIRONMENT_SCOPED = {
    "google_cloud_tasks_queue": "name",
    "google_bigquery_dataset": "dataset_id",
    "google_firestore_database": "name",
}


def test_what_name_prefix_does_not_rename_is_named_in_the_deploy_docs(
    production_plan: dict[str, Any], keyed_grader_plan: dict[str, Any]
) -> None:
    other = keyed_grader_plan  # name_prefix = "staging"
    assert {v["name"] for v in services(other, ("worker",)).values()} == {"staging-worker"}
    shared = []
    for rtype, attribute in ENVIRONMENT_SCOPED.items():
        ours = {v[attribute] for v in planned(production_plan, rtype).values()}
        theirs = {v[attribute] for v in planned(other, rtype).values()}
        shared += sorted(ours & theirs)
    deploy = (REPO / "docs" / "deploy.md").read_text()
    described = tfconfig.load(terraform_run.TERRAFORM_DIR).variables["name_prefix"]["description"]
    if not shared:
        return  # every environment-scoped name follows the prefix
    # Two environments in one project would share these: the docs must say so plainly.
    assert "several environments can" not in deploy and "several environments can" not in described
    assert "needs its own project" in deploy and "own project" in described
    for name in shared:
        assert f"`{name}`" in deploy, f"docs/deploy.md does not name the shared {name!r}"
    # Renaming the queue instead is no way out: Cloud Tasks reserves a deleted queue's name.
    assert "tombstone" in deploy


# --- Cloud Run services are modules/run_service; resources that changed address have a
# moved block (terraform/moved.tf) so an applied deployment keeps them.

# Addresses of earlier layouts (three Cloud Run resources, six service accounts, three
# lane grants per lane, the failed-jobs alert) that an applied deployment of
# minimal.tfvars may hold.
EARLIER_ADDRESSES = [
    "google_logging_metric.job_failed",
    "time_sleep.job_failed_metric",
    "google_monitoring_alert_policy.job_failed",
    *(f"google_cloud_run_v2_service.{s}" for s in ("intake", "worker", "notification")),
    *(
        f"google_service_account.{a}"
        for a in ("intake", "worker", "notification", "tasks_invoker", "scheduler", "pubsub_push")
    ),
    *(
        f'google_cloud_tasks_queue_iam_member.{grant}["{lane}"]'
        for grant in ("lane_intake_enqueuer", "lane_worker_enqueuer", "lane_worker_task_viewer")
        for lane in ("exam", "bulk")
    ),
]
_ADDRESS = re.compile(r'(\w+)\.(\w+)(?:\["([^"]+)"\])?')


def test_every_cloud_run_service_is_a_run_service_module(production_plan: dict[str, Any]) -> None:
    calls = production_plan["configuration"]["root_module"]["module_calls"]
    found = planned(production_plan, "google_cloud_run_v2_service")
    assert sorted(found) == [
        f"module.{s}.google_cloud_run_v2_service.main"
        for s in ("gradebook", "intake", "notification", "worker")
    ]
    for address in found:
        assert calls[address.split(".")[1]]["source"] == "./modules/run_service", address


def _old_state(addresses: list[str]) -> dict[str, Any]:
    """A terraform state holding objects (known by their id only) at `addresses`."""
    resources: dict[tuple[str, str], dict[str, Any]] = {}
    for address in addresses:
        m = _ADDRESS.fullmatch(address)
        assert m, address
        rtype, name, key = m.groups()
        resource = resources.setdefault(
            (rtype, name),
            {
                "mode": "managed",
                "type": rtype,
                "name": name,
                "provider": f'provider["registry.terraform.io/hashicorp/{rtype.split("_")[0]}"]',
                "instances": [],
            },
        )
        instance: dict[str, Any] = {"schema_version": 0, "attributes": {"id": address}}
        if key is not None:
            resource["each"] = "map"
            instance["index_key"] = key
        resource["instances"].append(instance)
    return {
        "version": 4,
        "terraform_version": "1.9.0",
        "serial": 1,
        "lineage": "00000000-0000-0000-0000-000000000000",
        "outputs": {},
        "resources": list(resources.values()),
    }


def test_an_applied_deployment_keeps_what_moved(
    terraform_workspace: Workspace, production_plan: dict[str, Any], tmp_path: Path
) -> None:
    state = tmp_path / "old.tfstate"
    state.write_text(json.dumps(_old_state(EARLIER_ADDRESSES)))
    plan = terraform_run.plan_json(
        terraform_workspace,
        terraform_run.TERRAFORM_DIR,
        terraform_run.MINIMAL_VARS,
        extra=(f"-state={state}",),
    )
    moved = {c["previous_address"]: c for c in plan["resource_changes"] if "previous_address" in c}
    assert sorted(moved) == sorted(EARLIER_ADDRESSES)
    for old, change in moved.items():
        # Updated in place (the stand-in's state knows only the id), never recreated.
        assert change["change"]["actions"] == ["update"], (old, change["address"], change["change"])
    # The same objects, at the addresses a deployment from scratch plans.
    created = {c["address"] for c in production_plan["resource_changes"]}
    assert {c["address"] for c in moved.values()} <= created
    deleted = [c["address"] for c in plan["resource_changes"] if "delete" in c["change"]["actions"]]
    assert deleted == []


def _plain_env(values: dict[str, Any]) -> dict[str, str]:
    """A planned service's plain env variables (not the secret ones), by name."""
    (container,) = values["template"][0]["containers"]
    return {e["name"]: e["value"] for e in container["env"] if e.get("value") is not None}


@pytest.mark.parametrize("plan_name", ["production_plan", "keyed_grader_plan"])
def test_the_model_is_called_in_the_deployments_region_by_default(
    plan_name: str, request: pytest.FixtureRequest
) -> None:
    # Data residency: Gemini on Vertex AI runs where the answers are stored unless
    # grader.location names another location (docs/deploy.md, "The grader").
    plan: dict[str, Any] = request.getfixturevalue(plan_name)
    region = plan["variables"]["region"]["value"]
    (worker,) = services(plan, ("worker",)).values()
    env = _plain_env(worker)
    settings = Settings(
        location=env["GRADEQ_LOCATION"], grader_location=env.get("GRADEQ_GRADER_LOCATION", "")
    )
    assert settings.grader_vertex_location == region != "global"


def test_the_plan_warns_when_the_alerts_notify_nobody(production_plan: dict[str, Any]) -> None:
    # minimal.tfvars names no channel: every alert policy would notify nobody.
    policies = planned(production_plan, "google_monitoring_alert_policy")
    assert len(policies) >= 9
    assert all(not values.get("notification_channels") for values in policies.values())
    checks = {c["address"]["to_display"]: c["status"] for c in production_plan["checks"]}
    assert checks.get("check.alerts_notify_someone") == "fail", checks
