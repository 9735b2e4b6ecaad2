"""Assignments: create and revise them, accept a class's answers in one call, report progress.

A submission's job id is derived from the client, the assignment and the submission id,
so the submission id is the idempotency key within the assignment: a retried batch
creates nothing twice, and a batch cut off half way is completed by sending it again.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import logging
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from shared.domain.admission import AdmissionLimits
from shared.domain.assignment import Assignment, Rubric, Tally
from shared.domain.authorization import Action, Principal, as_principal, authorize, require
from shared.domain.errors import (
    AssignmentNotFound,
    GradeqError,
    IdempotencyConflict,
    ValidationFailed,
)
from shared.domain.ids import assignment_id_for, submission_job_id, task_name_for
from shared.domain.job import GradingRequest, Job, Posting, posting_of
from shared.domain.lanes import LanePolicy
from shared.domain.status import JobStatus
from shared.domain.uploads import FileRef
from shared.ports import (
    AssignmentStore,
    Clock,
    JobBatchWriter,
    JobCursor,
    JobFilter,
    JobStore,
    TaskQueue,
    TaskSpec,
    UnitOfWork,
)
from shared.service_layer.budgets import BudgetGate
from shared.service_layer.intake import decode_cursor, encode_cursor
from shared.service_layer.regrade_requests import REQUESTS_UNTIL

log = logging.getLogger(__name__)

#: The most answers one batch call accepts.
MAX_BATCH = 1000
#: Task creations in flight at once for one batch, where the queue is remote.
ENQUEUE_PARALLELISM = 16


@dataclass(frozen=True)
class Answer:
    """One answer of a batch: its submission id is its key within the assignment."""

    submission_id: str
    answer: str
    metadata: dict[str, Any] = field(default_factory=dict)
    callback_url: str | None = None
    student_id: str | None = None
    #: Uploads graded beside or instead of the answer, as sent (checked before storing).
    files: tuple[FileRef, ...] = ()

    def fingerprint(self) -> str:
        """Hash of what the client sent for this submission (not the assignment's rubric)."""
        sent: dict[str, Any] = {
            "submission_id": self.submission_id,
            "answer": self.answer,
            "metadata": self.metadata,
            "callback_url": self.callback_url,
        }
        if self.student_id is not None:  # the fingerprint of an answer without one is unchanged
            sent["student_id"] = self.student_id
        if self.files:  # likewise for an answer without files
            sent["files"] = [[f.upload_id, f.content_type, f.size, f.name] for f in self.files]
        canonical = json.dumps(
            sent,
            sort_keys=True,
            separators=(",", ":"),
        )
        return hashlib.sha256(canonical.encode()).hexdigest()


class ItemStatus(StrEnum):
    """What a batch did with one answer."""

    ACCEPTED = "accepted"
    EXISTING = "existing"
    REFUSED = "refused"


@dataclass(frozen=True)
class ItemResult:
    """One answer's outcome: its job, or the problem type and detail of its refusal."""

    submission_id: str
    status: ItemStatus
    job: Job | None = None
    problem: GradeqError | None = None


@dataclass(frozen=True)
class AssignmentPage:
    """One page of a client's assignments, and the cursor of the next (None on the last)."""

    assignments: list[Assignment]
    next_cursor: str | None


@dataclass(frozen=True)
class GradePage:
    """One page of an assignment's jobs, newest first."""

    jobs: list[Job]
    next_cursor: str | None


@dataclass(frozen=True)
class Progress:
    """An assignment with its current round's tally."""

    assignment: Assignment
    tally: Tally


def _cursor_of(assignment: Assignment) -> str:
    """The same opaque cursor as a job page's: where the page ended."""
    raw = json.dumps([assignment.created_at.isoformat(), assignment.id], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


class AssignmentService:
    """Assignments of one authenticated client and their submissions."""

    def __init__(
        self,
        assignments: AssignmentStore,
        jobs: JobStore,
        batch: JobBatchWriter,
        queue: TaskQueue,
        clock: Clock,
        limits: AdmissionLimits | None = None,
        uow: UnitOfWork | None = None,
        enqueue_parallelism: int = 1,
        lanes: LanePolicy | None = None,
        budgets: BudgetGate | None = None,
    ) -> None:
        # The school's lanes: its default one for every submission (None: the queue's).
        self._lanes = lanes
        # Monthly budgets: past a hard limit a whole batch is refused (BudgetExhausted).
        self._budgets = budgets
        self._assignments = assignments
        self._jobs = jobs
        self._batch = batch
        self._queue = queue
        self._clock = clock
        self._limits = limits
        self._uow = uow
        self._parallelism = enqueue_parallelism

    # --- the resource ------------------------------------------------------------------

    def create(
        self,
        caller: Principal | str,
        idempotency_key: str,
        title: str,
        rubric: Rubric,
        max_score: float,
        prompt_version: str,
        settings: dict[str, Any] | None = None,
    ) -> tuple[Assignment, bool]:
        """Create the assignment once per key; a retry with another body is a conflict."""
        principal = as_principal(caller)
        require(principal, Action.ASSIGNMENT_CREATE)
        new = Assignment.new(
            # The school's key space, whoever of its staff creates it.
            assignment_id_for(principal.school, idempotency_key),
            principal.school,
            title,
            rubric,
            max_score,
            prompt_version,
            self._clock.now(),
            settings,
            author=principal.author,
        )
        stored, created = self._assignments.create(new)
        if not created and _definition(stored) != _definition(new):
            raise IdempotencyConflict(
                "this Idempotency-Key was already used with a different assignment"
            )
        return stored, created

    def get(
        self,
        caller: Principal | str,
        assignment_id: str,
        action: Action = Action.ASSIGNMENT_READ,
        read: Action = Action.ASSIGNMENT_READ,
    ) -> Assignment:
        """The assignment, if the policy lets the caller `action` it; one the caller may
        not `read` is as unknown as a missing one (another school's always)."""
        principal = as_principal(caller)
        assignment = self._assignments.get(assignment_id)
        authorize(
            principal,
            action,
            assignment.owner if assignment else None,
            lambda _: AssignmentNotFound(f"no assignment {assignment_id}"),
            read,
        )
        assert assignment is not None
        return assignment

    def find(self, caller: Principal | str, assignment_id: str) -> Assignment | None:
        """The caller's school's assignment of this id to submit into, or None (a free-form
        label on a job, or another school's: as unknown as a missing one)."""
        principal = as_principal(caller)
        assignment = self._assignments.get(assignment_id)
        if assignment is None or not principal.may(Action.JOB_SUBMIT, assignment.owner):
            return None
        return assignment

    def page(
        self, caller: Principal | str, limit: int, cursor: str | None = None
    ) -> AssignmentPage:
        principal = as_principal(caller)
        require(principal, Action.ASSIGNMENT_LIST)
        after = decode_cursor(cursor) if cursor else None
        found = self._assignments.list_of(principal.school, limit + 1, after)
        more = len(found) > limit
        found = found[:limit]
        return AssignmentPage(found, _cursor_of(found[-1]) if more else None)

    def revise(self, caller: Principal | str, assignment_id: str, rubric: Rubric) -> Assignment:
        """Make `rubric` the assignment's next rubric version (the same rubric: no change)."""
        principal = as_principal(caller)
        self.get(principal, assignment_id, Action.ASSIGNMENT_EDIT)
        now = self._clock.now()
        return self._assignments.update(assignment_id, lambda a: a.revise(rubric, now))

    def set_requests_until(
        self, caller: Principal | str, assignment_id: str, until: datetime
    ) -> Assignment:
        """Set until when students may ask for a regrade of their grades."""
        principal = as_principal(caller)
        self.get(principal, assignment_id, Action.ASSIGNMENT_EDIT)
        setting = {REQUESTS_UNTIL: until.isoformat()}
        return self._assignments.update(
            assignment_id, lambda a: dataclasses.replace(a, settings={**a.settings, **setting})
        )

    def progress(self, caller: Principal | str, assignment_id: str) -> Progress:
        """The assignment and its current round's counters: two reads plus the tally's."""
        principal = as_principal(caller)
        assignment = self.get(principal, assignment_id)
        return Progress(assignment, self._assignments.tally(assignment.id, assignment.round))

    def grades(
        self, caller: Principal | str, assignment_id: str, limit: int, cursor: str | None = None
    ) -> GradePage:
        """One page of the assignment's jobs, newest first."""
        principal = as_principal(caller)
        assignment = self.get(principal, assignment_id, Action.ASSIGNMENT_GRADES)
        return self._grades(assignment, limit, cursor)

    def _grades(self, assignment: Assignment, limit: int, cursor: str | None) -> GradePage:
        after = JobCursor(*decode_cursor(cursor)) if cursor else None
        where = JobFilter(client_id=assignment.client_id, assignment_id=assignment.id)
        jobs = self._jobs.find_jobs(where, limit + 1, after)
        more = len(jobs) > limit
        jobs = jobs[:limit]
        return GradePage(jobs, encode_cursor(jobs[-1]) if more else None)

    def all_grades(self, assignment: Assignment, page: int = 200) -> Iterator[Job]:
        """Every job of an assignment the caller was allowed, a page at a time."""
        cursor: str | None = None
        while True:
            found = self._grades(assignment, page, cursor)
            yield from found.jobs
            if found.next_cursor is None:
                return
            cursor = found.next_cursor

    # --- submissions -------------------------------------------------------------------

    def request_for(self, assignment: Assignment, answer: Answer) -> GradingRequest:
        """The grading request of one answer under the assignment's current rubric."""
        return GradingRequest(
            submission_id=answer.submission_id,
            answer=answer.answer,
            rubric=assignment.rubric.rubric,
            max_score=assignment.max_score,
            assignment_id=assignment.id,
            callback_url=answer.callback_url,
            metadata=answer.metadata,
            student_id=answer.student_id,
            files=answer.files,
            rubric_version=assignment.rubric.version,
            prompt_version=assignment.prompt_version,
            assignment_round=assignment.round,
            post_manually=posting_of(assignment.settings) is Posting.MANUAL,
        )

    def submit_batch(
        self,
        caller: Principal | str,
        assignment_id: str,
        answers: list[Answer],
        action: Action = Action.ASSIGNMENT_BATCH,
    ) -> list[ItemResult]:
        """Accept each answer once: new ones get a job and its task, retries their job back.

        Items come back in the order given. An answer whose submission id was used with
        other content is refused (a conflict); a repeated id within one batch too.
        """
        principal = as_principal(caller)
        if len(answers) > MAX_BATCH:
            raise ValidationFailed(
                f"a batch holds at most {MAX_BATCH} answers",
                errors=[{"field": "answers", "message": f"at most {MAX_BATCH} items"}],
            )
        # A student submits one answer (`JOB_SUBMIT`) into an assignment it may not read.
        assignment = self.get(principal, assignment_id, action, read=action)
        if self._budgets is not None:
            self._budgets.admit(assignment.client_id, assignment.id)
        owner = principal.owner
        lane = self._lanes.resolve(assignment.client_id, None) if self._lanes else None
        now = self._clock.now()
        results: dict[int, ItemResult] = {}
        seen: set[str] = set()
        wanted: list[tuple[int, Answer, Job]] = []
        for index, answer in enumerate(answers):
            if answer.submission_id in seen:
                results[index] = ItemResult(
                    answer.submission_id,
                    ItemStatus.REFUSED,
                    problem=ValidationFailed("the submission id is repeated within the batch"),
                )
                continue
            seen.add(answer.submission_id)
            # A student's submission ids are their own; the staff share the school's.
            job_id = submission_job_id(principal.key_space, assignment.id, answer.submission_id)
            new = Job.new(
                job_id,
                assignment.client_id,
                self.request_for(assignment, answer),
                answer.fingerprint(),
                now,
                lane=lane,
                author=owner.author,
            )
            wanted.append((index, answer, new))
        with self._uow.atomic() if self._uow else nullcontext():
            # The ceilings are checked in the commits that count the new jobs (hard, also
            # against racing batches and single submissions).
            stored = self._batch.create_many([w[2] for w in wanted], self._limits)
            over = stored.refusal
            pending: list[Job] = []
            for (index, answer, new), (job, created) in zip(wanted, stored.items, strict=True):
                if job is None:
                    # Past a ceiling: not stored. A retried answer is never refused here.
                    assert over is not None
                    results[index] = ItemResult(
                        answer.submission_id, ItemStatus.REFUSED, None, over
                    )
                    continue
                if not created and job.fingerprint != new.fingerprint:
                    results[index] = ItemResult(
                        answer.submission_id,
                        ItemStatus.REFUSED,
                        job,
                        IdempotencyConflict(
                            "this submission id was already used with a different answer"
                        ),
                    )
                    continue
                status = ItemStatus.ACCEPTED if created else ItemStatus.EXISTING
                results[index] = ItemResult(answer.submission_id, status, job)
                if job.status is JobStatus.PENDING:
                    # Also for an existing job: the first batch may have died before its
                    # task was made. The task name dedupes.
                    pending.append(job)
            failed = self._enqueue(pending, now)
        for index, result in results.items():
            if result.job is not None and result.job.id in failed:
                results[index] = ItemResult(
                    result.submission_id, ItemStatus.REFUSED, result.job, failed[result.job.id]
                )
        if over is not None and not any(r.job for r in results.values()):
            raise over  # nothing admitted nor found: the whole batch waits (429 or 503)
        accepted = sum(1 for r in results.values() if r.status is ItemStatus.ACCEPTED)
        log.info(
            "batch accepted",
            extra={"assignment_id": assignment.id, "answers": len(answers), "accepted": accepted},
        )
        return [results[i] for i in range(len(answers))]

    def _enqueue(self, jobs: list[Job], now: datetime) -> dict[str, GradeqError]:
        """Make each pending job's task; the ones that failed, by job id (they stay pending:
        the batch's retry or the recovery sweep makes their task)."""

        def one(job: Job) -> tuple[str, GradeqError | None]:
            due = job.request.scheduled_for or now
            try:
                self._queue.enqueue(
                    TaskSpec(
                        task_name_for(job.id, job.generation),
                        job.id,
                        schedule_time=due,
                        queue=job.lane,
                    )
                )
            except GradeqError as exc:
                return job.id, exc
            return job.id, None

        if self._parallelism <= 1 or len(jobs) <= 1:
            outcomes = [one(job) for job in jobs]
        else:
            with ThreadPoolExecutor(max_workers=self._parallelism) as pool:
                outcomes = list(pool.map(one, jobs))
        return {job_id: error for job_id, error in outcomes if error is not None}


def _definition(assignment: Assignment) -> tuple[Any, ...]:
    first = assignment.rubrics[0]
    return (assignment.title, first.rubric, assignment.max_score, assignment.settings)
