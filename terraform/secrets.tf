# Secret values never pass through terraform state. A Cloud Run revision that reads a
# secret without any version fails, so the secrets are created with their first version
# (gcloud, docs/deploy.md) before the first apply, and terraform adopts them: the import
# blocks below take them over once and do nothing afterwards. The grader's API key exists
# only when the grader needs one (local.grader_needs_key): Gemini through the Gemini API,
# or an OpenAI-compatible server. Terraform never deletes an adopted secret with its value
# (prevent_destroy): one no longer needed (another grader, reviewer keys off) is forgotten
# with `terraform state rm` and stays in the project (docs/deploy.md, step 3).
#
# Client API keys are not secrets of the deployment: the intake keeps their SHA-256
# digests in Firestore (GRADEQ_API_KEYS_COLLECTION), issued and revoked with
# `python -m services.intake.auth.keys` (docs/deploy.md, step 6). Nor are clients' webhook
# secrets: the notification service keeps them sealed in Firestore; the webhook secret
# here holds the key that seals them (GRADEQ_WEBHOOK_SECRETS_KEY, docs/webhooks.md). Operator keys (the admin API
# and dashboard, GRADEQ_OPERATOR_KEYS) are a secret: "name=sha256:<hex>" pairs, so even the
# secret holds no usable key.

locals {
  secret_ids = {
    webhook_secret = "${var.name_prefix}-webhook-secret"
    grader_api_key = "${var.name_prefix}-grader-api-key"
    operator_keys  = "${var.name_prefix}-operator-keys"
    reviewer_keys  = "${var.name_prefix}-reviewer-keys"
    # The key that seals Gradeq's LTI private keys (GRADEQ_LTI_SECRETS_KEY,
    # docs/gradebook.md), only while var.lti_tool_url turns LTI on.
    lti_secrets_key = "${var.name_prefix}-lti-secrets-key"
  }
}

import {
  to = google_secret_manager_secret.webhook_secret
  id = "projects/${var.project_id}/secrets/${local.secret_ids.webhook_secret}"
}

import {
  to = google_secret_manager_secret.operator_keys
  id = "projects/${var.project_id}/secrets/${local.secret_ids.operator_keys}"
}

import {
  for_each = var.reviewer_keys ? [0] : []
  to       = google_secret_manager_secret.reviewer_keys[each.value]
  id       = "projects/${var.project_id}/secrets/${local.secret_ids.reviewer_keys}"
}

import {
  for_each = local.grader_needs_key ? [0] : []
  to       = google_secret_manager_secret.grader_api_key[each.value]
  id       = "projects/${var.project_id}/secrets/${local.secret_ids.grader_api_key}"
}

import {
  for_each = local.lti_enabled ? [0] : []
  to       = google_secret_manager_secret.lti_secrets_key[each.value]
  id       = "projects/${var.project_id}/secrets/${local.secret_ids.lti_secrets_key}"
}

resource "google_secret_manager_secret" "webhook_secret" {
  secret_id = local.secret_ids.webhook_secret
  labels    = var.labels

  replication {
    auto {}
  }

  # Never destroyed by accident; the teardown keeps it or lifts this on purpose
  # (docs/deploy.md, "Teardown").
  lifecycle {
    prevent_destroy = true
  }

  depends_on = [time_sleep.apis]
}

resource "google_secret_manager_secret" "operator_keys" {
  secret_id = local.secret_ids.operator_keys
  labels    = var.labels

  replication {
    auto {}
  }

  # Never destroyed by accident; the teardown keeps it or lifts this on purpose
  # (docs/deploy.md, "Teardown").
  lifecycle {
    prevent_destroy = true
  }

  depends_on = [time_sleep.apis]
}

# Reviewer keys (GRADEQ_REVIEWER_KEYS, docs/review.md): "client/name=sha256:<hex>" pairs,
# only when var.reviewer_keys asks for them.
resource "google_secret_manager_secret" "reviewer_keys" {
  count = var.reviewer_keys ? 1 : 0

  secret_id = local.secret_ids.reviewer_keys
  labels    = var.labels

  replication {
    auto {}
  }

  # Never destroyed by accident; the teardown keeps it or lifts this on purpose
  # (docs/deploy.md, "Teardown").
  lifecycle {
    prevent_destroy = true
  }

  depends_on = [time_sleep.apis]
}

resource "google_secret_manager_secret" "grader_api_key" {
  count = local.grader_needs_key ? 1 : 0

  secret_id = local.secret_ids.grader_api_key
  labels    = var.labels

  replication {
    auto {}
  }

  # Never destroyed by accident; the teardown keeps it or lifts this on purpose
  # (docs/deploy.md, "Teardown").
  lifecycle {
    prevent_destroy = true
  }

  depends_on = [time_sleep.apis]
}

# The LTI sealing key, read by the intake (launches, the tool's JWKS) and the gradebook
# (its client assertions to the platforms' token endpoints), only with var.lti_tool_url.
resource "google_secret_manager_secret" "lti_secrets_key" {
  count = local.lti_enabled ? 1 : 0

  secret_id = local.secret_ids.lti_secrets_key
  labels    = var.labels

  replication {
    auto {}
  }

  # Never destroyed by accident; the teardown keeps it or lifts this on purpose
  # (docs/deploy.md, "Teardown").
  lifecycle {
    prevent_destroy = true
  }

  depends_on = [time_sleep.apis]
}

# Earlier versions read client keys from the secret NAME_PREFIX-client-keys. Terraform
# forgets it without deleting it, so its value stays available until every client has a
# key from the key store; delete it by hand afterwards (docs/deploy.md).
removed {
  from = google_secret_manager_secret.client_keys

  lifecycle {
    destroy = false
  }
}
