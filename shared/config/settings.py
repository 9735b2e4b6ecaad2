"""One typed, frozen settings object, read from `GRADEQ_*` environment variables once.

Every variable is listed in the README's configuration table. Tests build `Settings`
directly instead of touching the environment.
"""

from __future__ import annotations

import os
from datetime import timedelta
from enum import StrEnum
from pathlib import Path

from pydantic import Field, PrivateAttr, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.config.queues import DEFAULT_QUEUES_FILE, QueueConfig, load_queues

_EMULATOR_VARIABLES = ("FIRESTORE_EMULATOR_HOST", "PUBSUB_EMULATOR_HOST")


class Backend(StrEnum):
    EMBEDDED = "embedded"
    GOOGLE = "google"


class PushAuth(StrEnum):
    """How the worker and subscribers authenticate pushes from the queue and the bus."""

    OIDC = "oidc"  # Google-signed ID token (production)
    SHARED_TOKEN = "shared-token"  # noqa: S105 - a bearer secret shared with the local dispatcher/bus
    NONE = "none"  # only against the emulators: the Pub/Sub emulator pushes without a token


class Settings(BaseSettings):
    """Gradeq configuration."""

    model_config = SettingsConfigDict(env_prefix="GRADEQ_", frozen=True, extra="ignore")

    backend: Backend = Backend.EMBEDDED
    data_dir: Path = Path("data")
    queues_file: Path = DEFAULT_QUEUES_FILE
    queue: str = "grading"

    # Where the queue delivers tasks: the worker's base URL (also the OIDC audience).
    worker_url: str = "http://127.0.0.1:8081"
    retry_after_s: int = Field(default=2, ge=1)
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
    # How long one call waits for a busy or unreachable store before the request answers 503.
    store_wait_s: float = Field(default=10.0, gt=0)

    # Worker behaviour.
    grader: str = "rubric"
    grader_timeout_s: float = Field(default=540.0, gt=0)
    lease_margin_s: float = Field(default=30.0, ge=0)
    grader_latency_s: float = Field(default=0.5, ge=0)

    # Push authentication for /tasks/* and /pubsub/*.
    push_auth: PushAuth = PushAuth.SHARED_TOKEN
    push_token: SecretStr = SecretStr("")
    push_audience: str = ""
    push_service_accounts: str = ""

    # Web frontends' Firebase ID tokens: accepted when the Firebase project is set. A token
    # names its client in this custom claim, or else by its Identity Platform tenant
    # ("tenant_id=client_id" pairs, comma-separated).
    firebase_project_id: str = ""
    firebase_client_claim: str = "gradeq_client"
    firebase_tenant_clients: str = ""

    # Clients whose API keys may read the analytics service's reports, comma-separated.
    analytics_readers: str = ""

    # Browser origins allowed to call the intake (CORS), comma-separated; none by default.
    cors_origins: str = ""

    # Callback URLs: loopback targets are refused unless this is set (local runs only).
    callback_allow_loopback: bool = False

    # Notification subscriber.
    webhook_secret: SecretStr = SecretStr("")
    webhook_timeout_s: float = Field(default=10.0, gt=0)

    # Google Cloud.
    project_id: str = ""
    location: str = "europe-west1"
    tasks_service_account: str = ""
    firestore_database: str = "(default)"
    jobs_collection: str = "grading_jobs"
    # Counters of jobs not yet final (per client, and the backlog's shards).
    counters_collection: str = "grading_job_counters"
    # Server clients' API keys (digests only), managed with `python -m services.intake.keys`.
    api_keys_collection: str = "api_keys"
    # Shared with terraform's TTL policy (var.processed_events_collection).
    processed_events_collection: str = "processed_events"
    topic: str = "grading-completed"
    job_ttl_days: int = Field(default=30, ge=1)

    log_level: str = "INFO"

    _queues: dict[str, QueueConfig] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> Settings:
        if self.backend is Backend.GOOGLE and not self.project_id:
            raise ValueError("GRADEQ_PROJECT_ID is required with GRADEQ_BACKEND=google")
        emulated = any(os.environ.get(v) for v in _EMULATOR_VARIABLES)
        if self.push_auth is not PushAuth.OIDC and self.backend is Backend.GOOGLE and not emulated:
            raise ValueError(f"GRADEQ_PUSH_AUTH={self.push_auth} is for local runs; use oidc")
        if self.callback_allow_loopback and self.backend is Backend.GOOGLE and not emulated:
            raise ValueError("GRADEQ_CALLBACK_ALLOW_LOOPBACK is for local runs only")
        if self.push_auth is PushAuth.NONE and not emulated:
            raise ValueError("GRADEQ_PUSH_AUTH=none is only allowed against the emulators")
        self._queues = load_queues(self.queues_file)
        if self.queue not in self._queues:
            raise ValueError(f"queue {self.queue!r} is not defined in {self.queues_file}")
        deadline = self.queue_config().dispatch_deadline.total_seconds()
        if self.grader_timeout_s >= deadline:
            raise ValueError(
                f"GRADEQ_GRADER_TIMEOUT_S ({self.grader_timeout_s}) must be below the "
                f"queue's dispatch_deadline ({deadline}s)"
            )
        return self

    def firebase_tenant_client_map(self) -> dict[str, str]:
        """{tenant id: client id} from GRADEQ_FIREBASE_TENANT_CLIENTS."""
        mapping = {}
        for pair in (p.strip() for p in self.firebase_tenant_clients.split(",") if p.strip()):
            tenant, sep, client = pair.partition("=")
            if not sep or not tenant.strip() or not client.strip():
                raise ValueError("GRADEQ_FIREBASE_TENANT_CLIENTS looks like 'tenant=client,...'")
            mapping[tenant.strip()] = client.strip()
        return mapping

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

    def fair_spacing(self) -> timedelta:
        """How far apart one client's queued jobs are scheduled."""
        if self.fair_spacing_s is not None:
            return timedelta(seconds=self.fair_spacing_s)
        rate = self.queue_config().rate_limits.max_dispatches_per_second
        return timedelta(seconds=1 / rate)

    def queue_config(self) -> QueueConfig:
        return self._queues[self.queue]

    @property
    def database_path(self) -> Path:
        return self.data_dir / "gradeq.sqlite3"
