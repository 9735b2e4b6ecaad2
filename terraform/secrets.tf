# Secret values never pass through terraform state. A Cloud Run revision that reads a
# secret without any version fails, so the secrets are created with their first version
# (gcloud, docs/deploy.md) before the first apply, and terraform adopts them: the import
# blocks below take them over once and do nothing afterwards.

locals {
  secret_ids = {
    client_keys    = "${var.name_prefix}-client-keys"
    webhook_secret = "${var.name_prefix}-webhook-secret"
  }
}

import {
  to = google_secret_manager_secret.client_keys
  id = "projects/${var.project_id}/secrets/${local.secret_ids.client_keys}"
}

import {
  to = google_secret_manager_secret.webhook_secret
  id = "projects/${var.project_id}/secrets/${local.secret_ids.webhook_secret}"
}

resource "google_secret_manager_secret" "client_keys" {
  secret_id = local.secret_ids.client_keys
  labels    = var.labels

  replication {
    auto {}
  }

  depends_on = [time_sleep.apis]
}

resource "google_secret_manager_secret" "webhook_secret" {
  secret_id = local.secret_ids.webhook_secret
  labels    = var.labels

  replication {
    auto {}
  }

  depends_on = [time_sleep.apis]
}
