"""Which review rules apply to a job, and a reviewer's decision on a held grade.

A review is one job write (the decision beside the model's grade, `announced` False),
then its events: `GradeReviewed` (id from job, generation and review number) and, when
the grade was withheld from the student, the job's own `GradingCompleted` with its usual
stable id; then a write marking them announced. A crash in between leaves the review
unannounced; the next request about the job to the review API publishes the same ids
again (`announce_pending`), which subscribers dedupe.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from shared.domain.agreement import Agreement, agreement_of
from shared.domain.authorization import (
    SERVER,
    Action,
    Principal,
    as_principal,
    authorize,
    require,
    same_school,
)
from shared.domain.errors import GradeqError, JobNotFound, ValidationFailed
from shared.domain.events import GradePosted, GradeReviewed, GradingCompleted
from shared.domain.grade import GradeResult
from shared.domain.job import Job
from shared.domain.review import (
    Release,
    Review,
    ReviewDecision,
    ReviewPolicy,
    policy_of,
)
from shared.domain.status import JobStatus
from shared.logs import job_context
from shared.ports import (
    AssignmentStore,
    Clock,
    EventPublisher,
    JobStore,
    ReviewCursor,
    ReviewQueue,
)

log = logging.getLogger(__name__)


#: How long a review's own request has to publish its events before the sweep does.
UNANNOUNCED_AFTER = timedelta(minutes=1)


class ReviewPolicies:
    """The review policy of a job: its assignment's, else its client's, else none."""

    def __init__(
        self,
        assignments: AssignmentStore | None,
        client_policies: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        self._assignments = assignments
        self._clients = {
            c: ReviewPolicy.from_dict(dict(p)) for c, p in (client_policies or {}).items()
        }

    def __call__(self, job: Job) -> ReviewPolicy | None:
        assignment_id = job.request.assignment_id
        if assignment_id is not None and self._assignments is not None:
            assignment = self._assignments.get(assignment_id)
            # The assignment's rules hold for every submission of its school, a student's too.
            if assignment is not None and same_school(assignment.owner, job.owner):
                policy = policy_of(assignment.settings)
                if policy is not None:
                    return policy
        return self._clients.get(job.client_id)


@dataclass(frozen=True)
class Override:
    """A reviewer's own grade: the score, and optionally criteria and feedback."""

    score: float
    criteria: tuple[dict[str, Any], ...] | None = None
    feedback: str | None = None


class GradeNotHeld(GradeqError):
    slug = "grade-not-held"
    title = "The job's grade is not held for review"
    status = 409


class RegradeRequestOpen(GradeqError):
    slug = "regrade-request-open"
    title = "The student's regrade request is answered keep or change, with a reason"
    status = 409


@dataclass(frozen=True)
class ReviewPage:
    """One page of the held grades, oldest first, and the cursor of the next."""

    jobs: list[Job]
    next_cursor: str | None


def _encode_cursor(job: Job) -> str:
    assert job.review is not None
    held_at = job.review.to_dict()["held_at"]
    raw = json.dumps([held_at, job.id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(cursor: str) -> ReviewCursor:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        held_at, job_id = json.loads(raw)
        datetime.fromisoformat(held_at)
        if not isinstance(held_at, str) or not isinstance(job_id, str):
            raise ValueError("not a cursor")
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError) as exc:
        raise ValidationFailed(
            "the cursor is not one this API returned",
            errors=[{"field": "cursor", "message": "invalid cursor"}],
        ) from exc
    return ReviewCursor(held_at, job_id)


class ReviewService:
    """Reviewers' decisions on held grades, recorded and announced exactly once."""

    def __init__(
        self,
        store: JobStore,
        queue: ReviewQueue,
        publisher: EventPublisher,
        clock: Clock,
    ) -> None:
        self._store = store
        self._queue = queue
        self._publisher = publisher
        self._clock = clock

    def held(
        self,
        caller: Principal | str,
        assignment_id: str | None,
        limit: int,
        cursor: str | None = None,
    ) -> ReviewPage:
        """The school's held grades, oldest first (of one assignment, or all)."""
        principal = as_principal(caller)
        require(principal, Action.REVIEW_LIST)
        after = _decode_cursor(cursor) if cursor else None
        found = self._queue.held(principal.school, assignment_id, limit + 1, after)
        more = len(found) > limit
        found = found[:limit]
        return ReviewPage(found, _encode_cursor(found[-1]) if more else None)

    def get(self, caller: Principal | str, job_id: str, action: Action = Action.REVIEW_READ) -> Job:
        """A held or reviewed job the caller may `action`; JobNotFound for one it may not
        read, or one never held."""
        principal = as_principal(caller)
        job = self._store.get(job_id)
        authorize(
            principal,
            action,
            job.owner if job is not None and job.review is not None else None,
            lambda _: JobNotFound(f"no grading job {job_id} held for review"),
            Action.JOB_READ,
        )
        assert job is not None
        # A review whose events a crash left unpublished goes out on the next look at it.
        return self.announce_pending(job)

    def decide(
        self,
        caller: Principal | str,
        job_id: str,
        reason: str,
        override: Override | None = None,
    ) -> Job:
        """Accept the model's grade (`override` None) or replace it; then announce."""
        principal = as_principal(caller)
        # A previous review still unannounced goes out first (`get`): each keeps its events.
        self.get(principal, job_id, Action.REVIEW_DECIDE)
        by = reviewer_name(principal)

        def review(job: Job) -> Job:
            if job.status is not JobStatus.SUCCEEDED or job.review is None or job.result is None:
                raise GradeNotHeld(f"grading job {job.id} has no grade held for review")
            if job.regrade_request is not None and job.regrade_request.is_open:
                raise RegradeRequestOpen(
                    f"answer the regrade request: POST /v1/reviews/{job.id}/request"
                )
            now = self._clock.now()
            number = len(job.review.reviews) + 1
            if override is not None and override.score > job.request.max_score:
                raise ValidationFailed(
                    f"the score is above the job's max score {job.request.max_score:g}",
                    errors=[{"field": "score", "message": "above the max score"}],
                )
            if override is None:
                decision, result = ReviewDecision.ACCEPT, job.result
            else:
                decision, result = ReviewDecision.OVERRIDE, _overridden(job.result, override, by)
            reviewed = job.record_review(
                Review(number, by, now, decision, reason, result, job.generation), now
            )
            # A teacher's decision on a posted grade is a new version at once; posting
            # automatically, the first one is posted with it.
            return (
                reviewed.post(now, by)
                if job.posted is not None
                else reviewed.post_if_automatic(now)
            )

        reviewed = self._store.update(job_id, review)
        return self.announce_pending(reviewed)

    def sweep(self, limit: int = 100) -> list[str]:
        """Publish the events of reviews a crash left unannounced (a minute after them)."""
        cutoff = self._clock.now() - UNANNOUNCED_AFTER
        announced = []
        for job in self._queue.unannounced(limit):
            latest = job.review.latest if job.review is not None else None
            if latest is not None and latest.at <= cutoff:
                self.announce_pending(job)
                announced.append(job.id)
        return announced

    def announce_pending(self, job: Job) -> Job:
        """Publish the newest review's events unless they are marked announced."""
        state = job.review
        if state is None or state.announced or state.latest is None:
            return job
        event = GradeReviewed.from_job(job)
        self._publisher.publish(event)
        if state.release is Release.AFTER_REVIEW and len(state.reviews) == 1 and not job.withheld:
            # The grade was withheld: its completion goes out now, with its usual id.
            self._publisher.publish(GradingCompleted.from_job(job))
        if job.posted is not None and not job.post_announced:
            self._publisher.publish(GradePosted.from_job(job))

        version = job.posted.version if job.posted is not None else 0

        def mark(current: Job) -> Job:
            assert current.review is not None
            marked = dataclasses.replace(current, review=current.review.mark_announced())
            return marked.mark_post_announced(version)

        announced = self._store.update(job.id, mark)
        with job_context(job.id):
            log.info(
                "grade reviewed",
                extra={
                    "event": "grade_reviewed",
                    "event_id": event.event_id,
                    "decision": state.latest.decision.value,
                    "review": state.latest.number,
                },
            )
        return announced


def _overridden(model: GradeResult, override: Override, by: str) -> GradeResult:
    """The teacher's grade: the model's, with what the teacher changed."""
    return GradeResult(
        score=override.score,
        max_score=model.max_score,
        feedback=override.feedback if override.feedback is not None else model.feedback,
        criteria=override.criteria if override.criteria is not None else model.criteria,
        grader=f"reviewer:{by}",
        model=model.model,
        prompt_version=model.prompt_version,
    )


#: The most reviewed grades one agreement report reads (the oldest holds first).
MAX_AGREEMENT_GRADES = 10_000


@dataclass(frozen=True)
class ModelAgreement:
    """The agreement on the grades of one model and prompt version."""

    model: str
    prompt_version: str
    agreement: Agreement


@dataclass(frozen=True)
class AgreementReport:
    """Model against teacher on the reviewed grades: all of them, and by model and prompt."""

    assignment_id: str | None
    overall: Agreement
    by_model: list[ModelAgreement]
    #: (model score, teacher score) of each reviewed grade, for a plot.
    pairs: list[tuple[float, float]]


def reviewer_name(principal: Principal) -> str:
    """Who reviewed, as the job's history records it: `key:<name>`, `server`, `user:<uid>`."""
    if principal.author == SERVER or principal.author.startswith("key:"):
        return principal.author
    return f"user:{principal.author}"


def agreement_report(
    queue: ReviewQueue, principal: Principal | str, assignment_id: str | None
) -> AgreementReport:
    """Compare each reviewed grade's model score with its newest review's score (of the
    caller's school; an operator names the school)."""
    if isinstance(principal, Principal):
        require(principal, Action.REVIEW_LIST)
        school = principal.school
    else:
        school = principal
    jobs = queue.reviewed(school, assignment_id, MAX_AGREEMENT_GRADES)
    rows: list[tuple[str, str, float, float, float]] = []
    for job in jobs:
        teacher = job.effective_result
        if job.result is None or teacher is None:
            continue
        rows.append(
            (
                job.result.model,
                job.result.prompt_version,
                job.result.score,
                teacher.score,
                job.request.max_score,
            )
        )

    def of(selected: list[tuple[str, str, float, float, float]]) -> Agreement:
        top = max((r[4] for r in selected), default=0.0)
        return agreement_of([r[2] for r in selected], [r[3] for r in selected], top)

    groups = sorted({(r[0], r[1]) for r in rows})
    by_model = [
        ModelAgreement(m, p, of([r for r in rows if (r[0], r[1]) == (m, p)])) for m, p in groups
    ]
    return AgreementReport(assignment_id, of(rows), by_model, [(r[2], r[3]) for r in rows])
