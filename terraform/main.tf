provider "google" {
  project = var.project_id
  region  = var.region

  # Bill and count every call against this project, whatever quota project the
  # credentials carry: the provider does not read the one in Application Default
  # Credentials (docs/deploy.md, step 1).
  billing_project       = var.project_id
  user_project_override = true
}

provider "google-beta" {
  project = var.project_id
  region  = var.region

  # Bill and count every call against this project, whatever quota project the
  # credentials carry: the provider does not read the one in Application Default
  # Credentials (docs/deploy.md, step 1).
  billing_project       = var.project_id
  user_project_override = true
}

data "google_project" "main" {
  project_id = var.project_id
}

locals {
  # The same files the local dispatcher and bus read: Cloud Tasks and Pub/Sub settings
  # cannot drift from what the services are tested against.
  queues        = jsondecode(file("${path.module}/../shared/config/queues.json"))
  subscriptions = jsondecode(file("${path.module}/../shared/config/subscriptions.json"))
  topic_name    = local.subscriptions.topic

  task_queue = local.queues[var.queue]
  # "600s" -> 600; Cloud Run's request timeout for the worker is derived from it.
  dispatch_deadline_s = tonumber(trimsuffix(local.task_queue.dispatch_deadline, "s"))

  # Cloud Run's deterministic URLs (https://SERVICE-PROJECT_NUMBER.REGION.run.app): known
  # before the services exist, so services can name each other and be OIDC audiences
  # without a dependency cycle.
  service_names = {
    intake       = "${var.name_prefix}-intake"
    worker       = "${var.name_prefix}-worker"
    notification = "${var.name_prefix}-notification"
    gradebook    = "${var.name_prefix}-gradebook"
  }
  service_urls = {
    for key, name in local.service_names :
    key => "https://${name}-${data.google_project.main.number}.${var.region}.run.app"
  }

  # The Pub/Sub service agent (service-PROJECT_NUMBER@gcp-sa-pubsub...) is created lazily
  # by Google; the identity resource makes it exist before anything grants it a role.
  pubsub_service_agent = "serviceAccount:${google_project_service_identity.pubsub.email}"

  # Analytics data stays in the services' region unless a location is chosen.
  bigquery_location = coalesce(var.bigquery_location, var.region)

  # Settings every service reads on Google Cloud.
  common_env = {
    GRADEQ_BACKEND                     = "google"
    GRADEQ_PROJECT_ID                  = var.project_id
    GRADEQ_LOCATION                    = var.region
    GRADEQ_QUEUE                       = var.queue
    GRADEQ_WORKER_URL                  = local.service_urls.worker
    GRADEQ_TASKS_SERVICE_ACCOUNT       = google_service_account.main["tasks_invoker"].email
    GRADEQ_FIRESTORE_DATABASE          = google_firestore_database.main.name
    GRADEQ_JOBS_COLLECTION             = var.jobs_collection
    GRADEQ_PROCESSED_EVENTS_COLLECTION = var.processed_events_collection
    GRADEQ_TOPIC                       = google_pubsub_topic.events.name
    GRADEQ_UPLOADS_BUCKET              = google_storage_bucket.uploads.name
    GRADEQ_PUSH_AUTH                   = "oidc"
    GRADEQ_LOG_LEVEL                   = var.log_level
    # The time budget (shared/config/budget.py): the worker lives by it, and every service
    # checks it against the queue's dispatch_deadline at start-up, so all get the same.
    GRADEQ_GRADER_TIMEOUT_S     = tostring(var.grader_timeout_s)
    GRADEQ_LEASE_S              = tostring(var.lease_s)
    GRADEQ_HEARTBEAT_S          = tostring(var.heartbeat_s)
    GRADEQ_RESULT_WRITE_RETRY_S = tostring(var.result_write_retry_s)
  }

  # What the push receivers check. Both services require authentication, so Cloud Run
  # itself verifies each caller's ID token (signature, audience, run.invoker) and hands it
  # on with the signature replaced: the app checks the claims only
  # (GRADEQ_PUSH_VERIFY_SIGNATURE=false). The audience is the value the queue, the
  # scheduler job and the push subscription put in their tokens (tasks.tf, pubsub.tf); the
  # accounts are exactly the callers that hold run.invoker on the service (iam.tf).
  push_env = {
    worker = {
      GRADEQ_PUSH_AUDIENCE         = local.service_urls.worker
      GRADEQ_PUSH_SERVICE_ACCOUNTS = join(",", [google_service_account.main["tasks_invoker"].email, google_service_account.main["scheduler"].email])
      GRADEQ_PUSH_VERIFY_SIGNATURE = "false"
    }
    notification = {
      GRADEQ_PUSH_AUDIENCE         = local.service_urls.notification
      GRADEQ_PUSH_SERVICE_ACCOUNTS = join(",", [google_service_account.main["pubsub_push"].email])
      GRADEQ_PUSH_VERIFY_SIGNATURE = "false"
    }
    gradebook = {
      GRADEQ_PUSH_AUDIENCE         = local.service_urls.gradebook
      GRADEQ_PUSH_SERVICE_ACCOUNTS = join(",", [google_service_account.main["pubsub_push"].email])
      GRADEQ_PUSH_VERIFY_SIGNATURE = "false"
    }
  }

  # Each school's gradebook connection (docs/gradebook.md); no secret in it: the
  # gradebook service calls each LMS with its own identity.
  gradebook_env = merge(
    { GRADEQ_GRADEBOOK_CONNECTIONS_JSON = jsonencode(var.gradebook_connections) },
    local.lti_env,
  )

  # LTI 1.3 (docs/gradebook.md), on only with var.lti_tool_url: the intake serves the
  # launches, the gradebook posts scores to each platform's AGS; both read the sealing
  # key (GRADEQ_LTI_SECRETS_KEY) from Secret Manager.
  lti_enabled = var.lti_tool_url != ""
  lti_env     = local.lti_enabled ? { GRADEQ_LTI_TOOL_URL = var.lti_tool_url } : {}

  # The intake's settings (docs/configuration.md): browser access (CORS,
  # Firebase ID tokens) and admission limits. As for the grader, an empty value is left
  # out: those settings default to empty too. GRADEQ_ANALYTICS_READERS is not set: the
  # analytics service is not deployed here (analytics is a BigQuery subscription).
  intake_settings = {
    GRADEQ_CORS_ORIGINS               = join(",", var.cors_origins)
    GRADEQ_FIREBASE_PROJECT_ID        = var.firebase_auth ? coalesce(var.firebase_project_id, var.project_id) : ""
    GRADEQ_FIREBASE_TENANT_CLIENTS    = join(",", [for tenant, client in var.firebase_tenant_clients : "${tenant}=${client}"])
    GRADEQ_MAX_ACTIVE_JOBS_PER_CLIENT = tostring(var.admission.max_active_jobs_per_client)
    GRADEQ_MAX_BACKLOG                = tostring(var.admission.max_backlog)
    GRADEQ_SUBMIT_BURST               = tostring(var.admission.submit_burst)
    GRADEQ_SUBMIT_RATE_PER_S          = tostring(var.admission.submit_rate_per_s)
    GRADEQ_TRUSTED_PROXY_HOPS         = tostring(var.intake_trusted_proxy_hops)
    GRADEQ_LTI_TOOL_URL               = var.lti_tool_url
    # Named in erasure answers with the statement that deletes a student's event rows.
    GRADEQ_ANALYTICS_TABLE = "${var.project_id}.${var.analytics_dataset_id}.grading_completed_raw"
  }
  intake_env = { for name, value in local.intake_settings : name => value if value != "" }

  # The grader (var.grader): Gemini on Vertex AI runs as the worker's service account;
  # the Gemini API and OpenAI-compatible servers take a key from Secret Manager.
  grader_on_vertex = var.grader.kind == "gemini" && var.grader.gemini_api == "vertex"
  grader_needs_key = var.grader.kind == "openai" || (var.grader.kind == "gemini" && var.grader.gemini_api == "developer")

  # The worker's grader settings (GRADEQ_GRADER_*, docs/graders.md). An
  # empty value is left out: the setting's default is empty too, so the worker reads the
  # same and no env entry without a value reaches Cloud Run. GRADEQ_GRADER_SIMULATE is
  # never set: failure injection stays off on Google Cloud.
  grader_settings = {
    GRADEQ_GRADER                   = var.grader.kind
    GRADEQ_GRADER_MODEL             = var.grader.model
    GRADEQ_GRADER_GEMINI_API        = var.grader.gemini_api
    GRADEQ_GRADER_LOCATION          = var.grader.location
    GRADEQ_GRADER_BASE_URL          = var.grader.base_url
    GRADEQ_GRADER_REQUEST_TIMEOUT_S = tostring(var.grader.request_timeout_s)
    GRADEQ_GRADER_QUOTA_RPM         = tostring(var.grader.quota_rpm)
    GRADEQ_GRADER_QUOTA_TPM         = tostring(var.grader.quota_tpm)
    GRADEQ_GRADER_QUOTA_HEADROOM    = tostring(var.grader.quota_headroom)
    GRADEQ_GRADER_QUOTA_MODE        = var.grader.quota_mode
  }
  grader_env = { for name, value in local.grader_settings : name => value if value != "" }

  # Batch mode (var.batch, docs/graders.md#batch-mode).
  batch_settings = {
    GRADEQ_BATCH_MODE     = tostring(var.batch.enabled)
    GRADEQ_BATCH_LANES    = var.batch.lanes
    GRADEQ_BATCH_REGRADES = tostring(var.batch.regrades)
    GRADEQ_BATCH_MAX_SIZE = tostring(var.batch.max_size)
    GRADEQ_BATCH_WINDOW_S = tostring(var.batch.window_s)
    GRADEQ_BATCH_TICK_S   = tostring(var.batch.tick_s)
  }

  # Model requests a minute all worker instances together may send. shared (and adaptive,
  # whose limit the declared quota stands in for): one pool of
  # max(1, floor(quota_rpm x quota_headroom)) (shared/bootstrap/graders.py, pool_limits);
  # instance: each instance takes max(1, floor(quota_rpm x quota_headroom / max_instances))
  # (shared/adapters/graders/limiter.py).
  grader_quota_rpm_used = var.grader.quota_mode == "instance" ? var.worker.max_instances * max(1, floor(var.grader.quota_rpm * var.grader.quota_headroom / var.worker.max_instances)) : max(1, floor(var.grader.quota_rpm * var.grader.quota_headroom))

  required_apis = toset(concat([
    "artifactregistry.googleapis.com",
    "bigquery.googleapis.com",
    "cloudresourcemanager.googleapis.com",
    "cloudscheduler.googleapis.com",
    "cloudtasks.googleapis.com",
    "firestore.googleapis.com",
    "iam.googleapis.com",
    "logging.googleapis.com",
    "monitoring.googleapis.com",
    "pubsub.googleapis.com",
    "run.googleapis.com",
    "secretmanager.googleapis.com",
    "iamcredentials.googleapis.com", # signBlob: the intake signs upload URLs
    "storage.googleapis.com",
  ], local.grader_on_vertex ? ["aiplatform.googleapis.com"] : []))
}

resource "google_project_service" "main" {
  for_each = local.required_apis

  project            = var.project_id
  service            = each.value
  disable_on_destroy = false
}

# An API answers "has not been used in project ... or it is disabled" for a while after
# its enablement finished. Every resource waits for this (directly or through a resource
# it references); a changed API list sleeps again.
resource "time_sleep" "apis" {
  create_duration = "60s"

  triggers = {
    apis = join(",", sort(tolist(local.required_apis)))
  }

  depends_on = [google_project_service.main]
}

# Generates the Pub/Sub service agent if it does not exist yet, so the grants to it
# (BigQuery writes, dead-lettering, push tokens) never race its lazy creation.
resource "google_project_service_identity" "pubsub" {
  provider = google-beta

  project = var.project_id
  service = "pubsub.googleapis.com"

  depends_on = [time_sleep.apis]
}
