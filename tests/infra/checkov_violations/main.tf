# Deliberately wrong configuration: every Gradeq checkov policy must fail on it.

resource "google_pubsub_subscription" "bad" {
  name  = "bad"
  topic = "projects/p/topics/t"

  push_config {
    push_endpoint = "https://example.invalid/pubsub/push"
  }
}

resource "google_cloud_run_v2_service" "bad" {
  name     = "bad"
  location = "europe-west1"
  ingress  = "INGRESS_TRAFFIC_ALL"

  template {
    containers {
      image = "example.invalid/bad:1"

      env {
        name  = "GRADEQ_WEBHOOK_SECRET"
        value = "plain-text"
      }
    }
  }
}

resource "google_cloud_tasks_queue" "bad" {
  name     = "bad"
  location = "europe-west1"
}

resource "google_project_iam_member" "bad" {
  project = "p"
  role    = "roles/datastore.user"
  member  = "allUsers"
}

resource "google_pubsub_topic_iam_member" "bad" {
  topic  = "t"
  role   = "roles/pubsub.publisher"
  member = "allAuthenticatedUsers"
}

resource "google_cloud_scheduler_job" "bad" {
  name     = "bad"
  schedule = "* * * * *"

  http_target {
    uri = "https://example.invalid/tasks/recover"
  }
}
