"""The uploads bucket: private, uniform access, kept as long as the jobs, CORS for the
frontends, signed URLs through signBlob on the intake's own account, read by the worker."""

from __future__ import annotations

from typing import Any

import pytest

from shared.config.settings import Settings
from shared.domain.uploads import UploadLimits
from tests.infra import tfconfig
from tests.infra.tfconfig import Terraform

pytestmark = pytest.mark.infra


def _bucket(tf: Terraform) -> dict[str, Any]:
    return tf.resource("google_storage_bucket", "uploads")


def test_the_bucket_is_private_with_uniform_access(tf: Terraform) -> None:
    bucket = _bucket(tf)
    assert bucket["uniform_bucket_level_access"] is True
    assert bucket["public_access_prevention"] == "enforced"
    members = [
        body["member"]
        for (rtype, _), body in tf.resources.items()
        if rtype.startswith("google_storage_bucket_iam")
    ]
    assert members and not any(m in ("allUsers", "allAuthenticatedUsers") for m in members)


def test_files_are_deleted_a_day_after_their_jobs_expire(tf: Terraform) -> None:
    [rule] = _bucket(tf)["lifecycle_rule"]
    assert rule["action"] == [{"type": "Delete"}]
    assert rule["condition"] == [{"age": "${var.uploads_retention_days}"}]
    default = tf.variables["uploads_retention_days"]["default"]
    assert default == Settings().job_ttl_days + 1


def test_browsers_on_the_frontend_origins_may_put_files(tf: Terraform) -> None:
    [dynamic] = _bucket(tf)["dynamic"]
    cors = dynamic["cors"]
    assert cors["for_each"] == "${length(var.cors_origins) > 0 ? [var.cors_origins] : []}"
    [content] = cors["content"]
    assert content["origin"] == "${cors.value}"
    assert content["method"] == ["PUT"]
    # Every header the signed URL binds may be sent from the page.
    assert set(content["response_header"]) == {
        "Content-Type",
        "x-goog-content-length-range",
        "x-goog-if-generation-match",
    }
    assert content["max_age_seconds"] >= UploadLimits().url_ttl_s


def test_the_intake_signs_with_its_own_account_and_no_key(tf: Terraform) -> None:
    grant = tf.resource("google_service_account_iam_member", "intake_signs_upload_urls")
    assert grant["role"] == "roles/iam.serviceAccountTokenCreator"
    assert grant["service_account_id"] == '${google_service_account.main["intake"].name}'
    assert grant["member"] == 'serviceAccount:${google_service_account.main["intake"].email}'
    assert not tf.of_type("google_service_account_key")
    assert "iamcredentials.googleapis.com" in (tfconfig.TERRAFORM_DIR / "main.tf").read_text()


def test_the_worker_reads_and_the_services_know_the_bucket(tf: Terraform) -> None:
    grant = tf.resource("google_storage_bucket_iam_member", "worker_reads_uploads")
    assert grant["role"] == "roles/storage.objectViewer"
    assert grant["member"] == 'serviceAccount:${google_service_account.main["worker"].email}'
    assert "GRADEQ_UPLOADS_BUCKET" in (tfconfig.TERRAFORM_DIR / "main.tf").read_text()


def test_on_vertex_ai_the_service_agent_may_read_too(tf: Terraform) -> None:
    grant = tf.resource("google_storage_bucket_iam_member", "vertex_agent_reads_uploads")
    assert grant["count"] == "${local.grader_on_vertex ? 1 : 0}"
    assert grant["role"] == "roles/storage.objectViewer"
    assert "google_project_service_identity.aiplatform[0].email" in grant["member"]
