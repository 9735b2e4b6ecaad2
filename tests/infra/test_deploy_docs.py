"""docs/deploy.md and docs/cost.md say what terraform/ actually needs and creates."""

from __future__ import annotations

import re

import pytest

from tests.infra.tfconfig import REPO, Terraform

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
    for rtype, _ in tf.resources:
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


def test_cost_docs_list_the_sweep_index_with_its_fields(tf: Terraform) -> None:
    text = COST.read_text()
    for name, body in tf.of_type("google_firestore_index").items():
        fields = ", ".join(f"`{f['field_path']}` ASC" for f in body["fields"])
        assert f"`google_firestore_index.{name}`" in text, name
        assert fields in text, f"docs/cost.md does not give the fields of {name}: {fields}"


def test_cost_docs_count_the_analytics_path_as_a_bigquery_subscription() -> None:
    text = COST.read_text()
    assert "BigQuery subscription" in text
    assert "Pub/Sub pushes to `notification` and `analytics`" not in text
