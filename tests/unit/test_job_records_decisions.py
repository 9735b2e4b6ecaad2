"""What a job's posted grade stores, and how records written before a field existed read
back, pinned key by key."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest, Job, PostedGrade

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=30)
ASSIGNED = GradingRequest(
    submission_id="s",
    answer="a",
    rubric="r",
    max_score=20.0,
    assignment_id="as-1",
    rubric_version=2,
)
TEACHERS = PostedGrade(
    version=3,
    score=14.5,
    max_score=20.0,
    source="teacher",
    feedback="Well argued.",
    at=T0,
    by="teacher-1",
    reason="rubric misread",
    progress="PendingManual",
    generation=2,
)


def test_a_posted_grade_stores_every_field_and_reads_back_the_same() -> None:
    stored = TEACHERS.to_dict()
    assert stored == {
        "version": 3,
        "score": 14.5,
        "max_score": 20.0,
        "source": "teacher",
        "feedback": "Well argued.",
        "at": T0.isoformat(),
        "by": "teacher-1",
        "reason": "rubric misread",
        "progress": "PendingManual",
        "generation": 2,
    }
    assert PostedGrade.from_dict(stored) == TEACHERS


def test_a_posted_grade_written_before_its_later_fields_reads_back_their_defaults() -> None:
    old = {"version": "1", "score": "7", "max_score": "10", "source": "model", "at": T0.isoformat()}
    assert PostedGrade.from_dict(old) == PostedGrade(
        version=1,
        score=7.0,
        max_score=10.0,
        source="model",
        feedback="",
        at=T0,
        by="",
        reason="",
        progress="FullyGraded",
        generation=0,
    )


def test_a_posted_grade_with_null_fields_reads_back_their_defaults() -> None:
    nulls = {
        **TEACHERS.to_dict(),
        "feedback": None,
        "by": None,
        "reason": None,
        "progress": None,
        "generation": None,
    }
    assert PostedGrade.from_dict(nulls) == dataclasses.replace(
        TEACHERS, feedback="", by="", reason="", progress="FullyGraded", generation=0
    )


def test_a_jobs_posted_grade_survives_its_record() -> None:
    job = Job.new("job-7", "c", ASSIGNED, "fp", T0)
    done = job.start_attempt("w", T0, LEASE, 3).succeed("w", GradeResult(9, 20, "Fine."), T0)
    posted = done.post(T0 + timedelta(seconds=1), "auto")
    assert posted.posted == PostedGrade(
        version=1,
        score=9,
        max_score=20.0,
        source="model",
        feedback="Fine.",
        at=T0 + timedelta(seconds=1),
        by="auto",
        reason="",
        progress="FullyGraded",
        generation=0,
    )
    record = posted.to_record()
    assert record["posted"] == posted.posted.to_dict()
    assert record["post_announced"] is False
    assert Job.from_record(record) == posted
    taught = dataclasses.replace(posted, posted=TEACHERS)
    assert Job.from_record(taught.to_record()).posted == TEACHERS
