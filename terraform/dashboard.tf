# The operator's figures in Cloud Monitoring: log-based metrics from the one
# "job completed" line per finished job (shared/service_layer/completion.py logs it with
# jsonPayload.event = "job_completed", outcome, error_type, queue_wait_ms, processing_ms
# and total_ms), and a dashboard beside the alerts of monitoring.tf.

locals {
  completion_filter = "resource.type = \"cloud_run_revision\" AND resource.labels.service_name = (\"${module.worker.name}\" OR \"${module.intake.name}\") AND jsonPayload.event = \"job_completed\""

  # Distribution metrics of the completion line: name -> the jsonPayload field it reads.
  job_timings = {
    queue_wait = "queue_wait_ms"
    processing = "processing_ms"
    total      = "total_ms"
  }

  metric_prefix = "logging.googleapis.com/user/${var.name_prefix}"
}

resource "google_logging_metric" "job_timing" {
  for_each = local.job_timings

  name            = "${var.name_prefix}/job_${each.key}_ms"
  description     = "Per finished grading job: ${each.value} of the completion log line."
  filter          = "${local.completion_filter} AND jsonPayload.${each.value} >= 0"
  value_extractor = "EXTRACT(jsonPayload.${each.value})"

  label_extractors = {
    outcome = "EXTRACT(jsonPayload.outcome)"
  }

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "DISTRIBUTION"
    unit        = "ms"

    labels {
      key         = "outcome"
      value_type  = "STRING"
      description = "succeeded, failed or cancelled"
    }
  }

  # 10 ms to about 2.7 hours in 34 buckets, each half as wide again as the last.
  bucket_options {
    exponential_buckets {
      num_finite_buckets = 34
      growth_factor      = 1.5
      scale              = 10
    }
  }

  depends_on = [time_sleep.apis]
}

resource "google_logging_metric" "jobs_completed" {
  name        = "${var.name_prefix}/jobs_completed"
  description = "Finished grading jobs by outcome and error type (completion log line)."
  filter      = local.completion_filter

  label_extractors = {
    outcome    = "EXTRACT(jsonPayload.outcome)"
    error_type = "EXTRACT(jsonPayload.error_type)"
  }

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"

    labels {
      key         = "outcome"
      value_type  = "STRING"
      description = "succeeded, failed or cancelled"
    }

    labels {
      key         = "error_type"
      value_type  = "STRING"
      description = "the problem type of a failed job (empty otherwise)"
    }
  }

  depends_on = [time_sleep.apis]
}

# Cloud Monitoring knows a new log-based metric only a while after Logging created it
# (hashicorp/terraform-provider-google#11102): the dashboard that charts them waits as
# long as each log-event alert waits for its metric (time_sleep.metric in
# modules/log_alert). A replaced metric waits again.
resource "time_sleep" "dashboard_metrics" {
  create_duration = "60s"

  triggers = merge(
    { for key, metric in google_logging_metric.job_timing : "job_${key}_ms" => metric.id },
    { jobs_completed = google_logging_metric.jobs_completed.id },
  )
}

resource "google_monitoring_dashboard" "operations" {
  dashboard_json = jsonencode({
    displayName = "${var.name_prefix}: grading queue"
    mosaicLayout = {
      columns = 12
      tiles = concat(
        [
          for index, percentile in ["50", "95", "99"] : {
            xPos   = 4 * index
            yPos   = 0
            width  = 4
            height = 4
            widget = {
              title = "Queue wait vs processing, p${percentile}"
              xyChart = {
                dataSets = [
                  for timing in ["queue_wait", "processing"] : {
                    legendTemplate = timing
                    plotType       = "LINE"
                    timeSeriesQuery = {
                      timeSeriesFilter = {
                        filter = "metric.type = \"${local.metric_prefix}/job_${timing}_ms\" AND resource.type = \"cloud_run_revision\""
                        aggregation = {
                          alignmentPeriod    = "300s"
                          perSeriesAligner   = "ALIGN_DELTA"
                          crossSeriesReducer = "REDUCE_PERCENTILE_${percentile}"
                        }
                      }
                    }
                  }
                ]
                yAxis = { label = "ms", scale = "LINEAR" }
              }
            }
          }
        ],
        [
          {
            xPos   = 0
            yPos   = 4
            width  = 6
            height = 4
            widget = {
              title = "Jobs finished per minute, by outcome"
              xyChart = {
                dataSets = [{
                  plotType = "STACKED_BAR"
                  timeSeriesQuery = {
                    timeSeriesFilter = {
                      filter = "metric.type = \"${local.metric_prefix}/jobs_completed\" AND resource.type = \"cloud_run_revision\""
                      aggregation = {
                        alignmentPeriod    = "60s"
                        perSeriesAligner   = "ALIGN_RATE"
                        crossSeriesReducer = "REDUCE_SUM"
                        groupByFields      = ["metric.label.outcome"]
                      }
                    }
                  }
                }]
                yAxis = { label = "jobs/s", scale = "LINEAR" }
              }
            }
          },
          {
            xPos   = 6
            yPos   = 4
            width  = 6
            height = 4
            widget = {
              title = "Failures by error type"
              xyChart = {
                dataSets = [{
                  plotType = "STACKED_BAR"
                  timeSeriesQuery = {
                    timeSeriesFilter = {
                      filter = "metric.type = \"${local.metric_prefix}/jobs_completed\" AND resource.type = \"cloud_run_revision\" AND metric.label.outcome = \"failed\""
                      aggregation = {
                        alignmentPeriod    = "300s"
                        perSeriesAligner   = "ALIGN_SUM"
                        crossSeriesReducer = "REDUCE_SUM"
                        groupByFields      = ["metric.label.error_type"]
                      }
                    }
                  }
                }]
              }
            }
          },
          {
            xPos   = 0
            yPos   = 8
            width  = 6
            height = 4
            widget = {
              title = "Total time p50 / p95 / p99"
              xyChart = {
                dataSets = [
                  for percentile in ["50", "95", "99"] : {
                    legendTemplate = "p${percentile}"
                    plotType       = "LINE"
                    timeSeriesQuery = {
                      timeSeriesFilter = {
                        filter = "metric.type = \"${local.metric_prefix}/job_total_ms\" AND resource.type = \"cloud_run_revision\""
                        aggregation = {
                          alignmentPeriod    = "300s"
                          perSeriesAligner   = "ALIGN_DELTA"
                          crossSeriesReducer = "REDUCE_PERCENTILE_${percentile}"
                        }
                      }
                    }
                  }
                ]
                yAxis = { label = "ms", scale = "LINEAR" }
              }
            }
          },
          {
            xPos   = 6
            yPos   = 8
            width  = 6
            height = 4
            widget = {
              title = "Tasks waiting in the queue"
              xyChart = {
                dataSets = [{
                  plotType = "LINE"
                  timeSeriesQuery = {
                    timeSeriesFilter = {
                      filter = "metric.type = \"cloudtasks.googleapis.com/queue/depth\" AND resource.type = \"cloud_tasks_queue\" AND resource.labels.queue_id = \"${google_cloud_tasks_queue.main[var.queue].name}\""
                      aggregation = {
                        alignmentPeriod  = "60s"
                        perSeriesAligner = "ALIGN_MAX"
                      }
                    }
                  }
                }]
              }
            }
          },
        ],
      )
    }
  })

  depends_on = [time_sleep.dashboard_metrics]
}
