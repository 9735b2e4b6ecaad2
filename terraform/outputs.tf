output "intake_url" {
  description = "Base URL of the public intake API."
  value       = module.intake.uri
}

output "service_urls" {
  description = "Deterministic base URLs of the services; they are also the OIDC audiences the services check."
  value       = local.service_urls
}

output "worker_url" {
  description = "Base URL of the worker (internal; Cloud Tasks and Cloud Scheduler only)."
  value       = module.worker.uri

  # The worker's settings, checked before anything is planned. They sit here because a
  # module call (run.tf) takes no preconditions of its own.
  precondition {
    condition     = contains(keys(local.queues), var.queue)
    error_message = "var.queue must be a queue id defined in shared/config/queues.json."
  }
  # The longest delivery (shared/config/budget.py) ends before the queue gives up on it:
  # wait one lease for a dead attempt, grade, retry storing the result.
  precondition {
    condition     = var.lease_s + var.grader_timeout_s + var.result_write_retry_s <= local.dispatch_deadline_s
    error_message = "lease_s (${var.lease_s}) + grader_timeout_s (${var.grader_timeout_s}) + result_write_retry_s (${var.result_write_retry_s}) = ${var.lease_s + var.grader_timeout_s + var.result_write_retry_s}s must not exceed the queue's dispatch_deadline (${local.dispatch_deadline_s}s)."
  }
  # Every lane dispatches to the one worker. More tasks in flight than the worker has
  # slots meet Cloud Run's 429 (no instance free), which spends the tasks' attempts.
  precondition {
    condition     = local.lanes_concurrent_dispatches <= var.worker.max_instances * var.worker.concurrency
    error_message = "The lanes may dispatch ${local.lanes_concurrent_dispatches} tasks at once (the sum of max_concurrent_dispatches in shared/config/queues.json), more than the worker's ${var.worker.max_instances * var.worker.concurrency} slots (worker.max_instances ${var.worker.max_instances} x worker.concurrency ${var.worker.concurrency}). Raise worker.max_instances or worker.concurrency, or lower the lanes' max_concurrent_dispatches."
  }
}

output "notification_url" {
  description = "Base URL of the notification subscriber (internal; Pub/Sub push only)."
  value       = module.notification.uri
}

output "gradebook_url" {
  description = "Base URL of the gradebook subscriber (internal; Pub/Sub push only)."
  value       = module.gradebook.uri
}

output "queue_ids" {
  description = "Cloud Tasks queue ids, one per entry of shared/config/queues.json."
  value       = { for key, queue in google_cloud_tasks_queue.main : key => queue.id }
}

output "topic" {
  description = "Pub/Sub topic that receives GradingCompleted events."
  value       = google_pubsub_topic.events.name
}

output "dead_letter_subscription" {
  description = "Pull subscription that keeps events no subscriber could take."
  value       = google_pubsub_subscription.dead_letter.name
}

output "analytics_table" {
  description = "BigQuery table written by the analytics subscription, and its typed view."
  value = {
    raw   = "${google_bigquery_table.events.project}.${google_bigquery_table.events.dataset_id}.${google_bigquery_table.events.table_id}"
    typed = "${google_bigquery_table.events_v1.project}.${google_bigquery_table.events_v1.dataset_id}.${google_bigquery_table.events_v1.table_id}"
  }
}

output "firestore_database" {
  description = "Firestore database id that holds jobs and processed events."
  value       = google_firestore_database.main.name
}

output "service_accounts" {
  description = "Service account emails by role."
  value = {
    intake        = google_service_account.main["intake"].email
    worker        = google_service_account.main["worker"].email
    notification  = google_service_account.main["notification"].email
    gradebook     = google_service_account.main["gradebook"].email
    tasks_invoker = google_service_account.main["tasks_invoker"].email
    scheduler     = google_service_account.main["scheduler"].email
    pubsub_push   = google_service_account.main["pubsub_push"].email
  }
}

output "secrets" {
  description = "Secret Manager secret ids to add versions to before the first deploy."
  value = {
    webhook_secret = google_secret_manager_secret.webhook_secret.secret_id
    operator_keys  = google_secret_manager_secret.operator_keys.secret_id
    # null unless the grader needs a key (var.grader).
    grader_api_key = one(google_secret_manager_secret.grader_api_key[*].secret_id)
    # null unless var.lti_tool_url turns LTI on.
    lti_secrets_key = one(google_secret_manager_secret.lti_secrets_key[*].secret_id)
  }
}

output "uploads_bucket" {
  description = "The bucket of uploaded answer files (GRADEQ_UPLOADS_BUCKET)."
  value       = google_storage_bucket.uploads.name
}
