"""Teacher review of model grades: the rules that hold a grade, and the reviews on record.

An assignment (or, without one, the client) sets a `ReviewPolicy`. A job whose grade meets
one of its rules ends SUCCEEDED as usual but carries a `ReviewState` that says it is held;
the job's status machine is unchanged because a held grade is a finished grading, only
its release to the student waits (`release: after_review`). A reviewer then accepts the
model's grade or overrides it; the model's `GradeResult` stays on the job beside every
review, and the newest review's grade is the one the student sees.

A teacher's decision is data: a regrade grades the job again but keeps its reviews
(`ReviewState.carried`), so the teacher's grade stays the final grade. Where the new model
grade lies further from the teacher's than the assignment's threshold, the grade goes back
to the teacher's queue flagged `regrade-moved`; a regrade that asked to reopen reviewed
grades puts them back flagged `reopened` (`after_regrade`).
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from shared.domain.grade import GradeResult


class Release(StrEnum):
    """Whether the student's result and the webhook wait for a held grade's review."""

    IMMEDIATELY = "immediately"
    AFTER_REVIEW = "after_review"


class HoldReason(StrEnum):
    """Which rule held a grade (stable slugs, shown to reviewers)."""

    LOW_CONFIDENCE = "low-confidence"
    NEAR_PASS_MARK = "near-pass-mark"  # noqa: S105 (a reason slug, not a password)
    FORMAT_FAILURE = "format-failure"
    SAMPLED = "sampled"
    REGRADE_REQUEST = "regrade-request"  # the student asked for a regrade
    #: A regrade's model grade lies further from the teacher's grade than the threshold.
    REGRADE_MOVED = "regrade-moved"
    #: The teacher chose, on a regrade, to look at reviewed grades again.
    REOPENED = "reopened"


class ReviewStatus(StrEnum):
    HELD = "held"
    REVIEWED = "reviewed"


class ReviewDecision(StrEnum):
    ACCEPT = "accept"
    OVERRIDE = "override"


def sampled(job_id: str, rate: float) -> bool:
    """Whether the calibration sample takes the job: a hash of its id, so it is repeatable."""
    if rate <= 0:
        return False
    if rate >= 1:
        return True
    digest = hashlib.sha256(f"gradeq/review-sample\0{job_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < rate


@dataclass(frozen=True)
class ReviewPolicy:
    """When to hold a grade for a teacher, and what waits for the teacher's word.

    `confidence_below`: hold when the grader's own confidence (0..1) is below it.
    `pass_mark` and `margin`: hold when the score is within `margin` of the pass mark.
    `format_failures`: hold when the model answered in a wrong format before a usable one.
    `sample_rate`: hold this fraction of all grades (by job id) to measure agreement.
    """

    confidence_below: float | None = None
    pass_mark: float | None = None
    margin: float = 0.0
    format_failures: bool = False
    sample_rate: float = 0.0
    release: Release = Release.IMMEDIATELY
    #: How far (in points) a regrade's model grade may lie from the teacher's grade before
    #: the grade goes back to the teacher's queue; None: `DEFAULT_REGRADE_THRESHOLD` of the
    #: max score.
    regrade_threshold: float | None = None

    def reasons(self, job_id: str, result: GradeResult) -> tuple[HoldReason, ...]:
        """The rules `result` meets, in a fixed order; empty: the grade is not held."""
        found: list[HoldReason] = []
        if (
            self.confidence_below is not None
            and result.confidence is not None
            and result.confidence < self.confidence_below
        ):
            found.append(HoldReason.LOW_CONFIDENCE)
        if self.pass_mark is not None and abs(result.score - self.pass_mark) <= self.margin:
            found.append(HoldReason.NEAR_PASS_MARK)
        if self.format_failures and result.format_retries > 0:
            found.append(HoldReason.FORMAT_FAILURE)
        if sampled(job_id, self.sample_rate):
            found.append(HoldReason.SAMPLED)
        return tuple(found)

    def to_dict(self) -> dict[str, Any]:
        return {
            "confidence_below": self.confidence_below,
            "pass_mark": self.pass_mark,
            "margin": self.margin,
            "format_failures": self.format_failures,
            "sample_rate": self.sample_rate,
            "release": self.release.value,
            "regrade_threshold": self.regrade_threshold,
        }

    def threshold(self, max_score: float) -> float:
        """The regrade threshold in points for a grade out of `max_score`."""
        return regrade_threshold(self, max_score)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReviewPolicy:
        below = data.get("confidence_below")
        mark = data.get("pass_mark")
        threshold = data.get("regrade_threshold")
        return cls(
            confidence_below=None if below is None else float(below),
            pass_mark=None if mark is None else float(mark),
            margin=float(data.get("margin") or 0.0),
            format_failures=bool(data.get("format_failures", False)),
            sample_rate=float(data.get("sample_rate") or 0.0),
            release=Release(data.get("release") or Release.IMMEDIATELY.value),
            regrade_threshold=None if threshold is None else float(threshold),
        )


#: The default regrade threshold: a tenth of the max score.
DEFAULT_REGRADE_THRESHOLD = 0.10


def regrade_threshold(policy: ReviewPolicy | None, max_score: float) -> float:
    """How far a regrade's model grade may move from the teacher's before it is flagged."""
    if policy is not None and policy.regrade_threshold is not None:
        return policy.regrade_threshold
    return DEFAULT_REGRADE_THRESHOLD * max_score


def policy_of(settings: dict[str, Any]) -> ReviewPolicy | None:
    """The review policy kept in an assignment's (or a client's) settings, if any."""
    raw = settings.get("review")
    return ReviewPolicy.from_dict(raw) if isinstance(raw, dict) else None


def hold_state(
    policy: ReviewPolicy | None, job_id: str, generation: int, result: GradeResult, now: datetime
) -> ReviewState | None:
    """The review state a new grade starts with, or None when no rule holds it."""
    if policy is None:
        return None
    reasons = policy.reasons(job_id, result)
    if not reasons:
        return None
    return ReviewState(ReviewStatus.HELD, reasons, policy.release, now, generation)


@dataclass(frozen=True)
class Review:
    """One reviewer's decision on a held grade: accepted as is, or overridden with a reason."""

    number: int
    by: str
    at: datetime
    decision: ReviewDecision
    reason: str
    #: The grade the student sees after this review (the model's own when accepted).
    result: GradeResult
    #: The job's generation whose model grade the teacher saw (None: stored before).
    generation: int | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "number": self.number,
            "by": self.by,
            "at": self.at.isoformat(),
            "decision": self.decision.value,
            "reason": self.reason,
            "result": self.result.to_dict(),
        }
        if self.generation is not None:
            data["generation"] = self.generation
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Review:
        return cls(
            number=int(data["number"]),
            by=data["by"],
            at=datetime.fromisoformat(data["at"]),
            decision=ReviewDecision(data["decision"]),
            reason=data.get("reason") or "",
            result=GradeResult.from_dict(data["result"]),
            generation=None if data.get("generation") is None else int(data["generation"]),
        )


@dataclass(frozen=True)
class ReviewState:
    """A held grade's review: why it was held, how it is released, and its reviews."""

    status: ReviewStatus
    reasons: tuple[HoldReason, ...]
    release: Release
    held_at: datetime
    generation: int
    reviews: tuple[Review, ...] = ()
    #: Whether the newest review's events (GradeReviewed, and a withheld GradingCompleted)
    #: reached the bus; False between the review's write and its publication.
    announced: bool = True
    #: The regrade that carried this state asked to reopen reviewed grades.
    reopen: bool = False

    @property
    def withheld(self) -> bool:
        """Whether the student and the webhook still wait for a teacher: a held grade no
        teacher has decided yet (a reviewed grade held again keeps the teacher's grade out)."""
        return (
            self.release is Release.AFTER_REVIEW
            and self.status is ReviewStatus.HELD
            and not self.reviews
        )

    @property
    def flagged(self) -> bool:
        """Held again after a teacher's review (a regrade moved away from it, or reopened)."""
        return self.status is ReviewStatus.HELD and bool(self.reviews)

    def carried(self, reopen: bool) -> ReviewState:
        """The state a regrade keeps: the teacher's reviews, the choice to reopen them."""
        return dataclasses.replace(self, announced=True, reopen=reopen)

    @property
    def latest(self) -> Review | None:
        return self.reviews[-1] if self.reviews else None

    def reviewed(self, review: Review) -> ReviewState:
        return dataclasses.replace(
            self, status=ReviewStatus.REVIEWED, reviews=(*self.reviews, review), announced=False
        )

    def mark_announced(self) -> ReviewState:
        return dataclasses.replace(self, announced=True)

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status.value,
            "reasons": [r.value for r in self.reasons],
            "release": self.release.value,
            # Fixed-width UTC text: stores order the review queue by it as a string.
            "held_at": self.held_at.astimezone(UTC).isoformat(timespec="microseconds"),
            "generation": self.generation,
            "reviews": [r.to_dict() for r in self.reviews],
            "announced": self.announced,
            **({"reopen": True} if self.reopen else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReviewState:
        return cls(
            status=ReviewStatus(data["status"]),
            reasons=tuple(HoldReason(r) for r in data.get("reasons") or ()),
            release=Release(data["release"]),
            held_at=datetime.fromisoformat(data["held_at"]),
            generation=int(data.get("generation", 0)),
            reviews=tuple(Review.from_dict(r) for r in data.get("reviews") or ()),
            announced=bool(data.get("announced", True)),
            reopen=bool(data.get("reopen", False)),
        )


class RequestAnswer(StrEnum):
    """A teacher's answer to a student's regrade request."""

    KEEP = "keep"
    CHANGE = "change"


@dataclass(frozen=True)
class RegradeRequest:
    """A student's request that a teacher look at their grade again, once per grade, and
    the teacher's answer (None while open). The grade itself changes only as a review
    (the job's `review.reviews`), so the history of grades stays whole."""

    by: str  # the student's user id
    at: datetime
    reason: str
    #: The job's generation the request was about.
    generation: int
    answer: RequestAnswer | None = None
    answered_by: str | None = None
    answered_at: datetime | None = None
    answer_reason: str = ""

    @property
    def is_open(self) -> bool:
        return self.answer is None

    def answered(self, answer: RequestAnswer, by: str, at: datetime, reason: str) -> RegradeRequest:
        return dataclasses.replace(
            self, answer=answer, answered_by=by, answered_at=at, answer_reason=reason
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "by": self.by,
            "at": self.at.isoformat(),
            "reason": self.reason,
            "generation": self.generation,
            "answer": self.answer.value if self.answer is not None else None,
            "answered_by": self.answered_by,
            "answered_at": self.answered_at.isoformat() if self.answered_at else None,
            "answer_reason": self.answer_reason,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RegradeRequest:
        answer = data.get("answer")
        answered_at = data.get("answered_at")
        return cls(
            by=data["by"],
            at=datetime.fromisoformat(data["at"]),
            reason=data.get("reason") or "",
            generation=int(data.get("generation", 0)),
            answer=RequestAnswer(answer) if answer else None,
            answered_by=data.get("answered_by"),
            answered_at=datetime.fromisoformat(answered_at) if answered_at else None,
            answer_reason=data.get("answer_reason") or "",
        )


def requested_state(state: ReviewState | None, generation: int, now: datetime) -> ReviewState:
    """The review state of a grade a student asked to have looked at again: held in the
    teacher's queue, flagged as a request, its grade still shown to the student (it was
    released: the request never withholds it)."""
    if state is None:
        return ReviewState(
            ReviewStatus.HELD, (HoldReason.REGRADE_REQUEST,), Release.IMMEDIATELY, now, generation
        )
    reasons = state.reasons
    if HoldReason.REGRADE_REQUEST not in reasons:
        reasons = (*reasons, HoldReason.REGRADE_REQUEST)
    return dataclasses.replace(
        state,
        status=ReviewStatus.HELD,
        reasons=reasons,
        release=Release.IMMEDIATELY,
        held_at=now,
    )


def request_kept(state: ReviewState | None, before: ReviewState, generation: int) -> ReviewState:
    """The review state of a regraded grade whose student's regrade request is still open
    (`before`: the state the request held it in; `state`: the regrade's own, or None).

    The request keeps its place in the teacher's queue (its `held_at`) and its release; the
    regrade's own reasons (`regrade-moved`, `reopened`, a hold rule) stand beside it.
    """
    base = state if state is not None else before
    reasons = base.reasons if base.status is ReviewStatus.HELD else ()
    if HoldReason.REGRADE_REQUEST not in reasons:
        reasons = (*reasons, HoldReason.REGRADE_REQUEST)
    return dataclasses.replace(
        base,
        status=ReviewStatus.HELD,
        reasons=reasons,
        release=before.release,
        held_at=before.held_at,
        generation=generation,
    )


def after_regrade(
    state: ReviewState, result: GradeResult, threshold: float, generation: int, now: datetime
) -> ReviewState:
    """The review state of a reviewed grade once a regrade's model grade `result` is in.

    The teacher's reviews stay, so the teacher's grade stays the final grade. The grade goes
    back to the teacher's queue when the regrade asked to reopen reviewed grades, or when
    the new model grade lies more than `threshold` points from the teacher's; otherwise it
    stays reviewed. The usual hold rules do not hold a grade a teacher already decided.
    """
    latest = state.latest
    assert latest is not None, "only a reviewed grade is carried through a regrade"
    reasons: list[HoldReason] = []
    if state.reopen:
        reasons.append(HoldReason.REOPENED)
    if abs(result.score - latest.result.score) > threshold:
        reasons.append(HoldReason.REGRADE_MOVED)
    if not reasons:
        return dataclasses.replace(state, generation=generation, reopen=False)
    return dataclasses.replace(
        state,
        status=ReviewStatus.HELD,
        reasons=tuple(reasons),
        held_at=now,
        generation=generation,
        reopen=False,
    )
