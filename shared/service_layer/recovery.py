"""Find jobs the queue can no longer finish and put them back on track.

Cloud Tasks deletes a task after its last attempt and keeps no dead-letter queue, and an
intake can die between storing a job and enqueueing its task. A periodic sweep (Cloud
Scheduler -> worker `/tasks/recover`) finds such jobs by status and age and either
enqueues a fresh task (a new generation, hence a new task name) or, once the replay
or attempt budget is spent, fails them for good. Final jobs whose event was never
published are announced.

A job whose lane is paused is left alone: its task waits in the paused queue.
A job is replayed only when the queue no longer holds its current task (task names are
deterministic, so the sweep asks the queue): a job waiting in a deep backlog is left to
its task. Replays keep the job's attempt count, so they never grant a fresh budget; the
replay budget counts from an operator's last replay of the job (`Job.recovery_replays`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TypeVar

from shared.config.budget import Budget
from shared.domain.errors import GradeqError
from shared.domain.job import Job, JobError
from shared.domain.status import JobStatus
from shared.logs import job_context
from shared.ports import Clock, EventPublisher, JobStore, TaskQueue, TaskSpec
from shared.service_layer.assignment_completion import AssignmentCompletion
from shared.service_layer.completion import announce
from shared.service_layer.review import ReviewService

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass
class SweepReport:
    """What one sweep did, by job id."""

    replayed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    announced: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, list[str]]:
        return {
            "replayed": self.replayed,
            "failed": self.failed,
            "announced": self.announced,
            "errors": self.errors,
        }


class RecoveryService:
    """Replays stuck jobs and announces unannounced final ones."""

    def __init__(
        self,
        store: JobStore,
        queue: TaskQueue,
        publisher: EventPublisher,
        clock: Clock,
        budget: Budget,
        max_replays: int = 3,
        batch: int = 100,
        max_scan: int = 2000,
        assignments: AssignmentCompletion | None = None,
        reviews: ReviewService | None = None,
        regrades: Callable[[], object] | None = None,
        batches: Callable[[], object] | None = None,
    ) -> None:
        # Submits due provider batches and fans out the ended ones (docs/graders.md#batch-mode).
        self._batches = batches
        # Resumes the regrades waiting for room under the ceilings (`Regrader.resume_waiting`).
        self._regrades = regrades
        self._assignments = assignments
        # Reviews whose events a crash left unpublished (docs/review.md).
        self._reviews = reviews
        self._store = store
        self._queue = queue
        self._publisher = publisher
        self._clock = clock
        self._max_replays = max_replays
        self._max_attempts = budget.job_max_attempts
        self._batch = batch
        self._max_scan = max_scan
        # Younger jobs are still in the intake's or a delivery's hands.
        self._stale = budget.sweep_stale
        self._unannounced_after = timedelta(minutes=1)
        # Lanes found paused in the current sweep: their queued jobs are left alone.
        self._paused_lanes: dict[str | None, bool] = {}

    def sweep(self) -> SweepReport:
        report = SweepReport()
        self._paused_lanes = {}
        now = self._clock.now()
        for status in (JobStatus.PENDING, JobStatus.RETRYING, JobStatus.RUNNING):
            for job in self._stale_jobs(status, now - self._stale):
                with job_context(job.id):
                    self._recover(job, report)
        # Announcing takes a job out of this query, so asking again pages on.
        seen: set[str] = set()
        while len(seen) < self._max_scan:
            page = [
                j
                for j in self._store.find_unannounced(now - self._unannounced_after, self._batch)
                if j.id not in seen
            ]
            for job in page:
                seen.add(job.id)
                if not job.lease_is_live(now):
                    with job_context(job.id):
                        self._try(job, report, lambda j: self._announce(j, report))
            if len(page) < self._batch or not report.announced:
                break
        if self._assignments is not None:
            report.announced.extend(self._assignments.sweep(self._batch))
        if self._reviews is not None:
            report.announced.extend(self._reviews.sweep(self._batch))
        if self._regrades is not None:
            try:
                self._regrades()
            except GradeqError:
                log.warning("waiting regrades not resumed; the next sweep tries again")
        if self._batches is not None:
            try:
                self._batches()
            except GradeqError:
                log.warning("provider batches not ticked; the next sweep tries again")
        return report

    def _stale_jobs(self, status: JobStatus, before: datetime) -> Iterator[Job]:
        """Every job in `status` older than `before`, in pages, up to the scan limit."""
        after: datetime | None = None
        after_id: str | None = None
        scanned = 0
        while scanned < self._max_scan:
            page = self._store.find(
                status, before, self._batch, updated_after=after, after_id=after_id
            )
            yield from page
            scanned += len(page)
            if len(page) < self._batch:
                return
            after, after_id = page[-1].updated_at, page[-1].id

    def _recover(self, job: Job, report: SweepReport) -> None:
        if job.status is JobStatus.RUNNING and job.lease_is_live(self._clock.now()):
            return
        if self._try(job, report, self._paused) is not False:
            return  # its lane is paused (or could not be asked): its task waits there
        exists = self._try(job, report, lambda j: self._queue.exists(self._task_name(j), j.lane))
        if exists is not False:
            return  # the queue still holds its task (or could not be asked): leave it be
        if job.recovery_replays >= self._max_replays or job.attempts >= self._max_attempts:
            self._try(job, report, lambda j: self._give_up(j, report))
        else:
            self._try(job, report, lambda j: self._replay(j, report))

    def _paused(self, job: Job) -> bool:
        """Whether the job's lane is paused (asked once per lane and sweep)."""
        if job.lane not in self._paused_lanes:
            self._paused_lanes[job.lane] = self._queue.is_paused(job.lane)
        return self._paused_lanes[job.lane]

    @staticmethod
    def _task_name(job: Job) -> str:
        return job.task_name

    def _replay(self, job: Job, report: SweepReport) -> None:
        now = self._clock.now()
        replayed = self._store.update(job.id, lambda j: j.replay(now))
        # A scheduled job's new task still waits for its not_before.
        scheduled = replayed.request.scheduled_for
        at = scheduled if scheduled is not None and scheduled > now else now
        self._queue.enqueue(
            TaskSpec(self._task_name(replayed), replayed.id, at, queue=replayed.lane)
        )
        log.warning("stuck job replayed", extra={"generation": replayed.generation})
        report.replayed.append(job.id)

    def _give_up(self, job: Job, report: SweepReport) -> None:
        error = JobError("retries-exhausted", "the job could not be completed after all retries")
        failed = self._store.update(job.id, lambda j: j.fail(None, error, self._clock.now()))
        log.error("job failed by recovery", extra={"event": "job_failed"})
        report.failed.append(job.id)
        self._announce(failed, report)

    def _announce(self, job: Job, report: SweepReport) -> None:
        on_final = self._assignments.on_final if self._assignments else None
        announce(job, self._store, self._publisher, self._clock, on_final)
        report.announced.append(job.id)

    @staticmethod
    def _try(job: Job, report: SweepReport, action: Callable[[Job], T]) -> T | None:
        try:
            return action(job)
        except GradeqError as exc:
            # A lost race (the job moved on meanwhile) is fine; the next sweep looks again.
            log.info("recovery skipped the job", extra={"reason": exc.detail})
            report.errors.append(job.id)
            return None
