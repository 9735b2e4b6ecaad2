# Secret containers only: their values never pass through terraform state. Add a version
# with `gcloud secrets versions add` before the services start (see docs/deploy.md).

resource "google_secret_manager_secret" "client_keys" {
  secret_id = "${var.name_prefix}-client-keys"
  labels    = var.labels

  replication {
    auto {}
  }

  depends_on = [google_project_service.main]
}

resource "google_secret_manager_secret" "webhook_secret" {
  secret_id = "${var.name_prefix}-webhook-secret"
  labels    = var.labels

  replication {
    auto {}
  }

  depends_on = [google_project_service.main]
}
