# The Cloud Run services run one image; SERVICE selects the app. Requests from
# Cloud Tasks, Pub/Sub and Cloud Scheduler in the same project count as internal traffic,
# so only the intake accepts traffic from the internet. What they share (port, CPU
# allocation, probes, env wiring) is modules/run_service.

module "intake" {
  source = "./modules/run_service"
  #checkov:skip=CKV2_GRADEQ_7:The intake is the public API; its ingress is the var.intake_ingress choice.

  name                = local.service_names.intake
  location            = var.region
  image               = var.image
  service_account     = google_service_account.main["intake"].email
  ingress             = var.intake_ingress
  deletion_protection = var.deletion_protection
  labels              = var.labels

  # Public without an allUsers binding (iam.tf); the API checks client keys itself.
  invoker_iam_disabled = var.intake_public

  request_timeout = "60s"
  sizing          = var.intake

  env = merge(local.common_env, local.intake_env, {
    SERVICE = "intake"
  })

  secret_env = merge(
    # Operator keys for the admin API and the dashboard (<intake URL>/admin/).
    { GRADEQ_OPERATOR_KEYS = google_secret_manager_secret.operator_keys.secret_id },
    # Reviewer keys, when var.reviewer_keys asks for them (docs/review.md).
    var.reviewer_keys ? { GRADEQ_REVIEWER_KEYS = google_secret_manager_secret.reviewer_keys[0].secret_id } : {},
    # The LTI sealing key, when var.lti_tool_url turns LTI on (docs/gradebook.md).
    local.lti_enabled ? { GRADEQ_LTI_SECRETS_KEY = google_secret_manager_secret.lti_secrets_key[0].secret_id } : {},
  )

  # A revision that cannot read the operator keys does not start.
  depends_on = [
    time_sleep.apis,
    time_sleep.service_iam,
  ]
}

module "worker" {
  source = "./modules/run_service"

  name                = local.service_names.worker
  location            = var.region
  image               = var.image
  service_account     = google_service_account.main["worker"].email
  ingress             = "INGRESS_TRAFFIC_INTERNAL_ONLY"
  deletion_protection = var.deletion_protection
  labels              = var.labels

  # Cloud Run checks every caller's run.invoker (iam.tf) before the app sees the request.
  invoker_iam_disabled = false

  # Cloud Tasks stops waiting at the dispatch deadline; Cloud Run must not cut the
  # request earlier, or every long grading run would end in a 504 and a retry.
  request_timeout = "${local.dispatch_deadline_s}s"
  sizing          = var.worker

  env = merge(local.common_env, local.push_env.worker, local.grader_env, local.batch_settings, {
    SERVICE = "worker"
    # The grader's quota is split evenly over this many instances.
    GRADEQ_WORKER_MAX_INSTANCES = tostring(var.worker.max_instances)
  })

  # Only for a grader that needs a key (local.grader_needs_key).
  secret_env = local.grader_needs_key ? { GRADEQ_GRADER_API_KEY = google_secret_manager_secret.grader_api_key[0].secret_id } : {}

  # A revision must not grade before it may read its key or call Vertex AI: a refused
  # model call fails the job at once (grading-provider-rejected).
  depends_on = [
    time_sleep.apis,
    time_sleep.service_iam,
  ]
}

module "notification" {
  source = "./modules/run_service"

  name                = local.service_names.notification
  location            = var.region
  image               = var.image
  service_account     = google_service_account.main["notification"].email
  ingress             = "INGRESS_TRAFFIC_INTERNAL_ONLY"
  deletion_protection = var.deletion_protection
  labels              = var.labels

  # Cloud Run checks every caller's run.invoker (iam.tf) before the app sees the request.
  invoker_iam_disabled = false

  # Pub/Sub waits for a push response as long as the subscription's ack deadline.
  request_timeout = "${local.subscriptions.subscriptions.notification.ack_deadline_seconds}s"
  sizing          = var.notification

  env = merge(local.common_env, local.push_env.notification, {
    SERVICE = "notification"
  })

  secret_env = {
    GRADEQ_WEBHOOK_SECRETS_KEY = google_secret_manager_secret.webhook_secret.secret_id
  }

  depends_on = [
    time_sleep.apis,
    time_sleep.service_iam,
  ]
}

module "gradebook" {
  source = "./modules/run_service"

  name                = local.service_names.gradebook
  location            = var.region
  image               = var.image
  service_account     = google_service_account.main["gradebook"].email
  ingress             = "INGRESS_TRAFFIC_INTERNAL_ONLY"
  deletion_protection = var.deletion_protection
  labels              = var.labels

  # Cloud Run checks every caller's run.invoker (iam.tf) before the app sees the request.
  invoker_iam_disabled = false

  # Pub/Sub waits for a push response as long as the subscription's ack deadline.
  request_timeout = "${local.subscriptions.subscriptions.gradebook.ack_deadline_seconds}s"
  sizing          = var.gradebook

  env = merge(local.common_env, local.push_env.gradebook, local.gradebook_env, {
    SERVICE = "gradebook"
  })

  # The LTI sealing key, when var.lti_tool_url turns LTI on: it signs the client
  # assertions to each platform's token endpoint.
  secret_env = local.lti_enabled ? { GRADEQ_LTI_SECRETS_KEY = google_secret_manager_secret.lti_secrets_key[0].secret_id } : {}

  depends_on = [
    time_sleep.apis,
    time_sleep.service_iam,
  ]
}
