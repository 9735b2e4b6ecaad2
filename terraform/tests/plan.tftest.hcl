# `terraform test` (make terraform-check): plans only, against the provider stand-in
# (docs/terraform-check.md); nothing is created.

variables {
  project_id = "my-gradeq-project"
  region     = "europe-west1"
  image      = "europe-west1-docker.pkg.dev/my-gradeq-project/gradeq/gradeq:0.1.0"
}

run "production_defaults" {
  command = plan

  assert {
    condition     = alltrue([for s in [google_pubsub_subscription.notification, google_pubsub_subscription.analytics, google_pubsub_subscription.dead_letter] : s.expiration_policy[0].ttl == ""])
    error_message = "Every subscription must never expire (expiration_policy.ttl = \"\"); the default deletes it after 31 idle days."
  }

  assert {
    condition     = alltrue([for s in [google_cloud_run_v2_service.worker, google_cloud_run_v2_service.notification] : s.ingress == "INGRESS_TRAFFIC_INTERNAL_ONLY" && s.invoker_iam_disabled == false])
    error_message = "The worker and the notification service must be internal and check run.invoker."
  }

  assert {
    condition     = google_cloud_run_v2_service.intake.invoker_iam_disabled == true
    error_message = "A public intake disables the invoker check instead of granting allUsers (refused under domain restricted sharing)."
  }
}

run "private_intake" {
  command = plan

  variables {
    intake_public   = false
    intake_invokers = ["serviceAccount:frontend@my-gradeq-project.iam.gserviceaccount.com"]
  }

  assert {
    condition     = google_cloud_run_v2_service.intake.invoker_iam_disabled == false && length(google_cloud_run_v2_service_iam_member.intake_invokers) == 1
    error_message = "A private intake checks run.invoker and grants it to intake_invokers only."
  }
}

run "dataset_id_is_validated" {
  command = plan

  variables {
    analytics_dataset_id = "gradeq-analytics"
  }

  expect_failures = [var.analytics_dataset_id]
}
