"""Two gradebook instances (or two deliveries) writing the first grades of an assignment
at once make one Classroom course work, not two: the creation is claimed in the
gradebook's marks, the other instance is held off and then uses the recorded item."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import requests

from services.gradebook.app import create_app
from services.gradebook.claims import ItemClaims
from services.gradebook.classroom import ClassroomWriter, marker
from services.gradebook.connections import StaticConnections
from services.gradebook.ports import GradebookBusy, GradebookWriteHeld, PostedGrade
from services.gradebook.settings import GradebookSettings
from shared.adapters.embedded.gradebook_marks import SqliteGradebookMarks
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.clock import FrozenClock
from shared.config.settings import Settings
from tests.support.classroom_fake import ClassroomFake, Fault
from tests.support.grade_posted import grade_data, push_body
from tests.support.push import AUTH, PUSH_TOKEN, restored_root_logger
from tests.unit.test_classroom_writer import COURSE, STUDENTS, grade


class DuringCreate(requests.Session):
    """A session that runs `meanwhile` just before it sends the course work creation: the
    other instance's write, arriving while this one creates."""

    def __init__(self) -> None:
        super().__init__()
        self.meanwhile: Callable[[], None] = lambda: None

    def request(
        self, method: str | bytes, url: str | bytes, *args: Any, **kwargs: Any
    ) -> requests.Response:
        if method == "POST" and str(url).endswith("/courseWork"):
            run, self.meanwhile = self.meanwhile, lambda: None
            run()
        return super().request(method, url, *args, **kwargs)


@pytest.fixture
def fake() -> Iterator[ClassroomFake]:
    with ClassroomFake(page_size=1) as classroom:
        classroom.add_course(COURSE, STUDENTS)
        yield classroom


@pytest.fixture
def claims(tmp_path: Path) -> ItemClaims:
    marks = SqliteGradebookMarks(SqliteDatabase(tmp_path / "marks.sqlite3"))
    return ItemClaims(marks, FrozenClock())


def instance(
    fake: ClassroomFake, claims: ItemClaims | None, session: requests.Session | None = None
) -> ClassroomWriter:
    """One gradebook instance's writer for the school (each its own session and cache)."""
    return ClassroomWriter(
        session or requests.Session(), COURSE, base_url=fake.base_url, claims=claims
    )


def second_student() -> PostedGrade:
    return dataclasses.replace(grade(), student_id="student-2", lms_user_id="ben@school.example")


def test_without_claims_two_instances_racing_create_two_course_works(
    fake: ClassroomFake,
) -> None:
    # What the claim prevents: each instance looked, found nothing, and created one.
    session = DuringCreate()
    first, second = instance(fake, None, session), instance(fake, None)
    session.meanwhile = lambda: second.write(second_student())
    first.write(grade())
    assert len(fake.created_by_gradeq()) == 2


def test_an_instance_creating_holds_off_the_other_which_then_uses_its_course_work(
    fake: ClassroomFake, claims: ItemClaims
) -> None:
    session = DuringCreate()
    first, second = instance(fake, claims, session), instance(fake, claims)
    held: list[Exception] = []

    def other_write() -> None:
        with pytest.raises(GradebookWriteHeld) as raised:
            second.write(second_student())
        held.append(raised.value)

    session.meanwhile = other_write
    first.write(grade())
    assert len(held) == 1  # the second instance's write waited, nothing created
    second.write(second_student())  # its redelivery
    [work] = fake.created_by_gradeq()
    assert fake.submission_of(work["id"], "111")["assignedGrade"] == 7.5
    assert fake.submission_of(work["id"], "222")["assignedGrade"] == 7.5
    assert claims.recorded("school-a", "essay-1") == work["id"]


def made_by_gradeq(fake: ClassroomFake) -> str:
    """Course work of the assignment created through the API, as an instance would."""
    body = {"title": "Gradeq: essay-1", "workType": "ASSIGNMENT", "description": marker("essay-1")}
    url = f"{fake.base_url}/v1/courses/{COURSE}/courseWork"
    return str(requests.post(url, json=body, timeout=5).json()["id"])


def test_a_claim_whose_holder_died_runs_out_and_the_next_finds_its_course_work(
    fake: ClassroomFake, claims: ItemClaims
) -> None:
    # An instance claimed the creation, created the course work, and was SIGKILLed
    # before it recorded the id.
    assert claims.claim("school-a", "essay-1", "killed-instance").value == "write"
    made = made_by_gradeq(fake)
    writer = instance(fake, claims)
    with pytest.raises(GradebookWriteHeld):
        writer.write(grade())
    assert isinstance(claims.clock, FrozenClock)
    claims.clock.advance(claims.lease + timedelta(seconds=1))
    writer.write(grade())  # the redelivery, once the claim ran out
    assert [w["id"] for w in fake.created_by_gradeq()] == [made]
    assert fake.submission_of(made, "111")["assignedGrade"] == 7.5
    assert claims.recorded("school-a", "essay-1") == made


def test_a_busy_classroom_while_claimed_gives_the_claim_back(
    fake: ClassroomFake, claims: ItemClaims
) -> None:
    fake.fail_next(Fault(503))  # the look for the course work fails
    with pytest.raises(GradebookBusy):
        instance(fake, claims).write(grade())
    assert fake.created_by_gradeq() == []
    instance(fake, claims).write(grade())  # at once: nothing holds the claim any more
    [work] = fake.created_by_gradeq()
    assert claims.recorded("school-a", "essay-1") == work["id"]


def test_the_service_answers_a_held_creation_503_without_an_outage(
    fake: ClassroomFake, claims: ItemClaims, tmp_path: Path
) -> None:
    settings = Settings(data_dir=tmp_path, push_token=PUSH_TOKEN)  # type: ignore[arg-type]
    marks = claims.marks
    writer = instance(fake, claims)
    connections = StaticConnections(
        writers={"school-a": writer}, rosters={"school-a": {"student-1": "111"}}
    )
    with restored_root_logger():
        app = create_app(
            settings, GradebookSettings(), marks=marks, connections=connections, clock=FrozenClock()
        )
    client = app.test_client()
    # Another instance holds the creation claim of the assignment.
    claims.claim("school-a", "essay-1", "another-instance")
    body = push_body(grade_data(1, assignment_id="essay-1", score=6.0))
    answer = client.post("/pubsub/push", json=body, headers=AUTH)
    assert answer.status_code == 503
    assert answer.json is not None and answer.json["type"].endswith("grade-write-in-progress")
    assert fake.created_by_gradeq() == []
    assert [h.state.value for h in marks.health()] == []  # not an LMS outage
    # It made and recorded the course work; the redelivery writes there.
    made = made_by_gradeq(fake)
    claims.record("school-a", "essay-1", "another-instance", made)
    assert client.post("/pubsub/push", json=body, headers=AUTH).status_code == 204
    assert fake.submission_of(made, "111")["assignedGrade"] == 6.0
    assert [w["id"] for w in fake.created_by_gradeq()] == [made]
