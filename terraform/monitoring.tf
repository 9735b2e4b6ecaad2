# Alerts. The log-based ones assume the worker logs one JSON line per occurrence with
# jsonPayload.event set (job_failed also carries the job id in jsonPayload.job_id).

locals {
  worker_revisions    = "resource.type = \"cloud_run_revision\" AND resource.labels.service_name = \"${module.worker.name}\""
  gradebook_revisions = "resource.type = \"cloud_run_revision\" AND resource.labels.service_name = \"${module.gradebook.name}\""
}

# Worker log events that need a person: each is a log-based metric and an alert on any
# occurrence (modules/log_alert).
module "job_failed_alert" {
  source = "./modules/log_alert"

  name                  = "${var.name_prefix}/job_failed"
  display_name          = "${var.name_prefix}: grading jobs failed"
  description           = "Grading jobs that ended failed (worker log event job_failed)."
  log_filter            = "${local.worker_revisions} AND jsonPayload.event = \"job_failed\""
  documentation         = "At least one grading job ended failed after its retries. Search the worker logs for jsonPayload.event=\"job_failed\"."
  notification_channels = var.notification_channels
  labels                = var.labels

  depends_on = [time_sleep.apis]
}

# A refusal that would fail every job (unknown model, revoked key, disabled API) suspends
# grading instead; jobs wait in the queue until a probe of the provider succeeds.
module "grader_suspended_alert" {
  source = "./modules/log_alert"

  name                  = "${var.name_prefix}/grader_suspended"
  display_name          = "${var.name_prefix}: grading suspended by the provider's refusal"
  description           = "The grader's configuration was refused (worker log event grader_suspended)."
  log_filter            = "${local.worker_revisions} AND jsonPayload.event = \"grader_suspended\""
  documentation         = "The model provider refused the grader's configuration (unknown model, revoked key or disabled API), so the worker stopped taking work; no job is spent while it waits. Search the worker logs for jsonPayload.event=\"grader_suspended\", fix the setting or the key, and grading resumes at the next successful probe (jsonPayload.event=\"grader_resumed\")."
  notification_channels = var.notification_channels
  labels                = var.labels

  depends_on = [time_sleep.apis]
}

# A client or an assignment passed the soft limit of its monthly budget (worker log event
# budget_soft_limit, one line when a grading takes the spend past it).
module "budget_soft_limit_alert" {
  source = "./modules/log_alert"

  name                  = "${var.name_prefix}/budget_soft_limit"
  display_name          = "${var.name_prefix}: a grading budget passed its soft limit"
  description           = "A monthly budget's spend passed its soft limit (worker log event budget_soft_limit)."
  log_filter            = "${local.worker_revisions} AND jsonPayload.event = \"budget_soft_limit\""
  documentation         = "The monthly spend of jsonPayload.scope jsonPayload.key passed its soft limit (jsonPayload.soft_micro_usd, micro-dollars). At the hard limit its new submissions are refused (429 budget-exhausted) and its queued work is held. Check `gradeq budgets list` and raise the budget if the spend is expected (docs/cost.md)."
  notification_channels = var.notification_channels
  labels                = var.labels

  depends_on = [time_sleep.apis]
}

# The grader's model retires within 30 days (worker log event grader_model_retiring, at
# most one line a day per instance); past the date a default model suspends grading.
module "grader_model_retiring_alert" {
  source = "./modules/log_alert"

  name                  = "${var.name_prefix}/grader_model_retiring"
  display_name          = "${var.name_prefix}: the grader's model retires soon"
  description           = "The grader's model retires within 30 days (worker log event grader_model_retiring)."
  log_filter            = "${local.worker_revisions} AND jsonPayload.event = \"grader_model_retiring\""
  documentation         = "Vertex AI retires the grader's Gemini model on jsonPayload.retires_on (new access to it is already blocked). Set var.grader.model (GRADEQ_GRADER_MODEL) to a current model and apply before that date: past it, a worker on the default model suspends grading (grader_suspended) until it names a current one. Search the worker logs for jsonPayload.event=\"grader_model_retiring\"."
  notification_channels = var.notification_channels
  labels                = var.labels

  depends_on = [time_sleep.apis]
}

# A school's gradebook (its LMS) stopped taking grades: the gradebook service logs
# gradebook_outage once, at the first failed write of a streak. Grades wait in the
# subscription and arrive when the LMS answers again (gradebook_recovered).
module "gradebook_outage_alert" {
  source = "./modules/log_alert"

  name                  = "${var.name_prefix}/gradebook_outage"
  display_name          = "${var.name_prefix}: a school's gradebook is not taking grades"
  description           = "A school's LMS answered 429, 5xx or timed out (gradebook log event gradebook_outage)."
  log_filter            = "${local.gradebook_revisions} AND jsonPayload.event = \"gradebook_outage\""
  documentation         = "A school's gradebook (jsonPayload.school) stopped taking grades: its LMS answers 429 or 5xx, or times out. No grade is lost: Pub/Sub redelivers each one with the subscription's backoff until the LMS takes it (about 16 hours before the dead-letter topic). GET <gradebook URL>/admin/gradebooks (operator key) shows the outage since when and its last error; the outage ends at jsonPayload.event=\"gradebook_recovered\"."
  notification_channels = var.notification_channels
  labels                = var.labels

  depends_on = [time_sleep.apis]
}

resource "google_monitoring_alert_policy" "dead_lettered" {
  display_name          = "${var.name_prefix}: events dead-lettered"
  combiner              = "OR"
  notification_channels = var.notification_channels
  user_labels           = var.labels

  documentation {
    content   = "GradingCompleted events exhausted their delivery attempts and sit on ${google_pubsub_subscription.dead_letter.name}. Inspect them with `gcloud pubsub subscriptions pull`, fix the cause, then republish."
    mime_type = "text/markdown"
  }

  conditions {
    display_name = "Dead-letter subscription has undelivered messages"

    condition_threshold {
      filter          = "resource.type = \"pubsub_subscription\" AND resource.labels.subscription_id = \"${google_pubsub_subscription.dead_letter.name}\" AND metric.type = \"pubsub.googleapis.com/subscription/num_undelivered_messages\""
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "0s"

      aggregations {
        alignment_period   = "300s"
        per_series_aligner = "ALIGN_MAX"
      }
    }
  }
}

# Cloud Tasks exports no "oldest task age" metric; the delay between a task's scheduled
# and actual dispatch is the closest signal that the queue is falling behind.
resource "google_monitoring_alert_policy" "task_backlog" {
  display_name          = "${var.name_prefix}: grading tasks dispatched late"
  combiner              = "OR"
  notification_channels = var.notification_channels
  user_labels           = var.labels

  documentation {
    content   = "Cloud Tasks dispatches grading tasks more than ${var.alert_task_delay_s}s after they were due: the worker is saturated (max_instances, concurrency) or failing. Check the queue depth and the worker's errors."
    mime_type = "text/markdown"
  }

  conditions {
    display_name = "99th percentile task attempt delay"

    condition_threshold {
      filter          = "resource.type = \"cloud_tasks_queue\" AND resource.labels.queue_id = \"${google_cloud_tasks_queue.main[var.queue].name}\" AND metric.type = \"cloudtasks.googleapis.com/queue/task_attempt_delays\""
      comparison      = "COMPARISON_GT"
      threshold_value = var.alert_task_delay_s * 1000 # the metric is in milliseconds
      duration        = "300s"

      aggregations {
        alignment_period   = "300s"
        per_series_aligner = "ALIGN_PERCENTILE_99"
      }
    }
  }
}

resource "google_monitoring_alert_policy" "oldest_unacked" {
  display_name          = "${var.name_prefix}: events waiting too long"
  combiner              = "OR"
  notification_channels = var.notification_channels
  user_labels           = var.labels

  documentation {
    content   = "A GradingCompleted subscription has an event older than ${var.alert_oldest_unacked_age_s}s that is not acknowledged: the notification service or the BigQuery write is failing."
    mime_type = "text/markdown"
  }

  dynamic "conditions" {
    for_each = local.dead_lettered_subscriptions
    content {
      display_name = "Oldest unacked message age on ${conditions.value}"

      condition_threshold {
        filter          = "resource.type = \"pubsub_subscription\" AND resource.labels.subscription_id = \"${conditions.value}\" AND metric.type = \"pubsub.googleapis.com/subscription/oldest_unacked_message_age\""
        comparison      = "COMPARISON_GT"
        threshold_value = var.alert_oldest_unacked_age_s
        duration        = "300s"

        aggregations {
          alignment_period   = "60s"
          per_series_aligner = "ALIGN_MAX"
        }
      }
    }
  }
}

resource "google_monitoring_alert_policy" "worker_errors" {
  display_name          = "${var.name_prefix}: worker 5xx rate"
  combiner              = "OR"
  notification_channels = var.notification_channels
  user_labels           = var.labels

  documentation {
    content   = "More than ${var.alert_worker_error_ratio * 100}% of the worker's responses were 5xx over 10 minutes. Each one is a Cloud Tasks retry."
    mime_type = "text/markdown"
  }

  conditions {
    display_name = "Worker 5xx / all responses"

    condition_threshold {
      filter             = "${local.worker_revisions} AND metric.type = \"run.googleapis.com/request_count\" AND metric.labels.response_code_class = \"5xx\""
      denominator_filter = "${local.worker_revisions} AND metric.type = \"run.googleapis.com/request_count\""
      comparison         = "COMPARISON_GT"
      threshold_value    = var.alert_worker_error_ratio
      duration           = "600s"

      aggregations {
        alignment_period     = "300s"
        per_series_aligner   = "ALIGN_RATE"
        cross_series_reducer = "REDUCE_SUM"
      }

      denominator_aggregations {
        alignment_period     = "300s"
        per_series_aligner   = "ALIGN_RATE"
        cross_series_reducer = "REDUCE_SUM"
      }
    }
  }
}

# Lanes (docs/lanes.md): each recovery sweep logs every lane's oldest waiting job's age
# (event lane_figures); an alert per lane fires when it passes the lane's
# oldest_age_objective in shared/config/queues.json. Cloud Tasks exports no oldest-task
# age, and a starved lane dispatches nothing, so its attempt delays would say nothing.
locals {
  lane_objectives = {
    for name, queue in local.queues : name => tonumber(trimsuffix(queue.lane.oldest_age_objective, "s"))
    if can(queue.lane.oldest_age_objective)
  }
}

resource "google_logging_metric" "lane_oldest_job_age" {
  name        = "${var.name_prefix}/lane_oldest_job_age"
  description = "Age in seconds of each lane's oldest waiting job, logged by every recovery sweep."
  filter      = "${local.worker_revisions} AND jsonPayload.event = \"lane_figures\""

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "DISTRIBUTION"
    unit        = "s"

    labels {
      key         = "lane"
      value_type  = "STRING"
      description = "The lane (queue) of shared/config/queues.json."
    }
  }

  value_extractor = "EXTRACT(jsonPayload.oldest_age_s)"
  label_extractors = {
    lane = "EXTRACT(jsonPayload.lane)"
  }

  bucket_options {
    exponential_buckets {
      num_finite_buckets = 32
      growth_factor      = 2
      scale              = 1
    }
  }

  depends_on = [time_sleep.apis]
}

resource "time_sleep" "lane_metric" {
  create_duration = "60s"

  triggers = {
    metric = google_logging_metric.lane_oldest_job_age.id
  }
}

resource "google_monitoring_alert_policy" "lane_starved" {
  for_each = local.lane_objectives

  display_name          = "${var.name_prefix}: lane ${each.key} has a job older than ${each.value}s"
  combiner              = "OR"
  notification_channels = var.notification_channels
  user_labels           = var.labels

  documentation {
    content   = "Lane ${each.key}'s oldest waiting job is older than its objective (${each.value}s, shared/config/queues.json): the lane is paused, starved by the higher lanes' quota claims, or the worker is saturated. Check `gradeq lanes list` and docs/lanes.md."
    mime_type = "text/markdown"
  }

  conditions {
    display_name = "Oldest waiting job of lane ${each.key}"

    condition_threshold {
      filter          = "resource.type = \"cloud_run_revision\" AND metric.type = \"logging.googleapis.com/user/${google_logging_metric.lane_oldest_job_age.name}\" AND metric.labels.lane = \"${each.key}\""
      comparison      = "COMPARISON_GT"
      threshold_value = each.value
      duration        = "0s"

      aggregations {
        alignment_period     = "600s"
        per_series_aligner   = "ALIGN_PERCENTILE_99"
        cross_series_reducer = "REDUCE_MAX"
      }
    }
  }

  depends_on = [time_sleep.lane_metric]
}
