"""The gradebook subscriber: latest version wins whatever the order of delivery, a busy
LMS never spends a grade, a refusal is recorded and shown, an outage is visible (in the
intake's admin API, which reads the same store)."""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from services.gradebook.app import create_app
from services.gradebook.connections import StaticConnections
from services.gradebook.ports import GradebookBusy, GradebookRejected
from services.gradebook.settings import GradebookSettings
from services.intake.app import create_app as create_intake_app
from shared.adapters.embedded.gradebook_marks import SqliteGradebookMarks
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.gradebook import MarkKey
from tests.support.grade_posted import ScriptedWriter, grade_data, push_body
from tests.support.push import AUTH, PUSH_TOKEN, restored_root_logger

OPERATOR = {"Authorization": "Bearer operator-key-for-tests"}
T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    with restored_root_logger():
        yield


@pytest.fixture
def marks(settings: Settings) -> SqliteGradebookMarks:
    return SqliteGradebookMarks(SqliteDatabase(settings.database_path))


@pytest.fixture
def writer() -> ScriptedWriter:
    return ScriptedWriter()


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(T0)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(
        data_dir=tmp_path,
        push_token=PUSH_TOKEN,  # type: ignore[arg-type]
        operator_keys="ops=operator-key-for-tests",  # type: ignore[arg-type]
    )


@pytest.fixture
def admin(settings: Settings, adapters: Adapters, clock: FrozenClock) -> FlaskClient:
    """The intake's admin API on the same data directory (so the same store)."""
    return create_intake_app(settings, adapters, clock).test_client()


@pytest.fixture
def client(
    settings: Settings, marks: SqliteGradebookMarks, writer: ScriptedWriter, clock: FrozenClock
) -> FlaskClient:
    connections = StaticConnections(
        writers={"school-a": writer}, rosters={"school-a": {"student-1": "lms-1"}}
    )
    app = create_app(
        settings, GradebookSettings(), marks=marks, connections=connections, clock=clock
    )
    return app.test_client()


def push(client: FlaskClient, data: dict[str, Any]) -> int:
    return client.post("/pubsub/push", json=push_body(data), headers=AUTH).status_code


def held(writer: ScriptedWriter) -> Any:
    return writer.book[("essay-1", "student-1")]


def test_a_posted_grade_reaches_the_gradebook_with_the_lms_user_id(
    client: FlaskClient, writer: ScriptedWriter
) -> None:
    assert push(client, grade_data(1)) == 204
    grade = held(writer)
    assert (grade.version, grade.score, grade.lms_user_id) == (1, 7.0, "lms-1")
    assert grade.posted_at == datetime(2026, 3, 2, 9, 1, tzinfo=UTC)


def test_a_reordered_older_version_never_overwrites_a_newer_one(
    client: FlaskClient, writer: ScriptedWriter, marks: SqliteGradebookMarks
) -> None:
    assert push(client, grade_data(3, score=9.0)) == 204
    assert push(client, grade_data(2, score=4.0)) == 204
    assert push(client, grade_data(1, score=1.0)) == 204
    assert (held(writer).version, held(writer).score) == (3, 9.0)
    assert [c.version for c in writer.calls] == [3]
    mark = marks.mark(MarkKey("school-a", "essay-1", "student-1"))
    assert mark is not None and mark.version == 3


def test_a_redelivered_version_is_written_once(client: FlaskClient, writer: ScriptedWriter) -> None:
    for _ in range(3):
        assert push(client, grade_data(1)) == 204
    assert push(client, grade_data(2, score=8.0)) == 204
    assert push(client, grade_data(2, score=8.0)) == 204
    assert [c.version for c in writer.calls] == [1, 2]
    assert held(writer).score == 8.0


@pytest.mark.parametrize(
    "busy",
    [GradebookBusy(30.0, "HTTP 429 from the LMS"), GradebookBusy(None, "HTTP 503 from the LMS")],
)
def test_a_busy_lms_never_spends_the_grade(
    client: FlaskClient, writer: ScriptedWriter, busy: GradebookBusy
) -> None:
    writer.failures = [busy, busy]
    first = client.post("/pubsub/push", json=push_body(grade_data(1)), headers=AUTH)
    assert first.status_code == 503
    assert first.content_type == "application/problem+json"
    assert first.get_json()["type"].endswith("/gradebook-unavailable")
    if busy.retry_after_s is not None:
        assert first.headers["Retry-After"] == "30"
    assert push(client, grade_data(1)) == 503
    assert writer.book == {}
    # Pub/Sub redelivers the same version once the LMS answers again: it is written.
    assert push(client, grade_data(1)) == 204
    assert held(writer).version == 1
    assert [c.version for c in writer.calls] == [1, 1, 1]


def test_an_outage_is_visible_in_the_admin_api_until_the_lms_answers(
    client: FlaskClient,
    admin: FlaskClient,
    writer: ScriptedWriter,
    clock: FrozenClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert push(client, grade_data(1)) == 204
    writer.failures = [GradebookBusy(None, "HTTP 503"), GradebookBusy(None, "HTTP 503")]
    clock.advance(timedelta(minutes=1))
    with caplog.at_level(logging.INFO):
        assert push(client, grade_data(2, score=5.0)) == 503
        clock.advance(timedelta(minutes=1))
        assert push(client, grade_data(3, score=6.0)) == 503
    events = [(r.levelno, r.__dict__["event"]) for r in caplog.records if "event" in r.__dict__]
    assert events == [(logging.ERROR, "gradebook_outage"), (logging.WARNING, "gradebook_busy")]
    seen = admin.get("/admin/v1/gradebooks", headers=OPERATOR).get_json()
    assert seen["outages"] == ["school-a"]
    [school] = seen["gradebooks"]
    assert (school["state"], school["failures"], school["last_error"]) == ("outage", 2, "HTTP 503")
    assert school["since"] == (T0 + timedelta(minutes=1)).isoformat()
    # The grades queued during the outage arrive after it, the latest last.
    assert push(client, grade_data(2, score=5.0)) == 204
    with caplog.at_level(logging.INFO):
        assert push(client, grade_data(3, score=6.0)) == 204
    assert any(r.__dict__.get("event") == "gradebook_recovered" for r in caplog.records)
    assert (held(writer).version, held(writer).score) == (3, 6.0)
    after = admin.get("/admin/v1/gradebooks", headers=OPERATOR).get_json()
    assert after["outages"] == [] and after["gradebooks"][0]["state"] == "ok"


def test_an_outage_in_reverse_order_still_ends_on_the_latest(
    client: FlaskClient, writer: ScriptedWriter
) -> None:
    writer.failures = [GradebookBusy(None, "timeout"), GradebookBusy(None, "timeout")]
    assert push(client, grade_data(1)) == 503
    assert push(client, grade_data(2, score=9.5)) == 503
    # Redelivery order is not publication order.
    assert push(client, grade_data(2, score=9.5)) == 204
    assert push(client, grade_data(1)) == 204
    assert (held(writer).version, held(writer).score) == (2, 9.5)


def test_a_rejected_grade_is_recorded_shown_and_not_retried(
    client: FlaskClient, admin: FlaskClient, writer: ScriptedWriter
) -> None:
    writer.failures = [GradebookRejected("course work created by another project")]
    assert push(client, grade_data(1)) == 204
    assert push(client, grade_data(1)) == 204
    assert len(writer.calls) == 1
    seen = admin.get("/admin/v1/gradebooks?school=school-a", headers=OPERATOR).get_json()
    [rejected] = seen["rejected"]
    assert (rejected["student_id"], rejected["version"], rejected["detail"]) == (
        "student-1",
        1,
        "course work created by another project",
    )
    # A later version is written again (the refusal was about that version).
    assert push(client, grade_data(2)) == 204
    assert held(writer).version == 2
    assert admin.get("/admin/v1/gradebooks", headers=OPERATOR).get_json()["rejected"] == []


def test_a_write_in_progress_holds_off_a_second_delivery(
    client: FlaskClient, marks: SqliteGradebookMarks, writer: ScriptedWriter
) -> None:
    key = MarkKey("school-a", "essay-1", "student-1")
    marks.begin(key, 1, "another-instance", T0, timedelta(seconds=60))
    answer = client.post("/pubsub/push", json=push_body(grade_data(2)), headers=AUTH)
    assert answer.status_code == 503
    assert answer.get_json()["type"].endswith("/grade-write-in-progress")
    assert writer.calls == []


def test_a_school_without_a_gradebook_is_acknowledged(
    client: FlaskClient, writer: ScriptedWriter
) -> None:
    assert push(client, grade_data(1, school="school-b")) == 204
    assert writer.calls == []


def test_a_grade_that_names_no_student_is_acknowledged_not_malformed(
    client: FlaskClient, writer: ScriptedWriter, settings: Settings
) -> None:
    nameless = grade_data(1)
    nameless["student_id"] = None  # a submission without a student id: no gradebook row
    assert push(client, nameless) == 204
    assert writer.calls == []
    with contextlib.closing(sqlite3.connect(settings.database_path)) as conn:
        rows = conn.execute(
            "SELECT subscriber FROM processed_events WHERE subscriber LIKE '%malformed'"
        ).fetchall()
    assert rows == []


def test_other_event_types_and_malformed_grades_are_acknowledged_unwritten(
    client: FlaskClient, writer: ScriptedWriter
) -> None:
    other = push_body(grade_data(1))
    other["message"]["attributes"]["ce-type"] = "dev.gradeq.grading.completed.v1"
    assert client.post("/pubsub/push", json=other, headers=AUTH).status_code == 204
    bad = grade_data(1)
    bad["version"] = 0
    assert push(client, bad) == 204
    assert writer.calls == []


def test_pushes_need_the_push_credential_and_the_admin_api_an_operator(
    client: FlaskClient, admin: FlaskClient
) -> None:
    assert client.post("/pubsub/push", json=push_body(grade_data(1))).status_code == 401
    assert admin.get("/admin/v1/gradebooks").status_code == 401
    assert admin.get("/admin/v1/gradebooks", headers=AUTH).status_code == 403
