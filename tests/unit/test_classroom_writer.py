"""ClassroomWriter against the loopback Classroom: course work made by Gradeq's project,
draftGrade then assignedGrade and return once posted, the errors mapped to busy or
rejected, the gradebook service retrying through a 429 and a 503, and how each base URL
is called: Google's through the teacher's delegation, a loopback stand-in without
credentials, anything else refused at start."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import requests

from services.gradebook.app import create_app
from services.gradebook.classroom import (
    ClassroomAccess,
    ClassroomWriter,
    classroom_access,
    marker,
)
from services.gradebook.connections import StaticConnections, load_connections
from services.gradebook.ports import GradebookBusy, GradebookRejected, PostedGrade
from services.gradebook.settings import GradebookSettings
from shared.adapters.embedded.gradebook_marks import SqliteGradebookMarks
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.clock import FrozenClock
from shared.config.settings import Settings
from tests.support.classroom_fake import ClassroomFake, Fault
from tests.support.grade_posted import grade_data, push_body
from tests.support.push import AUTH, PUSH_TOKEN, restored_root_logger

COURSE = "course-7"
STUDENTS = {"111": "ada@school.example", "222": "ben@school.example"}


@pytest.fixture
def fake() -> Iterator[ClassroomFake]:
    with ClassroomFake(page_size=1) as classroom:
        classroom.add_course(COURSE, STUDENTS)
        yield classroom


def writer(fake: ClassroomFake, **kwargs: object) -> ClassroomWriter:
    return ClassroomWriter(requests.Session(), COURSE, base_url=fake.base_url, **kwargs)  # type: ignore[arg-type]


def grade(version: int = 1, **changes: object) -> PostedGrade:
    base = PostedGrade(
        school="school-a",
        assignment_id="essay-1",
        student_id="student-1",
        submission_id="sub-1",
        job_id="job-1",
        version=version,
        score=7.5,
        max_score=10.0,
        source="teacher",
        feedback="good",
        grading_progress="FullyGraded",
        posted_at=datetime(2026, 3, 2, 9, 0, tzinfo=UTC),
        reason=None,
        lms_user_id="ada@school.example",
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_a_posted_grade_is_drafted_assigned_and_returned(fake: ClassroomFake) -> None:
    writer(fake).write(grade())
    [work] = fake.created_by_gradeq()
    assert (work["description"], work["maxPoints"], work["workType"]) == (
        marker("essay-1"),
        10.0,
        "ASSIGNMENT",
    )
    submission = fake.submission_of(work["id"], "111")
    assert (submission["draftGrade"], submission["assignedGrade"], submission["state"]) == (
        7.5,
        7.5,
        "RETURNED",
    )
    sid = submission["id"]
    assert fake.history == [
        ("patch", sid, {"draftGrade": 7.5}),
        ("patch", sid, {"assignedGrade": 7.5}),
        ("return", sid, {}),
    ]
    other = fake.submission_of(work["id"], "222")
    assert "assignedGrade" not in other and other["state"] == "CREATED"


def test_a_grade_pending_manual_review_is_only_a_draft(fake: ClassroomFake) -> None:
    writer(fake).write(grade(grading_progress="PendingManual", score=4.0))
    [work] = fake.created_by_gradeq()
    submission = fake.submission_of(work["id"], "111")
    assert submission["draftGrade"] == 4.0
    assert "assignedGrade" not in submission and submission["state"] == "CREATED"


def test_writing_again_finds_gradeqs_course_work_and_keeps_the_latest(
    fake: ClassroomFake,
) -> None:
    fake.add_foreign_course_work(COURSE, description=marker("essay-1"))  # not ours: skipped
    writer(fake).write(grade(1, score=5.0))
    # A new instance (a restart) finds the course work through the pages of the list.
    again = writer(fake)
    again.write(grade(2, score=9.0))
    again.write(grade(2, score=9.0))
    [work] = fake.created_by_gradeq()
    submission = fake.submission_of(work["id"], "111")
    assert (submission["draftGrade"], submission["assignedGrade"]) == (9.0, 9.0)


def test_course_work_another_project_created_is_rejected(fake: ClassroomFake) -> None:
    foreign = fake.add_foreign_course_work(COURSE)
    with pytest.raises(GradebookRejected, match="another Google Cloud project"):
        writer(fake, linked={"essay-1": foreign}).write(grade())
    assert "draftGrade" not in fake.submission_of(foreign, "111")


@pytest.mark.parametrize(
    ("fault", "retry_after_s"), [(Fault(429, "30"), 30.0), (Fault(503), None), (Fault(500), None)]
)
def test_a_429_or_5xx_is_busy(
    fake: ClassroomFake, fault: Fault, retry_after_s: float | None
) -> None:
    fake.fail_next(fault)
    with pytest.raises(GradebookBusy) as raised:
        writer(fake).write(grade())
    assert raised.value.retry_after_s == retry_after_s


def test_a_refused_connection_is_busy() -> None:
    with ClassroomFake() as gone:
        url = gone.base_url
    refused = ClassroomWriter(requests.Session(), COURSE, base_url=url, timeout_s=2)
    with pytest.raises(GradebookBusy, match="ConnectionError"):
        refused.write(grade())


def test_a_student_outside_the_course_or_the_roster_is_rejected(fake: ClassroomFake) -> None:
    with pytest.raises(GradebookRejected, match="no submission"):
        writer(fake).write(grade(lms_user_id="eve@elsewhere.example"))
    with pytest.raises(GradebookRejected, match="roster"):
        writer(fake).write(grade(lms_user_id=None))


def test_the_gradebook_service_retries_a_busy_classroom_until_the_grade_lands(
    fake: ClassroomFake, tmp_path: Path
) -> None:
    settings = Settings(data_dir=tmp_path, push_token=PUSH_TOKEN)  # type: ignore[arg-type]
    connections = StaticConnections(
        writers={"school-a": writer(fake)}, rosters={"school-a": {"student-1": "111"}}
    )
    with restored_root_logger():
        app = create_app(
            settings,
            GradebookSettings(),
            marks=SqliteGradebookMarks(SqliteDatabase(settings.database_path)),
            connections=connections,
            clock=FrozenClock(),
        )
    client = app.test_client()
    body = push_body(grade_data(1, score=6.0))
    fake.fail_next(Fault(429, "12"), Fault(503))
    first = client.post("/pubsub/push", json=body, headers=AUTH)
    assert (first.status_code, first.headers.get("Retry-After")) == (503, "12")
    assert client.post("/pubsub/push", json=body, headers=AUTH).status_code == 503
    assert fake.created_by_gradeq() == []
    # Pub/Sub redelivers the same message; the LMS answers again.
    assert client.post("/pubsub/push", json=body, headers=AUTH).status_code == 204
    [work] = fake.created_by_gradeq()
    assert fake.submission_of(work["id"], "111")["assignedGrade"] == 6.0
    # An older version redelivered after a newer one changes nothing.
    assert (
        client.post(
            "/pubsub/push", json=push_body(grade_data(3, score=8.0)), headers=AUTH
        ).status_code
        == 204
    )
    assert (
        client.post(
            "/pubsub/push", json=push_body(grade_data(2, score=1.0)), headers=AUTH
        ).status_code
        == 204
    )
    assert fake.submission_of(work["id"], "111")["assignedGrade"] == 8.0


def test_a_token_refused_for_a_missing_grant_is_busy(fake: ClassroomFake) -> None:
    from google.auth.exceptions import RefreshError

    class NoToken(requests.Session):
        def request(self, *args: object, **kwargs: object) -> requests.Response:
            raise RefreshError("unauthorized_client")  # type: ignore[no-untyped-call]

    with pytest.raises(GradebookBusy, match="RefreshError"):
        ClassroomWriter(NoToken(), COURSE, base_url=fake.base_url).write(grade())


@pytest.mark.parametrize(
    ("base_url", "access"),
    [
        ("https://classroom.googleapis.com", ClassroomAccess.DELEGATED),
        ("https://classroom.example.test:8443/", ClassroomAccess.DELEGATED),
        ("http://127.0.0.1:8123", ClassroomAccess.LOOPBACK),
        ("http://localhost:9", ClassroomAccess.LOOPBACK),
        ("http://LOCALHOST", ClassroomAccess.LOOPBACK),
        ("http://[::1]:8080", ClassroomAccess.LOOPBACK),
    ],
)
def test_google_is_called_by_delegation_and_a_loopback_stand_in_without_credentials(
    base_url: str, access: ClassroomAccess
) -> None:
    assert classroom_access(base_url) is access


@pytest.mark.parametrize(
    "base_url",
    [
        "http://classroom.googleapis.com",  # Google's API, unencrypted
        "http://10.0.0.7:8080",  # another machine
        "http://127.0.0.1.example.test",  # a name that begins like a loopback address
        "http://localhost@classroom.example.test",  # userinfo naming a loopback host
        "http://user@127.0.0.1:8080",  # credentials in the URL
        "http://127.0.0.1:port",  # a malformed port
        "ftp://127.0.0.1",
        "https://",
        "127.0.0.1:8080",
        "",
    ],
)
def test_any_other_classroom_base_url_is_refused(base_url: str) -> None:
    with pytest.raises(ValueError, match="Classroom base URL"):
        classroom_access(base_url)


ENTRY = {"kind": "classroom", "course_id": COURSE, "teacher": "t@school.example"}


def test_a_connection_to_a_loopback_stand_in_writes_without_delegation(
    fake: ClassroomFake, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_delegation(teacher: str) -> requests.Session:
        raise AssertionError("a loopback stand-in needs no Google credentials")

    monkeypatch.setattr("services.gradebook.classroom.delegated_session", no_delegation)
    settings = GradebookSettings(
        connections_json=json.dumps({"school-a": {**ENTRY, "roster": "student_id"}}),
        classroom_base_url=fake.base_url,
    )
    connections = load_connections(settings)
    built = connections.writer("school-a")
    assert isinstance(built, ClassroomWriter)
    built.write(grade())
    [work] = fake.created_by_gradeq()
    assert fake.submission_of(work["id"], "111")["assignedGrade"] == 7.5


def test_google_classroom_is_reached_through_the_teachers_delegation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    teachers: list[str] = []

    def delegation(teacher: str) -> requests.Session:
        teachers.append(teacher)
        return requests.Session()

    monkeypatch.setattr("services.gradebook.classroom.delegated_session", delegation)
    connections = load_connections(GradebookSettings(connections_json=json.dumps({"s": ENTRY})))
    assert isinstance(connections.writer("s"), ClassroomWriter)
    assert teachers == ["t@school.example"]


def test_a_plain_http_classroom_off_this_machine_never_starts_the_service(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def delegation(teacher: str) -> requests.Session:
        raise AssertionError("refused before any credential is made")

    monkeypatch.setattr("services.gradebook.classroom.delegated_session", delegation)
    settings = GradebookSettings(
        connections_json=json.dumps({"s": ENTRY}), classroom_base_url="http://10.0.0.7"
    )
    with pytest.raises(ValueError, match="must be https"):
        load_connections(settings)
