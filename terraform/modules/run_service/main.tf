# One Gradeq service on Cloud Run: every service runs the same image (env SERVICE selects
# the app) with the same port, CPU allocation and probes; the caller chooses the rest.
#
# Health paths: the probes stay on /healthz. Cloud Run's front end reserves some paths
# ending in "z" for requests through the service URL, but container-configured probes
# reach them, and every image version serves /healthz (the /health/live and
# /health/ready aliases only exist in newer ones). Anything that checks health through
# the public URL (an uptime check, a curl after deploying) uses /health/live instead.

resource "google_cloud_run_v2_service" "main" {
  name                 = var.name
  location             = var.location
  ingress              = var.ingress
  deletion_protection  = var.deletion_protection
  labels               = var.labels
  invoker_iam_disabled = var.invoker_iam_disabled

  template {
    service_account                  = var.service_account
    timeout                          = var.request_timeout
    max_instance_request_concurrency = var.sizing.concurrency

    scaling {
      min_instance_count = var.sizing.min_instances
      max_instance_count = var.sizing.max_instances
    }

    containers {
      image = var.image

      ports {
        container_port = 8080
      }

      resources {
        limits = {
          cpu    = var.sizing.cpu
          memory = var.sizing.memory
        }
        cpu_idle          = true
        startup_cpu_boost = true
      }

      # gunicorn's thread count follows CONCURRENCY, so it always matches the requests
      # Cloud Run sends to one instance.
      dynamic "env" {
        for_each = merge(var.env, {
          CONCURRENCY = tostring(var.sizing.concurrency)
        })
        content {
          name  = env.key
          value = env.value
        }
      }

      dynamic "env" {
        for_each = var.secret_env
        content {
          name = env.key
          value_source {
            secret_key_ref {
              secret  = env.value
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
}
