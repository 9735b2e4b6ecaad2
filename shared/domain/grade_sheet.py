"""The grade sheet: one row per submission with its final grade and where it came from,
and the class statistics over the final grades (the teacher's where a teacher decided)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from shared.domain.job import Job
from shared.domain.status import JobStatus

#: The sheet's columns, in order (the rubric's criteria follow them in the CSV).
COLUMNS = (
    "student_id",
    "submission_id",
    "job_id",
    "status",
    "final_score",
    "final_source",
    "model_score",
    "teacher_score",
    "max_score",
    "reviewer",
    "reason",
    "feedback",
    "rubric_version",
    "prompt_version",
    "review_status",
    "reviewed_at",
    "posted_at",
)


def grade_row(job: Job) -> dict[str, Any]:
    """One submission's row: final score and source, model and teacher score, the
    reviewer and reason, the feedback (the teacher's where one wrote it), versions."""
    model = job.result
    teacher = job.teacher_result
    latest = job.review.latest if job.review is not None else None
    final = job.effective_result if job.status is JobStatus.SUCCEEDED else None
    posted = job.posted
    return {
        "student_id": job.request.student_id,
        "submission_id": job.request.submission_id,
        "job_id": job.id,
        "status": job.status.value,
        "final_score": final.score if final is not None else None,
        "final_source": job.final_source if final is not None else None,
        "model_score": model.score if model is not None else None,
        "teacher_score": teacher.score if teacher is not None else None,
        "max_score": job.request.max_score,
        "reviewer": latest.by if latest is not None else None,
        "reason": latest.reason if latest is not None else None,
        "feedback": final.feedback if final is not None else None,
        "rubric_version": job.request.rubric_version,
        "prompt_version": (model.prompt_version if model and model.prompt_version else None)
        or job.request.prompt_version,
        "review_status": job.review.status.value if job.review is not None else None,
        "reviewed_at": latest.at.isoformat() if latest is not None else None,
        "posted_at": posted.at.isoformat() if posted is not None else None,
    }


def criteria_cells(job: Job, n_criteria: int) -> list[object]:
    """The final grade's verdict on each criterion, padded to the rubric's count."""
    final = job.effective_result if job.status is JobStatus.SUCCEEDED else None
    verdicts: list[object] = []
    for criterion in final.criteria if final else ():
        verdicts.append(
            next((criterion[k] for k in ("score", "verdict", "met") if k in criterion), "")
        )
    return (verdicts + [""] * n_criteria)[:n_criteria]


@dataclass(frozen=True)
class ClassStatistics:
    """Over the final grades of the graded submissions."""

    graded: int
    mean: float | None
    median: float | None
    stdev: float | None
    minimum: float | None
    maximum: float | None
    #: How many final grades are a teacher's.
    by_teacher: int

    @classmethod
    def of(cls, jobs: Iterable[Job]) -> ClassStatistics:
        scores: list[float] = []
        by_teacher = 0
        for job in jobs:
            final = job.effective_result if job.status is JobStatus.SUCCEEDED else None
            if final is None:
                continue
            scores.append(final.score)
            by_teacher += job.final_source == "teacher"
        return cls(
            graded=len(scores),
            mean=statistics.fmean(scores) if scores else None,
            median=statistics.median(scores) if scores else None,
            stdev=statistics.pstdev(scores) if scores else None,
            minimum=min(scores) if scores else None,
            maximum=max(scores) if scores else None,
            by_teacher=by_teacher,
        )
