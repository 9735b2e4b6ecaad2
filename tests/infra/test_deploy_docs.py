"""docs/deploy.md and docs/cost.md say what terraform/ actually needs and creates."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from pydantic import SecretStr

from services.intake.admin.auth import OperatorAuthenticator, OperatorCredentialRequired
from shared.config.settings import Settings
from shared.config.subscriptions import DEFAULT_SUBSCRIPTIONS_FILE
from tests.infra import tfconfig
from tests.infra.tfconfig import REPO, Terraform, block

pytestmark = pytest.mark.infra

DEPLOY = REPO / "docs" / "deploy.md"
COST = REPO / "docs" / "cost.md"

# The role that lets the applying identity manage each family of resources.
ROLE_FOR = {
    "google_project_service": "roles/serviceusage.serviceUsageAdmin",
    "google_project_service_identity": "roles/serviceusage.serviceUsageAdmin",
    "google_project_iam_member": "roles/resourcemanager.projectIamAdmin",
    "google_service_account": "roles/iam.serviceAccountAdmin",
    "google_cloud_run_v2_service": "roles/run.admin",
    "google_cloud_tasks_queue": "roles/cloudtasks.admin",
    "google_cloud_scheduler_job": "roles/cloudscheduler.admin",
    "google_pubsub_": "roles/pubsub.admin",
    "google_firestore_": "roles/datastore.owner",
    "google_storage_bucket": "roles/storage.admin",
    "google_bigquery_": "roles/bigquery.dataOwner",
    "google_secret_manager_secret": "roles/secretmanager.admin",
    "google_logging_metric": "roles/logging.configWriter",
    "google_monitoring_alert_policy": "roles/monitoring.alertPolicyEditor",
    "google_monitoring_dashboard": "roles/monitoring.dashboardEditor",
}


def _role_for(rtype: str) -> str | None:
    matches = [prefix for prefix in ROLE_FOR if rtype.startswith(prefix)]
    return ROLE_FOR[max(matches, key=len)] if matches else None


def test_deploy_docs_name_a_role_for_every_resource(tf: Terraform) -> None:
    text = DEPLOY.read_text()
    for rtype, _ in tfconfig.every_resource(tf):
        if not rtype.startswith("google_"):
            continue  # time_sleep calls no API
        role = _role_for(rtype)
        assert role, f"{rtype}: which role does applying it need? Add it to docs/deploy.md"
        assert f"`{role}`" in text, f"docs/deploy.md does not list {role} (for {rtype})"
    # Naming an account in the OIDC tokens (queue, scheduler, push) and running services as
    # their accounts both need actAs.
    assert "`roles/iam.serviceAccountUser`" in text


def test_deploy_docs_name_secrets_from_the_prefix(tf: Terraform) -> None:
    text = DEPLOY.read_text()
    names = re.findall(r"gcloud secrets (?:create|versions add) (\S+)", text)
    assert len(names) >= 2, names
    suffixes = {v.removeprefix("${var.name_prefix}") for v in tf.locals["secret_ids"].values()}
    for name in names:
        assert name.strip('"').startswith("$PREFIX-"), f"secret {name} is not named from the prefix"
    assert {n.strip('"').removeprefix("$PREFIX") for n in names} >= suffixes
    assert "gradeq-client-keys" not in text and "gradeq-webhook-secret" not in text


def test_deploy_docs_say_how_to_import_the_firestore_database() -> None:
    text = DEPLOY.read_text()
    command = r"terraform import .*google_firestore_database\.main "
    assert re.search(command + r'"projects/\$PROJECT/databases/\(default\)"', text)


def test_deploy_docs_check_health_through_the_url_on_health_live() -> None:
    text = DEPLOY.read_text()
    through_url = [line for line in text.splitlines() if "curl" in line and "_url" in line]
    assert through_url, "docs/deploy.md shows no health check through the service URL"
    for line in through_url:
        assert "/health/live" in line and "healthz" not in line, line


def test_deploy_docs_say_when_to_verify_push_signatures() -> None:
    text = " ".join(DEPLOY.read_text().split())
    assert "`GRADEQ_PUSH_VERIFY_SIGNATURE` | `false`" in text
    assert "must set `GRADEQ_PUSH_VERIFY_SIGNATURE=true`" in text


def test_cost_docs_list_every_index_with_its_fields(tf: Terraform) -> None:
    text = COST.read_text()
    short = {"ASCENDING": "ASC", "DESCENDING": "DESC"}
    for name, body in tf.of_type("google_firestore_index").items():
        fields = ", ".join(f"`{f['field_path']}` {short[f['order']]}" for f in body["fields"])
        assert f"`google_firestore_index.{name}`" in text, name
        assert fields in text, f"docs/cost.md does not give the fields of {name}: {fields}"


def test_cost_docs_count_the_analytics_path_as_a_bigquery_subscription() -> None:
    text = COST.read_text()
    assert "BigQuery subscription" in text
    assert "Pub/Sub pushes to `notification` and `analytics`" not in text


def _firestore_prices() -> tuple[float, float]:
    """$ per document read and write, from docs/cost.md's price table."""
    pattern = r"reads \$([\d.]+), writes \$([\d.]+)(?:, deletes \$[\d.]+)? per 100,000 documents"
    m = re.search(pattern, COST.read_text())
    assert m, "docs/cost.md gives no Firestore read/write prices"
    return float(m.group(1)) / 100_000, float(m.group(2)) / 100_000


@pytest.mark.parametrize(("lease", "heartbeat"), [(None, None), (15, 5), (120, 40)])
def test_cost_docs_price_the_lease_renewals(
    tf: Terraform, lease: float | None, heartbeat: float | None
) -> None:
    shipped = lease is None
    lease = float(tf.variables["lease_s"]["default"]) if lease is None else lease
    heartbeat = float(tf.variables["heartbeat_s"]["default"]) if heartbeat is None else heartbeat
    budget = Settings(lease_s=lease, heartbeat_s=heartbeat, grader_timeout_s=300).budget()
    _read, write = _firestore_prices()
    # A renewal is one write conditioned on the version the worker wrote last: no read.
    per_million = budget.renewals_per_minute * write * 1_000_000
    label = f"{lease:g} / {heartbeat:g}" + (" (shipped)" if shipped else "")
    row = f"| {label} | {budget.renewals_per_minute:g} | {per_million:.2f} |"
    assert row in COST.read_text(), row


def test_deploy_docs_describe_the_budget_rules_and_the_grader(tf: Terraform) -> None:
    text = " ".join(DEPLOY.read_text().split())
    # The precondition and the validation terraform checks, as written in variables.tf/outputs.tf.
    assert (
        "`lease_s` + `grader_timeout_s` + `result_write_retry_s` <= the queue's `dispatch_deadline`"
        in text
    )
    assert "`heartbeat_s` at most `lease_s` / 2" in text
    shipped = [
        tf.variables[n]["default"] for n in ("lease_s", "grader_timeout_s", "result_write_retry_s")
    ]
    assert f"{shipped[0]} + {shipped[1]} + {shipped[2]} = {sum(shipped)} <= 600" in text
    for role in ("roles/cloudtasks.viewer", "roles/aiplatform.user"):
        assert f"`{role}`" in text, role
    assert "`cloudtasks.tasks.get`" in text
    # The sizing rule the check block warns about, per quota mode, and its name.
    assert "max_dispatches_per_second x 60 >= the requests a minute above" in text
    assert "`max(1, floor(quota_rpm x quota_headroom))` requests a minute" in text
    assert "`share_rpm = max(1, floor(quota_rpm x quota_headroom / worker.max_instances))`" in text
    assert f"`{next(iter(tf.checks))}`" in text


def _cost_bench() -> Any:
    """bench/cost_per_job.py as a module (its pricing and the deployed topology)."""
    name = "gradeq_cost_per_job"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "bench" / "cost_per_job.py")
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def test_cost_bench_counts_the_deployed_bigquery_subscriptions(tf: Terraform) -> None:
    deployed = {
        name
        for name, body in tf.of_type("google_pubsub_subscription").items()
        if block(body, "bigquery_config")
    }
    assert deployed
    # The subscriptions file marks them, the bench and the local bus read the mark.
    subscriptions = json.loads(DEFAULT_SUBSCRIPTIONS_FILE.read_text())["subscriptions"]
    marked = {name for name, sub in subscriptions.items() if sub["kind"] == "bigquery"}
    assert deployed == marked
    assert marked == _cost_bench().BIGQUERY_SUBSCRIPTIONS
    pushed = {
        name
        for name, body in tf.of_type("google_pubsub_subscription").items()
        if block(body, "push_config")
    }
    assert pushed == {name for name, sub in subscriptions.items() if sub["kind"] == "push"}


#: The rows of the cost tables: the bench's labels.
COST_LABELS = ("succeeds at once", "retried once", "next job, key remembered", "with a webhook")
_COST_ROW = re.compile(
    r"^\| (" + "|".join(COST_LABELS) + r") \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+)"
    r" \| (\d+) \| (\d+) \| \*\*([\d.]+)\*\*",
    re.M,
)


def _cost_rows() -> dict[str, tuple[list[int], str]]:
    rows = {
        m.group(1): ([int(g) for g in m.groups()[1:9]], m.group(10))
        for m in _COST_ROW.finditer(COST.read_text())
    }
    assert set(rows) == set(COST_LABELS), rows
    return rows


def test_cost_docs_totals_are_the_benchs_prices_of_their_counts() -> None:
    bench = _cost_bench()
    for label, (counts, shown) in _cost_rows().items():
        reads, writes, deletes, task_ops, publishes, pushes, bigquery, filtered = counts
        cost = bench.JobCost(
            label=label,
            firestore_reads=reads,
            firestore_writes=writes,
            firestore_ttl_deletes=deletes,
            tasks_creates=1,
            tasks_deliveries=task_ops - 1,
            pubsub_publishes=publishes,
            pubsub_deliveries=pushes,
            bigquery_writes=bigquery,
            pubsub_message_bytes=660,
            subscriber_writes=0,
            pubsub_filtered=filtered,
        )
        assert f"{sum(cost.dollars_per_million().values()):.2f}" == shown, label


def test_cost_docs_table_is_what_the_bench_printed() -> None:
    text = COST.read_text()
    for label, (counts, shown) in _cost_rows().items():
        printed = re.search(
            rf"^{label}\s+" + r"\s+".join([r"(\d+)"] * 10) + r"\s+([\d.]+) =", text, re.M
        )
        assert printed, f"docs/cost.md does not show the script's line for {label}"
        p = [int(g) for g in printed.groups()[:10]]
        reads, writes, ttl, ops, publish, push, bq, _bytes, sub, filtered = p
        assert [reads, writes + sub, ttl, ops, publish, push, bq, filtered] == counts, label
        assert printed.group(11) == shown, label


def test_readme_quotes_the_cost_docs_figures() -> None:
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## Cost per job") :]
    section = section[: section.index("\n## ", 1)]
    for label, (counts, shown) in _cost_rows().items():
        row = re.search(rf"^\| {label} \| (\d+) / (\d+) .*\| ([\d.]+) \|$", section, re.M)
        assert row, f"README's cost table has no row for {label}"
        assert [int(row.group(1)), int(row.group(2))] == counts[:2], label
        assert row.group(3) == shown, label
    # The heartbeat's cost is set against the rest of a job in docs/reliability.md.
    reliability = (REPO / "docs" / "reliability.md").read_text()
    quoted = set(re.findall(r"\$(\d+\.\d\d) for the rest of a job", readme + reliability))
    assert quoted == {_cost_rows()["succeeds at once"][1]}


def test_deploy_docs_create_no_client_keys_secret() -> None:
    text = DEPLOY.read_text()
    assert not re.search(r"gcloud secrets (create|versions add) \"?\$PREFIX-client-keys", text)
    assert "| `$PREFIX-client-keys` |" not in text


def _key_command_env() -> dict[str, str]:
    """The GRADEQ_* variables docs/deploy.md exports before `services.intake.auth.keys`."""
    text = DEPLOY.read_text()
    export = re.search(r"^export (GRADEQ_.*?)\n(?!\s)", text, re.M | re.S)
    assert export, "docs/deploy.md exports no settings for the key command"
    words = shlex.split(export.group(1).replace("\\\n", " "))
    env = dict(w.split("=", 1) for w in words if w.startswith("GRADEQ_"))
    assert env, words
    return env


def test_deploy_docs_issue_the_first_key_with_settings_that_start(
    tf: Terraform, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = DEPLOY.read_text()
    assert "python -m services.intake.auth.keys create --client " in text
    env = _key_command_env()
    assert env["GRADEQ_FIRESTORE_DATABASE"] == (
        "$(terraform -chdir=terraform output -raw firestore_database)"
    )
    assert "firestore_database" in tf.outputs
    for name in list(env):
        monkeypatch.delenv(name, raising=False)
    shell = {"$PROJECT": "my-gradeq-project"}
    for name, value in env.items():
        value = shell.get(value, value)
        if value.startswith("$("):
            value = "(default)"  # what the output gives for the default database
        monkeypatch.setenv(name, value)
    settings = Settings()  # the settings the command reads refuse nothing
    assert settings.backend.value == "google"
    # The intake gets the same database and collection (terraform sets neither otherwise).
    assert tf.locals["common_env"]["GRADEQ_FIRESTORE_DATABASE"] == (
        "${google_firestore_database.main.name}"
    )
    assert "GRADEQ_API_KEYS_COLLECTION" not in tf.locals["common_env"]
    assert settings.api_keys_collection == Settings.model_fields["api_keys_collection"].default


def _operator_keys_recipe() -> str:
    """The shell block of docs/deploy.md that creates the operator-keys secret."""
    blocks = re.findall(r"^```sh\n(.*?)^```", DEPLOY.read_text(), re.M | re.S)
    recipes = [str(b) for b in blocks if 'gcloud secrets create "$PREFIX-operator-keys"' in b]
    assert len(recipes) == 1, "docs/deploy.md must show one command creating the operator keys"
    return recipes[0]


def test_deploy_docs_store_operator_keys_as_digests_the_intake_accepts(tmp_path: Path) -> None:
    recipe = _operator_keys_recipe()
    missing = [tool for tool in ("bash", "openssl", "sha256sum") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"the recipe needs {', '.join(missing)}, not installed here")
    assert "sha256:" in recipe and "OPERATOR_KEY" in recipe
    # Run the recipe with gcloud replaced by a stand-in that keeps what it was given.
    stored = tmp_path / "secret"
    gcloud = tmp_path / "gcloud"
    gcloud.write_text(f'#!/bin/sh\ncat > "{stored}"\n')
    gcloud.chmod(0o755)
    script = recipe + '\nprintf "%s" "$OPERATOR_KEY"\n'
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "PREFIX": "gradeq", "PROJECT": "p"}
    key = subprocess.run(
        ["bash", "-euc", script], env=env, capture_output=True, text=True, check=True
    ).stdout
    value = stored.read_text()
    assert key and key not in value  # the secret holds no usable key
    keys = Settings(operator_keys=SecretStr(value)).operator_key_map()
    assert list(keys.values()) == ["alice"]
    app = Flask(__name__)
    with app.test_request_context(headers={"Authorization": f"Bearer {key}"}):
        assert OperatorAuthenticator(keys).operator() == "alice"
    with (
        app.test_request_context(headers={"Authorization": f"Bearer {key}x"}),
        pytest.raises(OperatorCredentialRequired),
    ):
        OperatorAuthenticator(keys).operator()
    # The digest is of the key alone (printf '%s'), not of the key and a newline (echo).
    assert hashlib.sha256(key.encode()).hexdigest() in value
    assert hashlib.sha256(f"{key}\n".encode()).hexdigest() not in value


def test_deploy_docs_say_where_the_dashboard_is() -> None:
    text = " ".join(DEPLOY.read_text().split())
    assert "`<intake URL>/admin/`" in text
    assert "| `$PREFIX-operator-keys` | `GRADEQ_OPERATOR_KEYS` | intake |" in text


# --- docs/deploy.md as a new platform team follows it, command by command.


def _shell_lines() -> list[str]:
    """Every line of the ```sh blocks of docs/deploy.md, in order."""
    blocks = re.findall(r"```sh\n(.*?)```", DEPLOY.read_text(), re.S)
    return [line for block in blocks for line in block.splitlines()]


def test_deploy_docs_link_the_project_to_a_billing_account() -> None:
    # Without billing, enabling Cloud Run, Cloud Tasks or Artifact Registry fails.
    lines = _shell_lines()
    link = [i for i, line in enumerate(lines) if "gcloud billing projects link" in line]
    assert link and "--billing-account=" in lines[link[0]]
    enable = next(i for i, line in enumerate(lines) if "gcloud services enable" in line)
    assert link[0] < enable


def test_deploy_docs_let_docker_push_to_artifact_registry() -> None:
    lines = _shell_lines()
    configure = [i for i, line in enumerate(lines) if "gcloud auth configure-docker" in line]
    push = [i for i, line in enumerate(lines) if re.search(r"\b(docker|podman) push\b", line)]
    assert configure and push and configure[0] < push[0]
    assert "$REGION-docker.pkg.dev" in lines[configure[0]]


def test_deploy_docs_build_the_image_for_cloud_runs_platform() -> None:
    # Cloud Run runs linux/amd64; an image built on an arm64 machine (Apple silicon) for
    # its own platform does not start there.
    builds = [line for line in _shell_lines() if re.search(r"\b(docker|podman) build\b", line)]
    assert builds
    for line in builds:
        assert "--platform linux/amd64" in line or "--platform=linux/amd64" in line, line


def test_deploy_docs_deploy_the_image_they_built() -> None:
    lines = _shell_lines()
    text = "\n".join(lines)
    # The image is pushed by tag and deployed by the digest of what that tag names.
    (tagged,) = re.findall(r"^TAGGED=(\S+)", text, re.M)
    assert any(re.search(r'(docker|podman) push "\$TAGGED"', line) for line in lines)
    (image,) = re.findall(r"^IMAGE=(.+)$", text, re.M)
    assert 'describe "$TAGGED"' in image and "fully_qualified_digest" in image
    var_files = set(re.findall(r"terraform [^\n]*-var-file=(\S+)", text))
    assert len(var_files) == 1, f"terraform runs with several variable files: {var_files}"
    (var_file,) = var_files
    # The variable file is written from the same $IMAGE the build step pushed.
    written = re.search(rf"cat > {re.escape(var_file)} <<EOF\n(.*?)\nEOF", text, re.S)
    assert written, f"docs/deploy.md never writes {var_file}"
    assert re.search(r'^image\s*=\s*"\$IMAGE"$', written.group(1), re.M), written.group(1)
    assert tagged.startswith("$REGION-docker.pkg.dev/$PROJECT/")


def test_deploy_docs_change_into_terraform_once() -> None:
    lines = [line.split("#", 1)[0].strip() for line in _shell_lines()]
    cds = [i for i, line in enumerate(lines) if line == "cd terraform"]
    assert len(cds) == 1, "a second `cd terraform` fails: the shell is already in terraform/"
    # The bootstrap runs before, from the root, with -chdir.
    first_terraform = next(
        i for i, line in enumerate(lines) if line.startswith("terraform ") and "-chdir" not in line
    )
    assert cds[0] < first_terraform


def _section(text: str, heading: str) -> str:
    """One `## ` section of a document, from its heading to the next."""
    start = text.index(f"\n## {heading}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_deploy_docs_give_googles_queue_name_tombstone() -> None:
    # Google's reference for queues.delete: "a tombstone window of up to 3 days".
    text = " ".join(DEPLOY.read_text().split())
    assert "up to 3 days" in text
    assert "up to 7 days" not in text


def test_step_one_says_how_terraform_authenticates_and_whom_it_bills() -> None:
    step = " ".join(_section(DEPLOY.read_text(), "1. ").split())
    assert "Application Default Credentials" in step
    assert "gcloud auth application-default login" in step
    assert "--impersonate-service-account" in step
    # The provider ignores ADC's quota project: the configuration names its own.
    assert "does not read the quota project" in step
    assert "`billing_project = var.project_id`" in step
    assert "`user_project_override = true`" in step


def test_the_grader_choice_is_said_where_the_variables_are_written() -> None:
    text = DEPLOY.read_text()
    step = " ".join(_section(text, "4. ").split())
    assert "cat > gradeq.tfvars" in step
    assert "**offline keyword grader**" in step
    assert 'grader = { kind = "gemini" }' in step
    example = (tfconfig.TERRAFORM_DIR / "examples" / "minimal.tfvars").read_text()
    assert "offline keyword grader" in example


def test_deploy_docs_walk_bootstrap_first_apply_check_upgrade_and_teardown() -> None:
    text = DEPLOY.read_text()
    headings = [
        "## 2. Bootstrap",
        "## 5. First apply",
        "## 7. Check the deployment end to end",
        "## Upgrade",
        "## Teardown",
    ]
    positions = [text.index(f"\n{h}") for h in headings]
    assert positions == sorted(positions)
    check = _section(text, "7. ")
    assert "gradeq doctor --url" in check
    teardown = _section(text, "Teardown")
    assert "./teardown.sh -var-file=gradeq.tfvars" in teardown
    assert "terraform apply teardown.tfplan" in teardown
    assert (tfconfig.TERRAFORM_DIR / "teardown.sh").exists()
    upgrade = _section(text, "Upgrade")
    assert "terraform plan -var-file=gradeq.tfvars" in upgrade
