# The three Cloud Run services run one image; SERVICE selects the app. Requests from
# Cloud Tasks, Pub/Sub and Cloud Scheduler in the same project count as internal traffic,
# so only the intake accepts traffic from the internet.
#
# Health paths: the probes stay on /healthz. Cloud Run's front end reserves some paths
# ending in "z" for requests through the service URL, but container-configured probes
# reach them, and every image version serves /healthz (the /health/live and
# /health/ready aliases only exist in newer ones). Anything that checks health through
# the public URL (an uptime check, a curl after deploying) uses /health/live instead.

resource "google_cloud_run_v2_service" "intake" {
  #checkov:skip=CKV2_GRADEQ_7:The intake is the public API; its ingress is the var.intake_ingress choice.
  name                = local.service_names.intake
  location            = var.region
  ingress             = var.intake_ingress
  deletion_protection = var.deletion_protection
  labels              = var.labels

  # Public without an allUsers binding (iam.tf); the API checks client keys itself.
  invoker_iam_disabled = var.intake_public

  template {
    service_account                  = google_service_account.intake.email
    timeout                          = "60s"
    max_instance_request_concurrency = var.intake.concurrency

    scaling {
      min_instance_count = var.intake.min_instances
      max_instance_count = var.intake.max_instances
    }

    containers {
      image = var.image

      ports {
        container_port = 8080
      }

      resources {
        limits = {
          cpu    = var.intake.cpu
          memory = var.intake.memory
        }
        cpu_idle          = true
        startup_cpu_boost = true
      }

      dynamic "env" {
        for_each = merge(local.common_env, local.intake_env, {
          SERVICE     = "intake"
          CONCURRENCY = tostring(var.intake.concurrency)
        })
        content {
          name  = env.key
          value = env.value
        }
      }

      # Operator keys for the admin API and the dashboard (<intake URL>/admin/).
      env {
        name = "GRADEQ_OPERATOR_KEYS"
        value_source {
          secret_key_ref {
            secret  = google_secret_manager_secret.operator_keys.secret_id
            version = "latest"
          }
        }
      }

      # Reviewer keys, when var.reviewer_keys asks for them (docs/review.md).
      dynamic "env" {
        for_each = var.reviewer_keys ? ["GRADEQ_REVIEWER_KEYS"] : []
        content {
          name = env.value
          value_source {
            secret_key_ref {
              secret  = google_secret_manager_secret.reviewer_keys[0].secret_id
              version = "latest"
            }
          }
        }
      }

      # gunicorn runs CONCURRENCY + 2 threads (shared/http/gunicorn_conf.py): probes are
      # not counted against the concurrency, so they find a thread on a busy instance.
      # The timeouts still allow for a CPU shared with long requests: a restart would
      # lose every request in flight.
      startup_probe {
        http_get {
          path = "/healthz"
        }
        timeout_seconds   = 5
        period_seconds    = 5
        failure_threshold = 24
      }

      liveness_probe {
        http_get {
          path = "/healthz"
        }
        timeout_seconds   = 10
        period_seconds    = 30
        failure_threshold = 4
      }
    }
  }

  # A revision that cannot read the operator keys does not start.
  depends_on = [
    time_sleep.apis,
    time_sleep.service_iam,
  ]
}

resource "google_cloud_run_v2_service" "worker" {
  name                = local.service_names.worker
  location            = var.region
  ingress             = "INGRESS_TRAFFIC_INTERNAL_ONLY"
  deletion_protection = var.deletion_protection
  labels              = var.labels

  # Cloud Run checks every caller's run.invoker (iam.tf) before the app sees the request.
  invoker_iam_disabled = false

  template {
    service_account = google_service_account.worker.email
    # Cloud Tasks stops waiting at the dispatch deadline; Cloud Run must not cut the
    # request earlier, or every long grading run would end in a 504 and a retry.
    timeout                          = "${local.dispatch_deadline_s}s"
    max_instance_request_concurrency = var.worker.concurrency

    scaling {
      min_instance_count = var.worker.min_instances
      max_instance_count = var.worker.max_instances
    }

    containers {
      image = var.image

      ports {
        container_port = 8080
      }

      resources {
        limits = {
          cpu    = var.worker.cpu
          memory = var.worker.memory
        }
        cpu_idle          = true
        startup_cpu_boost = true
      }

      dynamic "env" {
        for_each = merge(local.common_env, local.push_env.worker, local.grader_env, {
          SERVICE     = "worker"
          CONCURRENCY = tostring(var.worker.concurrency)
          # The grader's quota is split evenly over this many instances.
          GRADEQ_WORKER_MAX_INSTANCES = tostring(var.worker.max_instances)
        })
        content {
          name  = env.key
          value = env.value
        }
      }

      # Only for a grader that needs a key (local.grader_needs_key).
      dynamic "env" {
        for_each = local.grader_needs_key ? ["GRADEQ_GRADER_API_KEY"] : []
        content {
          name = env.value
          value_source {
            secret_key_ref {
              secret  = google_secret_manager_secret.grader_api_key[0].secret_id
              version = "latest"
            }
          }
        }
      }

      # gunicorn runs CONCURRENCY + 2 threads (shared/http/gunicorn_conf.py): probes are
      # not counted against the concurrency, so they find a thread on a busy instance.
      # The timeouts still allow for a CPU shared with long requests: a restart would
      # lose every request in flight.
      startup_probe {
        http_get {
          path = "/healthz"
        }
        timeout_seconds   = 5
        period_seconds    = 5
        failure_threshold = 24
      }

      liveness_probe {
        http_get {
          path = "/healthz"
        }
        timeout_seconds   = 10
        period_seconds    = 30
        failure_threshold = 4
      }
    }
  }

  lifecycle {
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
  }

  # A revision must not grade before it may read its key or call Vertex AI: a refused
  # model call fails the job at once (grading-provider-rejected).
  depends_on = [
    time_sleep.apis,
    time_sleep.service_iam,
  ]
}

resource "google_cloud_run_v2_service" "notification" {
  name                = local.service_names.notification
  location            = var.region
  ingress             = "INGRESS_TRAFFIC_INTERNAL_ONLY"
  deletion_protection = var.deletion_protection
  labels              = var.labels

  # Cloud Run checks every caller's run.invoker (iam.tf) before the app sees the request.
  invoker_iam_disabled = false

  template {
    service_account = google_service_account.notification.email
    # Pub/Sub waits for a push response as long as the subscription's ack deadline.
    timeout                          = "${local.subscriptions.subscriptions.notification.ack_deadline_seconds}s"
    max_instance_request_concurrency = var.notification.concurrency

    scaling {
      min_instance_count = var.notification.min_instances
      max_instance_count = var.notification.max_instances
    }

    containers {
      image = var.image

      ports {
        container_port = 8080
      }

      resources {
        limits = {
          cpu    = var.notification.cpu
          memory = var.notification.memory
        }
        cpu_idle          = true
        startup_cpu_boost = true
      }

      dynamic "env" {
        for_each = merge(local.common_env, local.push_env.notification, {
          SERVICE     = "notification"
          CONCURRENCY = tostring(var.notification.concurrency)
        })
        content {
          name  = env.key
          value = env.value
        }
      }

      env {
        name = "GRADEQ_WEBHOOK_SECRETS_KEY"
        value_source {
          secret_key_ref {
            secret  = google_secret_manager_secret.webhook_secret.secret_id
            version = "latest"
          }
        }
      }

      # gunicorn runs CONCURRENCY + 2 threads (shared/http/gunicorn_conf.py): probes are
      # not counted against the concurrency, so they find a thread on a busy instance.
      # The timeouts still allow for a CPU shared with long requests: a restart would
      # lose every request in flight.
      startup_probe {
        http_get {
          path = "/healthz"
        }
        timeout_seconds   = 5
        period_seconds    = 5
        failure_threshold = 24
      }

      liveness_probe {
        http_get {
          path = "/healthz"
        }
        timeout_seconds   = 10
        period_seconds    = 30
        failure_threshold = 4
      }
    }
  }

  depends_on = [
    time_sleep.apis,
    time_sleep.service_iam,
  ]
}
