output "metric_name" {
  description = "The log-based metric's name."
  value       = google_logging_metric.main.name
}
