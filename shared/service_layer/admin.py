"""The operator's side of the queue: list jobs, replay dead letters, cancel.

A dead letter is a FAILED job. Replaying it is a new task generation with a fresh attempt
budget (`Job.replay_failed`); the replay is idempotent for an operator who names the
generation they saw failing: asking again once the job has moved past it changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from shared.domain.errors import GradeqError, JobNotFound
from shared.domain.ids import task_name_for
from shared.domain.job import Job
from shared.domain.status import JobStatus
from shared.logs import job_context
from shared.ports import Clock, EventPublisher, JobCursor, JobFilter, JobStore, TaskQueue, TaskSpec
from shared.service_layer.completion import announce

log = logging.getLogger(__name__)

#: The most jobs one listing page or one batch replay handles.
MAX_PAGE = 100
#: Why a batch replay left out a job another replay had just put back on the queue.
ALREADY_REPLAYED = "already-replayed"


@dataclass(frozen=True)
class JobPage:
    """One page of a listing and where the next one starts (None: this was the last)."""

    jobs: list[Job]
    next_cursor: JobCursor | None


@dataclass(frozen=True)
class Replay:
    """A replay request's outcome: the job as it now is, and whether this call replayed it."""

    job: Job
    replayed: bool


@dataclass
class BatchReplay:
    """What a batch replay did, by job id."""

    replayed: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


class GenerationMismatch(GradeqError):
    slug = "generation-mismatch"
    title = "The job is not at the generation asked to replay"
    status = 409

    def __init__(self, job: Job, generation: int) -> None:
        super().__init__(
            f"job {job.id} is at generation {job.generation}, not {generation}",
            generation=job.generation,
        )


class _MovedOn(GradeqError):
    """The job left the generation the operator asked to replay (already replayed)."""


class AdminService:
    """Operator use cases over the job store and the queue."""

    def __init__(
        self,
        store: JobStore,
        queue: TaskQueue,
        publisher: EventPublisher,
        clock: Clock,
        on_final: Callable[[Job], None] | None = None,
    ) -> None:
        self._on_final = on_final
        self._store = store
        self._queue = queue
        self._publisher = publisher
        self._clock = clock

    def list_jobs(self, where: JobFilter, limit: int, after: JobCursor | None = None) -> JobPage:
        """One newest-first page of jobs matching `where` (at most MAX_PAGE)."""
        limit = max(1, min(limit, MAX_PAGE))
        jobs = self._store.find_jobs(where, limit, after)
        last = jobs[-1] if len(jobs) == limit else None
        return JobPage(jobs, JobCursor(last.created_at, last.id) if last else None)

    def dead_letters(self, where: JobFilter, limit: int, after: JobCursor | None = None) -> JobPage:
        """Failed jobs (with their attempt histories), newest first."""
        return self.list_jobs(replace(where, status=JobStatus.FAILED), limit, after)

    def get(self, job_id: str) -> Job:
        job = self._store.get(job_id)
        if job is None:
            raise JobNotFound(f"no grading job {job_id}")
        return job

    def replay(self, job_id: str, by: str, generation: int | None = None) -> Replay:
        """Replay a failed job; with `generation`, only the failure of that generation.

        Asking again for a generation already replayed answers the job as it is, so a
        retried request never makes a second generation. The task of the job's current
        generation is (re)created either way: the queue dedupes it by name, and a replay
        whose enqueue failed is completed by the retry.
        """
        with job_context(job_id):
            job = self.get(job_id)
            if generation is not None and job.generation != generation:
                return self._already_replayed(job, generation)

            def mutate(current: Job) -> Job:
                if generation is not None and current.generation != generation:
                    raise _MovedOn(f"job {job_id} moved past generation {generation}")
                return current.replay_failed(self._clock.now(), by)

            try:
                replayed = self._store.update(job_id, mutate)
            except _MovedOn:
                assert generation is not None
                return self._already_replayed(self.get(job_id), generation)
            self._enqueue(replayed)
            log.warning(
                "failed job replayed by an operator",
                extra={"by": by, "generation": replayed.generation},
            )
            return Replay(replayed, True)

    def _already_replayed(self, job: Job, generation: int) -> Replay:
        if not any(r.generation == generation + 1 for r in job.replays):
            raise GenerationMismatch(job, generation)
        if job.status is JobStatus.PENDING:
            self._enqueue(job)
        return Replay(job, False)

    def _enqueue(self, job: Job) -> None:
        self._queue.enqueue(TaskSpec(task_name_for(job.id, job.generation), job.id, queue=job.lane))

    def replay_failed(self, where: JobFilter, by: str, limit: int) -> BatchReplay:
        """Replay the newest failed jobs matching `where`, at most `limit` (<= MAX_PAGE)."""
        page = self.dead_letters(where, limit)
        outcome = BatchReplay()
        for job in page.jobs:
            try:
                replay = self.replay(job.id, by, job.generation)
            except GradeqError as exc:
                outcome.skipped[job.id] = exc.slug
                continue
            if replay.replayed:
                outcome.replayed.append(job.id)
            else:
                outcome.skipped[job.id] = ALREADY_REPLAYED
        return outcome

    def cancel(self, job_id: str) -> Job:
        """Cancel any unfinished job and announce it like every final state."""
        with job_context(job_id):
            self.get(job_id)
            job = self._store.update(job_id, lambda j: j.cancel(self._clock.now()))
            log.warning("job cancelled by an operator")
            return announce(job, self._store, self._publisher, self._clock, self._on_final)
