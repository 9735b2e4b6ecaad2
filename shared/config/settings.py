"""One typed, frozen settings object, read from `GRADEQ_*` environment variables once.

Every variable is listed in docs/configuration.md. Tests build `Settings`
directly instead of touching the environment.
"""

from __future__ import annotations

import os
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import Field, PrivateAttr, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.config.budget import Budget
from shared.config.prices import DEFAULT_PRICES_FILE
from shared.config.queues import DEFAULT_QUEUES_FILE, QueueConfig, lanes_by_priority, load_queues
from shared.domain.lanes import LanePolicy
from shared.domain.uploads import UploadLimits

_EMULATOR_VARIABLES = ("FIRESTORE_EMULATOR_HOST", "PUBSUB_EMULATOR_HOST")
#: A job's attempt budget when its queue retries without limit (max_attempts -1).
DEFAULT_JOB_MAX_ATTEMPTS = 10


class Backend(StrEnum):
    EMBEDDED = "embedded"
    GOOGLE = "google"


class PushAuth(StrEnum):
    """How the worker and subscribers authenticate pushes from the queue and the bus."""

    OIDC = "oidc"  # Google ID token (production): forwarded by Cloud Run, or verified here
    SHARED_TOKEN = "shared-token"  # noqa: S105 - a bearer secret shared with the local dispatcher/bus
    NONE = "none"  # only against the emulators: the Pub/Sub emulator pushes without a token


class GraderKind(StrEnum):
    """Which grader the worker runs."""

    RUBRIC = "rubric"  # offline keyword grader (the embedded default)
    GEMINI = "gemini"  # Gemini on Vertex AI or the Gemini API
    OPENAI = "openai"  # any OpenAI-compatible chat completions server


class GeminiApi(StrEnum):
    """Where Gemini is called."""

    VERTEX = "vertex"  # Vertex AI, with Application Default Credentials
    DEVELOPER = "developer"  # the Gemini API, with an API key


#: The model used when GRADEQ_GRADER_MODEL is empty (the OpenAI-compatible grader needs one).
#: Its retirement date is minded while the worker grades: a warning ahead of it, grading
#: suspended past it (shared/adapters/graders/lifecycle.py).
DEFAULT_MODELS = {GraderKind.GEMINI: "gemini-3.5-flash"}


class QuotaMode(StrEnum):
    """How the worker instances share the provider's quota (docs/graders.md)."""

    SHARED = "shared"  # the declared quota, leased in slices from the job store
    ADAPTIVE = "adaptive"  # no declared quota: the limit found by AIMD, shared the same way
    INSTANCE = "instance"  # a fixed share per instance: quota x headroom / max instances


class ThinkingLevel(StrEnum):
    """How much Gemini 3 and later think before answering (google-genai ThinkingLevel)."""

    MINIMAL = "minimal"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


class TokenLimitParam(StrEnum):
    """The request field an OpenAI-compatible server takes for the output token limit."""

    MAX_COMPLETION_TOKENS = "max_completion_tokens"  # OpenAI (required by reasoning models)
    MAX_TOKENS = "max_tokens"  # older compatible servers


def _is_http_base_url(url: str) -> bool:
    """An absolute http(s) URL with a host, a valid port, and no query or fragment.

    It starts with "http://" or "https://" as written, which is what Cloud Tasks checks.
    """
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        return False
    return (
        url.startswith(("http://", "https://"))
        and bool(parts.hostname)
        and not parts.query
        and not parts.fragment
        and url == url.strip()
    )


class Settings(BaseSettings):
    """Gradeq configuration."""

    model_config = SettingsConfigDict(env_prefix="GRADEQ_", frozen=True, extra="ignore")

    backend: Backend = Backend.EMBEDDED
    data_dir: Path = Path("data")
    queues_file: Path = DEFAULT_QUEUES_FILE
    #: The price table per model (see shared/config/prices.py and docs/cost.md).
    prices_file: Path = DEFAULT_PRICES_FILE
    queue: str = "grading"
    # Lanes (see docs/lanes.md): the lane of a request naming none, and the lanes each
    # client may use, e.g. "acme=exam|grading,*=grading|bulk" (first: that client's default).
    default_lane: str | None = None
    client_lanes: str = ""

    # Where the queue delivers tasks: the worker's base URL (also the OIDC audience).
    worker_url: str = "http://127.0.0.1:8081"
    # Operator credentials for the admin API and dashboard: "name=key" pairs separated by
    # commas; a key may be given as "sha256:<hex digest>" so the setting holds no secret.
    operator_keys: SecretStr = SecretStr("")
    retry_after_s: int = Field(default=2, ge=1)
    # Erasure answers: the BigQuery table the analytics subscription writes (project.dataset.
    # table; empty: no BigQuery) and how long the logs are kept (Cloud Logging's _Default).
    analytics_table: str = ""
    log_retention_days: int = Field(default=30, ge=1)
    # Reviewer credentials apart from client keys: "client/name=key" pairs separated by
    # commas (a key may be "sha256:<hex digest>"); a reviewer sees only that client's grades.
    reviewer_keys: SecretStr = SecretStr("")
    # Review rules of jobs without an assignment, per client: a JSON object of client id
    # to policy (docs/review.md), e.g. {"school-a": {"sample_rate": 0.05}}.
    client_review_policies: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # Schools whose signed-in students may send practice jobs of their own (a rubric of
    # their own, no assignment; never the school's webhook or gradebook), comma-separated.
    practice_clients: str = ""
    # Admission: jobs not yet final allowed per client and in all; Retry-After past them.
    max_active_jobs_per_client: int = Field(default=1000, ge=1)
    max_backlog: int = Field(default=100_000, ge=1)
    admission_retry_after_s: int = Field(default=30, ge=1)
    # Fairness: a client's n-th job not yet final is scheduled n times this many seconds
    # ahead; unset, it is one dispatch slot of the queue (1 / max_dispatches_per_second).
    fair_spacing_s: float | None = Field(default=None, ge=0)
    # Submissions per client: a token bucket of this size, refilled at this rate.
    submit_burst: int = Field(default=60, ge=1)
    submit_rate_per_s: float = Field(default=1.0, gt=0)
    # Failed authentications per failing credential (per caller address for requests
    # without one): a bucket of this size, refilled at this rate; past it 429, before any
    # lookup of that credential (docs/auth.md#failed-authentications). The address is
    # X-Forwarded-For's entry this many hops from the right (1 behind Cloud Run's front,
    # one more per load balancer), or the peer's with 0.
    auth_failure_burst: int = Field(default=20, ge=1)
    auth_failure_rate_per_s: float = Field(default=0.2, gt=0)
    trusted_proxy_hops: int = Field(default=0, ge=0)
    # How long a key id found in no key store is answered without another read.
    api_key_unknown_cache_s: float = Field(default=60.0, ge=0)
    # How long a request waits for a busy embedded store before answering 503.
    store_wait_s: float = Field(default=2.0, gt=0)

    # Worker behaviour; the durations are checked against each other (shared.config.budget).
    grader: GraderKind = GraderKind.RUBRIC
    grader_timeout_s: float = Field(default=540.0, gt=0)
    grader_latency_s: float = Field(default=0.5, ge=0)
    # Honour metadata.simulate (failure injection) in the offline grader; unset means
    # on for the embedded backend and off for the Google backend.
    grader_simulate: bool | None = None

    # Model graders (GRADEQ_GRADER=gemini|openai); see docs/graders.md.
    grader_model: str = ""
    grader_gemini_api: GeminiApi = GeminiApi.VERTEX
    # Vertex AI location serving the model; empty: the deployment's region (`location`),
    # so student work is processed where it is stored. "global" only when chosen.
    grader_location: str = ""
    grader_api_key: SecretStr = SecretStr("")  # Gemini API key, or the OpenAI-compatible key
    grader_base_url: str = ""  # OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1
    grader_prompt_version: str = "grading-v1"
    # Thinking tokens count against this limit too (Gemini 2.5+, reasoning models).
    grader_max_output_tokens: int = Field(default=8192, ge=64)
    # A job's estimated input tokens past this fail it before any request.
    grader_max_input_tokens: int = Field(default=200_000, ge=1_000)
    # Unset: the model's default (reasoning models refuse any other value).
    grader_temperature: float | None = Field(default=None, ge=0, le=2)
    # Gemini's thinking: a level (Gemini 3 and later), or a budget in tokens (the 2.x
    # models; -1 dynamic, 0 off where the model allows). The 2.x models get a budget of
    # 1024 when none is set.
    grader_thinking_level: ThinkingLevel = ThinkingLevel.LOW
    grader_thinking_budget: int | None = Field(default=None, ge=-1)
    # Explicit Gemini context caches for an assignment's shared prompt prefix, where the
    # price table says they pay (docs/graders.md#prompt-caching).
    grader_context_cache: bool = True
    grader_token_limit_param: TokenLimitParam = TokenLimitParam.MAX_COMPLETION_TOKENS
    grader_request_timeout_s: float = Field(default=300.0, gt=0)
    grader_answer_retries: int = Field(default=2, ge=0, le=5)
    # The project's quota for the model, shared by the worker's instances (QuotaMode).
    grader_quota_mode: QuotaMode = QuotaMode.SHARED
    grader_quota_rpm: int = Field(default=60, ge=1)
    grader_quota_tpm: int = Field(default=0, ge=0)  # 0: no token limit
    grader_quota_headroom: float = Field(default=0.9, gt=0, le=1)
    # Batch mode (docs/graders.md#batch-mode): work that may wait goes to provider batches.
    batch_mode: bool = False
    batch_lanes: str = "bulk"  # lanes whose jobs all may wait ("|"-separated)
    batch_regrades: bool = True  # an assignment's regrades may wait
    batch_max_size: int = Field(default=1000, ge=1, le=50_000)
    batch_window_s: float = Field(default=600.0, gt=0)
    batch_tick_s: float = Field(default=300.0, gt=0)  # the recovery sweep's period
    worker_max_instances: int = Field(default=1, ge=1)
    # Budgets (docs/cost.md#budgets): how often an instance reads the budgets again (a
    # raised budget takes effect within this), and how long a job held by a spent budget
    # waits before its next look (sooner at the month's end). At most 30 days: the
    # longest Cloud Tasks schedules a task ahead.
    budget_refresh_s: float = Field(default=60.0, gt=0)
    budget_hold_recheck_s: float = Field(default=900.0, gt=0, le=30 * 24 * 3600)
    # The provider's quota window: a minute (shorter only to run the quota bench fast).
    grader_quota_window_s: float = Field(default=60.0, gt=0)
    # adaptive: the limit's start, floor and ceiling, in requests a minute.
    grader_adaptive_start_rpm: int = Field(default=60, ge=1)
    grader_adaptive_min_rpm: int = Field(default=1, ge=1)
    grader_adaptive_max_rpm: int = Field(default=100_000, ge=1)

    # The attempt's lease, renewed every heartbeat while it grades.
    lease_s: float = Field(default=45.0, gt=0)
    heartbeat_s: float = Field(default=15.0, gt=0)
    # Grader calls one job may cost, across replays; None: the queue's max_attempts.
    job_max_attempts: int | None = Field(default=None, ge=1)
    # How long a graded result's write is retried while the store is unavailable.
    result_write_retry_s: float = Field(default=10.0, ge=0)
    # On SIGTERM: how long gradings in flight may still finish before their leases go back.
    drain_grace_s: float = Field(default=5.0, ge=0)

    # Push authentication for /tasks/* and /pubsub/*.
    push_auth: PushAuth = PushAuth.SHARED_TOKEN
    push_token: SecretStr = SecretStr("")
    push_audience: str = ""
    push_service_accounts: str = ""
    # oidc: verify the token's signature here too. Off behind Cloud Run IAM, which verifies
    # it and forwards the token with its signature removed; on for a service without IAM.
    push_verify_signature: bool = False
    # Claims-only mode (the above off) outside Cloud Run (no K_SERVICE): only behind a
    # local stand-in of Cloud Run's front (the local stack, tests); refused on Google.
    push_allow_claims_outside_cloud_run: bool = False

    # Web frontends' Firebase ID tokens: accepted when the Firebase project is set. A token
    # names its client in this custom claim, or else by its Identity Platform tenant
    # ("tenant_id=client_id" pairs, comma-separated).
    firebase_project_id: str = ""
    firebase_client_claim: str = "gradeq_client"
    firebase_tenant_clients: str = ""
    # A signed-in user sees only their own jobs unless this custom claim (a string or a
    # list) holds one of the client-wide roles (comma-separated).
    firebase_role_claim: str = "gradeq_role"
    firebase_client_wide_roles: str = "teacher,admin"
    # Anonymous sign-ins, and email sign-ins whose address is not verified, are refused
    # unless these allow them.
    firebase_allow_anonymous: bool = False
    firebase_allow_unverified: bool = False
    # Look each signed-in user's account up (Identity Toolkit accounts:lookup): refuse
    # tokens of disabled accounts and of sign-ins revoked since (one API call a request).
    firebase_check_revoked: bool = False

    # Clients whose API keys may read their own records in the analytics service's reports,
    # comma-separated; operator keys (GRADEQ_OPERATOR_KEYS) read every client's.
    analytics_readers: str = ""

    # Browser origins allowed to call the intake (CORS), comma-separated; none by default.
    cors_origins: str = ""

    # Callback URLs: loopback targets are refused unless this is set (local runs only).
    callback_allow_loopback: bool = False
    # Ports a callback URL may name besides 443 (and 80 for http), comma-separated.
    callback_ports: str = ""

    # Notification subscriber. Each client's webhooks are signed with that client's own
    # secrets (`python -m services.notification.webhook_secrets`), stored sealed under
    # this key-encryption key: base64 of 32 bytes; several, comma-separated, while the key
    # is rotated (the first seals, any opens). See docs/webhooks.md.
    webhook_secrets_key: SecretStr = SecretStr("")
    # The whole delivery (connect, send, answer headers) ends after this many seconds.
    webhook_timeout_s: float = Field(default=10.0, gt=0)
    # Extra certificate authorities (a PEM file) trusted for callbacks, beside the usual
    # public roots: for a client whose endpoint has a private CA's certificate.
    webhook_ca_bundle: Path | None = None

    # LTI 1.3 Advantage (docs/gradebook.md). The intake serves the tool's login, launch and
    # JWKS routes only when both are set: the intake's public base URL as the LMS reaches
    # it (https://...), and the key-encryption key that seals Gradeq's LTI private keys
    # (base64 of 32 bytes; several, comma-separated, while it is rotated).
    lti_tool_url: str = ""
    lti_secrets_key: SecretStr = SecretStr("")

    # Google Cloud.
    project_id: str = ""
    location: str = "europe-west1"
    tasks_service_account: str = ""
    firestore_database: str = "(default)"
    jobs_collection: str = "grading_jobs"
    # How long one Firestore call may take, retries included, before the request answers 503.
    firestore_deadline_s: float = Field(default=10.0, gt=0)
    # Counters of jobs not yet final (per client, and the backlog's shards).
    counters_collection: str = "grading_job_counters"
    # Server clients' API keys (digests only), managed with `python -m services.intake.auth.keys`.
    api_keys_collection: str = "api_keys"
    # Clients' webhook secrets (sealed), managed with
    # `python -m services.notification.webhook_secrets`.
    webhook_secrets_collection: str = "webhook_secrets"
    lti_registrations_collection: str = "lti_registrations"
    lti_keys_collection: str = "lti_tool_keys"
    lti_links_collection: str = "lti_assignment_links"
    # Shared with terraform's TTL policy (var.processed_events_collection).
    processed_events_collection: str = "processed_events"
    topic: str = "grading-completed"
    job_ttl_days: int = Field(default=30, ge=1)

    # Uploaded answer files (docs/uploads.md): limits per file, per job and per archive,
    # and how long a signed upload URL lives.
    upload_max_file_bytes: int = Field(default=10 * 1024 * 1024, ge=1)
    upload_max_job_bytes: int = Field(default=25 * 1024 * 1024, ge=1)
    upload_max_files_per_job: int = Field(default=10, ge=0)
    upload_max_archive_entries: int = Field(default=200, ge=1)
    upload_max_archive_expanded_bytes: int = Field(default=2 * 1024 * 1024, ge=1)
    upload_max_job_text_bytes: int = Field(default=100 * 1024, ge=1)
    upload_max_bytes_per_day: int = Field(default=2 * 1024 * 1024 * 1024, ge=1)
    upload_url_ttl_s: int = Field(default=600, ge=1, le=7 * 24 * 3600)
    # Embedded backend: uploads older than this that no job names are removed on the
    # recovery tick (Google Cloud: the bucket's lifecycle rule, var.uploads_retention_days).
    uploads_retention_days: int = Field(default=31, ge=1)
    # Upload URLs per client: a token bucket of this size, refilled at this rate.
    upload_burst: int = Field(default=60, ge=1)
    upload_rate_per_s: float = Field(default=2.0, gt=0)
    # Google: the bucket, and the account that signs URLs through IAM signBlob (empty:
    # the credentials' own). Embedded: the HMAC key (empty: one kept in the data dir).
    uploads_bucket: str = ""
    upload_signer_email: str = ""
    upload_signing_key: SecretStr = SecretStr("")
    # Emulator runs only: a service-account key file that signs upload URLs locally (on
    # Google Cloud there is no key file: URLs are signed through IAM signBlob).
    upload_signing_key_file: Path | None = None

    log_level: str = "INFO"

    _queues: dict[str, QueueConfig] = PrivateAttr(default_factory=dict)

    @field_validator("worker_url")
    @classmethod
    def _absolute_http_url(cls, url: str) -> str:
        """The worker's base URL: Cloud Tasks refuses a task whose URL is not http(s)://."""
        if not _is_http_base_url(url):
            raise ValueError(
                "GRADEQ_WORKER_URL must be an absolute http(s) URL, the worker's base URL "
                f"(e.g. https://gradeq-worker-123.europe-west1.run.app), not {url!r}"
            )
        return url

    @model_validator(mode="after")
    def _check(self) -> Settings:
        if self.backend is Backend.GOOGLE and not self.project_id:
            raise ValueError("GRADEQ_PROJECT_ID is required with GRADEQ_BACKEND=google")
        emulated = any(os.environ.get(v) for v in _EMULATOR_VARIABLES)
        if self.push_auth is not PushAuth.OIDC and self.backend is Backend.GOOGLE and not emulated:
            raise ValueError(f"GRADEQ_PUSH_AUTH={self.push_auth} is for local runs; use oidc")
        if self.callback_allow_loopback and self.backend is Backend.GOOGLE and not emulated:
            raise ValueError("GRADEQ_CALLBACK_ALLOW_LOOPBACK is for local runs only")
        if (
            self.push_allow_claims_outside_cloud_run
            and self.backend is Backend.GOOGLE
            and not emulated
        ):
            raise ValueError("GRADEQ_PUSH_ALLOW_CLAIMS_OUTSIDE_CLOUD_RUN is for local runs only")
        self.callback_port_set()
        if self.upload_signing_key_file and self.backend is Backend.GOOGLE and not emulated:
            raise ValueError("GRADEQ_UPLOAD_SIGNING_KEY_FILE is for the emulators only")
        if self.push_auth is PushAuth.NONE and not emulated:
            raise ValueError("GRADEQ_PUSH_AUTH=none is only allowed against the emulators")
        self._check_grader()
        self._queues = load_queues(self.queues_file)
        if self.queue not in self._queues:
            raise ValueError(f"queue {self.queue!r} is not defined in {self.queues_file}")
        self.lane_policy()  # refuse a lane list naming undeclared lanes
        if self.batch_mode and not self.batch_lane_set() <= set(self._queues):
            raise ValueError(f"GRADEQ_BATCH_LANES names undeclared lanes: {self.batch_lanes}")
        for lane in self._queues:  # refuse an inconsistent set of durations at start-up
            self.budget(lane)
        return self

    def _check_grader(self) -> None:
        if self.grader is GraderKind.GEMINI:
            if self.grader_gemini_api is GeminiApi.VERTEX and not self.project_id:
                raise ValueError("GRADEQ_PROJECT_ID is required for Gemini on Vertex AI")
            if self.grader_gemini_api is GeminiApi.DEVELOPER and not self.grader_api_key:
                raise ValueError("GRADEQ_GRADER_API_KEY is required for the Gemini API")
        if self.batch_mode and (
            self.grader is GraderKind.RUBRIC
            or (self.grader is GraderKind.GEMINI and self.grader_gemini_api is GeminiApi.VERTEX)
        ):
            # Vertex AI batch prediction reads its requests from Cloud Storage or BigQuery
            # only; the Gemini API and OpenAI's Batch API take them inline or as a file.
            raise ValueError(
                "GRADEQ_BATCH_MODE needs GRADEQ_GRADER=openai, or gemini with "
                "GRADEQ_GRADER_GEMINI_API=developer"
            )
        budget = self.grader_thinking_budget
        if budget is not None and budget >= self.grader_max_output_tokens:
            raise ValueError(
                f"GRADEQ_GRADER_THINKING_BUDGET ({budget}) must leave room for the answer "
                f"within GRADEQ_GRADER_MAX_OUTPUT_TOKENS ({self.grader_max_output_tokens})"
            )
        if self.grader is GraderKind.OPENAI and not (self.grader_base_url and self.grader_model):
            raise ValueError(
                "GRADEQ_GRADER_BASE_URL and GRADEQ_GRADER_MODEL are required with "
                "GRADEQ_GRADER=openai"
            )

    @property
    def grader_vertex_location(self) -> str:
        """Where Gemini on Vertex AI processes requests: the chosen location or the region."""
        return self.grader_location or self.location

    @property
    def grader_model_name(self) -> str:
        """The configured model, or the grader's default one."""
        return self.grader_model or DEFAULT_MODELS.get(self.grader, "")

    @property
    def simulation_enabled(self) -> bool:
        """Whether the offline grader acts out metadata.simulate."""
        if self.grader_simulate is None:
            return self.backend is Backend.EMBEDDED
        return self.grader_simulate

    def firebase_tenant_client_map(self) -> dict[str, str]:
        """{tenant id: client id} from GRADEQ_FIREBASE_TENANT_CLIENTS."""
        mapping = {}
        for pair in (p.strip() for p in self.firebase_tenant_clients.split(",") if p.strip()):
            tenant, sep, client = pair.partition("=")
            if not sep or not tenant.strip() or not client.strip():
                raise ValueError("GRADEQ_FIREBASE_TENANT_CLIENTS looks like 'tenant=client,...'")
            mapping[tenant.strip()] = client.strip()
        return mapping

    def callback_port_set(self) -> frozenset[int]:
        """The ports of `callback_ports`; ValueError if one is not a TCP port number."""
        ports = frozenset(int(p) for p in self.callback_ports.split(",") if p.strip())
        if any(not 0 < port < 65536 for port in ports):
            raise ValueError("GRADEQ_CALLBACK_PORTS lists TCP ports, 1-65535")
        return ports

    def analytics_reader_set(self) -> frozenset[str]:
        """The client ids allowed to read analytics (none by default)."""
        return frozenset(c.strip() for c in self.analytics_readers.split(",") if c.strip())

    def cors_origin_list(self) -> list[str]:
        """The configured frontend origins, e.g. ["https://app.example.com"]."""
        origins = [o.strip().rstrip("/") for o in self.cors_origins.split(",") if o.strip()]
        for origin in origins:
            if origin == "*" or "://" not in origin:
                raise ValueError(f"GRADEQ_CORS_ORIGINS needs exact origins, got {origin!r}")
        return origins

    def queues(self) -> dict[str, QueueConfig]:
        """Every queue of the queues file, read once when the settings were made."""
        return dict(self._queues)

    def lane_policy(self) -> LanePolicy:
        """Which lanes each client may use (GRADEQ_CLIENT_LANES, GRADEQ_DEFAULT_LANE)."""
        default = self.default_lane or self.queue
        if default not in self._queues:
            raise ValueError(f"GRADEQ_DEFAULT_LANE {default!r} is not a queue of the file")
        rank = self._queues[default].lane.priority
        urgent = [q.name for q in self._queues.values() if q.lane.priority > rank]
        return LanePolicy.parse(self._queues, default, self.client_lanes, urgent)

    def batch_lane_set(self) -> frozenset[str]:
        return frozenset(lane for lane in self.batch_lanes.split("|") if lane)

    def regrade_lane(self) -> str:
        """The lane regrades go to: the lowest-priority one of the queues file."""
        return lanes_by_priority(self._queues)[-1].name

    def fair_spacing(self) -> timedelta:
        """How far apart one client's queued jobs are scheduled."""
        if self.fair_spacing_s is not None:
            return timedelta(seconds=self.fair_spacing_s)
        rate = self.queue_config().rate_limits.max_dispatches_per_second
        return timedelta(seconds=1 / rate)

    def queue_config(self) -> QueueConfig:
        return self._queues[self.queue]

    def budget(self, lane: str | None = None) -> Budget:
        """The checked time budget of the configured queue, or of a lane (`BudgetError`)."""
        queue = self._queues[lane] if lane is not None else self.queue_config()
        attempts = self.job_max_attempts
        if attempts is None:
            attempts = queue.retry_config.max_attempts
            attempts = attempts if attempts > 0 else DEFAULT_JOB_MAX_ATTEMPTS
        return Budget(
            grader_timeout_s=self.grader_timeout_s,
            lease_s=self.lease_s,
            heartbeat_s=self.heartbeat_s,
            result_write_retry_s=self.result_write_retry_s,
            drain_grace_s=self.drain_grace_s,
            job_max_attempts=attempts,
            queue=queue,
        ).check()

    def operator_key_map(self) -> dict[str, str]:
        """Return {key or "sha256:<hex>": operator name} from GRADEQ_OPERATOR_KEYS."""
        pairs = [p.strip() for p in self.operator_keys.get_secret_value().split(",") if p.strip()]
        mapping = {}
        for pair in pairs:
            name, sep, key = pair.partition("=")
            if not sep or not name or not key:
                raise ValueError("GRADEQ_OPERATOR_KEYS must look like 'alice=key,bob=sha256:...'")
            mapping[key] = name
        return mapping

    def practice_client_set(self) -> frozenset[str]:
        """The schools allowing students' practice jobs (GRADEQ_PRACTICE_CLIENTS)."""
        return frozenset(c.strip() for c in self.practice_clients.split(",") if c.strip())

    def reviewer_key_map(self) -> dict[str, tuple[str, str]]:
        """Return {key or "sha256:<hex>": (client id, reviewer name)} from GRADEQ_REVIEWER_KEYS."""
        pairs = [p.strip() for p in self.reviewer_keys.get_secret_value().split(",") if p.strip()]
        mapping = {}
        for pair in pairs:
            who, sep, key = pair.partition("=")
            client, slash, name = who.partition("/")
            if not sep or not slash or not client or not name or not key:
                raise ValueError(
                    "GRADEQ_REVIEWER_KEYS must look like 'acme/alice=key,acme/bob=sha256:...'"
                )
            mapping[key] = (client, name)
        return mapping

    def upload_limits(self) -> UploadLimits:
        """The limits on uploaded files."""
        return UploadLimits(
            max_file_bytes=self.upload_max_file_bytes,
            max_job_bytes=self.upload_max_job_bytes,
            max_files_per_job=self.upload_max_files_per_job,
            max_archive_entries=self.upload_max_archive_entries,
            max_archive_expanded_bytes=self.upload_max_archive_expanded_bytes,
            max_job_text_bytes=self.upload_max_job_text_bytes,
            max_bytes_per_day=self.upload_max_bytes_per_day,
            url_ttl_s=self.upload_url_ttl_s,
        )

    @property
    def database_path(self) -> Path:
        return self.data_dir / "gradeq.sqlite3"

    def lti_configured(self) -> bool:
        """Whether the intake serves LTI launches (tool URL and sealing key set)."""
        return bool(self.lti_tool_url.strip() and self.lti_secrets_key.get_secret_value())
