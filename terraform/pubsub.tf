# GradingCompleted events (CloudEvents in binary mode: ce-* attributes, data = JSON).
# Subscription settings come from shared/config/subscriptions.json, like the local bus.

locals {
  notification_subscription = local.subscriptions.subscriptions.notification
  analytics_subscription    = local.subscriptions.subscriptions.analytics
  gradebook_subscription    = local.subscriptions.subscriptions.gradebook
}

resource "google_pubsub_topic" "events" {
  #checkov:skip=CKV_GCP_83:Events carry ids and scores, no secrets; Google-managed encryption is enough. Add kms_key_name if your policy demands CMEK.
  name   = "${var.name_prefix}-${local.topic_name}"
  labels = var.labels

  # Never destroyed by accident; the teardown keeps it or lifts this on purpose
  # (docs/deploy.md, "Teardown").
  lifecycle {
    prevent_destroy = true
  }

  depends_on = [time_sleep.apis]
}

resource "google_pubsub_topic" "dead_letter" {
  #checkov:skip=CKV_GCP_83:Same data as the events topic; Google-managed encryption is enough.
  name   = "${var.name_prefix}-${local.topic_name}-dead-letter"
  labels = var.labels

  # Never destroyed by accident; the teardown keeps it or lifts this on purpose
  # (docs/deploy.md, "Teardown").
  lifecycle {
    prevent_destroy = true
  }

  depends_on = [time_sleep.apis]
}

resource "google_pubsub_subscription" "notification" {
  name                 = "${var.name_prefix}-${local.topic_name}-notification"
  topic                = google_pubsub_topic.events.id
  ack_deadline_seconds = local.notification_subscription.ack_deadline_seconds
  labels               = var.labels
  # Only the events with work for the notifier (a callback URL); Pub/Sub acknowledges the
  # rest for this subscription. Immutable: changing it replaces the subscription.
  filter = lookup(local.notification_subscription, "filter", "")

  push_config {
    push_endpoint = "${local.service_urls.notification}${local.notification_subscription.push_path}"

    oidc_token {
      service_account_email = google_service_account.main["pubsub_push"].email
      audience              = local.service_urls.notification
    }
  }

  # The provider's default expires a subscription after 31 days without activity
  # (a quiet month), and events published after that reach nobody.
  expiration_policy {
    ttl = ""
  }

  retry_policy {
    minimum_backoff = local.notification_subscription.retry_policy.minimum_backoff
    maximum_backoff = local.notification_subscription.retry_policy.maximum_backoff
  }

  dead_letter_policy {
    dead_letter_topic     = google_pubsub_topic.dead_letter.id
    max_delivery_attempts = local.notification_subscription.max_delivery_attempts
  }

  # Never destroyed by accident; the teardown keeps it or lifts this on purpose
  # (docs/deploy.md, "Teardown").
  lifecycle {
    prevent_destroy = true
  }

  depends_on = [google_cloud_run_v2_service_iam_member.notification_push_invoker]
}

# Posted grades to each school's gradebook. A busy LMS is answered non-2xx, so Pub/Sub
# holds the grade and redelivers it with the retry policy until the LMS takes it.
resource "google_pubsub_subscription" "gradebook" {
  name                 = "${var.name_prefix}-${local.topic_name}-gradebook"
  topic                = google_pubsub_topic.events.id
  ack_deadline_seconds = local.gradebook_subscription.ack_deadline_seconds
  labels               = var.labels
  # Only GradePosted events; Pub/Sub acknowledges the rest for this subscription.
  # Immutable: changing it replaces the subscription.
  filter = lookup(local.gradebook_subscription, "filter", "")

  push_config {
    push_endpoint = "${local.service_urls.gradebook}${local.gradebook_subscription.push_path}"

    oidc_token {
      service_account_email = google_service_account.main["pubsub_push"].email
      audience              = local.service_urls.gradebook
    }
  }

  # The provider's default expires a subscription after 31 days without activity
  # (a quiet month), and grades posted after that reach nobody.
  expiration_policy {
    ttl = ""
  }

  retry_policy {
    minimum_backoff = local.gradebook_subscription.retry_policy.minimum_backoff
    maximum_backoff = local.gradebook_subscription.retry_policy.maximum_backoff
  }

  dead_letter_policy {
    dead_letter_topic     = google_pubsub_topic.dead_letter.id
    max_delivery_attempts = local.gradebook_subscription.max_delivery_attempts
  }

  # Never destroyed by accident; the teardown keeps it or lifts this on purpose
  # (docs/deploy.md, "Teardown").
  lifecycle {
    prevent_destroy = true
  }

  depends_on = [google_cloud_run_v2_service_iam_member.gradebook_push_invoker]
}

# Analytics on Google Cloud: Pub/Sub writes every event straight into BigQuery.
resource "google_pubsub_subscription" "analytics" {
  name                 = "${var.name_prefix}-${local.topic_name}-analytics"
  topic                = google_pubsub_topic.events.id
  ack_deadline_seconds = local.analytics_subscription.ack_deadline_seconds
  labels               = var.labels

  bigquery_config {
    table            = "${google_bigquery_table.events.project}.${google_bigquery_table.events.dataset_id}.${google_bigquery_table.events.table_id}"
    use_topic_schema = false
    use_table_schema = false
    write_metadata   = true
  }

  # The provider's default expires a subscription after 31 days without activity
  # (a quiet month), and events published after that reach nobody.
  expiration_policy {
    ttl = ""
  }

  retry_policy {
    minimum_backoff = local.analytics_subscription.retry_policy.minimum_backoff
    maximum_backoff = local.analytics_subscription.retry_policy.maximum_backoff
  }

  dead_letter_policy {
    dead_letter_topic     = google_pubsub_topic.dead_letter.id
    max_delivery_attempts = local.analytics_subscription.max_delivery_attempts
  }

  # Never destroyed by accident; the teardown keeps it or lifts this on purpose
  # (docs/deploy.md, "Teardown").
  lifecycle {
    prevent_destroy = true
  }

  # The grants below plus the time for them to propagate (bigquery.tf).
  depends_on = [time_sleep.bigquery_iam]
}

# A dead-letter topic without a subscription drops what it receives.
resource "google_pubsub_subscription" "dead_letter" {
  #checkov:skip=CKV2_GRADEQ_1:This is the end of the line for dead-lettered events; a dead-letter policy here would loop.
  #checkov:skip=CKV2_GRADEQ_2:Pull subscription read by operators; nothing is redelivered automatically.
  name                       = "${var.name_prefix}-${local.topic_name}-dead-letter"
  topic                      = google_pubsub_topic.dead_letter.id
  ack_deadline_seconds       = 60
  message_retention_duration = var.dead_letter_retention
  retain_acked_messages      = false
  labels                     = var.labels

  expiration_policy {
    ttl = "" # never expires, even when nobody pulls for a while
  }

  # Never destroyed by accident; the teardown keeps it or lifts this on purpose
  # (docs/deploy.md, "Teardown").
  lifecycle {
    prevent_destroy = true
  }
}

# --- What the Pub/Sub service agent needs for dead-lettering: publish to the dead-letter
# topic and acknowledge (subscriber) on every source subscription.
resource "google_pubsub_topic_iam_member" "dead_letter_publisher" {
  topic  = google_pubsub_topic.dead_letter.name
  role   = "roles/pubsub.publisher"
  member = local.pubsub_service_agent
}

locals {
  dead_lettered_subscriptions = {
    notification = google_pubsub_subscription.notification.name
    analytics    = google_pubsub_subscription.analytics.name
    gradebook    = google_pubsub_subscription.gradebook.name
  }
}

resource "google_pubsub_subscription_iam_member" "dead_letter_subscriber" {
  for_each = local.dead_lettered_subscriptions

  subscription = each.value
  role         = "roles/pubsub.subscriber"
  member       = local.pubsub_service_agent
}
