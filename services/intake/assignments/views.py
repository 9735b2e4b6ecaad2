"""The public JSON shapes of assignments, as pydantic models (rendered and documented)."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from services.intake.jobs.views import JobView, _iso
from shared.domain.assignment import Assignment, RubricVersion, Tally
from shared.domain.errors import GradeqError
from shared.domain.grade_sheet import ClassStatistics
from shared.domain.job import Job, posting_of
from shared.domain.status import JobStatus
from shared.service_layer.assignments import ItemResult, ItemStatus
from shared.service_layer.regrade import RegradeReport


class RubricVersionView(BaseModel):
    """One version of the rubric; versions are numbered from 1 and never change."""

    version: int = Field(ge=1)
    rubric: str | list[str]
    created_at: str


class ProgressView(BaseModel):
    """The current grading round's counts by status and mean score so far."""

    round: int = Field(ge=0)
    submissions: int = Field(ge=0)
    final: int = Field(ge=0)
    counts: dict[JobStatus, int]
    mean_score: float | None
    done: bool
    #: Scores so far in tenths of the max score: [0, 10%), [10%, 20%), ..., the full score.
    histogram: list[int]
    #: Submissions a regrade has still to move into this round: they wait for room under
    #: the ceilings of jobs not yet final, and move as the round's jobs are graded.
    waiting: int = Field(default=0, ge=0)


class AssignmentView(BaseModel):
    """An assignment as its client sees it."""

    model_config = ConfigDict(extra="forbid")

    id: str
    title: str
    max_score: float
    prompt_version: str
    rubric: RubricVersionView
    rubric_versions: list[RubricVersionView]
    created_at: str
    updated_at: str
    progress: ProgressView | None = None
    #: The review rules (docs/review.md); null when no grade of it is held for review.
    review: dict[str, Any] | None = None
    #: Until when students may ask for a regrade of their grade; null: never.
    regrade_requests_until: str | None = None
    #: "automatic": each grade reaches students once final; "manual": when posted.
    posting: Literal["automatic", "manual"] = "automatic"


class AssignmentPageView(BaseModel):
    """One page of a client's assignments, newest first; `next_cursor` fetches the next."""

    assignments: list[AssignmentView]
    next_cursor: str | None


class ItemProblem(BaseModel):
    """Why one answer of a batch was refused (an RFC 9457 problem, without status)."""

    type: str
    title: str
    detail: str
    errors: list[dict[str, str]] | None = None


class BatchItemView(BaseModel):
    """What the batch did with one answer."""

    submission_id: str | None
    status: ItemStatus
    job_id: str | None = None
    problem: ItemProblem | None = None


class BatchView(BaseModel):
    """The batch's answer, item by item in the order sent, with the totals."""

    accepted: int
    existing: int
    refused: int
    items: list[BatchItemView]


class GradeRowView(BaseModel):
    """One row of the grade sheet: the final grade (the teacher's where a teacher decided)
    and its source, the model's and the teacher's score, who reviewed and why."""

    student_id: str | None
    submission_id: str
    job_id: str
    status: JobStatus
    final_score: float | None
    final_source: Literal["model", "teacher"] | None
    model_score: float | None
    teacher_score: float | None
    max_score: float
    reviewer: str | None
    reason: str | None
    #: The teacher's feedback where one wrote it, else the model's.
    feedback: str | None
    rubric_version: int | None
    prompt_version: str | None
    review_status: str | None
    reviewed_at: str | None
    posted_at: str | None


class ClassStatisticsView(BaseModel):
    """The class's statistics over the final grades (the teacher's where one decided)."""

    graded: int
    mean: float | None
    median: float | None
    stdev: float | None
    min: float | None
    max: float | None
    by_teacher: int


def statistics_view(stats: ClassStatistics) -> ClassStatisticsView:
    return ClassStatisticsView(
        graded=stats.graded,
        mean=stats.mean,
        median=stats.median,
        stdev=stats.stdev,
        min=stats.minimum,
        max=stats.maximum,
        by_teacher=stats.by_teacher,
    )


class GradePageView(BaseModel):
    """One page of the assignment's jobs, newest first, with their grade sheet rows; the
    first page (no cursor) carries the class statistics over the final grades."""

    jobs: list[JobView]
    grades: list[GradeRowView] = []
    statistics: ClassStatisticsView | None = None
    next_cursor: str | None


def _rubric(version: RubricVersion) -> RubricVersionView:
    rubric: Any = version.rubric
    created_at = _iso(version.created_at)
    assert created_at is not None
    return RubricVersionView(
        version=version.version,
        rubric=list(rubric) if isinstance(rubric, tuple) else rubric,
        created_at=created_at,
    )


def assignment_view(assignment: Assignment, tally: Tally | None = None) -> AssignmentView:
    created_at, updated_at = _iso(assignment.created_at), _iso(assignment.updated_at)
    assert created_at is not None and updated_at is not None
    progress = None
    if tally is not None:
        progress = ProgressView(
            round=assignment.round,
            submissions=tally.total,
            final=tally.final,
            counts={s: tally.counts.get(s, 0) for s in JobStatus},
            mean_score=tally.mean_score,
            histogram=list(tally.histogram),
            done=tally.done and tally.total >= assignment.expected,
            waiting=max(0, assignment.expected - tally.total) if assignment.round else 0,
        )
    return AssignmentView(
        id=assignment.id,
        title=assignment.title,
        max_score=assignment.max_score,
        prompt_version=assignment.prompt_version,
        rubric=_rubric(assignment.rubric),
        rubric_versions=[_rubric(v) for v in assignment.rubrics],
        created_at=created_at,
        updated_at=updated_at,
        progress=progress,
        review=assignment.settings.get("review"),
        regrade_requests_until=assignment.settings.get("regrade_requests_until"),
        posting=posting_of(assignment.settings).value,
    )


def _problem(error: GradeqError) -> ItemProblem:
    errors = error.extensions.get("errors")
    return ItemProblem(type=error.type_uri, title=error.title, detail=error.detail, errors=errors)


def batch_view(results: list[ItemResult | tuple[str | None, GradeqError]]) -> BatchView:
    """The batch's answer; a (submission id, error) pair is an item refused before storing."""
    items: list[BatchItemView] = []
    for result in results:
        if isinstance(result, tuple):
            submission_id, error = result
            items.append(
                BatchItemView(
                    submission_id=submission_id, status=ItemStatus.REFUSED, problem=_problem(error)
                )
            )
            continue
        job: Job | None = result.job
        items.append(
            BatchItemView(
                submission_id=result.submission_id,
                status=result.status,
                job_id=job.id if job is not None else None,
                problem=_problem(result.problem) if result.problem is not None else None,
            )
        )
    count = {s: sum(1 for i in items if i.status is s) for s in ItemStatus}
    return BatchView(
        accepted=count[ItemStatus.ACCEPTED],
        existing=count[ItemStatus.EXISTING],
        refused=count[ItemStatus.REFUSED],
        items=items,
    )


class ScoreChangeView(BaseModel):
    """One submission's grade before and after the regrade (null: no score): `old` and
    `new` are the final grades the student sees (the teacher's where a teacher decided),
    `old_model` and `new_model` the model's."""

    submission_id: str
    job_id: str
    old: float | None
    new: float | None
    status: JobStatus
    student_id: str | None = None
    old_model: float | None = None
    new_model: float | None = None
    #: Whose grade `new` is.
    source: Literal["model", "teacher"] = "model"
    #: Back in the teacher's queue: the model moved past the threshold, or reopened.
    flagged: bool = False


class RegradeReportView(BaseModel):
    """How the last regrade moved the grades: the mean shift of the final grades and how
    many moved more than the threshold, the model's mean shift, the quadratic weighted
    kappa between the two model gradings, and how many went back to the teacher."""

    round: int
    compared: int
    mean_shift: float | None
    changed: int
    threshold: float
    kappa: float | None
    changes: list[ScoreChangeView]
    model_mean_shift: float | None = None
    flagged: int = 0
    #: The teacher chose to reopen reviewed grades on this regrade.
    reopen_reviewed: bool = False


def report_view(report: RegradeReport) -> RegradeReportView:
    return RegradeReportView(
        round=report.round,
        compared=report.compared,
        mean_shift=report.mean_shift,
        changed=report.changed,
        threshold=report.threshold,
        kappa=report.kappa,
        changes=[ScoreChangeView(**dataclasses.asdict(c)) for c in report.changes],
        model_mean_shift=report.model_mean_shift,
        flagged=report.flagged,
        reopen_reviewed=report.reopen_reviewed,
    )


class PostReportView(BaseModel):
    """What a post did, by submission id: new versions posted, grades already posted as
    they are, and those with no grade to post yet (not graded, or held for a first review)."""

    posted: list[str]
    unchanged: list[str]
    not_ready: list[str]
