"""The gradebook reads the GradePosted event exactly as posting publishes it."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

from services.gradebook import event as gradebook_event
from shared.codecs.cloudevent import GRADE_POSTED_TYPE, to_pubsub
from shared.domain.events import GradePosted


def _published(posted: GradePosted) -> dict[str, object]:
    data, attributes = to_pubsub(posted)
    return {
        "message": {
            "data": base64.b64encode(data).decode(),
            "attributes": attributes,
            "messageId": "m-1",
        },
        "subscription": "projects/p/subscriptions/gradebook",
    }


def test_a_published_grade_posted_is_read_whole_by_the_gradebook() -> None:
    posted = GradePosted(
        event_id="gp-job-1-v2",
        school="school-a",
        assignment_id="asg-1",
        student_id="s-17",
        submission_id="sub-17",
        job_id="job-1",
        version=2,
        score=6.0,
        max_score=8.0,
        source="teacher",
        feedback="see the second line",
        grading_progress="FullyGraded",
        posted_at=datetime(2026, 12, 1, 10, 30, tzinfo=UTC),
        reason="override",
    )
    received = gradebook_event.from_push(_published(posted))
    assert gradebook_event.GRADE_POSTED_TYPE == GRADE_POSTED_TYPE
    assert received.event_id == "gp-job-1-v2"
    grade = received.grade
    assert (grade.school, grade.assignment_id, grade.student_id) == ("school-a", "asg-1", "s-17")
    assert (grade.submission_id, grade.job_id, grade.version) == ("sub-17", "job-1", 2)
    assert (grade.score, grade.max_score, grade.source) == (6.0, 8.0, "teacher")
    assert grade.grading_progress == "FullyGraded"
    assert grade.feedback == "see the second line"
    assert grade.posted_at == datetime(2026, 12, 1, 10, 30, tzinfo=UTC)
