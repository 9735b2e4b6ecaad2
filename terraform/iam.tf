# One service account per workload and per push identity; every grant below is the
# smallest role on the narrowest resource that the design needs. Service accounts wait
# for the IAM API (time_sleep.apis); every grant references an account or a resource that
# already waits.

locals {
  service_accounts = {
    intake = {
      account_id   = "${var.name_prefix}-intake"
      display_name = "Gradeq intake API"
      description  = "Runs the intake service: reads/writes jobs, counters and API keys, and enqueues grading tasks."
    }
    worker = {
      account_id   = "${var.name_prefix}-worker"
      display_name = "Gradeq worker"
      description  = "Runs the worker service: grades jobs, updates them and publishes GradingCompleted."
    }
    notification = {
      account_id   = "${var.name_prefix}-notification"
      display_name = "Gradeq notification subscriber"
      description  = "Runs the notification service: delivers signed webhooks."
    }
    gradebook = {
      account_id   = "${var.name_prefix}-gradebook"
      display_name = "Gradeq gradebook subscriber"
      description  = "Runs the gradebook service: writes posted grades to each school's LMS."
    }
    tasks_invoker = {
      account_id   = "${var.name_prefix}-tasks"
      display_name = "Gradeq Cloud Tasks invoker"
      description  = "Identity in the OIDC tokens Cloud Tasks sends to the worker."
    }
    scheduler = {
      account_id   = "${var.name_prefix}-scheduler"
      display_name = "Gradeq recovery scheduler"
      description  = "Identity in the OIDC tokens Cloud Scheduler sends to the worker's /tasks/recover."
    }
    pubsub_push = {
      account_id   = "${var.name_prefix}-push"
      display_name = "Gradeq Pub/Sub push"
      description  = "Identity in the OIDC tokens Pub/Sub sends to the push subscribers."
    }
  }
}

resource "google_service_account" "main" {
  for_each = local.service_accounts

  account_id   = each.value.account_id
  display_name = each.value.display_name
  description  = each.value.description

  depends_on = [time_sleep.apis]
}

# --- Firestore: project-wide is the narrowest scope Firestore IAM offers; a condition
# narrows it to the Gradeq database. The intake's grant covers every collection it uses
# there: jobs, the counters of jobs not yet final (GRADEQ_COUNTERS_COLLECTION) and the API
# key digests (GRADEQ_API_KEYS_COLLECTION).
locals {
  firestore_users = {
    intake       = google_service_account.main["intake"].email
    worker       = google_service_account.main["worker"].email
    notification = google_service_account.main["notification"].email
    gradebook    = google_service_account.main["gradebook"].email
  }
}

resource "google_project_iam_member" "firestore_user" {
  for_each = local.firestore_users

  project = var.project_id
  role    = "roles/datastore.user"
  member  = "serviceAccount:${each.value}"

  condition {
    title       = "gradeq-database-only"
    description = "Only the Gradeq Firestore database."
    expression  = "resource.name == \"projects/${var.project_id}/databases/${google_firestore_database.main.name}\""
  }
}

# --- Cloud Tasks: the intake enqueues; the worker re-enqueues jobs it recovers.
locals {
  task_enqueuers = {
    intake = google_service_account.main["intake"].email
    worker = google_service_account.main["worker"].email
  }
}

resource "google_cloud_tasks_queue_iam_member" "enqueuer" {
  for_each = local.task_enqueuers

  name     = google_cloud_tasks_queue.main[var.queue].name
  location = var.region
  role     = "roles/cloudtasks.enqueuer"
  member   = "serviceAccount:${each.value}"
}

# The recovery sweep asks whether a stuck job's task still exists (GetTask) before it
# enqueues the job again; without cloudtasks.tasks.get every answer is PermissionDenied
# and the sweep never replays a job. roles/cloudtasks.viewer on this one queue is the
# smallest predefined role with it: besides tasks.get it allows listing this queue's tasks
# (a task carries nothing but the job id, and the worker reads every job in Firestore
# anyway) and reading the queue's configuration. A custom role with exactly tasks.get
# would save that at the price of a project-level role resource (roles/iam.roleAdmin for
# whoever applies, a role id that stays reserved for weeks after a destroy), for no
# access to anything the worker cannot already read.
resource "google_cloud_tasks_queue_iam_member" "worker_task_viewer" {
  name     = google_cloud_tasks_queue.main[var.queue].name
  location = var.region
  role     = "roles/cloudtasks.viewer"
  member   = "serviceAccount:${google_service_account.main["worker"].email}"
}

# Creating a task with an OIDC token for tasks_invoker requires actAs on that account.
resource "google_service_account_iam_member" "tasks_invoker_user" {
  for_each = local.task_enqueuers

  service_account_id = google_service_account.main["tasks_invoker"].name
  role               = "roles/iam.serviceAccountUser"
  member             = "serviceAccount:${each.value}"
}

# --- Cloud Run invokers.
resource "google_cloud_run_v2_service_iam_member" "worker_tasks_invoker" {
  name     = module.worker.name
  location = var.region
  role     = "roles/run.invoker"
  member   = "serviceAccount:${google_service_account.main["tasks_invoker"].email}"
}

resource "google_cloud_run_v2_service_iam_member" "worker_scheduler_invoker" {
  name     = module.worker.name
  location = var.region
  role     = "roles/run.invoker"
  member   = "serviceAccount:${google_service_account.main["scheduler"].email}"
}

resource "google_cloud_run_v2_service_iam_member" "notification_push_invoker" {
  name     = module.notification.name
  location = var.region
  role     = "roles/run.invoker"
  member   = "serviceAccount:${google_service_account.main["pubsub_push"].email}"
}

resource "google_cloud_run_v2_service_iam_member" "gradebook_push_invoker" {
  name     = module.gradebook.name
  location = var.region
  role     = "roles/run.invoker"
  member   = "serviceAccount:${google_service_account.main["pubsub_push"].email}"
}

# The intake is the public API: it authenticates clients itself, with API keys (digests
# in Firestore) or Firebase ID tokens. Public means invoker_iam_disabled on the service
# (run.tf), not an allUsers binding: organisations that enforce domain restricted sharing
# (Google's secure-by-default policy) refuse allUsers.

resource "google_cloud_run_v2_service_iam_member" "intake_invokers" {
  for_each = var.intake_public ? toset([]) : toset(var.intake_invokers)

  name     = module.intake.name
  location = var.region
  role     = "roles/run.invoker"
  member   = each.value
}

# Google Classroom: the gradebook acts as a school's teacher through domain-wide
# delegation, signing the delegation assertion with its own account through IAM signBlob
# (docs/gradebook.md): it needs the token creator role on itself, not a key.
resource "google_service_account_iam_member" "gradebook_signs_delegation" {
  service_account_id = google_service_account.main["gradebook"].name
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = "serviceAccount:${google_service_account.main["gradebook"].email}"
}

# --- Pub/Sub: only the worker publishes events.
resource "google_pubsub_topic_iam_member" "worker_publisher" {
  topic  = google_pubsub_topic.events.name
  role   = "roles/pubsub.publisher"
  member = "serviceAccount:${google_service_account.main["worker"].email}"
}

# The Pub/Sub service agent mints the push OIDC tokens for pubsub_push.
resource "google_service_account_iam_member" "pubsub_push_token_creator" {
  service_account_id = google_service_account.main["pubsub_push"].name
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = local.pubsub_service_agent
}

# Cloud Scheduler's job is created with an OIDC token for the scheduler account; the
# scheduler itself needs nothing else.

# --- Secrets: each secret readable only by the service that uses it.
resource "google_secret_manager_secret_iam_member" "notification_webhook_secret" {
  secret_id = google_secret_manager_secret.webhook_secret.id
  role      = "roles/secretmanager.secretAccessor"
  member    = "serviceAccount:${google_service_account.main["notification"].email}"
}

resource "google_secret_manager_secret_iam_member" "intake_operator_keys" {
  secret_id = google_secret_manager_secret.operator_keys.id
  role      = "roles/secretmanager.secretAccessor"
  member    = "serviceAccount:${google_service_account.main["intake"].email}"
}

resource "google_secret_manager_secret_iam_member" "intake_reviewer_keys" {
  count = var.reviewer_keys ? 1 : 0

  secret_id = google_secret_manager_secret.reviewer_keys[0].id
  role      = "roles/secretmanager.secretAccessor"
  member    = "serviceAccount:${google_service_account.main["intake"].email}"
}

resource "google_secret_manager_secret_iam_member" "intake_lti_secrets_key" {
  count = local.lti_enabled ? 1 : 0

  secret_id = google_secret_manager_secret.lti_secrets_key[0].id
  role      = "roles/secretmanager.secretAccessor"
  member    = "serviceAccount:${google_service_account.main["intake"].email}"
}

resource "google_secret_manager_secret_iam_member" "gradebook_lti_secrets_key" {
  count = local.lti_enabled ? 1 : 0

  secret_id = google_secret_manager_secret.lti_secrets_key[0].id
  role      = "roles/secretmanager.secretAccessor"
  member    = "serviceAccount:${google_service_account.main["gradebook"].email}"
}

resource "google_secret_manager_secret_iam_member" "worker_grader_api_key" {
  count = local.grader_needs_key ? 1 : 0

  secret_id = google_secret_manager_secret.grader_api_key[0].id
  role      = "roles/secretmanager.secretAccessor"
  member    = "serviceAccount:${google_service_account.main["worker"].email}"
}

# --- Vertex AI: Gemini on Vertex AI runs as the worker's account. Google's publisher
# models have no IAM of their own; the project is the narrowest scope of aiplatform.user.
resource "google_project_iam_member" "worker_aiplatform_user" {
  count = local.grader_on_vertex ? 1 : 0

  project = var.project_id
  role    = "roles/aiplatform.user"
  member  = "serviceAccount:${google_service_account.main["worker"].email}"
}

# A grant can take minutes to reach every Google front end (IAM's access change
# propagation): a revision started right after its secret grant fails to resolve the
# secret and never becomes ready, and a worker refused by Vertex AI fails jobs. Each
# service waits for this after its grants (run.tf).
resource "time_sleep" "service_iam" {
  create_duration = "120s"

  triggers = {
    notification_webhook_secret = google_secret_manager_secret_iam_member.notification_webhook_secret.id
    intake_operator_keys        = google_secret_manager_secret_iam_member.intake_operator_keys.id
    intake_reviewer_keys        = join(",", google_secret_manager_secret_iam_member.intake_reviewer_keys[*].id)
    worker_grader_api_key       = join(",", google_secret_manager_secret_iam_member.worker_grader_api_key[*].id)
    intake_lti_secrets_key      = join(",", google_secret_manager_secret_iam_member.intake_lti_secrets_key[*].id)
    gradebook_lti_secrets_key   = join(",", google_secret_manager_secret_iam_member.gradebook_lti_secrets_key[*].id)
    worker_aiplatform_user      = join(",", google_project_iam_member.worker_aiplatform_user[*].id)
  }
}
