"""GradePosted events as Pub/Sub pushes them to the gradebook subscriber (binary mode)."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from cloudevents.core.bindings.http import to_binary
from cloudevents.core.formats.json import JSONFormat
from cloudevents.core.v1.event import CloudEvent

from services.gradebook.event import GRADE_POSTED_TYPE
from services.gradebook.ports import PostedGrade

POSTED_AT = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def grade_data(
    version: int,
    *,
    school: str = "school-a",
    assignment_id: str = "essay-1",
    student_id: str = "student-1",
    score: float = 7.0,
    grading_progress: str = "FullyGraded",
    source: str = "teacher",
) -> dict[str, Any]:
    """The data of a GradePosted: version `version` of the student's posted grade."""
    return {
        "school": school,
        "assignment_id": assignment_id,
        "student_id": student_id,
        "submission_id": f"sub-{student_id}",
        "job_id": f"job-{student_id}",
        "version": version,
        "score": score,
        "max_score": 10,
        "source": source,
        "feedback": f"feedback v{version}",
        "grading_progress": grading_progress,
        "posted_at": (POSTED_AT + timedelta(minutes=version)).isoformat(),
        "reason": "" if version == 1 else "teacher override",
    }


def push_body(data: dict[str, Any], message_id: str | None = None) -> dict[str, Any]:
    """The push envelope for one GradePosted (event id stable per submission and version)."""
    event = CloudEvent(
        {
            "id": f"{data['submission_id']}:v{data['version']}",
            "type": GRADE_POSTED_TYPE,
            "source": "//gradeq/intake",
            "time": POSTED_AT,
            "datacontenttype": "application/json",
        },
        data,
    )
    message = to_binary(event, JSONFormat())
    return {
        "message": {
            "data": base64.b64encode(message.body).decode(),
            "attributes": dict(message.headers),
            "messageId": message_id or f"m-{data['student_id']}-{data['version']}",
            "publishTime": "2026-03-02T09:00:00Z",
        },
        "subscription": "projects/local/subscriptions/gradebook",
    }


@dataclass
class ScriptedWriter:
    """A GradebookWriter that raises the scripted errors in turn, then writes; it keeps
    what the gradebook holds: the last written grade per (assignment, student)."""

    failures: list[Exception] = field(default_factory=list)
    calls: list[PostedGrade] = field(default_factory=list)
    book: dict[tuple[str, str], PostedGrade] = field(default_factory=dict)

    def write(self, grade: PostedGrade) -> None:
        self.calls.append(grade)
        if self.failures:
            raise self.failures.pop(0)
        self.book[(grade.assignment_id, grade.student_id)] = grade
