# Analytics store for GradingCompleted events.
#
# Design: the BigQuery subscription writes with use_table_schema = false and
# write_metadata = true, so the table has exactly Pub/Sub's fixed columns:
#   subscription_name STRING, message_id STRING, publish_time TIMESTAMP,
#   data STRING (the event's JSON data), attributes STRING (JSON of the ce-* and outcome
#   attributes).
# Every event version lands, even one whose fields changed, and nothing is lost to a
# schema mismatch. The view grading_completed_v1 gives analysts typed columns that match
# shared/schemas/grading_completed.v1.json, one row per event: a publish that timed out
# on the worker's side may still land, and the retry then lands a second message with the
# same ce-id (and another message_id). model and the usage columns are null for the
# offline grader and for failed jobs.

resource "google_bigquery_dataset" "analytics" {
  #checkov:skip=CKV_GCP_81:Grading outcomes and scores only; Google-managed encryption is enough. Add default_encryption_configuration for CMEK.
  dataset_id  = var.analytics_dataset_id
  location    = local.bigquery_location
  description = "Gradeq GradingCompleted events, written by a Pub/Sub BigQuery subscription."
  labels      = var.labels

  # Never destroyed by accident; the teardown keeps it or lifts this on purpose
  # (docs/deploy.md, "Teardown").
  lifecycle {
    prevent_destroy = true
  }

  depends_on = [time_sleep.apis]
}

resource "google_bigquery_table" "events" {
  #checkov:skip=CKV_GCP_80:See the dataset: Google-managed encryption.
  dataset_id          = google_bigquery_dataset.analytics.dataset_id
  table_id            = "grading_completed_raw"
  description         = "One row per GradingCompleted event as published (Pub/Sub BigQuery subscription format)."
  deletion_protection = var.deletion_protection
  labels              = var.labels

  time_partitioning {
    type          = "DAY"
    field         = "publish_time"
    expiration_ms = var.analytics_partition_expiration_days == null ? null : var.analytics_partition_expiration_days * 86400000
  }

  schema = jsonencode([
    { name = "subscription_name", type = "STRING", mode = "NULLABLE", description = "Pub/Sub subscription that wrote the row." },
    { name = "message_id", type = "STRING", mode = "NULLABLE", description = "Pub/Sub message id (not the event id: see attributes.ce-id)." },
    { name = "publish_time", type = "TIMESTAMP", mode = "NULLABLE", description = "When the worker published the event." },
    { name = "data", type = "STRING", mode = "NULLABLE", description = "The event's data as JSON text." },
    { name = "attributes", type = "STRING", mode = "NULLABLE", description = "The message attributes (ce-id, ce-type, ce-source, ce-specversion, ce-time, outcome) as JSON text." },
  ])

  # Never destroyed by accident; the teardown keeps it or lifts this on purpose
  # (docs/deploy.md, "Teardown").
  lifecycle {
    prevent_destroy = true
  }
}

resource "google_bigquery_table" "events_v1" {
  #checkov:skip=CKV_GCP_80:A view stores no data.
  dataset_id          = google_bigquery_dataset.analytics.dataset_id
  table_id            = "grading_completed_v1"
  description         = "Typed view of dev.gradeq.grading.completed.v1 events."
  deletion_protection = var.deletion_protection
  labels              = var.labels

  view {
    use_legacy_sql = false
    query          = <<-SQL
      SELECT
        JSON_VALUE(attributes, '$."ce-id"') AS event_id,
        TIMESTAMP(JSON_VALUE(attributes, '$."ce-time"')) AS event_time,
        publish_time,
        JSON_VALUE(data, '$.job_id') AS job_id,
        JSON_VALUE(data, '$.client_id') AS client_id,
        JSON_VALUE(data, '$.submission_id') AS submission_id,
        JSON_VALUE(data, '$.assignment_id') AS assignment_id,
        JSON_VALUE(data, '$.outcome') AS outcome,
        SAFE_CAST(JSON_VALUE(data, '$.score') AS FLOAT64) AS score,
        SAFE_CAST(JSON_VALUE(data, '$.max_score') AS FLOAT64) AS max_score,
        SAFE_CAST(JSON_VALUE(data, '$.attempts') AS INT64) AS attempts,
        SAFE_CAST(JSON_VALUE(data, '$.timings.queue_wait_ms') AS INT64) AS queue_wait_ms,
        SAFE_CAST(JSON_VALUE(data, '$.timings.processing_ms') AS INT64) AS processing_ms,
        SAFE_CAST(JSON_VALUE(data, '$.timings.total_ms') AS INT64) AS total_ms,
        JSON_VALUE(data, '$.callback_url') AS callback_url,
        JSON_VALUE(data, '$.error.type') AS error_type,
        JSON_VALUE(data, '$.error.message') AS error_message,
        JSON_VALUE(data, '$.model') AS model,
        JSON_VALUE(data, '$.lane') AS lane,
        COALESCE(JSON_VALUE(data, '$.author'), 'server') AS author,
        COALESCE(SAFE_CAST(JSON_VALUE(data, '$.practice') AS BOOL), FALSE) AS practice,
        SAFE_CAST(JSON_VALUE(data, '$.usage.input_tokens') AS INT64) AS input_tokens,
        SAFE_CAST(JSON_VALUE(data, '$.usage.output_tokens') AS INT64) AS output_tokens,
        SAFE_CAST(JSON_VALUE(data, '$.usage.total_tokens') AS INT64) AS total_tokens,
        SAFE_CAST(JSON_VALUE(data, '$.usage.requests') AS INT64) AS model_requests,
        SAFE_CAST(JSON_VALUE(data, '$.usage.cached_input_tokens') AS INT64) AS cached_input_tokens,
        SAFE_CAST(JSON_VALUE(data, '$.usage.cost_micro_usd') AS INT64) AS cost_micro_usd,
        message_id
      FROM `${google_bigquery_table.events.project}.${google_bigquery_table.events.dataset_id}.${google_bigquery_table.events.table_id}`
      WHERE JSON_VALUE(attributes, '$."ce-type"') = 'dev.gradeq.grading.completed.v1'
      -- One row per event id, the first published; a row without ce-id stays on its own.
      QUALIFY ROW_NUMBER() OVER (
        PARTITION BY COALESCE(JSON_VALUE(attributes, '$."ce-id"'), message_id)
        ORDER BY publish_time, message_id
      ) = 1
    SQL
  }
}

# The Pub/Sub service agent writes the rows.
resource "google_bigquery_table_iam_member" "pubsub_data_editor" {
  dataset_id = google_bigquery_table.events.dataset_id
  table_id   = google_bigquery_table.events.table_id
  role       = "roles/bigquery.dataEditor"
  member     = local.pubsub_service_agent
}

resource "google_bigquery_table_iam_member" "pubsub_metadata_viewer" {
  dataset_id = google_bigquery_table.events.dataset_id
  table_id   = google_bigquery_table.events.table_id
  role       = "roles/bigquery.metadataViewer"
  member     = local.pubsub_service_agent
}

# Pub/Sub checks its agent's access to the table when the BigQuery subscription is
# created; a grant made seconds earlier may not be visible yet (403 in a share of first
# applies). IAM changes usually propagate within two minutes.
resource "time_sleep" "bigquery_iam" {
  create_duration = "120s"

  triggers = {
    data_editor     = google_bigquery_table_iam_member.pubsub_data_editor.id
    metadata_viewer = google_bigquery_table_iam_member.pubsub_metadata_viewer.id
  }
}
