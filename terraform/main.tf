provider "google" {
  project = var.project_id
  region  = var.region
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
  }
  service_urls = {
    for key, name in local.service_names :
    key => "https://${name}-${data.google_project.main.number}.${var.region}.run.app"
  }

  pubsub_service_agent = "serviceAccount:service-${data.google_project.main.number}@gcp-sa-pubsub.iam.gserviceaccount.com"

  # Settings every service reads on Google Cloud.
  common_env = {
    GRADEQ_BACKEND               = "google"
    GRADEQ_PROJECT_ID            = var.project_id
    GRADEQ_LOCATION              = var.region
    GRADEQ_QUEUE                 = var.queue
    GRADEQ_WORKER_URL            = local.service_urls.worker
    GRADEQ_TASKS_SERVICE_ACCOUNT = google_service_account.tasks_invoker.email
    GRADEQ_FIRESTORE_DATABASE    = google_firestore_database.main.name
    GRADEQ_JOBS_COLLECTION       = var.jobs_collection
    GRADEQ_TOPIC                 = google_pubsub_topic.events.name
    GRADEQ_PUSH_AUTH             = "oidc"
    GRADEQ_LOG_LEVEL             = var.log_level
  }

  required_apis = toset([
    "bigquery.googleapis.com",
    "cloudscheduler.googleapis.com",
    "cloudtasks.googleapis.com",
    "firestore.googleapis.com",
    "iam.googleapis.com",
    "logging.googleapis.com",
    "monitoring.googleapis.com",
    "pubsub.googleapis.com",
    "run.googleapis.com",
    "secretmanager.googleapis.com",
  ])
}

resource "google_project_service" "main" {
  for_each = local.required_apis

  project            = var.project_id
  service            = each.value
  disable_on_destroy = false
}
