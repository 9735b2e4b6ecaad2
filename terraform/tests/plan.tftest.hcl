# `terraform test` (make terraform-check): plans only, against the provider stand-in
# (docs/terraform-check.md); nothing is created.

variables {
  project_id = "my-gradeq-project"
  region     = "europe-west1"
  image      = "europe-west1-docker.pkg.dev/my-gradeq-project/gradeq/gradeq@sha256:69ee2d9c6dc292a5c4da9a0edce074dcaf08cea41296940cd03bfb952ff4e4ae"
  # Without one the plan warns (check.alerts_notify_someone), which a test counts as a failure.
  notification_channels = ["projects/my-gradeq-project/notificationChannels/123"]
}

run "production_defaults" {
  command = plan

  assert {
    condition     = google_pubsub_subscription.notification.filter == jsondecode(file("${path.module}/../shared/config/subscriptions.json")).subscriptions.notification.filter
    error_message = "The notification subscription's filter must be the one in shared/config/subscriptions.json."
  }

  assert {
    condition     = alltrue([for s in [google_pubsub_subscription.notification, google_pubsub_subscription.analytics, google_pubsub_subscription.dead_letter] : s.expiration_policy[0].ttl == ""])
    error_message = "Every subscription must never expire (expiration_policy.ttl = \"\"); the default deletes it after 31 idle days."
  }

  assert {
    condition     = alltrue([for s in [module.worker, module.notification] : s.ingress == "INGRESS_TRAFFIC_INTERNAL_ONLY" && s.invoker_iam_disabled == false])
    error_message = "The worker and the notification service must be internal and check run.invoker."
  }

  assert {
    condition     = module.intake.invoker_iam_disabled == true
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
    condition     = module.intake.invoker_iam_disabled == false && length(google_cloud_run_v2_service_iam_member.intake_invokers) == 1
    error_message = "A private intake checks run.invoker and grants it to intake_invokers only."
  }
}

# Every optional feature at once: terraform checks the branches the defaults leave out.
run "every_option_set" {
  command = plan

  variables {
    labels                              = { team = "grading" }
    intake_public                       = false
    intake_invokers                     = ["serviceAccount:frontend@my-gradeq-project.iam.gserviceaccount.com"]
    intake_ingress                      = "INGRESS_TRAFFIC_INTERNAL_LOAD_BALANCER"
    cors_origins                        = ["https://app.example.com"]
    firebase_auth                       = true
    firebase_tenant_clients             = { tenant1 = "client1" }
    grader                              = { kind = "openai", base_url = "https://api.openai.com/v1", model = "gpt-5-mini" }
    firestore_database                  = "gradeq"
    bigquery_location                   = "EU"
    analytics_partition_expiration_days = 30
    notification_channels               = ["projects/my-gradeq-project/notificationChannels/123"]
    deletion_protection                 = false
    lti_tool_url                        = "https://grading.school.example"
  }

  assert {
    condition     = google_pubsub_topic.events.labels["team"] == "grading" && google_firestore_database.main.name == "gradeq"
    error_message = "Labels and the database id reach the resources."
  }

  assert {
    condition     = length(google_secret_manager_secret.grader_api_key) == 1 && length(google_secret_manager_secret_iam_member.worker_grader_api_key) == 1
    error_message = "A grader with a key reads it from its secret, granted to the worker."
  }

  assert {
    condition     = length(google_secret_manager_secret.lti_secrets_key) == 1 && length(google_secret_manager_secret_iam_member.intake_lti_secrets_key) == 1 && length(google_secret_manager_secret_iam_member.gradebook_lti_secrets_key) == 1
    error_message = "A tool URL turns LTI on: the sealing key's secret, granted to the intake and the gradebook."
  }
}

run "lti_tool_url_is_https" {
  command = plan

  variables {
    lti_tool_url = "http://grading.school.example"
  }

  expect_failures = [var.lti_tool_url]
}

run "dataset_id_is_validated" {
  command = plan

  variables {
    analytics_dataset_id = "gradeq-analytics"
  }

  expect_failures = [var.analytics_dataset_id]
}

run "worker_budget_is_checked" {
  command = plan

  variables {
    grader_timeout_s = 3600
  }

  # lease + grader timeout + result write retry must fit the queue's dispatch deadline.
  expect_failures = [output.worker_url]
}

# Three lanes of 100 concurrent dispatches against 20 x 8 worker slots: tasks would meet
# Cloud Run's 429 and spend their attempts.
run "lanes_fit_the_worker_slots" {
  command = plan

  variables {
    worker = { max_instances = 20 }
  }

  expect_failures = [output.worker_url]
}

# The queue dispatches 1200 tasks a minute. In shared quota mode (the default) the worker
# instances together use the whole quota x headroom, floor(1340 x 0.9) = 1206 requests a
# minute: more than the queue dispatches, so the plan warns.
run "shared_quota_is_one_pool" {
  command = plan

  variables {
    grader = { kind = "gemini", quota_rpm = 1340 }
  }

  assert {
    condition     = local.grader_quota_rpm_used == 1206
    error_message = "In shared mode the worker instances together use the whole quota x headroom."
  }

  expect_failures = [check.queue_rate_covers_the_grader_quota]
}

# In instance mode each of the 40 instances takes floor(1206 / 40) = 30: 1200, which fits.
run "instance_quota_is_split" {
  command = plan

  variables {
    grader = { kind = "gemini", quota_rpm = 1340, quota_mode = "instance" }
  }

  assert {
    condition     = local.grader_quota_rpm_used == 1200
    error_message = "In instance mode each instance takes floor(quota x headroom / max_instances)."
  }
}

# No notification channel: the plan warns that the alerts notify nobody.
run "alerts_without_channels_warn" {
  command = plan

  variables {
    notification_channels = []
  }

  expect_failures = [check.alerts_notify_someone]
}

run "notification_channels_are_channel_ids" {
  command = plan

  variables {
    notification_channels = ["my-team@example.com"]
  }

  expect_failures = [var.notification_channels]
}

# A tag may be moved to another image; the services are deployed by digest.
run "image_by_digest" {
  command = plan

  variables {
    image = "europe-west1-docker.pkg.dev/my-gradeq-project/gradeq/gradeq:0.1.0"
  }

  expect_failures = [var.image]
}
