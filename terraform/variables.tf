variable "project_id" {
  description = "Google Cloud project id that hosts every Gradeq resource."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.project_id))
    error_message = "project_id must be a Google Cloud project id (6-30 lowercase letters, digits or hyphens)."
  }
}

variable "region" {
  description = "Region of the Cloud Run services, the Cloud Tasks queue and the Cloud Scheduler job."
  type        = string
  default     = "europe-west1"

  validation {
    # The shape of every Cloud Run region (africa-south1, me-central2, europe-west10,
    # northamerica-northeast2, ...), not a list that would lag behind new regions.
    condition     = can(regex("^[a-z]+-[a-z]+[1-9][0-9]?$", var.region))
    error_message = "region must be a Google Cloud region such as europe-west1 (not a zone or a multi-region)."
  }
}

variable "name_prefix" {
  description = "Prefix of the Cloud Run service, service account, Pub/Sub, secret and monitoring names. It does not isolate environments (the queue, the BigQuery dataset and the Firestore database keep their names): each environment needs its own project (docs/deploy.md)."
  type        = string
  default     = "gradeq"

  validation {
    # Service account ids are limited to 30 characters: the longest suffix is "-notification".
    condition     = can(regex("^[a-z][a-z0-9-]{0,15}$", var.name_prefix))
    error_message = "name_prefix must start with a letter and have at most 16 lowercase letters, digits or hyphens."
  }
}

variable "labels" {
  description = "Labels added to every resource that supports them."
  type        = map(string)
  default     = {}
}

variable "image" {
  description = "Container image of Gradeq (one image serves every service), by digest: REGION-docker.pkg.dev/PROJECT/gradeq/gradeq@sha256:<64 hex>. A digest names one image for good; a tag may be moved (docs/deploy.md, step 2)."
  type        = string

  validation {
    condition     = can(regex("^[^\\s@]+@sha256:[a-f0-9]{64}$", var.image))
    error_message = "image must name the image by digest (...@sha256:<64 hex digits>), not by tag alone: gcloud artifacts docker images describe IMAGE:TAG --format='value(image_summary.fully_qualified_digest)'."
  }
}

variable "queue" {
  description = "Queue id (a key of shared/config/queues.json) that the intake enqueues grading tasks on."
  type        = string
  default     = "grading"
}

variable "intake_ingress" {
  description = "Ingress of the public intake API: INGRESS_TRAFFIC_ALL, or INTERNAL_LOAD_BALANCER when a load balancer or API gateway fronts it."
  type        = string
  default     = "INGRESS_TRAFFIC_ALL"

  validation {
    condition     = contains(["INGRESS_TRAFFIC_ALL", "INGRESS_TRAFFIC_INTERNAL_LOAD_BALANCER", "INGRESS_TRAFFIC_INTERNAL_ONLY"], var.intake_ingress)
    error_message = "intake_ingress must be INGRESS_TRAFFIC_ALL, INGRESS_TRAFFIC_INTERNAL_LOAD_BALANCER or INGRESS_TRAFFIC_INTERNAL_ONLY."
  }
}

variable "intake_trusted_proxy_hops" {
  description = "Proxies that append the caller's address to X-Forwarded-For in front of the intake (GRADEQ_TRUSTED_PROXY_HOPS): 1 for Cloud Run's front, one more per load balancer. The intake limits failed authentications per caller address."
  type        = number
  default     = 1

  validation {
    condition     = var.intake_trusted_proxy_hops >= 0
    error_message = "intake_trusted_proxy_hops must be 0 or more."
  }
}

variable "intake_public" {
  description = "Let anyone reach the intake at the Cloud Run layer (invoker_iam_disabled: no run.invoker check, and no allUsers binding, which domain restricted sharing refuses); the API itself still requires a client API key. Set false when a frontend calls it with its own identity."
  type        = bool
  default     = true
}

variable "intake_invokers" {
  description = "IAM members (e.g. serviceAccount:frontend@PROJECT.iam.gserviceaccount.com) allowed to invoke the intake when intake_public is false."
  type        = list(string)
  default     = []
}

variable "cors_origins" {
  description = "Browser origins allowed to call the intake (GRADEQ_CORS_ORIGINS), exact and with their scheme, e.g. [\"https://app.example.com\"]. Empty: no CORS headers, so browsers may not call the API from other origins."
  type        = list(string)
  default     = []

  validation {
    # An origin is scheme://host[:port]: no wildcard, no path (not even a trailing "/"),
    # no comma (the list is passed comma-separated). Browsers send https origins only,
    # except from a developer's own machine, which a deployment does not serve.
    condition     = alltrue([for origin in var.cors_origins : can(regex("^https://[^/*,\\s]+$", origin))])
    error_message = "cors_origins must be exact origins such as \"https://app.example.com\": https, no \"*\", no path or trailing slash."
  }
}

variable "firebase_auth" {
  description = "Accept Firebase ID tokens from browser users at the intake (GRADEQ_FIREBASE_PROJECT_ID), besides API keys. The token's client comes from its custom claim gradeq_client or from firebase_tenant_clients."
  type        = bool
  default     = false
}

variable "reviewer_keys" {
  description = "Serve reviewer keys (GRADEQ_REVIEWER_KEYS, docs/review.md) from the secret NAME_PREFIX-reviewer-keys, created before the apply. Without it, reviewers sign in with Firebase (role reviewer or teacher)."
  type        = bool
  default     = false
}

variable "lti_tool_url" {
  description = "The intake's public base URL as schools' LMSs reach it (GRADEQ_LTI_TOOL_URL, docs/gradebook.md). Set, it turns LTI 1.3 on: the intake serves launches and the gradebook posts to the LMSs' AGS, both reading the secret NAME_PREFIX-lti-secrets-key, created before the apply. Empty: LTI is off."
  type        = string
  default     = ""

  validation {
    condition     = var.lti_tool_url == "" || can(regex("^https://[^/?#\\s]+(/[^?#\\s]*)?$", var.lti_tool_url))
    error_message = "lti_tool_url must be empty or an https:// URL without query or fragment."
  }
}

variable "firebase_project_id" {
  description = "Firebase (Identity Platform) project whose ID tokens the intake accepts when firebase_auth is true; empty means project_id."
  type        = string
  default     = ""

  validation {
    condition     = var.firebase_project_id == "" || can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.firebase_project_id))
    error_message = "firebase_project_id must be empty or a Google Cloud project id."
  }
}

variable "firebase_tenant_clients" {
  description = "Identity Platform tenant id -> Gradeq client id (GRADEQ_FIREBASE_TENANT_CLIENTS, passed as \"tenant=client,...\"): a token of that tenant acts for that client. Needs firebase_auth."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for tenant, client in var.firebase_tenant_clients : can(regex("^[^,=\\s]+$", tenant)) && can(regex("^[^,=\\s]+$", client))])
    error_message = "firebase_tenant_clients: tenant and client ids must be non-empty, without spaces, commas or \"=\"."
  }

  validation {
    condition     = var.firebase_auth || length(var.firebase_tenant_clients) == 0
    error_message = "firebase_tenant_clients needs firebase_auth = true."
  }
}

variable "admission" {
  description = <<-EOT
    The intake's admission limits (docs/configuration.md).
    max_active_jobs_per_client (GRADEQ_MAX_ACTIVE_JOBS_PER_CLIENT): jobs not yet final one
    client may have (429 past it). max_backlog (GRADEQ_MAX_BACKLOG): jobs not yet final in
    all (503 past it). submit_burst / submit_rate_per_s (GRADEQ_SUBMIT_BURST,
    GRADEQ_SUBMIT_RATE_PER_S): each client's submissions token bucket, per intake instance.
  EOT
  type = object({
    max_active_jobs_per_client = optional(number, 1000)
    max_backlog                = optional(number, 100000)
    submit_burst               = optional(number, 60)
    submit_rate_per_s          = optional(number, 1)
  })
  default = {}

  validation {
    # The bounds of the settings in shared/config/settings.py.
    condition = (
      var.admission.max_active_jobs_per_client >= 1 && floor(var.admission.max_active_jobs_per_client) == var.admission.max_active_jobs_per_client
      && var.admission.max_backlog >= 1 && floor(var.admission.max_backlog) == var.admission.max_backlog
      && var.admission.submit_burst >= 1 && floor(var.admission.submit_burst) == var.admission.submit_burst
      && var.admission.submit_rate_per_s > 0
    )
    error_message = "admission: max_active_jobs_per_client, max_backlog and submit_burst must be whole numbers >= 1, submit_rate_per_s positive."
  }
}

variable "intake" {
  description = "Sizing of the intake service."
  type = object({
    cpu           = optional(string, "1")
    memory        = optional(string, "512Mi")
    concurrency   = optional(number, 80)
    min_instances = optional(number, 0)
    max_instances = optional(number, 10)
  })
  default = {}

  validation {
    condition     = var.intake.concurrency >= 1 && var.intake.concurrency <= 1000 && var.intake.min_instances >= 0 && var.intake.max_instances >= max(1, var.intake.min_instances)
    error_message = "intake: concurrency must be 1..1000 and 0 <= min_instances <= max_instances (max_instances >= 1)."
  }
}

variable "worker" {
  description = "Sizing of the worker service. Each request holds a slot for a whole grading run, so concurrency is also the number of gunicorn threads. max_instances x concurrency (the worker's slots) must hold every lane's max_concurrent_dispatches at once (shared/config/queues.json): 40 x 8 = 320 >= 3 x 100."
  type = object({
    cpu           = optional(string, "1")
    memory        = optional(string, "1Gi")
    concurrency   = optional(number, 8)
    min_instances = optional(number, 0)
    max_instances = optional(number, 40)
  })
  default = {}

  validation {
    condition     = var.worker.concurrency >= 1 && var.worker.concurrency <= 1000 && var.worker.min_instances >= 0 && var.worker.max_instances >= max(1, var.worker.min_instances)
    error_message = "worker: concurrency must be 1..1000 and 0 <= min_instances <= max_instances (max_instances >= 1)."
  }
}

variable "notification" {
  description = "Sizing of the notification subscriber service."
  type = object({
    cpu           = optional(string, "1")
    memory        = optional(string, "512Mi")
    concurrency   = optional(number, 16)
    min_instances = optional(number, 0)
    max_instances = optional(number, 5)
  })
  default = {}

  validation {
    condition     = var.notification.concurrency >= 1 && var.notification.concurrency <= 1000 && var.notification.min_instances >= 0 && var.notification.max_instances >= max(1, var.notification.min_instances)
    error_message = "notification: concurrency must be 1..1000 and 0 <= min_instances <= max_instances (max_instances >= 1)."
  }
}

variable "gradebook" {
  description = "Sizing of the gradebook subscriber service."
  type = object({
    cpu           = optional(string, "1")
    memory        = optional(string, "512Mi")
    concurrency   = optional(number, 16)
    min_instances = optional(number, 0)
    max_instances = optional(number, 3)
  })
  default = {}

  validation {
    condition     = var.gradebook.concurrency >= 1 && var.gradebook.concurrency <= 1000 && var.gradebook.min_instances >= 0 && var.gradebook.max_instances >= max(1, var.gradebook.min_instances)
    error_message = "gradebook: concurrency must be 1..1000 and 0 <= min_instances <= max_instances (max_instances >= 1)."
  }
}

variable "gradebook_connections" {
  description = "Each school's gradebook connection, by school (docs/gradebook.md): for Google Classroom {kind = \"classroom\", course_id, teacher, roster}. No secrets: the gradebook service calls each LMS with its own identity."
  type        = any
  default     = {}
}

variable "grader_timeout_s" {
  description = "Seconds the worker lets one grading run take (GRADEQ_GRADER_TIMEOUT_S). lease_s + grader_timeout_s + result_write_retry_s must not exceed the queue's dispatch_deadline."
  type        = number
  default     = 540

  validation {
    condition     = var.grader_timeout_s > 0
    error_message = "grader_timeout_s must be positive."
  }
}

# The time budget of one delivery (shared/config/budget.py): a delivery may wait one lease
# for a dead attempt's lease to expire, grade for grader_timeout_s, then retry storing the
# result for result_write_retry_s. That must end before the queue's dispatch_deadline
# (the precondition on the worker_url output); the worker refuses to start otherwise.
variable "lease_s" {
  description = "Seconds of a grading attempt's lease (GRADEQ_LEASE_S), renewed every heartbeat_s while it grades: a dead attempt is taken over this long after its last renewal."
  type        = number
  default     = 45

  validation {
    condition     = var.lease_s > 0
    error_message = "lease_s must be positive."
  }
}

variable "heartbeat_s" {
  description = "Seconds between two renewals of a grading attempt's lease (GRADEQ_HEARTBEAT_S); at most half of lease_s. Each renewal is one Firestore read and one write (docs/cost.md)."
  type        = number
  default     = 15

  validation {
    condition     = var.heartbeat_s > 0 && var.heartbeat_s * 2 <= var.lease_s
    error_message = "heartbeat_s (${var.heartbeat_s}) must be positive and at most half of lease_s (${var.lease_s}), so one late renewal does not lose the lease."
  }
}

variable "result_write_retry_s" {
  description = "Seconds the worker keeps retrying to store a graded result while Firestore is unavailable (GRADEQ_RESULT_WRITE_RETRY_S)."
  type        = number
  default     = 10

  validation {
    condition     = var.result_write_retry_s >= 0
    error_message = "result_write_retry_s must not be negative."
  }
}

variable "grader" {
  description = <<-EOT
    The worker's grader (docs/graders.md). kind: rubric (offline), gemini or
    openai (any OpenAI-compatible server). model: empty means the grader's default (gemini:
    the worker's current default, warned about a month before its retirement and
    suspended at it (docs/graders.md); openai
    needs one). gemini_api: vertex (Vertex AI as the worker's
    service account; terraform grants roles/aiplatform.user) or developer (the Gemini API
    with a key). location: the Vertex AI location serving the model; empty means the
    deployment's region, so answers are processed where they are stored ("global" only
    when chosen: Google advises against it where the processing location matters). base_url: the
    OpenAI-compatible server (openai). quota_rpm / quota_tpm: the project's requests and
    tokens per minute for the model (tpm 0: no token limit); quota_headroom: the fraction
    Gradeq may use. quota_mode: shared (one pool for every worker instance, leased in
    slices from the job store), adaptive (no declared quota: the limit found from the
    provider's 429s, shared the same way) or instance (the quota split evenly over the
    worker's max_instances). request_timeout_s: the
    longest single model request. gemini with developer and openai read their key from the
    secret NAME_PREFIX-grader-api-key (docs/deploy.md).
  EOT
  type = object({
    kind              = optional(string, "rubric")
    model             = optional(string, "")
    gemini_api        = optional(string, "vertex")
    location          = optional(string, "")
    base_url          = optional(string, "")
    quota_rpm         = optional(number, 60)
    quota_tpm         = optional(number, 0)
    quota_headroom    = optional(number, 0.9)
    quota_mode        = optional(string, "shared")
    request_timeout_s = optional(number, 300)
  })
  default = {}

  validation {
    condition     = contains(["rubric", "gemini", "openai"], var.grader.kind)
    error_message = "grader.kind must be rubric, gemini or openai."
  }

  validation {
    condition     = contains(["vertex", "developer"], var.grader.gemini_api)
    error_message = "grader.gemini_api must be vertex or developer."
  }

  validation {
    condition     = contains(["shared", "adaptive", "instance"], var.grader.quota_mode)
    error_message = "grader.quota_mode must be shared, adaptive or instance."
  }

  validation {
    # The worker refuses to start without them (shared/config/settings.py).
    condition     = var.grader.kind != "openai" || (var.grader.base_url != "" && var.grader.model != "")
    error_message = "grader.kind = openai needs grader.base_url and grader.model."
  }

  validation {
    # The bounds of GRADEQ_GRADER_QUOTA_RPM, _TPM (whole numbers), _HEADROOM and
    # GRADEQ_GRADER_REQUEST_TIMEOUT_S in shared/config/settings.py.
    condition = (
      var.grader.quota_rpm >= 1 && floor(var.grader.quota_rpm) == var.grader.quota_rpm
      && var.grader.quota_tpm >= 0 && floor(var.grader.quota_tpm) == var.grader.quota_tpm
      && var.grader.quota_headroom > 0 && var.grader.quota_headroom <= 1
      && var.grader.request_timeout_s > 0
    )
    error_message = "grader: quota_rpm must be a whole number >= 1, quota_tpm a whole number >= 0, quota_headroom in (0, 1] and request_timeout_s positive."
  }
}

variable "batch" {
  description = <<-EOT
    Batch mode (docs/graders.md#batch-mode): work that may wait is graded in provider
    batches at the batch price. enabled: off by default; it needs grader.kind = openai, or
    gemini with gemini_api = developer (Vertex AI batch prediction reads its requests from
    Cloud Storage only). lanes: the lanes whose jobs all may wait ("|"-separated, each a
    lane of shared/config/queues.json). regrades: an assignment's regrades may wait.
    max_size: the most jobs in one batch; window_s: the longest a gathered job waits for
    its batch to fill. tick_s: the recovery sweep's period, which submits and polls the
    batches (keep it equal to recovery_schedule's).
  EOT
  type = object({
    enabled  = optional(bool, false)
    lanes    = optional(string, "bulk")
    regrades = optional(bool, true)
    max_size = optional(number, 1000)
    window_s = optional(number, 600)
    tick_s   = optional(number, 300)
  })
  default = {}

  validation {
    # The bounds of GRADEQ_BATCH_MAX_SIZE, _WINDOW_S and _TICK_S in shared/config/settings.py.
    condition = (
      var.batch.max_size >= 1 && var.batch.max_size <= 50000 && floor(var.batch.max_size) == var.batch.max_size
      && var.batch.window_s > 0 && var.batch.tick_s > 0
    )
    error_message = "batch: max_size must be a whole number in [1, 50000], window_s and tick_s positive."
  }

  validation {
    # The worker refuses to start with batch mode on another grader (shared/config/settings.py).
    condition     = !var.batch.enabled || var.grader.kind == "openai" || (var.grader.kind == "gemini" && var.grader.gemini_api == "developer")
    error_message = "batch.enabled needs grader.kind = openai, or gemini with grader.gemini_api = developer."
  }
}

variable "recovery_schedule" {
  description = "Cron schedule (in UTC) of the Cloud Scheduler job that calls the worker's /tasks/recover."
  type        = string
  default     = "*/5 * * * *"

  validation {
    condition     = length(split(" ", trimspace(var.recovery_schedule))) == 5
    error_message = "recovery_schedule must be a five-field cron expression."
  }
}

variable "log_level" {
  description = "GRADEQ_LOG_LEVEL of every service."
  type        = string
  default     = "INFO"

  validation {
    condition     = contains(["DEBUG", "INFO", "WARNING", "ERROR"], var.log_level)
    error_message = "log_level must be DEBUG, INFO, WARNING or ERROR."
  }
}

variable "firestore_database" {
  description = "Firestore database id; \"(default)\" unless the project already uses it for something else."
  type        = string
  default     = "(default)"
}

variable "firestore_location" {
  description = "Firestore location (a region such as europe-west1 or a multi-region such as eur3); null means var.region."
  type        = string
  default     = null
}

variable "jobs_collection" {
  description = "Firestore collection of grading jobs (GRADEQ_JOBS_COLLECTION)."
  type        = string
  default     = "grading_jobs"
}

variable "processed_events_collection" {
  description = "Firestore collection where subscribers record the event ids they already handled (GRADEQ_PROCESSED_EVENTS_COLLECTION); its TTL policy uses the same name."
  type        = string
  default     = "processed_events"
}

variable "bigquery_location" {
  description = "Location of the analytics BigQuery dataset (EU, US or a region); null means var.region. Changing it replaces the dataset."
  type        = string
  default     = null
}

variable "analytics_dataset_id" {
  description = "Id of the BigQuery dataset that receives GradingCompleted events."
  type        = string
  default     = "gradeq_analytics"

  validation {
    # RE2 (terraform's regex) refuses repeat counts above 1000, so the length is its own test.
    condition     = can(regex("^[A-Za-z_][A-Za-z0-9_]*$", var.analytics_dataset_id)) && length(var.analytics_dataset_id) <= 1024
    error_message = "analytics_dataset_id may hold letters, digits and underscores only (at most 1024)."
  }
}

variable "analytics_partition_expiration_days" {
  description = "Days a partition of the analytics table is kept; null keeps events forever."
  type        = number
  default     = null

  validation {
    condition     = var.analytics_partition_expiration_days == null ? true : var.analytics_partition_expiration_days >= 1
    error_message = "analytics_partition_expiration_days must be at least 1 (or null)."
  }
}

variable "dead_letter_retention" {
  description = "How long dead-lettered events are kept on the dead-letter subscription (a duration such as \"604800s\"; at most 31 days)."
  type        = string
  default     = "604800s"

  validation {
    condition     = can(regex("^[0-9]+s$", var.dead_letter_retention)) && tonumber(trimsuffix(var.dead_letter_retention, "s")) <= 2678400
    error_message = "dead_letter_retention must be seconds such as \"604800s\", at most 2678400s."
  }
}

variable "notification_channels" {
  description = "Cloud Monitoring notification channel ids (projects/PROJECT/notificationChannels/ID) that every alert policy notifies. Empty: the alerts fire where nobody is told (the plan warns, check.alerts_notify_someone)."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for channel in var.notification_channels : can(regex("^projects/[^/]+/notificationChannels/[0-9]+$", channel))])
    error_message = "notification_channels must be channel ids such as projects/PROJECT/notificationChannels/1234567890 (gcloud beta monitoring channels list)."
  }
}

# Every alert policy notifies var.notification_channels: with none, an alert opens an
# incident in the console that nobody is told about. A deployment may do that on purpose
# (a test project), so this warns at plan and apply instead of refusing.
check "alerts_notify_someone" {
  assert {
    condition     = length(var.notification_channels) > 0
    error_message = "notification_channels is empty: every alert policy (failed jobs, suspended grading, dead-lettered events, ...) will fire without notifying anyone. Create a channel (gcloud beta monitoring channels create, or the console) and set notification_channels."
  }
}

variable "alert_oldest_unacked_age_s" {
  description = "Alert when a subscription's oldest unacknowledged event is older than this many seconds."
  type        = number
  default     = 900

  validation {
    condition     = var.alert_oldest_unacked_age_s >= 60
    error_message = "alert_oldest_unacked_age_s must be at least 60."
  }
}

variable "alert_task_delay_s" {
  description = "Alert when the 99th percentile delay between a task's scheduled and actual dispatch exceeds this many seconds."
  type        = number
  default     = 600

  validation {
    condition     = var.alert_task_delay_s >= 60
    error_message = "alert_task_delay_s must be at least 60."
  }
}

variable "alert_worker_error_ratio" {
  description = "Alert when more than this fraction of the worker's responses are 5xx over 10 minutes."
  type        = number
  default     = 0.05

  validation {
    condition     = var.alert_worker_error_ratio > 0 && var.alert_worker_error_ratio < 1
    error_message = "alert_worker_error_ratio must be between 0 and 1."
  }
}

variable "deletion_protection" {
  description = "Terraform's own delete protection of the Cloud Run services and the analytics tables: set false and apply before the teardown (docs/deploy.md). The Firestore database keeps Google's delete protection whatever this says."
  type        = bool
  default     = true
}

variable "uploads_retention_days" {
  description = "Days an uploaded answer file is kept (the bucket's lifecycle rule): the jobs' TTL (GRADEQ_JOB_TTL_DAYS, 30 by default) plus one, so a file outlives no job by more than a day."
  type        = number
  default     = 31

  validation {
    condition     = var.uploads_retention_days >= 1
    error_message = "uploads_retention_days must be at least 1."
  }
}
