"""The composition root: build what each service needs, from the settings.

Clients and connections are made here when an app factory runs, never at import time.
Each service asks for its own ports only: a subscriber builds a processed-events store and
nothing else. Adapters never import this package; it imports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Protocol

from shared.clock import SystemClock
from shared.config.settings import Backend, Settings
from shared.ports import (
    ApiKeyStore,
    AssignmentStore,
    BlobStore,
    BudgetStore,
    Clock,
    ContextCacheRecords,
    EventPublisher,
    EventRecords,
    GradebookMarks,
    Grader,
    JobBatchWriter,
    JobEraser,
    JobStore,
    LtiStore,
    ProcessedEvents,
    QuotaLedger,
    ReviewQueue,
    TaskQueue,
    UnitOfWork,
    UploadQuota,
    UploadReferences,
    WebhookSecretStore,
)

if TYPE_CHECKING:
    from shared.service_layer.budgets import BudgetGate


class AdapterFamily(Protocol):
    """One backend's adapters, each built on first use and shared after."""

    def job_store(self) -> JobStore: ...

    def task_queue(self) -> TaskQueue: ...

    def event_publisher(self) -> EventPublisher: ...

    def processed_events(self) -> ProcessedEvents: ...

    def event_records(self) -> EventRecords: ...

    def api_key_store(self) -> ApiKeyStore: ...

    def webhook_secret_store(self) -> WebhookSecretStore: ...

    def gradebook_marks(self) -> GradebookMarks: ...

    def unit_of_work(self) -> UnitOfWork: ...

    def assignment_store(self) -> AssignmentStore: ...

    def review_queue(self) -> ReviewQueue: ...

    def job_eraser(self) -> JobEraser: ...

    def upload_references(self) -> UploadReferences: ...

    def upload_quota(self) -> UploadQuota: ...

    def budget_store(self) -> BudgetStore: ...

    def context_cache_records(self) -> ContextCacheRecords: ...

    def lti_store(self) -> LtiStore: ...

    def quota_ledger(self) -> QuotaLedger: ...

    def job_batch(self) -> JobBatchWriter: ...

    #: Task creations in flight at once for one batch (1: one after another, in-thread).
    enqueue_parallelism: int

    def blob_store(self, clock: Clock | None = None) -> BlobStore: ...


@dataclass(frozen=True)
class Adapters:
    """The ports the intake and the worker use."""

    store: JobStore
    queue: TaskQueue
    publisher: EventPublisher
    #: Groups their writes into one commit where the backend can (None: each on its own).
    uow: UnitOfWork | None = None
    #: Assignments and batched job creation (None: the assignments API is not served).
    assignments: AssignmentStore | None = None
    batch: JobBatchWriter | None = None
    enqueue_parallelism: int = 1
    #: Monthly budgets and the spend counted against them (None: no budgets apply).
    budgets: BudgetStore | None = None


def adapter_family(settings: Settings) -> AdapterFamily:
    """The embedded (SQLite) or the Google Cloud family, as the settings choose."""
    if settings.backend is Backend.GOOGLE:
        from shared.bootstrap.google import GoogleFamily

        return GoogleFamily(settings)
    from shared.bootstrap.embedded import EmbeddedFamily

    return EmbeddedFamily(settings)


def build_adapters(settings: Settings) -> Adapters:
    """The job store, task queue and event publisher of the configured backend."""
    return family_adapters(adapter_family(settings))


def family_adapters(family: AdapterFamily) -> Adapters:
    """Every port the intake and the worker use, from one family."""
    return Adapters(
        family.job_store(),
        family.task_queue(),
        family.event_publisher(),
        family.unit_of_work(),
        family.assignment_store(),
        family.job_batch(),
        family.enqueue_parallelism,
        family.budget_store(),
    )


def build_clock() -> Clock:
    return SystemClock()


def build_budget_gate(settings: Settings, adapters: Adapters, clock: Clock) -> BudgetGate | None:
    """The budgets as the intake and the worker apply them (None: no budget store), read
    again every GRADEQ_BUDGET_REFRESH_S, a held job looked at every
    GRADEQ_BUDGET_HOLD_RECHECK_S."""
    if adapters.budgets is None:
        return None
    from shared.service_layer.budgets import BudgetGate

    return BudgetGate(
        adapters.budgets,
        clock,
        refresh=timedelta(seconds=settings.budget_refresh_s),
        hold_recheck=timedelta(seconds=settings.budget_hold_recheck_s),
    )


def build_grader(settings: Settings, clock: Clock | None = None) -> Grader:
    """The grader named by GRADEQ_GRADER (a model's retirement date is read on `clock`)."""
    from shared.bootstrap.graders import grader_for

    return grader_for(settings, clock)
