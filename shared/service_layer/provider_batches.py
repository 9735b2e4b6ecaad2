"""Batch mode: gather work that may wait into provider batches, poll them, fan answers out.

A job that may wait (its lane is a batch lane, it is an assignment's regrade, or its
request says `"deadline": "hours"`) is claimed by its delivery as usual (one attempt of
its budget) and then handed to the next batch (`Job.enter_batch`): the delivery is
acknowledged and the job stays RUNNING under a lease that outlasts the gathering.

Every tick of the recovery sweep (Cloud Scheduler, not a sleeping worker):
1. gathered jobs are reserved (`Job.submit_batch` with a token, a conditional write, so
   two ticks never submit one job twice), sent as one provider batch once `max_size` of
   them wait or the oldest waited `window`, then marked with the provider's batch id and
   a lease that outlasts the provider's 24-hour completion window;
2. each submitted batch the jobs name is asked for its state; once it ended, each job's
   answer is stored as its attempt's success and announced through the worker's own
   outcome path (one commit with its event where the backend allows), and every job
   without a usable answer (a failed, expired or cancelled batch, or a request's own
   error) returns to its queue on a new task, graded one request at a time.

A job answered twice (two ticks reading one batch) finishes once: the second write finds
it final. A tick that dies between the provider's batch and the jobs' marks leaves them
reserved; their lease runs out and the recovery sweep replays them (the batch's answers
are then refused).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from shared.domain.errors import GradeqError, GradingError
from shared.domain.grade import GradeResult
from shared.domain.job import DEADLINE_HOURS, GradingRequest, Job, JobError
from shared.domain.status import JobStatus
from shared.logs import job_context
from shared.ports import Clock, JobStore, TaskQueue, TaskSpec, UnitOfWork

log = logging.getLogger(__name__)

#: The batch id of jobs a tick reserved but has not yet submitted.
RESERVED = "reserved/"
#: The providers' completion window (OpenAI: "24h"; Gemini: 24 hours), and a margin.
COMPLETION_WINDOW = timedelta(hours=24)
LEASE_MARGIN = timedelta(hours=2)


class BatchAnswers(Protocol):
    """What a provider batch tells about each request, by key (`BatchStatus`)."""

    @property
    def state(self) -> str: ...

    @property
    def answers(self) -> Mapping[str, object]: ...


class ProviderBatchGrader(Protocol):
    """A provider's batches (`shared.adapters.graders.provider_batch.BatchGrader`)."""

    provider: str

    def render(self, request: GradingRequest) -> object: ...

    def submit(self, requests: dict[str, object], name: str) -> str: ...

    def status(self, batch_id: str) -> BatchAnswers: ...

    def result(self, request: GradingRequest, answer: object) -> GradeResult: ...


@dataclass(frozen=True)
class BatchPolicy:
    """Which jobs may wait for a batch, and when a batch is sent."""

    lanes: frozenset[str]
    regrades: bool = True
    max_size: int = 1000
    window: timedelta = timedelta(minutes=10)
    #: How often the tick comes (the recovery sweep's schedule): a gathered job's lease
    #: covers the window and three ticks.
    tick: timedelta = timedelta(minutes=5)

    def accepts(self, job: Job) -> bool:
        if job.batch_returned:
            return False
        request = job.request
        if request.deadline == DEADLINE_HOURS:
            return True
        if self.regrades and request.tallied and request.assignment_round > 0:
            return True
        return job.lane is not None and job.lane in self.lanes

    @property
    def gather_lease(self) -> timedelta:
        return self.window + 3 * self.tick


@dataclass
class BatchReport:
    """What one tick did: batches submitted and ended, jobs answered and returned."""

    submitted: list[str] = field(default_factory=list)
    ended: list[str] = field(default_factory=list)
    answered: list[str] = field(default_factory=list)
    returned: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


#: Stores the batch's answer as the attempt's success and announces it (the worker's path).
RecordAnswer = Callable[[Job, str, GradeResult], Job]


class BatchService:
    """Gathers, submits and polls provider batches; fans their answers out to the jobs."""

    def __init__(
        self,
        store: JobStore,
        queue: TaskQueue,
        clock: Clock,
        grader: ProviderBatchGrader,
        policy: BatchPolicy,
        record_answer: RecordAnswer,
        uow: UnitOfWork | None = None,
        max_scan: int = 5000,
        page: int = 200,
    ) -> None:
        self._store = store
        self._queue = queue
        self._clock = clock
        self._grader = grader
        self.policy = policy
        self._record_answer = record_answer
        self._uow = uow
        self._max_scan = max_scan
        self._page = page

    # --- a delivery ----------------------------------------------------------------------

    def accepts(self, job: Job) -> bool:
        return self.policy.accepts(job)

    def gather(self, job: Job, owner: str) -> Job:
        """Hand a claimed job to the next batch (its delivery is then acknowledged)."""
        gathered = self._store.update(
            job.id,
            lambda j: j.enter_batch(
                owner, self._grader.provider, self._clock.now(), self.policy.gather_lease
            ),
        )
        log.info("job gathered for a provider batch", extra={"provider": self._grader.provider})
        return gathered

    # --- the tick ------------------------------------------------------------------------

    def tick(self) -> BatchReport:
        """Submit the batches that are due, and fan out the answers of those that ended."""
        report = BatchReport()
        now = self._clock.now()
        gathered: list[Job] = []
        submitted: dict[str, list[Job]] = {}
        for job in self._waiting(now):
            wait = job.provider_batch
            assert wait is not None
            if wait.batch_id is None:
                gathered.append(job)
            elif not wait.batch_id.startswith(RESERVED):
                submitted.setdefault(wait.batch_id, []).append(job)
        self._submit_due(gathered, now, report)
        for batch_id, jobs in submitted.items():
            try:
                self._poll(batch_id, jobs, report)
            except GradeqError as exc:
                log.warning(
                    "provider batch not polled; the next tick asks again",
                    extra={"batch_id": batch_id, "reason": exc.detail},
                )
                report.errors.append(batch_id)
        return report

    def _waiting(self, now: datetime) -> Iterator[Job]:
        """Every RUNNING job that waits in a batch, in pages, up to the scan limit."""
        after: datetime | None = None
        after_id: str | None = None
        scanned = 0
        before = now + timedelta(seconds=1)
        while scanned < self._max_scan:
            page = self._store.find(
                JobStatus.RUNNING, before, self._page, updated_after=after, after_id=after_id
            )
            yield from (j for j in page if j.waits_in_batch)
            scanned += len(page)
            if len(page) < self._page:
                return
            after, after_id = page[-1].updated_at, page[-1].id

    def _submit_due(self, gathered: list[Job], now: datetime, report: BatchReport) -> None:
        gathered.sort(key=lambda j: (j.provider_batch.since if j.provider_batch else now, j.id))
        size = self.policy.max_size
        for start in range(0, len(gathered), size):
            chunk = gathered[start : start + size]
            oldest = chunk[0].provider_batch
            assert oldest is not None
            if len(chunk) < size and now - oldest.since < self.policy.window:
                return  # neither full nor old enough: the next tick looks again
            self._submit(chunk, report)

    def _submit(self, chunk: list[Job], report: BatchReport) -> None:
        token = RESERVED + uuid.uuid4().hex
        reserved: list[Job] = []
        for job in chunk:
            mark = self._try(
                job,
                report,
                lambda j: self._store.update(
                    j.id,
                    lambda c: c.submit_batch(
                        None, token, self._clock.now(), self.policy.gather_lease
                    ),
                ),
            )
            if mark is not None:
                reserved.append(mark)
        requests: dict[str, object] = {}
        for job in reserved:
            try:
                requests[job.id] = self._grader.render(job.request)
            except GradingError as exc:
                # Its own request cannot go (a prompt too large): graded one by one, where
                # the same error ends it as the worker ends it.
                self._return(job, token, exc, report)
        if not requests:
            return
        try:
            batch_id = self._grader.submit(requests, token.removeprefix(RESERVED))
        except GradingError as exc:
            log.warning(
                "provider batch not created; its jobs are graded one by one",
                extra={"reason": exc.detail, "jobs": len(requests)},
            )
            for job in reserved:
                if job.id in requests:
                    self._return(job, token, exc, report)
            return
        lease = COMPLETION_WINDOW + LEASE_MARGIN
        for job in reserved:
            if job.id in requests:
                self._try(
                    job,
                    report,
                    lambda j: self._store.update(
                        j.id, lambda c: c.submit_batch(token, batch_id, self._clock.now(), lease)
                    ),
                )
        log.info(
            "provider batch submitted",
            extra={"batch_id": batch_id, "jobs": len(requests), "provider": self._grader.provider},
        )
        report.submitted.append(batch_id)

    def _poll(self, batch_id: str, jobs: list[Job], report: BatchReport) -> None:
        status = self._grader.status(batch_id)
        if status.state == "running":
            return
        report.ended.append(batch_id)
        log.info(
            "provider batch ended",
            extra={"batch_id": batch_id, "state": status.state, "answers": len(status.answers)},
        )
        for job in jobs:
            with job_context(job.id):
                answer = status.answers.get(job.id)
                if answer is None:
                    reason = JobError(
                        f"provider-batch-{status.state}",
                        f"the provider's batch {status.state} without answering this job",
                    )
                    self._return(job, batch_id, reason, report)
                    continue
                try:
                    result = self._grader.result(job.request, answer)
                except GradingError as exc:
                    # Graded one request at a time, the worker decides: a permanent error
                    # (a refusal) fails it there, a transient one is retried.
                    self._return(job, batch_id, exc, report)
                    continue
                self._answer(job, batch_id, result, report)

    def _answer(self, job: Job, batch_id: str, result: GradeResult, report: BatchReport) -> None:
        done = self._try(job, report, lambda j: self._record_answer(j, batch_id, result))
        if done is not None:
            report.answered.append(job.id)

    def _return(
        self, job: Job, batch_id: str, reason: GradingError | JobError, report: BatchReport
    ) -> None:
        """Back to the job's queue on a new task, graded one request at a time."""
        error = reason if isinstance(reason, JobError) else JobError(reason.slug, reason.detail)

        def back(j: Job) -> Job:
            now = self._clock.now()
            with self._atomic():
                returned = self._store.update(j.id, lambda c: c.leave_batch(batch_id, error, now))
                self._queue.enqueue(TaskSpec(returned.task_name, returned.id, now, returned.lane))
            return returned

        if self._try(job, report, back) is not None:
            log.warning("job returned from its provider batch", extra={"error_type": error.type})
            report.returned.append(job.id)

    def _atomic(self) -> AbstractContextManager[None]:
        return self._uow.atomic() if self._uow is not None else nullcontext()

    @staticmethod
    def _try(job: Job, report: BatchReport, action: Callable[[Job], Job]) -> Job | None:
        with job_context(job.id):
            try:
                return action(job)
            except GradeqError as exc:
                # The job moved on meanwhile (answered, cancelled, taken over): fine.
                log.info("batch step skipped the job", extra={"reason": exc.detail})
                report.errors.append(job.id)
                return None
