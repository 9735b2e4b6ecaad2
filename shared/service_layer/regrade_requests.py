"""Students' regrade requests and the teacher's answers.

A student asks once per grade, with a reason, before the assignment's deadline for
requests (its `regrade_requests_until` setting). The request is written on the job with
the grade held in the teacher's queue (the review queue, reason `regrade-request`); the
grade the student sees stays as it is. A teacher (or reviewer, or the school's server)
answers `keep` or `change`, each with a reason: the answer is a review of the grade
(`GradeReviewed`, the history of reviews is only ever appended to) and a change, the
grade having been released to the student, is a new version of the posted grade.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from shared.domain.authorization import Action, Principal, as_principal, authorize
from shared.domain.errors import GradeqError, JobNotFound, ValidationFailed
from shared.domain.grade import GradeResult
from shared.domain.job import Job
from shared.domain.review import (
    RegradeRequest,
    RequestAnswer,
    Review,
    ReviewDecision,
    requested_state,
)
from shared.domain.status import JobStatus
from shared.logs import job_context
from shared.ports import AssignmentStore, Clock, JobStore
from shared.service_layer.review import ReviewService, reviewer_name

log = logging.getLogger(__name__)

#: The assignment setting: until when (an aware datetime, ISO 8601) students may ask.
REQUESTS_UNTIL = "regrade_requests_until"


class RegradeAlreadyRequested(GradeqError):
    slug = "regrade-already-requested"
    title = "A regrade of this grade was already requested"
    status = 409


class RegradeRequestsClosed(GradeqError):
    slug = "regrade-requests-closed"
    title = "The assignment takes no regrade requests (now)"
    status = 409


class GradeNotReleased(GradeqError):
    slug = "grade-not-released"
    title = "There is no released grade to ask about"
    status = 409


class NoOpenRegradeRequest(GradeqError):
    slug = "no-open-regrade-request"
    title = "The grade has no open regrade request"
    status = 409


@dataclass(frozen=True)
class Change:
    """The teacher's new grade: the score, and optionally criteria and feedback."""

    score: float
    criteria: tuple[dict[str, Any], ...] | None = None
    feedback: str | None = None


class RegradeRequests:
    """A student's requests on their own grades; the school's answers to them."""

    def __init__(
        self,
        store: JobStore,
        assignments: AssignmentStore | None,
        reviews: ReviewService,
        clock: Clock,
    ) -> None:
        self._store = store
        self._assignments = assignments
        self._reviews = reviews
        self._clock = clock

    def job(self, caller: Principal | str, job_id: str, action: Action) -> Job:
        """The job, if the policy lets the caller `action` it: 404 for one it may not read
        (another student's, another school's), 403 for one it may read only."""
        principal = as_principal(caller)
        job = self._store.get(job_id)
        authorize(
            principal,
            action,
            job.owner if job is not None else None,
            lambda _: JobNotFound(f"no grading job {job_id}"),
            Action.JOB_READ,
        )
        assert job is not None
        return job

    def request(self, caller: Principal | str, job_id: str, reason: str) -> Job:
        """Ask, once per grade, before the assignment's deadline, for a second look."""
        principal = as_principal(caller)
        self.job(principal, job_id, Action.REGRADE_REQUEST)  # 404 / 403 first

        def ask(job: Job) -> Job:
            if job.regrade_request is not None:
                raise RegradeAlreadyRequested(f"a regrade of job {job.id} was already requested")
            now = self._clock.now()
            self._check_open(job, now)
            if job.status is not JobStatus.SUCCEEDED or job.result is None or job.withheld:
                raise GradeNotReleased(f"job {job.id} has no released grade")
            asked = RegradeRequest(principal.author, now, reason, job.generation)
            return dataclasses.replace(
                job,
                regrade_request=asked,
                review=requested_state(job.review, job.generation, now),
                updated_at=now,
            )

        asked = self._store.update(job_id, ask)
        with job_context(job_id):
            log.info("regrade requested", extra={"event": "regrade_requested"})
        return asked

    def _check_open(self, job: Job, now: datetime) -> None:
        assignment_id = job.request.assignment_id
        assignment = (
            self._assignments.get(assignment_id)
            if assignment_id is not None and self._assignments is not None
            else None
        )
        if assignment is None or assignment.client_id != job.client_id:
            raise RegradeRequestsClosed("only a grade of an assignment can be contested")
        until = assignment.settings.get(REQUESTS_UNTIL)
        if not isinstance(until, str):
            raise RegradeRequestsClosed("the assignment takes no regrade requests")
        if now >= datetime.fromisoformat(until):
            raise RegradeRequestsClosed(f"regrade requests closed at {until}")

    def answer(
        self,
        caller: Principal | str,
        job_id: str,
        answer: RequestAnswer,
        reason: str,
        change: Change | None = None,
    ) -> Job:
        """Keep the grade, or change it (a teacher's grade beside the others), with a
        reason; then announce the review and, for a change, the posted grade's version."""
        principal = as_principal(caller)
        job = self.job(principal, job_id, Action.REGRADE_ANSWER)
        if (answer is RequestAnswer.CHANGE) != (change is not None):
            raise ValidationFailed(
                "a change takes a score, a keep none",
                errors=[{"field": "score", "message": "required with change, only with it"}],
            )
        if not reason.strip():
            raise ValidationFailed(
                "an answer needs a reason", errors=[{"field": "reason", "message": "required"}]
            )
        # A review still unannounced goes out first: each keeps its events.
        self._reviews.announce_pending(job)
        by = reviewer_name(principal)

        def decide(job: Job) -> Job:
            asked = job.regrade_request
            if asked is None or not asked.is_open or job.review is None:
                raise NoOpenRegradeRequest(f"job {job.id} has no open regrade request")
            current = job.effective_result
            assert current is not None
            now = self._clock.now()
            number = len(job.review.reviews) + 1
            if change is None:
                decision, result = ReviewDecision.ACCEPT, current
            else:
                if change.score > job.request.max_score:
                    raise ValidationFailed(
                        f"the score is above the job's max score {job.request.max_score:g}",
                        errors=[{"field": "score", "message": "above the max score"}],
                    )
                decision, result = ReviewDecision.OVERRIDE, _changed(current, change, by)
            review = Review(number, by, now, decision, reason, result, job.generation)
            answered = dataclasses.replace(
                job.record_review(review, now),
                regrade_request=asked.answered(answer, by, now, reason),
            )
            # Posted as a review's decision is (ReviewService.decide): on a posted grade,
            # the next version at once where the grade changed; else as the assignment posts.
            return (
                answered.post(now, by)
                if job.posted is not None
                else answered.post_if_automatic(now)
            )

        answered = self._store.update(job_id, decide)
        # GradeReviewed and, where the posted grade changed, its new version (GradePosted).
        return self._reviews.announce_pending(answered)


def _changed(current: GradeResult, change: Change, by: str) -> GradeResult:
    """The teacher's grade: the grade the student saw, with what the teacher changed."""
    return GradeResult(
        score=change.score,
        max_score=current.max_score,
        feedback=change.feedback if change.feedback is not None else current.feedback,
        criteria=change.criteria if change.criteria is not None else current.criteria,
        grader=f"reviewer:{by}",
        model=current.model,
        prompt_version=current.prompt_version,
    )
