# One Cloud Tasks queue per entry of shared/config/queues.json; every limit is read from
# that file, so the local dispatcher and Google Cloud enforce the same numbers.

resource "google_cloud_tasks_queue" "main" {
  for_each = local.queues

  name     = each.key
  location = var.region

  rate_limits {
    max_dispatches_per_second = each.value.rate_limits.max_dispatches_per_second
    max_concurrent_dispatches = each.value.rate_limits.max_concurrent_dispatches
  }

  retry_config {
    max_attempts       = each.value.retry_config.max_attempts
    max_retry_duration = each.value.retry_config.max_retry_duration
    min_backoff        = each.value.retry_config.min_backoff
    max_backoff        = each.value.retry_config.max_backoff
    max_doublings      = each.value.retry_config.max_doublings
  }

  # Queue-level target: whatever a task says, it goes to the worker's target_path with
  # an OIDC token for the tasks invoker account.
  http_target {
    http_method = "POST"

    uri_override {
      scheme = "HTTPS"
      host   = trimprefix(local.service_urls.worker, "https://")

      path_override {
        path = each.value.target_path
      }

      uri_override_enforce_mode = "ALWAYS"
    }

    oidc_token {
      service_account_email = google_service_account.main["tasks_invoker"].email
      audience              = local.service_urls.worker
    }
  }

  stackdriver_logging_config {
    sampling_ratio = 1.0
  }

  # Never destroyed by accident; the teardown keeps it or lifts this on purpose
  # (docs/deploy.md, "Teardown").
  lifecycle {
    prevent_destroy = true
  }

  depends_on = [time_sleep.apis]
}

# Lanes (docs/lanes.md): the intake and the worker enqueue in every lane, and the worker's
# recovery sweep looks up tasks in every lane, as iam.tf grants on the default queue.
# Those default-queue grants stay apart: their addresses name no queue, and moving them
# under a "<queue>/<grant>" key would need var.queue in a moved block, which takes
# literal addresses only.
locals {
  # Tasks all lanes may have in flight at once: each is one worker request holding a slot
  # (output.worker_url checks it against the worker's slots).
  lanes_concurrent_dispatches = sum([for queue in values(local.queues) : queue.rate_limits.max_concurrent_dispatches])

  other_lanes = toset([for name in keys(local.queues) : name if name != var.queue])
  lane_grant_kinds = {
    intake_enqueuer    = { account = "intake", role = "roles/cloudtasks.enqueuer" }
    worker_enqueuer    = { account = "worker", role = "roles/cloudtasks.enqueuer" }
    worker_task_viewer = { account = "worker", role = "roles/cloudtasks.viewer" }
  }
  # "<lane>/<kind>" => the grant, for every lane and kind.
  lane_grants = merge([
    for lane in local.other_lanes : {
      for kind, grant in local.lane_grant_kinds : "${lane}/${kind}" => merge(grant, { lane = lane })
    }
  ]...)
}

resource "google_cloud_tasks_queue_iam_member" "lane" {
  for_each = local.lane_grants

  name     = google_cloud_tasks_queue.main[each.value.lane].name
  location = var.region
  role     = each.value.role
  member   = "serviceAccount:${google_service_account.main[each.value.account].email}"
}

# The admin API (in the intake) pauses, resumes and purges lanes: PauseQueue, ResumeQueue
# and PurgeQueue need cloudtasks.queues.pause/resume/purge, which only
# roles/cloudtasks.queueAdmin holds among the predefined roles; it is granted per queue.
resource "google_cloud_tasks_queue_iam_member" "lane_operator" {
  for_each = local.queues

  name     = google_cloud_tasks_queue.main[each.key].name
  location = var.region
  role     = "roles/cloudtasks.queueAdmin"
  member   = "serviceAccount:${google_service_account.main["intake"].email}"
}

# The queue must not be what keeps a model grader below its quota: the worker instances
# together may send the whole pool (quota_mode shared or adaptive), or share_rpm x
# max_instances (instance) requests a minute (docs/graders.md, "Quota"),
# and a grading sends one (more only when an unusable answer is asked again). A slower
# queue is allowed (it caps throughput on purpose, or the quota is shared with others),
# so this warns instead of refusing.
check "queue_rate_covers_the_grader_quota" {
  assert {
    condition     = var.grader.kind == "rubric" || local.task_queue.rate_limits.max_dispatches_per_second * 60 >= local.grader_quota_rpm_used
    error_message = "Queue ${var.queue} dispatches at most ${local.task_queue.rate_limits.max_dispatches_per_second * 60} tasks a minute (max_dispatches_per_second x 60), fewer than the ${local.grader_quota_rpm_used} model requests a minute the worker instances may send (grader.quota_rpm x quota_headroom, split over worker.max_instances when grader.quota_mode is instance): part of the quota stays unused. Raise max_dispatches_per_second in shared/config/queues.json."
  }
}

# Recovers jobs whose lease expired (a worker instance died mid-run).
resource "google_cloud_scheduler_job" "recover" {
  name        = "${var.name_prefix}-recover-stuck-jobs"
  description = "Calls the worker's /tasks/recover to re-enqueue jobs whose lease expired."
  region      = var.region
  schedule    = var.recovery_schedule
  time_zone   = "Etc/UTC"

  attempt_deadline = "180s"

  retry_config {
    retry_count = 0
  }

  http_target {
    http_method = "POST"
    uri         = "${local.service_urls.worker}/tasks/recover"

    oidc_token {
      service_account_email = google_service_account.main["scheduler"].email
      audience              = local.service_urls.worker
    }
  }

  depends_on = [time_sleep.apis]
}
