output "name" {
  description = "The Cloud Run service's name."
  value       = google_cloud_run_v2_service.main.name
}

output "uri" {
  description = "The service's URL as Cloud Run reports it."
  value       = google_cloud_run_v2_service.main.uri
}

output "ingress" {
  description = "The service's ingress setting."
  value       = google_cloud_run_v2_service.main.ingress
}

output "invoker_iam_disabled" {
  description = "Whether Cloud Run skips its run.invoker check (a public intake only)."
  value       = google_cloud_run_v2_service.main.invoker_iam_disabled
}
