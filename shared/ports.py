"""The ports: what the service layer needs from the outside world.

Each port has an embedded adapter (`shared.adapters.embedded`, the `make run` default)
and a Google Cloud adapter (`shared.adapters.google`). Both must pass the same contract
tests in `tests/contract`.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any, Protocol, TypeVar

from shared.domain.admission import ActiveCounts, AdmissionLimits
from shared.domain.api_keys import ApiKey
from shared.domain.assignment import Assignment, Tally
from shared.domain.authorization import Owner
from shared.domain.budgets import Budget, BudgetScope, Charge
from shared.domain.context_cache import ContextCacheRecord
from shared.domain.errors import GradeqError
from shared.domain.events import AssignmentGraded, GradePosted, GradeReviewed, GradingCompleted
from shared.domain.grade import GradeResult
from shared.domain.gradebook import Begin, GradebookHealth, GradeMark, MarkStatus
from shared.domain.gradebook import MarkKey as GradeMarkKey
from shared.domain.job import GradingRequest, Job
from shared.domain.lti import AssignmentLink, LtiRegistration, ToolKey
from shared.domain.status import JobStatus
from shared.domain.webhook_secrets import WebhookSecret

_T = TypeVar("_T")


@dataclass(frozen=True)
class JobQuery:
    """One page of a client's jobs: filters, a page size, and where the last page ended."""

    client_id: str
    limit: int
    status: JobStatus | None = None
    submission_id: str | None = None
    #: (created_at, id) of the last job of the previous page.
    after: tuple[datetime, str] | None = None
    #: Only the jobs of this author within the school (None: every author's).
    author: str | None = None


@dataclass(frozen=True)
class JobFilter:
    """Which jobs an operator lists; every set field must match (created range: [from, to))."""

    status: JobStatus | None = None
    client_id: str | None = None
    assignment_id: str | None = None
    created_from: datetime | None = None
    created_to: datetime | None = None


@dataclass(frozen=True)
class JobCursor:
    """Where a newest-first listing stopped: the last job's creation time and id."""

    created_at: datetime
    job_id: str


@dataclass(frozen=True)
class Admission:
    """What `JobStore.admit` did: the stored job, whether it is new, and the client's count.

    `ahead` is the client's jobs not yet final that this create found (the new job not
    included): the intake spaces the client's tasks by it.
    """

    job: Job
    created: bool
    ahead: int


@dataclass(frozen=True)
class ReviewCursor:
    """Where an oldest-first review queue page stopped: the last job's hold time and id."""

    held_at: str
    job_id: str


class ReviewQueue(Protocol):
    """Reads of the jobs held for review (their writes go through `JobStore.update`)."""

    def held(
        self,
        client_id: str,
        assignment_id: str | None,
        limit: int,
        after: ReviewCursor | None = None,
    ) -> list[Job]:
        """The client's grades waiting for a review, oldest hold first."""
        ...

    def reviewed(self, client_id: str, assignment_id: str | None, limit: int) -> list[Job]:
        """The client's reviewed grades (of one assignment, or all), oldest hold first."""
        ...

    def unannounced(self, limit: int) -> list[Job]:
        """Reviewed jobs whose newest review's events are not marked published (any client)."""
        ...


class JobEraser(Protocol):
    """Removes jobs and what refers to them (docs/review.md#erasure); apart from `JobStore`."""

    def jobs_of_student(self, client_id: str, student_id: str, limit: int) -> list[Job]:
        """The client's jobs whose request names `student_id` (at most `limit`)."""
        ...

    def delete(self, job: Job) -> bool:
        """Delete the final job if it is still as read, moving its assignment round's
        tally back in the same commit; False if it changed meanwhile or is gone."""
        ...

    def forget_events(self, event_ids: list[str]) -> int:
        """Make every subscriber's record of these events a tombstone (TOMBSTONE of
        shared.domain.erasure), and leave one for each of RECORDING_SUBSCRIBERS that has
        none yet, so a later delivery is a duplicate; how many records held more."""
        ...


class JobStore(Protocol):
    """Durable job documents with atomic create-if-absent and read-modify-write."""

    def create(self, job: Job, limits: AdmissionLimits | None = None) -> tuple[Job, bool]:
        """Insert `job` unless its id exists; return (stored job, created?).

        Creating counts the job as not yet final for its client and in total, in the same
        atomic write; with `limits`, a new job past a ceiling raises TooManyActiveJobs or
        BacklogFull and nothing is written (an existing job is returned whatever the
        counts: a retried request is never refused for the job it already made).

        The ceilings are hard: checked in the same atomic write that counts the job, so
        any number of racing creates admits at most a ceiling's worth of jobs (the
        backlog ceiling bounds the jobs admitted under limits; a create without limits
        is counted but not checked).
        """
        ...

    def admit(self, job: Job, limits: AdmissionLimits | None = None) -> Admission:
        """`create`, also answering the client's count of jobs not yet final it found.

        Costs no more round trips than `create` with limits: the count is the one the
        ceiling is checked against.
        """
        ...

    def list_jobs(self, query: JobQuery) -> list[Job]:
        """The client's jobs matching `query`, newest first (created_at, then id, descending).

        At most `query.limit` jobs, starting after `query.after` when given.
        """
        ...

    def active_counts(self, client_id: str) -> ActiveCounts:
        """Jobs not yet final of this client and of everyone, as the counters hold them."""
        ...

    def active_jobs_of(self, client_id: str) -> int:
        """Jobs not yet final of this client, as the counters hold them."""
        ...

    def get(self, job_id: str) -> Job | None:
        """Return the job, or None when the id is unknown."""
        ...

    def update(self, job_id: str, mutate: Callable[[Job], Job]) -> Job:
        """Atomically apply `mutate` to the current job and store its result.

        `mutate` may raise (a domain error): then nothing is written and the error
        propagates. When the job first reaches a final state its client's and the total
        count of jobs not yet final drop by one in the same atomic write. Raises
        `JobNotFound` for an unknown id. `mutate` may be called more than once (the store
        decides again when another writer changed the job first), so it must be pure.
        Concurrent updates of one job never fail each other for contention alone: each
        is decided on the job as the other left it, and the loser of a claim sees
        `JobLocked`. A writer that dies mid-update leaves the job as it was, locked by
        nothing.
        """
        ...

    def reopen(self, job_id: str, mutate: Callable[[Job], Job], limits: AdmissionLimits) -> Job:
        """`update`, admitting under `limits` a change that makes a final job not final.

        Such a change counts the job again (+1) and is checked in the same atomic write,
        as `create` checks a new job: past a ceiling it raises TooManyActiveJobs or
        BacklogFull and nothing is written. Any other change is written as `update` does.
        """
        ...

    def find(
        self,
        status: JobStatus,
        updated_before: datetime,
        limit: int,
        updated_after: datetime | None = None,
        after_id: str | None = None,
    ) -> list[Job]:
        """Jobs in `status` not updated since `updated_before`, oldest first (recovery).

        Ordered by updated_at, then id. To page on, pass the last job's `updated_at` as
        `updated_after` and its id as `after_id`: the next page holds the jobs updated
        later, or at that same moment with a greater id, so jobs that share the last
        job's `updated_at` are not skipped. `updated_after` alone is exclusive: it skips
        every job updated at that moment. `after_id` without `updated_after` is ignored.
        """
        ...

    def find_unannounced(self, updated_before: datetime, limit: int) -> list[Job]:
        """Final jobs whose event is not marked published, not updated since
        `updated_before`, oldest first: answered by the store's query, not by filtering."""
        ...

    def find_jobs(self, where: JobFilter, limit: int, after: JobCursor | None = None) -> list[Job]:
        """Jobs of any client matching `where` (the operator's view), newest first.

        Ordered by created_at, then id, descending.

        `after` pages on from the last job of the previous page. Answered by an indexed
        query that reads at most `limit` jobs.
        """
        ...

    def count_by_status(self, cap: int) -> dict[JobStatus, int]:
        """How many jobs are in each status, each count stopping at `cap`."""
        ...

    def completed_between(self, since: datetime, until: datetime, limit: int) -> list[Job]:
        """Final jobs completed in [since, until), newest first, at most `limit`."""
        ...

    def ping(self) -> None:
        """Raise `DependencyUnavailable` when the store cannot be reached."""
        ...


@dataclass(frozen=True)
class TaskSpec:
    """One Cloud Task: carries only the job id; the name makes it idempotent."""

    name: str
    job_id: str
    schedule_time: datetime | None = None
    #: The lane (a queue of shared/config/queues.json); None: the adapter's default queue.
    queue: str | None = None


class TaskQueue(Protocol):
    """The Cloud Tasks queues (one per lane) whose HTTP target is the worker.

    `queue` arguments name a lane; None is the adapter's default queue.
    """

    def enqueue(self, task: TaskSpec) -> bool:
        """Create the task; True if created, False if the name already exists (success)."""
        ...

    def exists(self, task_name: str, queue: str | None = None) -> bool:
        """Whether the queue still holds this task (to be delivered or retried)."""
        ...

    def pause(self, queue: str | None) -> None:
        """Stop dispatching the queue's tasks; it still accepts new ones (PauseQueue)."""
        ...

    def resume(self, queue: str | None) -> None:
        """Dispatch again, the backlog at the queue's rate limit (ResumeQueue)."""
        ...

    def purge(self, queue: str | None) -> None:
        """Delete every task the queue holds (PurgeQueue); attempts in flight carry on."""
        ...

    def is_paused(self, queue: str | None) -> bool:
        """Whether the queue is paused."""
        ...

    def ping(self) -> None:
        """Raise `DependencyUnavailable` when the queue cannot be reached."""
        ...


class UnitOfWork(Protocol):
    """Groups the writes made through the other ports into one commit, where it can."""

    #: Whether `atomic()` really makes its block one commit (False: each write its own).
    commits_together: bool

    def atomic(self) -> AbstractContextManager[None]:
        """A block whose writes commit together or not at all.

        A backend whose stores cannot share a commit makes each write commit on its own;
        callers must stay correct either way (idempotent task names, publish-then-mark).
        """
        ...


class EventPublisher(Protocol):
    """Publishes domain events durably before returning."""

    def publish(
        self, event: GradingCompleted | AssignmentGraded | GradeReviewed | GradePosted
    ) -> str:
        """Publish and wait until the bus has it; return the bus's message id."""
        ...

    def ping(self) -> None:
        """Raise `DependencyUnavailable` when the bus cannot be reached."""
        ...


class Grader(Protocol):
    """Grades one answer; raises TransientGradingError or PermanentGradingError."""

    name: str

    def grade(self, request: GradingRequest, *, attempt: int, timeout_s: float) -> GradeResult:
        """Return a result within `timeout_s` seconds or raise `GradingTimeout`.

        `attempt` is 1 for the job's first attempt and keeps counting across an operator's
        replays; graders may use it in logs or to pass an idempotency hint to a provider.
        """
        ...


class Clock(Protocol):
    """The time source, so tests can move time."""

    def now(self) -> datetime: ...


class ProcessedEvents(Protocol):
    """What a subscriber has already handled, keyed by the stable event id (dedup)."""

    def add(self, subscriber: str, event_id: str, record: dict[str, object]) -> bool:
        """Record the event as handled; False if it already was (nothing is written)."""
        ...

    def contains(self, subscriber: str, event_id: str) -> bool:
        """Whether the subscriber has handled this event."""
        ...


class EventRecords(Protocol):
    """The records a subscriber stored, read back by the analytics service's local reports.

    Deployed on Google Cloud, analytics is a BigQuery subscription and nothing reads this.
    """

    def records(self, subscriber: str) -> list[dict[str, Any]]:
        """Every record the subscriber stored, oldest first."""
        ...


class ApiKeyStore(Protocol):
    """Issued API keys by key id, stored as digests (never the key itself)."""

    def add(self, key: ApiKey) -> None:
        """Store a newly issued key; its key id must be new."""
        ...

    def get(self, key_id: str) -> ApiKey | None:
        """The key with this id, or None."""
        ...

    def list(self, client_id: str | None = None) -> list[ApiKey]:
        """Every key (of one client), oldest first."""
        ...

    def revoke(self, key_id: str, now: datetime) -> ApiKey:
        """Mark the key revoked at `now` (kept for audit); raise ApiKeyNotFound if unknown."""
        ...


class AssignmentStore(Protocol):
    """Assignments, their rounds' tallies (kept by the job store's writes) and the record
    of each round's one AssignmentGraded event."""

    def create(self, assignment: Assignment) -> tuple[Assignment, bool]:
        """Insert unless the id exists; return (stored assignment, created?)."""
        ...

    def get(self, assignment_id: str) -> Assignment | None:
        """The assignment, or None when the id is unknown."""
        ...

    def list_of(
        self, client_id: str, limit: int, after: tuple[datetime, str] | None = None
    ) -> list[Assignment]:
        """The client's assignments, newest first (created_at, then id, descending)."""
        ...

    def update(self, assignment_id: str, mutate: Callable[[Assignment], Assignment]) -> Assignment:
        """Atomically apply `mutate` (pure; it may run again on contention) and store it."""
        ...

    def tally(self, assignment_id: str, round_: int) -> Tally:
        """The round's counters, read in a constant number of reads whatever its size."""
        ...

    def record_graded(self, event: AssignmentGraded) -> bool:
        """Record the round's event unless one with its id exists; True if this call did.

        One caller wins however many race; the event is then published by the winner,
        or by the sweep (`unpublished_graded`) should the winner die first.
        """
        ...

    def mark_graded_published(self, event_id: str) -> None:
        """Note that the event reached the bus."""
        ...

    def waiting_regrades(self, limit: int) -> list[Assignment]:
        """Assignments of any client whose regrade waits for room (`regrade_waiting`),
        at most `limit`: answered by the store's query, not by filtering."""
        ...

    def unpublished_graded(self, limit: int) -> list[AssignmentGraded]:
        """Recorded events not yet marked published, oldest first."""
        ...

    def ping(self) -> None:
        """Raise `DependencyUnavailable` when the store cannot be reached."""
        ...


@dataclass(frozen=True)
class BatchCreated:
    """What `create_many` did: each job's (stored job, created?) in the order given, and
    the ceiling's error when it refused some (those answer (None, False))."""

    items: list[tuple[Job | None, bool]]
    refusal: GradeqError | None = None


class JobBatchWriter(Protocol):
    """Creates many jobs (all of one client) in as few commits as the backend allows."""

    def create_many(self, jobs: list[Job], limits: AdmissionLimits | None = None) -> BatchCreated:
        """Insert each job unless its id exists; (stored job, created?) in the same order.

        Counts each new job as `JobStore.create` does, in the same commits. With `limits`,
        new jobs are admitted in order while both ceilings have room, checked in the
        commits that count them (as `JobStore.create` checks one), so racing batches
        and creates never pass a ceiling together; a job past it is not stored and
        answers (None, False). An existing job is returned whatever the counts.
        """


class WebhookSecretStore(Protocol):
    """Clients' webhook signing secrets by secret id, stored sealed (never in plain text)."""

    def add(self, secret: WebhookSecret) -> None:
        """Store a newly issued secret; its secret id must be new."""
        ...

    def list(self, client_id: str | None = None) -> list[WebhookSecret]:
        """Every secret (of one client), expired ones included, oldest first."""
        ...

    def expire(self, secret_id: str, at: datetime) -> WebhookSecret:
        """Let the secret sign until `at` (an earlier expiry stays); raise
        WebhookSecretNotFound if unknown."""
        ...


class LtiStore(Protocol):
    """Schools' LTI 1.3 platform registrations and Gradeq's own LTI signing keys (sealed)."""

    def put_registration(self, registration: LtiRegistration) -> None:
        """Store a registration, replacing the one of the same (issuer, client id)."""
        ...

    def registration(self, issuer: str, client_id: str) -> LtiRegistration | None:
        """The registration of (issuer, client id), if any."""
        ...

    def registrations(self, school: str | None = None) -> list[LtiRegistration]:
        """Every registration (of one school), by issuer then client id."""
        ...

    def add_key(self, key: ToolKey) -> None:
        """Store a new signing key; its kid must be new."""
        ...

    def tool_keys(self) -> list[ToolKey]:
        """Every signing key, expired ones included, oldest first."""
        ...

    def expire_key(self, kid: str, at: datetime) -> ToolKey:
        """Publish the key until `at` (an earlier expiry stays); raise ToolKeyNotFound if
        unknown."""
        ...

    def put_link(self, link: AssignmentLink) -> None:
        """Store where an assignment lives in its LMS, replacing the former record; a line
        item already known stays when `link` names none."""
        ...

    def link(self, school: str, assignment_id: str) -> AssignmentLink | None:
        """Where the assignment lives in its LMS, if a launch told."""
        ...


@dataclass(frozen=True)
class SignedUpload:
    """A URL a browser PUTs one file to, and the headers it must send with it."""

    url: str
    headers: dict[str, str]
    expires_at: datetime


@dataclass(frozen=True)
class BlobInfo:
    """What the blob store holds under one name."""

    size: int
    content_type: str
    #: The school and author the upload was made for (None: stored before uploads named
    #: their owner).
    owner: Owner | None = None


@dataclass(frozen=True)
class StoredUpload:
    """One stored upload as the expiry sees it: its name, owner and when it was stored."""

    name: str
    owner: Owner | None
    stored_at: datetime


class ExpiringBlobs(Protocol):
    """A blob store that lists its uploads by age (the embedded one; Cloud Storage expires
    them by the bucket's lifecycle rule)."""

    def stored_before(self, cutoff: datetime) -> list[StoredUpload]:
        """The uploads stored before `cutoff`."""
        ...

    def delete(self, names: list[str]) -> None: ...


class UploadQuota(Protocol):
    """The bytes each client's uploads may hold per UTC day, counted when a URL is issued."""

    def reserve(self, client_id: str, day: date, size: int, limit: int) -> bool:
        """Count `size` more bytes for the client on `day` unless the day's count would
        pass `limit`; whether they were counted (atomic: racing calls never pass it)."""
        ...


class BudgetStore(Protocol):
    """Monthly budgets per client and per assignment, and each finished grading's cost
    counted against them once."""

    def set_budget(self, budget: Budget) -> None:
        """Create or replace the budget of `budget.scope` and `budget.key`."""
        ...

    def remove_budget(self, scope: BudgetScope, key: str) -> bool:
        """Remove a budget; whether there was one."""
        ...

    def budgets(self) -> list[Budget]:
        """Every budget, by scope then key."""
        ...

    def charge(self, charge: Charge) -> bool:
        """Count a grading's cost against its client's and assignment's month, once per
        job id (a second charge of the same job counts nothing); whether it counted now."""
        ...

    def spent(self, scope: BudgetScope, key: str, month: str) -> int:
        """What the client or assignment spent in `month` ("YYYY-MM"), micro-dollars."""
        ...

    def daily_spend(self, month: str) -> dict[str, dict[str, int]]:
        """Each client's spend per UTC day of `month`: {client: {"YYYY-MM-DD": micros}}."""
        ...


class ContextCacheRecords(Protocol):
    """Which explicit provider context caches exist, so each is made once across workers."""

    def get(self, key: str) -> ContextCacheRecord | None: ...

    def claim(self, record: ContextCacheRecord) -> bool:
        """Store `record` unless one with its key exists; whether it was stored."""
        ...

    def replace(self, old: ContextCacheRecord, new: ContextCacheRecord) -> bool:
        """Replace `old` by `new` if the stored record is still `old`; whether it was."""
        ...

    def of_assignment(self, assignment_id: str) -> list[ContextCacheRecord]: ...

    def remove(self, key: str) -> None: ...


class QuotaLedger(Protocol):
    """The provider quota every worker instance shares: one small state per provider model,
    changed atomically (see `shared/adapters/graders/quota_pool.py`)."""

    def change(
        self, key: str, change: Callable[[dict[str, Any] | None], tuple[dict[str, Any], _T]]
    ) -> _T:
        """Apply `change` to the stored state (None: none yet), store what it returns
        first and answer the second; a racing change makes it run again on the new state."""
        ...

    def read(self, key: str) -> dict[str, Any] | None:
        """The stored state, or None."""
        ...


class UploadReferences(Protocol):
    """Which uploaded files accepted jobs name: a file is deleted only when none does."""

    def named_by_a_job(self, client_id: str, name: str) -> bool:
        """Whether a stored job of the client names the object `name` among its files."""
        ...


class BlobStore(Protocol):
    """Uploaded files: signed URLs for direct PUTs, then bounded reads by the services."""

    def signed_put(
        self,
        name: str,
        content_type: str,
        size: int,
        expires_at: datetime,
        owner: Owner | None = None,
    ) -> SignedUpload:
        """A URL that accepts one PUT of exactly `size` bytes of `content_type` at `name`
        until `expires_at`; anything else sent to it is refused by the store. The object
        keeps `owner` (its school and author) in its metadata, bound by the URL too."""
        ...

    def stat(self, name: str) -> BlobInfo | None:
        """The stored object's size and content type, or None when there is none."""
        ...

    def read(self, name: str, max_bytes: int) -> bytes:
        """At most the first `max_bytes` bytes of the object (raise KeyError if absent)."""
        ...

    def uri(self, name: str) -> str:
        """How a model provider reaches the object in place (gs://bucket/name), or ""."""
        ...

    def delete(self, names: list[str]) -> None:
        """Remove these objects; names already gone are ignored."""
        ...

    def delete_under(self, prefix: str) -> list[str]:
        """Remove every object whose name starts with `prefix` (a folder, ending in "/");
        answer their names."""
        ...


class GradebookMarks(Protocol):
    """The gradebook subscriber's memory: a high-water mark per (school, assignment,
    student) with a short write lease, and each school's gradebook health. Each method is
    one atomic read-modify-write."""

    def begin(
        self, key: GradeMarkKey, version: int, holder: str, now: datetime, lease: timedelta
    ) -> Begin: ...

    def finish(
        self,
        key: GradeMarkKey,
        version: int,
        holder: str,
        status: MarkStatus,
        detail: str | None,
        at: datetime,
    ) -> GradeMark: ...

    def release(self, key: GradeMarkKey, holder: str) -> None: ...

    def mark(self, key: GradeMarkKey) -> GradeMark | None: ...

    def rejected(self, school: str | None = None) -> list[GradeMark]:
        """The marks whose latest version the gradebook refused, oldest first."""
        ...

    def record_success(self, school: str, at: datetime) -> tuple[GradebookHealth, GradebookHealth]:
        """Record a write the LMS answered; the school's health (before, after)."""
        ...

    def record_busy(
        self, school: str, at: datetime, error: str, retry_after_s: float | None
    ) -> GradebookHealth: ...

    def health(self) -> list[GradebookHealth]:
        """Every school's gradebook health, by school."""
        ...
