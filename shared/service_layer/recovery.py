"""Find jobs the queue can no longer finish and put them back on track.

Cloud Tasks deletes a task after its last attempt and keeps no dead-letter queue, and an
intake can die between storing a job and enqueueing its task. A periodic sweep (Cloud
Scheduler -> worker `/tasks/recover`) finds such jobs by status and age and either
enqueues a fresh task (a new generation, hence a new task name) or, once the replay
budget is spent, fails them for good. Final jobs whose event was never published are
announced.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from shared.config.queues import QueueConfig
from shared.domain.errors import GradeqError
from shared.domain.ids import task_name_for
from shared.domain.job import Job, JobError, JobStatus
from shared.logs import job_context
from shared.ports import Clock, EventPublisher, JobStore, TaskQueue, TaskSpec
from shared.service_layer.completion import announce

log = logging.getLogger(__name__)


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
        queue_config: QueueConfig,
        lease: timedelta,
        max_replays: int = 3,
        batch: int = 100,
    ) -> None:
        self._store = store
        self._queue = queue
        self._publisher = publisher
        self._clock = clock
        self._max_replays = max_replays
        self._batch = batch
        retry = queue_config.retry_config
        # Past these ages the queue cannot be holding a live task for the job any more.
        self._stale = {
            JobStatus.PENDING: queue_config.dispatch_deadline + retry.max_backoff,
            JobStatus.RETRYING: queue_config.dispatch_deadline + retry.max_backoff,
            JobStatus.RUNNING: lease + retry.max_backoff,
        }
        self._unannounced_after = timedelta(minutes=1)

    def sweep(self) -> SweepReport:
        report = SweepReport()
        now = self._clock.now()
        for status, age in self._stale.items():
            for job in self._store.find(status, now - age, self._batch):
                with job_context(job.id):
                    self._recover(job, report)
        for status in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED):
            for job in self._store.find(status, now - self._unannounced_after, self._batch):
                if not job.event_published and not job.lease_is_live(now):
                    with job_context(job.id):
                        self._try(job, report, lambda j: self._announce(j, report))
        return report

    def _recover(self, job: Job, report: SweepReport) -> None:
        if job.status is JobStatus.RUNNING and job.lease_is_live(self._clock.now()):
            return
        if job.generation >= self._max_replays:
            self._try(job, report, lambda j: self._give_up(j, report))
        else:
            self._try(job, report, lambda j: self._replay(j, report))

    def _replay(self, job: Job, report: SweepReport) -> None:
        replayed = self._store.update(job.id, lambda j: j.replay(self._clock.now()))
        self._queue.enqueue(TaskSpec(task_name_for(replayed.id, replayed.generation), replayed.id))
        log.warning("stuck job replayed", extra={"generation": replayed.generation})
        report.replayed.append(job.id)

    def _give_up(self, job: Job, report: SweepReport) -> None:
        error = JobError("retries-exhausted", "the job could not be completed after all retries")
        failed = self._store.update(job.id, lambda j: j.fail(None, error, self._clock.now()))
        log.error("job failed by recovery", extra={"event": "job_failed"})
        report.failed.append(job.id)
        self._announce(failed, report)

    def _announce(self, job: Job, report: SweepReport) -> None:
        announce(job, self._store, self._publisher, self._clock)
        report.announced.append(job.id)

    @staticmethod
    def _try(job: Job, report: SweepReport, action: Callable[[Job], None]) -> None:
        try:
            action(job)
        except GradeqError as exc:
            # A lost race (the job moved on meanwhile) is fine; the next sweep looks again.
            log.info("recovery skipped the job", extra={"reason": exc.detail})
            report.errors.append(job.id)
