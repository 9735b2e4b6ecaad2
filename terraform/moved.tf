# Where resources lived before they became module instances or for_each keys: an
# applied deployment keeps them (terraform moves them in state) instead of destroying
# and recreating them.

moved {
  from = google_cloud_run_v2_service.intake
  to   = module.intake.google_cloud_run_v2_service.main
}

moved {
  from = google_cloud_run_v2_service.worker
  to   = module.worker.google_cloud_run_v2_service.main
}

moved {
  from = google_cloud_run_v2_service.notification
  to   = module.notification.google_cloud_run_v2_service.main
}

moved {
  from = google_service_account.intake
  to   = google_service_account.main["intake"]
}

moved {
  from = google_service_account.worker
  to   = google_service_account.main["worker"]
}

moved {
  from = google_service_account.notification
  to   = google_service_account.main["notification"]
}

moved {
  from = google_service_account.tasks_invoker
  to   = google_service_account.main["tasks_invoker"]
}

moved {
  from = google_service_account.scheduler
  to   = google_service_account.main["scheduler"]
}

moved {
  from = google_service_account.pubsub_push
  to   = google_service_account.main["pubsub_push"]
}

# Every queue of shared/config/queues.json: the lanes are every queue but var.queue,
# and a moved block for an address that was never created does nothing.
moved {
  from = google_cloud_tasks_queue_iam_member.lane_intake_enqueuer["exam"]
  to   = google_cloud_tasks_queue_iam_member.lane["exam/intake_enqueuer"]
}

moved {
  from = google_cloud_tasks_queue_iam_member.lane_worker_enqueuer["exam"]
  to   = google_cloud_tasks_queue_iam_member.lane["exam/worker_enqueuer"]
}

moved {
  from = google_cloud_tasks_queue_iam_member.lane_worker_task_viewer["exam"]
  to   = google_cloud_tasks_queue_iam_member.lane["exam/worker_task_viewer"]
}

moved {
  from = google_cloud_tasks_queue_iam_member.lane_intake_enqueuer["grading"]
  to   = google_cloud_tasks_queue_iam_member.lane["grading/intake_enqueuer"]
}

moved {
  from = google_cloud_tasks_queue_iam_member.lane_worker_enqueuer["grading"]
  to   = google_cloud_tasks_queue_iam_member.lane["grading/worker_enqueuer"]
}

moved {
  from = google_cloud_tasks_queue_iam_member.lane_worker_task_viewer["grading"]
  to   = google_cloud_tasks_queue_iam_member.lane["grading/worker_task_viewer"]
}

moved {
  from = google_cloud_tasks_queue_iam_member.lane_intake_enqueuer["bulk"]
  to   = google_cloud_tasks_queue_iam_member.lane["bulk/intake_enqueuer"]
}

moved {
  from = google_cloud_tasks_queue_iam_member.lane_worker_enqueuer["bulk"]
  to   = google_cloud_tasks_queue_iam_member.lane["bulk/worker_enqueuer"]
}

moved {
  from = google_cloud_tasks_queue_iam_member.lane_worker_task_viewer["bulk"]
  to   = google_cloud_tasks_queue_iam_member.lane["bulk/worker_task_viewer"]
}

# The failed-jobs alert before it became modules/log_alert (monitoring.tf).
moved {
  from = google_logging_metric.job_failed
  to   = module.job_failed_alert.google_logging_metric.main
}

moved {
  from = time_sleep.job_failed_metric
  to   = module.job_failed_alert.time_sleep.metric
}

moved {
  from = google_monitoring_alert_policy.job_failed
  to   = module.job_failed_alert.google_monitoring_alert_policy.main
}
