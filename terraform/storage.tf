# Uploaded answer files (docs/uploads.md): one private bucket. Browsers PUT to V4 signed
# URLs the intake signs through IAM signBlob on its own account (no key file); the worker
# reads objects for providers that take bytes, and Gemini on Vertex AI reads them in
# place (gs:// parts), as the worker's account or the Vertex AI service agent.

resource "google_storage_bucket" "uploads" {
  #checkov:skip=CKV_GCP_62:Access is audited by Cloud Audit Logs (data access logs can be enabled for storage); usage logs to another bucket add cost without a reader.
  #checkov:skip=CKV_GCP_78:Objects are written once and must go with their job (erasure, TTL); noncurrent versions would outlive a deletion.
  name     = "${var.project_id}-${var.name_prefix}-uploads"
  location = var.region

  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  # Objects are written once through signed URLs and removed with their job.
  versioning {
    enabled = false
  }

  # A job's files go with the job: the jobs' TTL (GRADEQ_JOB_TTL_DAYS) plus a day, since
  # an upload is made shortly before the job that names it.
  lifecycle_rule {
    condition {
      age = var.uploads_retention_days
    }
    action {
      type = "Delete"
    }
  }

  # A browser on an allowed frontend origin PUTs the file straight to the bucket (no
  # origins: no CORS, only server clients upload).
  dynamic "cors" {
    for_each = length(var.cors_origins) > 0 ? [var.cors_origins] : []
    content {
      origin          = cors.value
      method          = ["PUT"]
      response_header = ["Content-Type", "x-goog-content-length-range", "x-goog-if-generation-match"]
      max_age_seconds = 600
    }
  }

  labels = { app = "gradeq" }

  # Never destroyed by accident; the teardown keeps it or lifts this on purpose
  # (docs/deploy.md, "Teardown").
  lifecycle {
    prevent_destroy = true
  }

  depends_on = [time_sleep.apis]
}

# The intake signs upload URLs with its own account through IAM signBlob: it needs the
# token creator role on itself, not a key.
resource "google_service_account_iam_member" "intake_signs_upload_urls" {
  service_account_id = google_service_account.main["intake"].name
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = "serviceAccount:${google_service_account.main["intake"].email}"
}

# The intake checks uploads at submit (size, type, first bytes) and deletes refused ones.
resource "google_storage_bucket_iam_member" "intake_uploads" {
  bucket = google_storage_bucket.uploads.name
  role   = "roles/storage.objectUser"
  member = "serviceAccount:${google_service_account.main["intake"].email}"
}

# The worker reads the files it grades; Gemini on Vertex AI reads gs:// parts with the
# caller's (the worker's) permissions.
resource "google_storage_bucket_iam_member" "worker_reads_uploads" {
  bucket = google_storage_bucket.uploads.name
  role   = "roles/storage.objectViewer"
  member = "serviceAccount:${google_service_account.main["worker"].email}"
}

# Gemini on Vertex AI may read gs:// parts through the project's Vertex AI service agent:
# it may read the uploads too (generated here, so it exists before the grant).
resource "google_project_service_identity" "aiplatform" {
  count    = local.grader_on_vertex ? 1 : 0
  provider = google-beta

  project = var.project_id
  service = "aiplatform.googleapis.com"

  depends_on = [time_sleep.apis]
}

resource "google_storage_bucket_iam_member" "vertex_agent_reads_uploads" {
  count = local.grader_on_vertex ? 1 : 0

  bucket = google_storage_bucket.uploads.name
  role   = "roles/storage.objectViewer"
  member = "serviceAccount:${google_project_service_identity.aiplatform[0].email}"
}
