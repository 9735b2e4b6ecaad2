"""Structural checks of terraform/ that `terraform validate` cannot do offline."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import pytest
from pydantic import SecretStr, ValidationError

from shared.adapters.graders.limiter import QuotaShare
from shared.bootstrap.google import BUDGET
from shared.config.budget import Budget, BudgetError
from shared.config.queues import DEFAULT_QUEUES_FILE
from shared.config.settings import GeminiApi, GraderKind, QuotaMode, Settings
from shared.config.subscriptions import DEFAULT_SUBSCRIPTIONS_FILE
from tests.infra import tfconfig
from tests.infra.tfconfig import Evaluator, Terraform, block, depends_on, path_of, references

pytestmark = pytest.mark.infra

RUN_SERVICES = ("intake", "worker", "notification", "gradebook")
PUSH_IDENTITIES = ("tasks_invoker", "scheduler", "pubsub_push")
PUBLIC_MEMBERS = {"allUsers", "allAuthenticatedUsers"}
# The one grant to the public the design allows: the intake API (it checks API keys).


def test_all_concern_files_exist() -> None:
    names = {p.name for p in tfconfig.TERRAFORM_DIR.glob("*.tf")}
    expected = {"versions.tf", "main.tf", "variables.tf", "outputs.tf", "run.tf", "tasks.tf"}
    expected |= {"pubsub.tf", "firestore.tf", "iam.tf", "monitoring.tf"}
    assert expected <= names


def test_every_reference_resolves(tf: Terraform) -> None:
    assert tfconfig.unresolved(tf) == []


def test_reference_check_catches_typos() -> None:
    broken = Terraform(
        resources={("google_pubsub_topic", "events"): {"name": "${var.nmae_prefix}-x"}},
        variables={"name_prefix": {"type": "${string}", "description": "d"}},
        outputs={"o": {"value": "${google_pubsub_topic.event.name}", "description": "d"}},
    )
    assert tfconfig.unresolved(broken) == ["google_pubsub_topic.event", "var.nmae_prefix"]


def test_every_variable_is_typed_described_and_used(tf: Terraform) -> None:
    used = {ref[1] for ref in references(tf.resources | tf.locals | tf.outputs | tf.data)}
    used |= {
        ref[1] for body in tf.variables.values() for ref in references(body.get("validation", []))
    }
    for name, body in tf.variables.items():
        assert body.get("type"), f"variable {name} has no type"
        assert str(body.get("description", "")).strip(), f"variable {name} has no description"
        assert name in used, f"variable {name} is declared but never used"


def test_every_output_is_described(tf: Terraform) -> None:
    assert tf.outputs
    for name, body in tf.outputs.items():
        assert str(body.get("description", "")).strip(), f"output {name} has no description"


def test_versions_pin_terraform_and_google_provider() -> None:
    text = (tfconfig.TERRAFORM_DIR / "versions.tf").read_text()
    assert re.search(r'required_version\s*=\s*">=\s*1\.\d+, < 2\.0"', text)
    assert re.search(r'source\s*=\s*"hashicorp/google"', text)
    assert re.search(r'version\s*=\s*">=\s*6\.\d+, < 7\.0"', text)


# --- Settings files: terraform reads the very files the local dispatcher and bus read.


def test_settings_files_are_the_ones_the_services_read(tf: Terraform) -> None:
    evaluator = Evaluator(tf)
    assert evaluator.json_file("queues") == DEFAULT_QUEUES_FILE.resolve()
    assert evaluator.json_file("subscriptions") == DEFAULT_SUBSCRIPTIONS_FILE.resolve()


def test_one_queue_per_settings_entry(tf: Terraform) -> None:
    queues = tf.of_type("google_cloud_tasks_queue")
    assert list(queues) == ["main"]
    assert path_of(queues["main"]["for_each"]) == ["local", "queues"]
    assert path_of(queues["main"]["name"]) == ["each", "key"]


@pytest.mark.parametrize("section", ["rate_limits", "retry_config"])
def test_queue_limits_equal_the_settings_file(tf: Terraform, section: str) -> None:
    evaluator = Evaluator(tf)
    queue = tf.resource("google_cloud_tasks_queue", "main")
    settings = json.loads(DEFAULT_QUEUES_FILE.read_text())
    body = block(queue, section)
    assert body is not None, f"queue has no {section} block"
    for queue_id, entry in settings.items():
        expected = entry[section]
        actual = {
            key: evaluator.value(expr, each_value=entry)
            for key, expr in body.items()
            if key != "__comments__"
        }
        assert actual == expected, f"queue {queue_id}: {section} differs from queues.json"


def test_queue_targets_the_worker_with_oidc(tf: Terraform) -> None:
    queue = tf.resource("google_cloud_tasks_queue", "main")
    oidc = block(queue, "http_target", "oidc_token")
    assert oidc is not None
    assert tfconfig.account_of(oidc["service_account_email"]) == "tasks_invoker"
    assert path_of(oidc["audience"]) == ["local", "service_urls", "worker"]
    override = block(queue, "http_target", "uri_override", "path_override")
    assert override is not None and path_of(override["path"]) == ["each", "value", "target_path"]


def test_worker_timeout_covers_the_dispatch_deadline(tf: Terraform) -> None:
    assert tfconfig.service(tf, "worker")["request_timeout"] == "${local.dispatch_deadline_s}s"
    assert "local.task_queue.dispatch_deadline" in tf.locals["dispatch_deadline_s"]
    assert tf.locals["task_queue"] == "${local.queues[var.queue]}"


# --- The time budget (shared/config/budget.py): terraform refuses what the worker refuses.

BUDGET_VARIABLES = {
    "grader_timeout_s": "GRADEQ_GRADER_TIMEOUT_S",
    "lease_s": "GRADEQ_LEASE_S",
    "heartbeat_s": "GRADEQ_HEARTBEAT_S",
    "result_write_retry_s": "GRADEQ_RESULT_WRITE_RETRY_S",
}


def _budget_precondition(tf: Terraform) -> str:
    # On the worker's output: a module call (run.tf) takes no preconditions.
    conditions = [p["condition"] for p in tf.outputs["worker_url"]["precondition"]]
    budget = [c for c in conditions if "local.dispatch_deadline_s" in c]
    assert len(budget) == 1, conditions
    return str(budget[0])


def _shipped_budget(**changes: float) -> Budget:
    return dataclasses.replace(Settings().budget(), **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", sorted(BUDGET_VARIABLES))
def test_budget_variables_default_to_the_code_defaults(tf: Terraform, name: str) -> None:
    variable = tf.variables[name]
    assert variable["type"] == "number"
    assert variable["default"] == Settings.model_fields[name].default


@pytest.mark.parametrize("name", sorted(BUDGET_VARIABLES))
def test_every_service_gets_each_budget_variable(tf: Terraform, name: str) -> None:
    # Every service checks the budget against the queue at start-up: with the code's
    # defaults instead, a shorter dispatch_deadline would stop the intake from starting.
    env = BUDGET_VARIABLES[name]
    assert tf.locals["common_env"][env] == f"${{tostring(var.{name})}}"
    for service in RUN_SERVICES:
        assert "local.common_env" in _env_maps(tf, service), service
        assert env not in _literal_env(tf, service), f"{service} overrides {env}"


@pytest.mark.parametrize(
    ("lease", "grader", "retry"),
    [
        (45, 540, 10),  # shipped: 595 <= 600
        (45, 545, 10),  # exactly the deadline
        (45, 546, 10),
        (45, 540, 16),
        (46, 545, 10),
        (120, 470, 10),
        (30, 560, 10),
        (30, 561, 10),
        (45, 555, 0),
    ],
)
def test_budget_precondition_is_the_workers_rule(
    tf: Terraform, lease: float, grader: float, retry: float
) -> None:
    budget = _shipped_budget(lease_s=lease, grader_timeout_s=grader, result_write_retry_s=retry)
    deadline = budget.queue.dispatch_deadline.total_seconds()
    values = {
        "var.lease_s": lease,
        "var.grader_timeout_s": grader,
        "var.result_write_retry_s": retry,
        "local.dispatch_deadline_s": deadline,
    }
    accepted = tfconfig.evaluate(_budget_precondition(tf), values)
    assert accepted is (budget.longest_delivery_s <= deadline)


def test_the_shipped_defaults_pass_the_budget_precondition(tf: Terraform) -> None:
    settings = json.loads(DEFAULT_QUEUES_FILE.read_text())
    deadline = float(settings[tf.variables["queue"]["default"]]["dispatch_deadline"][:-1])
    values = {f"var.{name}": tf.variables[name]["default"] for name in BUDGET_VARIABLES}
    assert tfconfig.evaluate(
        _budget_precondition(tf), {**values, "local.dispatch_deadline_s": deadline}
    )


@pytest.mark.parametrize(
    ("heartbeat", "lease"),
    [(15, 45), (22.5, 45), (23, 45), (30, 45), (0, 45), (60, 120), (61, 120)],
)
def test_heartbeat_validation_is_the_workers_rule(
    tf: Terraform, heartbeat: float, lease: float
) -> None:
    (validation,) = tf.variables["heartbeat_s"]["validation"]
    accepted = tfconfig.evaluate(
        validation["condition"], {"var.heartbeat_s": heartbeat, "var.lease_s": lease}
    )
    try:
        _shipped_budget(heartbeat_s=heartbeat, lease_s=lease, grader_timeout_s=300).check()
        worker_accepts = heartbeat > 0  # Settings: heartbeat_s > 0
    except BudgetError as refused:
        assert "GRADEQ_HEARTBEAT_S" in str(refused)
        worker_accepts = False
    assert accepted is worker_accepts


# --- Pub/Sub.


def _dead_letter_topics(tf: Terraform) -> set[str]:
    topics = set()
    for body in tf.of_type("google_pubsub_subscription").values():
        policy = block(body, "dead_letter_policy")
        if policy:
            parts = path_of(policy["dead_letter_topic"])
            assert parts and parts[0] == "google_pubsub_topic", policy
            topics.add(parts[1])
    return topics


def _topic_of(subscription: dict[str, Any]) -> str:
    parts = path_of(subscription["topic"])
    assert parts and parts[0] == "google_pubsub_topic", subscription["topic"]
    return parts[1]


def test_subscriptions_have_dead_letter_and_retry_policies(tf: Terraform) -> None:
    dead_letter_topics = _dead_letter_topics(tf)
    assert dead_letter_topics
    subscriptions = tf.of_type("google_pubsub_subscription")
    for name, body in subscriptions.items():
        if _topic_of(body) in dead_letter_topics:
            continue  # the end of the line: kept for operators, never redelivered
        assert block(body, "dead_letter_policy"), f"subscription {name} has no dead-letter policy"
        assert block(body, "retry_policy"), f"subscription {name} has no retry policy"


def test_subscription_settings_equal_the_settings_file(tf: Terraform) -> None:
    evaluator = Evaluator(tf)
    settings = json.loads(DEFAULT_SUBSCRIPTIONS_FILE.read_text())["subscriptions"]
    for name, expected in settings.items():
        body = tf.resource("google_pubsub_subscription", name)
        retry = block(body, "retry_policy")
        dead_letter = block(body, "dead_letter_policy")
        assert retry is not None and dead_letter is not None
        assert evaluator.value(body["ack_deadline_seconds"]) == expected["ack_deadline_seconds"]
        assert {k: evaluator.value(v) for k, v in retry.items()} == expected["retry_policy"]
        attempts = evaluator.value(dead_letter["max_delivery_attempts"])
        assert attempts == expected["max_delivery_attempts"]


def test_every_dead_letter_topic_has_a_subscription(tf: Terraform) -> None:
    subscribed = {_topic_of(b) for b in tf.of_type("google_pubsub_subscription").values()}
    assert _dead_letter_topics(tf) <= subscribed


def test_pubsub_service_agent_can_dead_letter(tf: Terraform) -> None:
    agent = "${local.pubsub_service_agent}"
    assert "google_project_service_identity.pubsub" in tf.locals["pubsub_service_agent"]
    publishers = {
        path_of(b["topic"])[1]  # type: ignore[index]
        for b in tf.of_type("google_pubsub_topic_iam_member").values()
        if b["member"] == agent and b["role"] == "roles/pubsub.publisher"
    }
    assert _dead_letter_topics(tf) <= publishers
    grants = [
        b
        for b in tf.of_type("google_pubsub_subscription_iam_member").values()
        if b["member"] == agent and b["role"] == "roles/pubsub.subscriber"
    ]
    assert len(grants) == 1 and path_of(grants[0]["for_each"]) == [
        "local",
        "dead_lettered_subscriptions",
    ]
    covered = {path_of(v)[1] for v in tf.locals["dead_lettered_subscriptions"].values()}  # type: ignore[index]
    dead_lettered = {
        name
        for name, b in tf.of_type("google_pubsub_subscription").items()
        if block(b, "dead_letter_policy")
    }
    assert covered == dead_lettered


def test_every_push_uses_oidc_with_the_receivers_audience(tf: Terraform) -> None:
    pushes = 0
    for name, body in tf.of_type("google_pubsub_subscription").items():
        push = block(body, "push_config")
        if push is None:
            continue
        pushes += 1
        oidc = block(push, "oidc_token")
        assert oidc, f"push subscription {name} sends no OIDC token"
        receiver = path_of(oidc["audience"])
        assert receiver and receiver[:2] == ["local", "service_urls"], oidc
        assert push["push_endpoint"].startswith(f"${{local.service_urls.{receiver[2]}}}")
    assert pushes >= 1
    for name, body in tf.of_type("google_cloud_scheduler_job").items():
        oidc = block(body, "http_target", "oidc_token")
        assert oidc, f"scheduler job {name} sends no OIDC token"
        assert body["http_target"][0]["uri"].startswith(oidc["audience"])


def test_analytics_is_a_bigquery_subscription_with_the_required_columns(tf: Terraform) -> None:
    body = tf.resource("google_pubsub_subscription", "analytics")
    config = block(body, "bigquery_config")
    assert config is not None and block(body, "push_config") is None
    assert config["write_metadata"] is True
    assert config["use_table_schema"] is False and config["use_topic_schema"] is False
    table = tf.resource("google_bigquery_table", "events")
    schema_text = table["schema"]
    columns = dict(re.findall(r'name = \\?"(\w+)\\?", type = \\?"(\w+)\\?"', schema_text))
    # What Pub/Sub writes with write_metadata and no schema mapping.
    assert columns == {
        "subscription_name": "STRING",
        "message_id": "STRING",
        "publish_time": "TIMESTAMP",
        "data": "STRING",
        "attributes": "STRING",
    }


def test_typed_view_exposes_every_event_field(tf: Terraform) -> None:
    query = block(tf.resource("google_bigquery_table", "events_v1"), "view")["query"]  # type: ignore[index]
    for name in (
        "job_id",
        "client_id",
        "submission_id",
        "assignment_id",
        "outcome",
        "score",
        "max_score",
        "attempts",
        "queue_wait_ms",
        "processing_ms",
        "total_ms",
        "callback_url",
        "error_type",
        "error_message",
        "event_id",
        "model",
        "input_tokens",
        "output_tokens",
        "total_tokens",
        "model_requests",
        "cached_input_tokens",
        "cost_micro_usd",
    ):
        assert f"AS {name}" in query, name
    assert "dev.gradeq.grading.completed.v1" in query


def test_typed_view_keeps_one_row_per_event_id(tf: Terraform) -> None:
    query = block(tf.resource("google_bigquery_table", "events_v1"), "view")["query"]  # type: ignore[index]
    # The event id is the ce-id attribute; message_id differs between two publishes of
    # one event (a publish that timed out may land after its retry).
    qualify = re.search(
        r"QUALIFY\s+ROW_NUMBER\(\)\s+OVER\s*\(\s*PARTITION BY (.+?)\s+ORDER BY (.+?)\s*\)\s*=\s*1",
        query,
        re.S,
    )
    assert qualify, "the typed view does not dedupe"
    assert qualify.group(1).startswith("COALESCE(JSON_VALUE(attributes, '$.\"ce-id\"')")
    assert qualify.group(2).split(",")[0].strip() == "publish_time"


def test_bigquery_location_follows_the_region_unless_set(tf: Terraform) -> None:
    assert tf.variables["bigquery_location"]["default"] is None
    assert tf.locals["bigquery_location"] == "${coalesce(var.bigquery_location, var.region)}"
    dataset = tf.resource("google_bigquery_dataset", "analytics")
    assert dataset["location"] == "${local.bigquery_location}"


# Regions Cloud Run runs in (cloud.google.com/run/docs/locations).
CLOUD_RUN_REGIONS = [
    "africa-south1",
    "asia-east1",
    "asia-east2",
    "asia-northeast1",
    "asia-northeast2",
    "asia-northeast3",
    "asia-south1",
    "asia-south2",
    "asia-southeast1",
    "asia-southeast2",
    "asia-southeast3",
    "australia-southeast1",
    "australia-southeast2",
    "europe-central2",
    "europe-north1",
    "europe-north2",
    "europe-southwest1",
    "europe-west1",
    "europe-west2",
    "europe-west3",
    "europe-west4",
    "europe-west6",
    "europe-west8",
    "europe-west9",
    "europe-west10",
    "europe-west12",
    "me-central1",
    "me-central2",
    "me-west1",
    "northamerica-northeast1",
    "northamerica-northeast2",
    "northamerica-south1",
    "southamerica-east1",
    "southamerica-west1",
    "us-central1",
    "us-east1",
    "us-east4",
    "us-east5",
    "us-south1",
    "us-west1",
    "us-west2",
    "us-west3",
    "us-west4",
]
NOT_REGIONS = [
    "",
    "EU",
    "eu",
    "us",
    "eur3",
    "nam5",
    "europe-west",
    "europe-west0",
    "europe-west100",
    "europe-west1-b",
    "Europe-west1",
    "europe_west1",
    "eu-west-1",
    "europewest1",
    "europe-west1 ",
    "-west1",
]


def _region_pattern(tf: Terraform) -> re.Pattern[str]:
    conditions = [v["condition"] for v in tf.variables["region"]["validation"]]
    found = [re.search(r'regex\("(.+?)", var\.region\)', c) for c in conditions]
    patterns = [m.group(1) for m in found if m]
    assert len(patterns) == 1, conditions
    # Terraform's regex() searches; only anchored patterns validate the whole value.
    assert patterns[0].startswith("^") and patterns[0].endswith("$")
    return re.compile(patterns[0].replace("\\\\", "\\"))


@pytest.mark.parametrize("region", CLOUD_RUN_REGIONS)
def test_region_validation_accepts_every_cloud_run_region(tf: Terraform, region: str) -> None:
    assert _region_pattern(tf).search(region), region


@pytest.mark.parametrize("value", NOT_REGIONS)
def test_region_validation_rejects_what_is_not_a_region(tf: Terraform, value: str) -> None:
    assert not _region_pattern(tf).search(value), value


# --- Cloud Run and IAM.


def test_each_service_runs_as_its_own_service_account(tf: Terraform) -> None:
    services = tfconfig.services(tf)
    assert set(services) == set(RUN_SERVICES)
    accounts = {}
    for name, body in services.items():
        account = tfconfig.account_of(body["service_account"])
        assert account, body["service_account"]
        accounts[name] = account
    assert len(set(accounts.values())) == len(accounts), accounts
    assert not set(accounts.values()) & set(PUSH_IDENTITIES)
    assert tf.resource("google_service_account", "main")["for_each"] == "${local.service_accounts}"
    assert {*accounts.values(), *PUSH_IDENTITIES} <= set(tf.locals["service_accounts"])


def test_only_the_intake_accepts_outside_traffic(tf: Terraform) -> None:
    for name in ("worker", "notification"):
        ingress = tfconfig.service(tf, name)["ingress"]
        assert ingress == "INGRESS_TRAFFIC_INTERNAL_ONLY", name


def _iam_grants(tf: Terraform) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (rtype, name, body)
        for (rtype, name), body in tf.resources.items()
        if rtype.endswith(("_iam_member", "_iam_binding", "_iam_policy"))
    ]


def test_no_public_access_except_where_intended(tf: Terraform) -> None:
    for rtype, name, body in _iam_grants(tf):
        members = set(strings_of(body.get("member"))) | set(strings_of(body.get("members")))
        members |= set(strings_of(body.get("policy_data")))
        assert not members & PUBLIC_MEMBERS, f"{rtype}.{name} grants to the public"
        assert not any(m in str(body) for m in PUBLIC_MEMBERS), f"{rtype}.{name} is public"
    # A public intake turns Cloud Run's invoker check off: domain restricted sharing
    # refuses allUsers bindings; the others always check it.
    services = tfconfig.services(tf)
    assert services["intake"]["invoker_iam_disabled"] == "${var.intake_public}"
    assert {services[s]["invoker_iam_disabled"] for s in ("worker", "notification")} == {False}


def strings_of(value: Any) -> list[str]:
    return list(tfconfig.strings(value)) if value is not None else []


def test_invokers_are_exactly_the_callers(tf: Terraform) -> None:
    invokers: dict[str, set[str]] = {}
    for body in tf.of_type("google_cloud_run_v2_service_iam_member").values():
        assert body["role"] == "roles/run.invoker"
        service = path_of(body["name"])[1]  # type: ignore[index]  # module.<service>.name
        invokers.setdefault(service, set()).add(body["member"])
    assert invokers["worker"] == {
        'serviceAccount:${google_service_account.main["tasks_invoker"].email}',
        'serviceAccount:${google_service_account.main["scheduler"].email}',
    }
    assert invokers["notification"] == {
        'serviceAccount:${google_service_account.main["pubsub_push"].email}'
    }


def _env_maps(tf: Terraform, service: str) -> list[str]:
    """The maps merged into a service's plain env (`env = merge(local.a, local.b.c, {...})`)."""
    env = tfconfig.service(tf, service)["env"]
    merged = re.fullmatch(r"\$\{merge\(([^{}]*?)(?:,\s*\{.*\})?\)\}", env, re.S)
    assert merged, env
    return re.findall(r"\blocal\.[\w.]+", merged.group(1))


def _literal_env(tf: Terraform, service: str) -> dict[str, str]:
    """The `{NAME = expr}` map written into a service's plain env merge."""
    return tfconfig.literal_map(tfconfig.service(tf, service)["env"])


def _settings_env_name(name: str) -> bool:
    field = name.removeprefix("GRADEQ_").lower()
    return name.startswith("GRADEQ_") and field in Settings.model_fields


def test_every_gradeq_variable_terraform_sets_is_a_setting(tf: Terraform) -> None:
    names: set[str] = set(tf.locals["common_env"]) | set(tf.locals["grader_settings"])
    names |= set(tf.locals["batch_settings"])
    names |= set(tf.locals["intake_settings"])
    for env in tf.locals["push_env"].values():
        names |= set(env)
    for service in RUN_SERVICES:
        names |= set(_literal_env(tf, service)) | set(tfconfig.secret_env(tf, service))
    gradeq = {n for n in names if n.startswith("GRADEQ_")}
    assert len(gradeq) > 20
    assert sorted(n for n in gradeq if not _settings_env_name(n)) == []


def test_collections_come_from_the_variables_the_ttl_policies_use(tf: Terraform) -> None:
    env = tf.locals["common_env"]
    assert env["GRADEQ_JOBS_COLLECTION"] == "${var.jobs_collection}"
    assert env["GRADEQ_PROCESSED_EVENTS_COLLECTION"] == "${var.processed_events_collection}"
    ttl_collections = {
        b["collection"] for b in tf.of_type("google_firestore_field").values() if "ttl_config" in b
    }
    # Budget charges (their collection's name is fixed in shared/bootstrap/google.py).
    assert {
        env["GRADEQ_JOBS_COLLECTION"],
        env["GRADEQ_PROCESSED_EVENTS_COLLECTION"],
        f"{BUDGET}_charges",
    } == ttl_collections
    for service in RUN_SERVICES:
        assert "local.common_env" in _env_maps(tf, service), service


PUSH_RECEIVERS = ("worker", "notification", "gradebook")


def _push_tokens(tf: Terraform) -> dict[str, list[dict[str, Any]]]:
    """Every OIDC token block a Google caller sends, by receiving service."""
    tokens: dict[str, list[dict[str, Any]]] = {}
    sources = [
        block(tf.resource("google_cloud_tasks_queue", "main"), "http_target", "oidc_token"),
        *(
            block(b, "http_target", "oidc_token")
            for b in tf.of_type("google_cloud_scheduler_job").values()
        ),
        *(
            block(b, "push_config", "oidc_token")
            for b in tf.of_type("google_pubsub_subscription").values()
            if block(b, "push_config")
        ),
    ]
    for oidc in sources:
        assert oidc is not None
        receiver = path_of(oidc["audience"])
        assert receiver and receiver[:2] == ["local", "service_urls"], oidc
        tokens.setdefault(receiver[2], []).append(oidc)
    return tokens


@pytest.mark.parametrize("service", PUSH_RECEIVERS)
def test_push_receivers_check_what_their_callers_send(tf: Terraform, service: str) -> None:
    assert tf.locals["common_env"]["GRADEQ_PUSH_AUTH"] == "oidc"
    assert f"local.push_env.{service}" in _env_maps(tf, service)
    env = tf.locals["push_env"][service]
    # Behind Cloud Run IAM the token arrives with its signature stripped.
    assert env["GRADEQ_PUSH_VERIFY_SIGNATURE"] == "false"
    tokens = _push_tokens(tf)[service]
    assert {t["audience"] for t in tokens} == {env["GRADEQ_PUSH_AUDIENCE"]}
    senders = {t["service_account_email"] for t in tokens}
    allowed = {
        f'${{google_service_account.main["{account}"].email}}'
        for account in tfconfig.accounts(env["GRADEQ_PUSH_SERVICE_ACCOUNTS"])
    }
    invokers = {
        b["member"].removeprefix("serviceAccount:")
        for b in tf.of_type("google_cloud_run_v2_service_iam_member").values()
        if path_of(b["name"]) == ["module", service, "name"]
    }
    assert allowed == senders == invokers


def test_the_intake_receives_no_pushes(tf: Terraform) -> None:
    assert set(tf.locals["push_env"]) == set(PUSH_RECEIVERS)
    assert not any("push_env" in m for m in _env_maps(tf, "intake"))
    assert "intake" not in _push_tokens(tf)


def test_probes_use_a_path_every_image_serves(tf: Terraform) -> None:
    # Container-configured probes reach /healthz, which Cloud Run's front end reserves for
    # requests through the service URL; the /health/* aliases exist only in newer images.
    module = tfconfig.run_service_module()
    for name, body in module.of_type("google_cloud_run_v2_service").items():
        container = block(body, "template")["containers"][0]  # type: ignore[index]
        for probe in ("startup_probe", "liveness_probe"):
            assert block(container, probe, "http_get")["path"] == "/healthz", (name, probe)  # type: ignore[index]
    for name, body in tf.of_type("google_monitoring_uptime_check_config").items():
        assert block(body, "http_check")["path"] == "/health/live", name  # type: ignore[index]


def test_project_level_grants_are_limited_to_firestore_and_vertex_ai(tf: Terraform) -> None:
    for name, body in tf.of_type("google_project_iam_member").items():
        if body["role"] == "roles/aiplatform.user":
            # Google's publisher models have no IAM of their own: granted only when the
            # worker calls Gemini on Vertex AI.
            assert name == "worker_aiplatform_user"
            assert body["count"] == "${local.grader_on_vertex ? 1 : 0}"
            continue
        assert body["role"] == "roles/datastore.user"
        assert block(body, "condition"), "the Firestore grant must be limited to the database"
    for _rtype, name, body in _iam_grants(tf):
        assert body.get("role") not in {"roles/owner", "roles/editor", "roles/viewer"}, name


def _lane_grants(tf: Terraform) -> list[tuple[str, str]]:
    """(role, account) of each grant every lane gets (tasks.tf, local.lane_grant_kinds)."""
    lane = tf.resource("google_cloud_tasks_queue_iam_member", "lane")
    assert lane["for_each"] == "${local.lane_grants}"
    assert "local.other_lanes" in tf.locals["lane_grants"]
    assert "local.lane_grant_kinds" in tf.locals["lane_grants"]
    assert lane["role"] == "${each.value.role}"
    assert (
        lane["member"] == "serviceAccount:${google_service_account.main[each.value.account].email}"
    )
    return [(k["role"], k["account"]) for k in tf.locals["lane_grant_kinds"].values()]


def test_least_privilege_grants(tf: Terraform) -> None:
    def members(rtype: str, role: str) -> set[str]:
        found: set[str] = set()
        for name, body in tf.of_type(rtype).items():
            if (rtype, name) == ("google_cloud_tasks_queue_iam_member", "lane"):
                found |= {account for r, account in _lane_grants(tf) if r == role}
                continue
            if body["role"] != role:
                continue
            path = path_of(body.get("for_each"))
            if path is not None and isinstance(tf.locals.get(path[1]), dict):
                local = tf.locals[path[1]]
                found |= tfconfig.accounts(local)
            else:  # one member (on one queue, say)
                found |= tfconfig.accounts(body["member"])
        return found

    assert members("google_cloud_tasks_queue_iam_member", "roles/cloudtasks.enqueuer") == {
        "intake",
        "worker",
    }
    assert members("google_pubsub_topic_iam_member", "roles/pubsub.publisher") == {"worker"}
    assert members("google_project_iam_member", "roles/datastore.user") == {
        "intake",
        "worker",
        "notification",
        "gradebook",
    }
    assert members("google_service_account_iam_member", "roles/iam.serviceAccountUser") == {
        "intake",
        "worker",
    }
    # The sweep's GetTask (cloudtasks.tasks.get) on the queue: the worker only.
    assert members("google_cloud_tasks_queue_iam_member", "roles/cloudtasks.viewer") == {"worker"}
    assert members("google_project_iam_member", "roles/aiplatform.user") == {"worker"}
    # Pause, resume and purge of a lane from the admin API: the intake only.
    queue_admin = members("google_cloud_tasks_queue_iam_member", "roles/cloudtasks.queueAdmin")
    assert queue_admin == {"intake"}
    roles = {b["role"] for b in tf.of_type("google_cloud_tasks_queue_iam_member").values()}
    roles = (roles - {"${each.value.role}"}) | {role for role, _account in _lane_grants(tf)}
    assert roles == {
        "roles/cloudtasks.enqueuer",
        "roles/cloudtasks.viewer",
        "roles/cloudtasks.queueAdmin",
    }


def test_every_lane_grants_what_the_default_queue_grants(tf: Terraform) -> None:
    # The intake and the worker enqueue in every lane and the sweep looks tasks up there.
    enqueuer = tf.resource("google_cloud_tasks_queue_iam_member", "enqueuer")
    viewer = tf.resource("google_cloud_tasks_queue_iam_member", "worker_task_viewer")
    assert enqueuer["for_each"] == "${local.task_enqueuers}"
    on_default = [(enqueuer["role"], a) for a in tfconfig.accounts(tf.locals["task_enqueuers"])]
    on_default += [(viewer["role"], a) for a in tfconfig.accounts(viewer["member"])]
    assert sorted(_lane_grants(tf)) == sorted(on_default)


def test_the_worker_may_read_tasks_on_its_own_queue(tf: Terraform) -> None:
    grant = tf.resource("google_cloud_tasks_queue_iam_member", "worker_task_viewer")
    assert grant["name"] == "${google_cloud_tasks_queue.main[var.queue].name}"
    assert grant["location"] == "${var.region}"
    assert "count" not in grant and "for_each" not in grant


def test_each_secret_is_readable_only_by_its_service(tf: Terraform) -> None:
    readers: dict[str, set[str]] = {}
    for body in tf.of_type("google_secret_manager_secret_iam_member").values():
        assert body["role"] == "roles/secretmanager.secretAccessor"
        secret = [r[2] for r in references(body["secret_id"]) if r[0] == "resource"]
        readers.setdefault(secret[0], set()).update(tfconfig.accounts(body["member"]))
    assert readers == {
        "webhook_secret": {"notification"},
        "grader_api_key": {"worker"},
        "operator_keys": {"intake"},
        "reviewer_keys": {"intake"},
        "lti_secrets_key": {"intake", "gradebook"},
    }
    for service in RUN_SERVICES:
        for read in tfconfig.secret_env(tf, service).values():
            assert service in readers[read], (service, read)
            # Only the LTI sealing key is shared: the intake signs launches' answers with
            # it, the gradebook its client assertions.
            assert readers[read] == {service} or read == "lti_secrets_key", (service, read)


def test_secrets_come_from_secret_manager(tf: Terraform) -> None:
    secret_like = re.compile(r"(SECRET|PASSWORD|TOKEN|_KEYS?$)")
    plain = str(tf.locals.get("common_env")) + str(tf.locals.get("push_env"))
    plain += str(tf.locals.get("grader_settings")) + str(tf.locals.get("intake_settings"))
    plain += "".join(str(b["env"]) for b in tfconfig.services(tf).values())
    # The module reads each secret_env entry from Secret Manager, latest version; plain
    # env comes from `env` (and CONCURRENCY) only.
    container = block(
        tfconfig.run_service_module().resource("google_cloud_run_v2_service", "main"), "template"
    )["containers"][0]  # type: ignore[index]
    assert "env" not in container, "a static env block in the module"
    dynamic = {d["env"]["for_each"]: d["env"]["content"][0] for d in container["dynamic"]}
    assert set(dynamic) == {
        "${merge(var.env, {CONCURRENCY = tostring(var.sizing.concurrency)})}",
        "${var.secret_env}",
    }
    ref = block(dynamic["${var.secret_env}"], "value_source", "secret_key_ref")
    assert ref == {"secret": "${env.value}", "version": "latest"}
    sourced = {service: set(tfconfig.secret_env(tf, service)) for service in RUN_SERVICES}
    # Client API keys are digests in Firestore, not a secret of the deployment; operator
    # keys are.
    assert sourced == {
        "intake": {"GRADEQ_OPERATOR_KEYS", "GRADEQ_REVIEWER_KEYS", "GRADEQ_LTI_SECRETS_KEY"},
        "notification": {"GRADEQ_WEBHOOK_SECRETS_KEY"},
        "worker": {"GRADEQ_GRADER_API_KEY"},
        # Classroom is called with the service's own identity; LTI platforms with
        # Gradeq's signing key, sealed under the LTI sealing key.
        "gradebook": {"GRADEQ_LTI_SECRETS_KEY"},
    }
    # Plain env maps must not carry them.
    for key in re.findall(r"\b(GRADEQ_[A-Z_]+)\s*[=:]", plain):
        assert not secret_like.search(key) or key == "GRADEQ_PUSH_AUTH", key


# --- Firestore, APIs, monitoring.


def test_firestore_index_and_ttl(tf: Terraform) -> None:
    index = tf.resource("google_firestore_index", "jobs_status_updated_at")
    assert index["collection"] == "${var.jobs_collection}"
    assert [(f["field_path"], f["order"]) for f in index["fields"]] == [
        ("status", "ASCENDING"),
        ("updated_at", "ASCENDING"),
    ]
    ttl = {
        (b["collection"], b["field"])
        for b in tf.of_type("google_firestore_field").values()
        if "ttl_config" in b
    }
    assert ttl == {
        ("${var.jobs_collection}", "expire_at"),
        ("${var.processed_events_collection}", "expire_at"),
        ("budget_charges", "expire_at"),
    }
    assert tf.variables["jobs_collection"]["default"] == "grading_jobs"


def test_firestore_index_for_the_unpublished_events_sweep(tf: Terraform) -> None:
    # event_published == false AND status IN [final] AND updated_at < T ORDER BY updated_at
    index = tf.resource("google_firestore_index", "jobs_unpublished_final")
    assert index["collection"] == "${var.jobs_collection}"
    assert index["query_scope"] == "COLLECTION"
    assert index["database"] == "${google_firestore_database.main.name}"
    assert [(f["field_path"], f["order"]) for f in index["fields"]] == [
        ("event_published", "ASCENDING"),
        ("status", "ASCENDING"),
        ("updated_at", "ASCENDING"),
    ]
    # Built after the other jobs index, not concurrently (409 contention).
    assert ("google_firestore_index", "jobs_status_updated_at") in depends_on(index)


API_OF = {
    "google_cloud_run_v2": "run.googleapis.com",
    "google_cloud_tasks": "cloudtasks.googleapis.com",
    "google_pubsub": "pubsub.googleapis.com",
    "google_firestore": "firestore.googleapis.com",
    "google_bigquery": "bigquery.googleapis.com",
    "google_secret_manager": "secretmanager.googleapis.com",
    "google_cloud_scheduler": "cloudscheduler.googleapis.com",
    "google_monitoring": "monitoring.googleapis.com",
    "google_logging": "logging.googleapis.com",
    "google_service_account": "iam.googleapis.com",
    "google_project_iam": "cloudresourcemanager.googleapis.com",
    "google_project_service_identity": "serviceusage.googleapis.com",
}
# Service Usage must already be on to enable anything (it is on in every new project);
# docs/deploy.md enables it, with Resource Manager, before the first apply.
PREREQUISITE_APIS = {"serviceusage.googleapis.com"}


def test_required_apis_are_enabled(tf: Terraform) -> None:
    enabled = set(re.findall(r'"([a-z]+\.googleapis\.com)"', tf.locals["required_apis"]))
    enabled |= set(re.findall(r'\\"([a-z]+\.googleapis\.com)\\"', tf.locals["required_apis"]))
    enabled |= PREREQUISITE_APIS
    for rtype, _ in tfconfig.every_resource(tf):
        for prefix, api in API_OF.items():
            if rtype.startswith(prefix):
                assert api in enabled, f"{rtype} needs {api}"


@pytest.mark.parametrize(
    "needle",
    [
        "pubsub.googleapis.com/subscription/num_undelivered_messages",
        "pubsub.googleapis.com/subscription/oldest_unacked_message_age",
        "cloudtasks.googleapis.com/queue/task_attempt_delays",
        "run.googleapis.com/request_count",
    ],
)
def test_alert_policies_cover(tf: Terraform, needle: str) -> None:
    policies = tf.of_type("google_monitoring_alert_policy")
    assert any(needle in str(body) for body in policies.values()), needle


@pytest.mark.parametrize("event", ["job_failed", "grader_suspended"])
def test_log_event_alerts_read_worker_logs(tf: Terraform, event: str) -> None:
    alert = tf.modules[f"{event}_alert"]
    assert alert["source"] == "./modules/log_alert"
    assert f'jsonPayload.event = \\"{event}\\"' in alert["log_filter"] or (
        f'jsonPayload.event = "{event}"' in alert["log_filter"]
    )
    assert "${local.worker_revisions}" in alert["log_filter"]
    module = tfconfig.load(tfconfig.TERRAFORM_DIR / "modules" / "log_alert")
    policy = module.resource("google_monitoring_alert_policy", "main")
    assert "logging.googleapis.com/user/" in str(policy["conditions"])


# --- Graders (var.grader; docs/graders.md).

# var.grader's fields -> the worker settings they become.
GRADER_FIELDS = {
    "kind": "grader",
    "model": "grader_model",
    "gemini_api": "grader_gemini_api",
    "location": "grader_location",
    "base_url": "grader_base_url",
    "quota_rpm": "grader_quota_rpm",
    "quota_tpm": "grader_quota_tpm",
    "quota_headroom": "grader_quota_headroom",
    "quota_mode": "grader_quota_mode",
    "request_timeout_s": "grader_request_timeout_s",
}


def _grader_defaults(tf: Terraform) -> dict[str, Any]:
    return tfconfig.optional_defaults(tf.variables["grader"]["type"])


def _grader_accepts(tf: Terraform, **changes: Any) -> bool:
    grader = {**_grader_defaults(tf), **changes}
    values = {f"var.grader.{name}": value for name, value in grader.items()}
    return all(
        tfconfig.evaluate(v["condition"], values) for v in tf.variables["grader"]["validation"]
    )


def _worker_accepts(**settings: Any) -> bool:
    try:
        Settings(project_id="p", grader_api_key=SecretStr("k"), **settings)
    except ValidationError:
        return False
    return True


def test_grader_defaults_are_the_code_defaults(tf: Terraform) -> None:
    defaults = _grader_defaults(tf)
    assert set(defaults) == set(GRADER_FIELDS)
    for field, setting in GRADER_FIELDS.items():
        assert defaults[field] == Settings.model_fields[setting].default, field
    assert tf.variables["grader"]["default"] == {}


@pytest.mark.parametrize("kind", [*(k.value for k in GraderKind), "claude", "RUBRIC", ""])
def test_grader_kind_validation_accepts_the_workers_graders(tf: Terraform, kind: str) -> None:
    # The openai grader needs a server and a model (a separate validation).
    extra = {"base_url": "http://127.0.0.1:8000/v1", "model": "m"}
    accepted = _grader_accepts(tf, kind=kind, **extra)
    worker = _worker_accepts(grader=kind, grader_base_url=extra["base_url"], grader_model="m")
    assert accepted is worker


@pytest.mark.parametrize("api", [*(a.value for a in GeminiApi), "vertexai", "studio"])
def test_gemini_api_validation_accepts_the_workers_endpoints(tf: Terraform, api: str) -> None:
    accepted = _grader_accepts(tf, kind="gemini", gemini_api=api)
    assert accepted is _worker_accepts(grader="gemini", grader_gemini_api=api)


@pytest.mark.parametrize(
    ("base_url", "model"),
    [("", ""), ("http://127.0.0.1:8000/v1", ""), ("", "m"), ("http://h/v1", "m")],
)
def test_openai_needs_a_server_and_a_model(tf: Terraform, base_url: str, model: str) -> None:
    accepted = _grader_accepts(tf, kind="openai", base_url=base_url, model=model)
    worker = _worker_accepts(grader="openai", grader_base_url=base_url, grader_model=model)
    assert accepted is worker


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("quota_rpm", 0),
        ("quota_rpm", 1),
        ("quota_rpm", 0.5),
        ("quota_rpm", 60.5),
        ("quota_rpm", 10000),
        ("quota_tpm", -1),
        ("quota_tpm", 0),
        ("quota_tpm", 2.5),
        ("quota_tpm", 1000000),
        ("quota_headroom", 0),
        ("quota_headroom", 0.5),
        ("quota_headroom", 1),
        ("quota_headroom", 1.01),
        ("request_timeout_s", 0),
        ("request_timeout_s", -3),
        ("request_timeout_s", 0.5),
    ],
)
def test_grader_bounds_are_the_workers(tf: Terraform, field: str, value: float) -> None:
    accepted = _grader_accepts(tf, **{field: value})
    assert accepted is _worker_accepts(**{GRADER_FIELDS[field]: value})


@pytest.mark.parametrize("mode", [*(m.value for m in QuotaMode), "pooled", "SHARED", ""])
def test_quota_mode_validation_accepts_the_workers_modes(tf: Terraform, mode: str) -> None:
    accepted = _grader_accepts(tf, quota_mode=mode)
    assert accepted is _worker_accepts(grader_quota_mode=mode)


# --- Batch mode (var.batch; docs/graders.md#batch-mode).

# var.batch's fields -> the worker settings they become.
BATCH_FIELDS = {
    "enabled": "batch_mode",
    "lanes": "batch_lanes",
    "regrades": "batch_regrades",
    "max_size": "batch_max_size",
    "window_s": "batch_window_s",
    "tick_s": "batch_tick_s",
}


def _batch_accepts(tf: Terraform, grader: dict[str, Any], **changes: Any) -> bool:
    batch = {**tfconfig.optional_defaults(tf.variables["batch"]["type"]), **changes}
    values = {f"var.batch.{name}": value for name, value in batch.items()}
    values |= {f"var.grader.{name}": value for name, value in grader.items()}
    return all(
        tfconfig.evaluate(v["condition"], values) for v in tf.variables["batch"]["validation"]
    )


def test_batch_defaults_are_the_code_defaults(tf: Terraform) -> None:
    defaults = tfconfig.optional_defaults(tf.variables["batch"]["type"])
    assert set(defaults) == set(BATCH_FIELDS)
    for field, setting in BATCH_FIELDS.items():
        assert defaults[field] == Settings.model_fields[setting].default, field
    assert tf.variables["batch"]["default"] == {}


def test_batch_settings_reach_the_worker(tf: Terraform) -> None:
    defaults = tfconfig.optional_defaults(tf.variables["batch"]["type"])
    expected = {}
    for field, setting in BATCH_FIELDS.items():
        value = f"var.batch.{field}"
        text = isinstance(defaults[field], str)
        expected[f"GRADEQ_{setting.upper()}"] = (
            f"${{{value}}}" if text else f"${{tostring({value})}}"
        )
    assert tf.locals["batch_settings"] == expected
    assert "local.batch_settings" in _env_maps(tf, "worker")
    for service in ("intake", "notification"):
        assert "local.batch_settings" not in _env_maps(tf, service), service


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_size", 0),
        ("max_size", 1),
        ("max_size", 2.5),
        ("max_size", 50000),
        ("max_size", 50001),
        ("window_s", 0),
        ("window_s", 0.5),
        ("tick_s", -1),
        ("tick_s", 60),
    ],
)
def test_batch_bounds_are_the_workers(tf: Terraform, field: str, value: float) -> None:
    openai = {"kind": "openai", "base_url": "http://h/v1", "model": "m", "gemini_api": "vertex"}
    accepted = _batch_accepts(tf, openai, **{field: value})
    worker = _worker_accepts(
        grader="openai",
        grader_base_url="http://h/v1",
        grader_model="m",
        **{BATCH_FIELDS[field]: value},
    )
    assert accepted is worker


@pytest.mark.parametrize("kind", [k.value for k in GraderKind])
@pytest.mark.parametrize("api", [a.value for a in GeminiApi])
def test_batch_mode_needs_a_grader_with_a_batch_endpoint(
    tf: Terraform, kind: str, api: str
) -> None:
    grader = {"kind": kind, "gemini_api": api, "base_url": "http://h/v1", "model": "m"}
    accepted = _batch_accepts(tf, grader, enabled=True)
    worker = _worker_accepts(
        batch_mode=True,
        grader=kind,
        grader_gemini_api=api,
        grader_base_url="http://h/v1",
        grader_model="m",
    )
    assert accepted is worker
    assert _batch_accepts(tf, grader, enabled=False)


@pytest.mark.parametrize("kind", [k.value for k in GraderKind])
@pytest.mark.parametrize("api", [a.value for a in GeminiApi])
def test_grader_locals(tf: Terraform, kind: str, api: str) -> None:
    values = {"var.grader.kind": kind, "var.grader.gemini_api": api}
    on_vertex = tfconfig.evaluate(tf.locals["grader_on_vertex"], values)
    needs_key = tfconfig.evaluate(tf.locals["grader_needs_key"], values)
    assert on_vertex is (kind == "gemini" and api == "vertex")
    assert needs_key is (kind == "openai" or (kind == "gemini" and api == "developer"))


def test_grader_settings_reach_the_worker(tf: Terraform) -> None:
    defaults = _grader_defaults(tf)
    expected = {}
    for field, setting in GRADER_FIELDS.items():
        value = f"var.grader.{field}"
        text = isinstance(defaults[field], str)
        expected[f"GRADEQ_{setting.upper()}"] = (
            f"${{{value}}}" if text else f"${{tostring({value})}}"
        )
    assert tf.locals["grader_settings"] == expected
    # Empty values are left out (the settings' defaults are empty too).
    assert tf.locals["grader_env"] == (
        '${{for name, value in local.grader_settings : name => value if value != ""}}'
    )
    assert "local.grader_env" in _env_maps(tf, "worker")
    for service in ("intake", "notification"):
        assert "local.grader_env" not in _env_maps(tf, service), service


def test_the_quota_is_split_over_the_workers_max_instances(tf: Terraform) -> None:
    env = _literal_env(tf, "worker")
    assert env["GRADEQ_WORKER_MAX_INSTANCES"] == "${tostring(var.worker.max_instances)}"
    assert tfconfig.service(tf, "worker")["sizing"] == "${var.worker}"
    module = tfconfig.run_service_module()
    scaling = block(module.resource("google_cloud_run_v2_service", "main"), "template", "scaling")
    assert scaling is not None and scaling["max_instance_count"] == "${var.sizing.max_instances}"


def test_failure_injection_is_never_switched_on(tf: Terraform) -> None:
    # GRADEQ_GRADER_SIMULATE unset means off on the Google backend.
    configured = tfconfig.strings([tf.resources, tf.modules, tf.locals, tf.variables, tf.outputs])
    assert not [text for text in configured if "SIMULATE" in text.upper()]


def test_vertex_ai_is_enabled_and_granted_only_for_gemini_on_vertex(tf: Terraform) -> None:
    apis = tf.locals["required_apis"].replace('\\"', '"')
    assert apis.count("aiplatform.googleapis.com") == 1
    assert 'local.grader_on_vertex ? ["aiplatform.googleapis.com"] : []' in apis
    grant = tf.resource("google_project_iam_member", "worker_aiplatform_user")
    assert grant["count"] == "${local.grader_on_vertex ? 1 : 0}"
    assert grant["role"] == "roles/aiplatform.user"
    assert grant["project"] == "${var.project_id}"
    assert grant["member"] == 'serviceAccount:${google_service_account.main["worker"].email}'


def test_the_grader_key_exists_only_when_the_grader_needs_one(tf: Terraform) -> None:
    when = "${local.grader_needs_key ? 1 : 0}"
    assert tf.resource("google_secret_manager_secret", "grader_api_key")["count"] == when
    access = tf.resource("google_secret_manager_secret_iam_member", "worker_grader_api_key")
    assert access["count"] == when
    assert access["secret_id"] == "${google_secret_manager_secret.grader_api_key[0].id}"
    assert tfconfig.service(tf, "worker")["secret_env"] == (
        "${local.grader_needs_key ? {GRADEQ_GRADER_API_KEY = "
        "google_secret_manager_secret.grader_api_key[0].secret_id} : {}}"
    )


def test_the_worker_starts_after_its_grader_grants(tf: Terraform) -> None:
    # A refused model call fails the job at once (grading-provider-rejected).
    waits = tfconfig.dependencies_of(tf, tfconfig.service(tf, "worker"))
    assert ("google_secret_manager_secret_iam_member", "worker_grader_api_key") in waits
    assert ("google_project_iam_member", "worker_aiplatform_user") in waits
    # ... and after they had time to propagate.
    assert ("time_sleep", "service_iam") in depends_on(tfconfig.service(tf, "worker"))


def _quota_check(tf: Terraform) -> str:
    (assertion,) = tf.checks["queue_rate_covers_the_grader_quota"]["assert"]
    return str(assertion["condition"])


_QUOTAS = [
    (60, 0.9, 20),
    (600, 0.9, 20),
    (10, 0.9, 20),
    (1000, 1, 1),
    (7, 0.5, 3),
    (100000, 0.9, 20),
]


@pytest.mark.parametrize(("rpm", "headroom", "instances"), _QUOTAS)
def test_quota_used_in_instance_mode_is_the_limiters_share_times_the_instances(
    tf: Terraform, rpm: int, headroom: float, instances: int
) -> None:
    values = {
        "var.grader.quota_mode": "instance",
        "var.grader.quota_rpm": rpm,
        "var.grader.quota_headroom": headroom,
        "var.worker.max_instances": instances,
    }
    used = tfconfig.evaluate(tf.locals["grader_quota_rpm_used"], values)
    assert used == QuotaShare.of(rpm, 0, instances, headroom).requests_per_minute * instances


@pytest.mark.parametrize("mode", [QuotaMode.SHARED, QuotaMode.ADAPTIVE])
@pytest.mark.parametrize(("rpm", "headroom", "instances"), _QUOTAS)
def test_quota_used_in_shared_mode_is_the_whole_pool_whatever_the_instances(
    tf: Terraform, mode: QuotaMode, rpm: int, headroom: float, instances: int
) -> None:
    from shared.bootstrap.graders import pool_limits

    values = {
        "var.grader.quota_mode": mode.value,
        "var.grader.quota_rpm": rpm,
        "var.grader.quota_headroom": headroom,
        "var.worker.max_instances": instances,
    }
    used = tfconfig.evaluate(tf.locals["grader_quota_rpm_used"], values)
    settings = Settings(
        grader_quota_mode=QuotaMode.SHARED,
        grader_quota_rpm=rpm,
        grader_quota_headroom=headroom,
        worker_max_instances=instances,
    )
    assert used == pool_limits(settings).rpm


@pytest.mark.parametrize(
    ("kind", "mode", "rpm", "per_second", "warns"),
    [
        ("gemini", "shared", 60, 20, False),  # shipped queue, default quota
        ("gemini", "instance", 1340, 20, False),  # 20 x floor(1206 / 20) = 1200: just fits
        ("gemini", "shared", 1340, 20, True),  # the whole pool, 1206 > 1200
        ("gemini", "shared", 1333, 20, False),  # floor(1199.7) = 1199
        ("gemini", "instance", 1400, 20, True),  # 20 x 63 = 1260 > 1200
        ("openai", "shared", 100000, 20, True),
        ("openai", "instance", 100000, 20, True),
        ("openai", "shared", 100000, 1500, False),
        ("rubric", "shared", 100000, 1, False),  # the offline grader has no quota
    ],
)
def test_the_queue_rate_check_warns_when_the_queue_caps_the_quota(
    tf: Terraform, kind: str, mode: str, rpm: int, per_second: float, warns: bool
) -> None:
    values: dict[str, Any] = {
        "var.grader.quota_mode": mode,
        "var.grader.quota_rpm": rpm,
        "var.grader.quota_headroom": 0.9,
        "var.worker.max_instances": 20,
    }
    used = tfconfig.evaluate(tf.locals["grader_quota_rpm_used"], values)
    holds = tfconfig.evaluate(
        _quota_check(tf),
        {
            "var.grader.kind": kind,
            "local.task_queue.rate_limits.max_dispatches_per_second": per_second,
            "local.grader_quota_rpm_used": used,
        },
    )
    assert holds is not warns


def test_the_shipped_queue_covers_the_default_quota(tf: Terraform) -> None:
    queue = json.loads(DEFAULT_QUEUES_FILE.read_text())[tf.variables["queue"]["default"]]
    defaults = _grader_defaults(tf)
    used = tfconfig.evaluate(
        tf.locals["grader_quota_rpm_used"],
        {
            "var.grader.quota_mode": defaults["quota_mode"],
            "var.grader.quota_rpm": defaults["quota_rpm"],
            "var.grader.quota_headroom": defaults["quota_headroom"],
            "var.worker.max_instances": 20,
        },
    )
    rate = queue["rate_limits"]["max_dispatches_per_second"]
    for kind in ("gemini", "openai"):
        values = {
            "var.grader.kind": kind,
            "local.task_queue.rate_limits.max_dispatches_per_second": rate,
            "local.grader_quota_rpm_used": used,
        }
        assert tfconfig.evaluate(_quota_check(tf), values)


def _schema_leaves(schema: dict[str, Any], prefix: str = "") -> set[str]:
    """Dotted paths of every scalar field of the event schema (objects inside oneOf too)."""
    leaves: set[str] = set()
    for name, prop in schema["properties"].items():
        objects = [p for p in [prop, *prop.get("oneOf", [])] if "properties" in p]
        if objects:
            for nested in objects:
                leaves |= _schema_leaves(nested, f"{prefix}{name}.")
        else:
            leaves.add(prefix + name)
    return leaves


def test_typed_view_reads_every_field_of_the_event_schema(tf: Terraform) -> None:
    query = block(tf.resource("google_bigquery_table", "events_v1"), "view")["query"]  # type: ignore[index]
    schema = json.loads((tfconfig.REPO / "shared/schemas/grading_completed.v1.json").read_text())
    read = set(re.findall(r"JSON_VALUE\(data, '\$\.([\w.]+)'\)", query))
    assert read == _schema_leaves(schema)
    columns = re.findall(r"\bAS (\w+),?\n", query)
    assert len(columns) == len(set(columns)), columns


@pytest.mark.parametrize(
    ("path", "column"),
    [
        ("usage.input_tokens", "input_tokens"),
        ("usage.output_tokens", "output_tokens"),
        ("usage.total_tokens", "total_tokens"),
        ("usage.requests", "model_requests"),
        ("usage.cached_input_tokens", "cached_input_tokens"),
        ("usage.cost_micro_usd", "cost_micro_usd"),
    ],
)
def test_typed_view_types_the_usage_counts(tf: Terraform, path: str, column: str) -> None:
    query = block(tf.resource("google_bigquery_table", "events_v1"), "view")["query"]  # type: ignore[index]
    assert f"SAFE_CAST(JSON_VALUE(data, '$.{path}') AS INT64) AS {column}," in query
