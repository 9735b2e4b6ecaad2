# One log-based metric counting a worker log event, and an alert on any occurrence.

resource "google_logging_metric" "main" {
  name        = var.name
  description = var.description
  filter      = var.log_filter

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"
  }
}

# Cloud Monitoring knows a new log-based metric only a while after Logging created it: an
# alert policy created at once fails with 404 "Cannot find metric(s)"
# (hashicorp/terraform-provider-google#11102). A replaced metric waits again.
resource "time_sleep" "metric" {
  create_duration = "60s"

  triggers = {
    metric = google_logging_metric.main.id
  }
}

resource "google_monitoring_alert_policy" "main" {
  display_name          = var.display_name
  combiner              = "OR"
  notification_channels = var.notification_channels
  user_labels           = var.labels

  documentation {
    content   = var.documentation
    mime_type = "text/markdown"
  }

  conditions {
    display_name = var.description

    condition_threshold {
      filter          = "resource.type = \"cloud_run_revision\" AND metric.type = \"logging.googleapis.com/user/${google_logging_metric.main.name}\""
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "0s"

      aggregations {
        alignment_period     = "300s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
      }
    }
  }

  depends_on = [time_sleep.metric]
}
