"""An assignment: one rubric (versioned), one prompt version, many submissions.

A change of rubric makes a new rubric version; old versions stay readable. Each grading
round of the assignment (round 0 is the first grading, each regrade opens the next) keeps
its own tally: counts of jobs by status and the sum of scores, moved by the jobs' own
writes (`tally_change`), so progress is read from a constant number of counters.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from shared.domain.authorization import SERVER, Owner, owner_of
from shared.domain.job import Job
from shared.domain.status import JobStatus

Rubric = str | tuple[str, ...]

#: How many rubric versions one assignment keeps (they live in its one document).
MAX_RUBRIC_VERSIONS = 40

#: The tally fields besides the per-status counts.
SCORE_SUM = "score_sum"
SCORED = "scored"
#: Scores are also counted in tenths of the max score (bucket 10 is a full score), so a
#: histogram is read from the same counters: fields "h0" .. "h10".
HISTOGRAM_BUCKETS = 11


def histogram_bucket(score: float, max_score: float) -> int:
    """The tenth of the scale a score falls in (0..10)."""
    if max_score <= 0:
        return 0
    return min(HISTOGRAM_BUCKETS - 1, max(0, int(score / max_score * 10)))


@dataclass(frozen=True)
class RubricVersion:
    """One version of an assignment's rubric: numbered from 1, never changed once made."""

    version: int
    rubric: Rubric
    created_at: datetime

    def to_record(self) -> dict[str, Any]:
        rubric = list(self.rubric) if isinstance(self.rubric, tuple) else self.rubric
        return {"version": self.version, "rubric": rubric, "created_at": self.created_at}

    @classmethod
    def from_record(cls, data: dict[str, Any]) -> RubricVersion:
        rubric = data["rubric"]
        return cls(
            version=int(data["version"]),
            rubric=tuple(rubric) if isinstance(rubric, list) else rubric,
            created_at=data["created_at"],
        )


@dataclass(frozen=True)
class Assignment:
    """A client's assignment: title, max score, prompt version and its rubric versions."""

    id: str
    client_id: str
    title: str
    max_score: float
    prompt_version: str
    rubrics: tuple[RubricVersion, ...]
    created_at: datetime
    updated_at: datetime
    #: The grading round new and regraded submissions belong to (0: the first grading).
    round: int = 0
    settings: dict[str, Any] = field(default_factory=dict)
    #: How many submissions a regrade moves into the current round: the round is not
    #: graded before that many are counted in it (0 for the first grading).
    expected: int = 0
    #: The current round's regrade has submissions still to move, waiting for room under
    #: the ceilings of jobs not yet final: the recovery sweep resumes it.
    regrade_waiting: bool = False
    #: The teacher chose, on the current round's regrade, to reopen reviewed grades.
    reopen_reviewed: bool = False
    #: Who in the school (`client_id`) made it: its server, or a signed-in user's id.
    author: str = SERVER

    @classmethod
    def new(
        cls,
        assignment_id: str,
        client_id: str,
        title: str,
        rubric: Rubric,
        max_score: float,
        prompt_version: str,
        now: datetime,
        settings: dict[str, Any] | None = None,
        author: str = SERVER,
    ) -> Assignment:
        return cls(
            author=author,
            id=assignment_id,
            client_id=client_id,
            title=title,
            max_score=max_score,
            prompt_version=prompt_version,
            rubrics=(RubricVersion(1, rubric, now),),
            created_at=now,
            updated_at=now,
            settings=dict(settings or {}),
        )

    @property
    def owner(self) -> Owner:
        """The school the assignment belongs to and its author there."""
        return Owner(self.client_id, self.author)

    @property
    def rubric(self) -> RubricVersion:
        """The current rubric version."""
        return self.rubrics[-1]

    def rubric_version(self, version: int) -> RubricVersion | None:
        """The rubric as it was at `version`, or None when the assignment never had it."""
        for kept in self.rubrics:
            if kept.version == version:
                return kept
        return None

    def revise(self, rubric: Rubric, now: datetime) -> Assignment:
        """A new rubric version; the same rubric again changes nothing."""
        if rubric == self.rubric.rubric:
            return self
        version = RubricVersion(self.rubric.version + 1, rubric, now)
        kept = (*self.rubrics, version)[-MAX_RUBRIC_VERSIONS:]
        return dataclasses.replace(self, rubrics=kept, updated_at=now)

    def start_round(
        self,
        now: datetime,
        expected: int,
        prompt_version: str | None = None,
        reopen_reviewed: bool = False,
    ) -> Assignment:
        """Open the next grading round (a regrade) of `expected` submissions; whether it
        reopens the grades teachers reviewed is recorded on the round."""
        return dataclasses.replace(
            self,
            round=self.round + 1,
            expected=expected,
            prompt_version=prompt_version or self.prompt_version,
            updated_at=now,
            reopen_reviewed=reopen_reviewed,
        )

    def with_regrade_waiting(self, waiting: bool) -> Assignment:
        """The assignment with its regrade marked as waiting for room (or not)."""
        return dataclasses.replace(self, regrade_waiting=waiting)

    def to_record(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "client_id": self.client_id,
            "title": self.title,
            "max_score": self.max_score,
            "prompt_version": self.prompt_version,
            "rubrics": [r.to_record() for r in self.rubrics],
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "round": self.round,
            "settings": dict(self.settings),
            "expected": self.expected,
            "regrade_waiting": self.regrade_waiting,
            "reopen_reviewed": self.reopen_reviewed,
            "author": self.author,
        }

    @classmethod
    def from_record(cls, data: dict[str, Any]) -> Assignment:
        # One made in a user's scope before objects had an author names the user there.
        owner = owner_of(data["client_id"], data.get("author"))
        return cls(
            id=data["id"],
            client_id=owner.school,
            author=owner.author,
            title=data["title"],
            max_score=float(data["max_score"]),
            prompt_version=data["prompt_version"],
            rubrics=tuple(RubricVersion.from_record(r) for r in data["rubrics"]),
            created_at=data["created_at"],
            updated_at=data["updated_at"],
            round=int(data.get("round", 0)),
            settings=dict(data.get("settings") or {}),
            expected=int(data.get("expected", 0)),
            regrade_waiting=bool(data.get("regrade_waiting", False)),
            reopen_reviewed=bool(data.get("reopen_reviewed", False)),
        )


@dataclass(frozen=True)
class Tally:
    """One grading round's counters: jobs by status, and the scores of those that succeeded."""

    counts: dict[JobStatus, int] = field(default_factory=dict)
    score_sum: float = 0.0
    scored: int = 0
    #: How many scores fell in each tenth of the scale (see `histogram_bucket`).
    histogram: tuple[int, ...] = (0,) * HISTOGRAM_BUCKETS

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def final(self) -> int:
        return sum(n for status, n in self.counts.items() if status.is_final)

    @property
    def done(self) -> bool:
        """Every submission counted in this round is final (and there is at least one)."""
        return self.total > 0 and self.final == self.total

    @property
    def mean_score(self) -> float | None:
        return self.score_sum / self.scored if self.scored else None

    @classmethod
    def from_fields(cls, fields: dict[str, float]) -> Tally:
        """Rebuild from summed counter fields (status names, SCORE_SUM, SCORED)."""
        counts = {s: int(fields.get(s.value, 0)) for s in JobStatus if fields.get(s.value)}
        histogram = tuple(int(fields.get(f"h{i}", 0)) for i in range(HISTOGRAM_BUCKETS))
        return cls(counts, float(fields.get(SCORE_SUM, 0.0)), int(fields.get(SCORED, 0)), histogram)


@dataclass(frozen=True)
class TallyChange:
    """What one job write adds to its assignment round's counters."""

    assignment_id: str
    round: int
    deltas: dict[str, float]


def tally_change(before: Job | None, after: Job) -> TallyChange | None:
    """The counter deltas of writing `after` over `before` (None: not part of an assignment).

    A job entering a new round (a regrade) is counted afresh in that round; the round it
    leaves keeps its final counts, so its report stays as it ended. Scores are final
    grades: a teacher's decision that changes a grade moves the sum and the histogram.
    """
    assignment_id = after.request.assignment_id
    if assignment_id is None or not after.request.tallied:
        return None
    round_ = after.request.assignment_round
    deltas: dict[str, float] = {}
    same_round = before is not None and before.request.assignment_round == round_
    if before is not None and same_round:
        if before.status is after.status:
            return _rescored(assignment_id, round_, before, after)
        deltas[before.status.value] = -1
    deltas[after.status.value] = deltas.get(after.status.value, 0) + 1
    was_scored = same_round and before is not None and _final_score(before) is not None
    score = _final_score(after)
    if score is not None and not was_scored:
        deltas[SCORE_SUM] = score
        deltas[SCORED] = 1
        deltas[f"h{histogram_bucket(score, after.request.max_score)}"] = 1
    return TallyChange(assignment_id, round_, deltas)


def _rescored(assignment_id: str, round_: int, before: Job, after: Job) -> TallyChange | None:
    """The deltas of a final grade changed in place (a teacher's decision), if any."""
    old, new = _final_score(before), _final_score(after)
    if old is None or new is None or old == new:
        return None
    deltas: dict[str, float] = {SCORE_SUM: new - old}
    was = histogram_bucket(old, before.request.max_score)
    now = histogram_bucket(new, after.request.max_score)
    if was != now:
        deltas[f"h{was}"] = -1
        deltas[f"h{now}"] = 1
    return TallyChange(assignment_id, round_, deltas)


def _final_score(job: Job) -> float | None:
    """The final grade's score of a succeeded job (the teacher's where one decided)."""
    if job.status is not JobStatus.SUCCEEDED:
        return None
    final = job.effective_result
    return final.score if final is not None else None
