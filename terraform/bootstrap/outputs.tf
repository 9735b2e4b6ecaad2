output "state_bucket" {
  description = "The bucket of the main configuration's state."
  value       = google_storage_bucket.state.name
}

output "backend_config" {
  description = "The gcs backend's settings for the main configuration: terraform init -backend-config=gcs.tfbackend."
  value       = <<-EOT
    bucket = "${google_storage_bucket.state.name}"
    prefix = "${var.state_prefix}"
  EOT
}

output "image_repository" {
  description = "Where the image is pushed: REGION-docker.pkg.dev/PROJECT/REPOSITORY."
  value       = "${google_artifact_registry_repository.images.location}-docker.pkg.dev/${var.project_id}/${google_artifact_registry_repository.images.repository_id}"
}
