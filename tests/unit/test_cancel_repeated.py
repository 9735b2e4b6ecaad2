"""A repeated cancel answers as the first did; a job that ended otherwise stays refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from services.intake.app import create_app
from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.errors import JobAlreadyFinal
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest, Job
from shared.domain.status import JobStatus
from shared.service_layer.intake import IntakeService
from tests.fakes import FakePublisher, FakeTaskQueue
from tests.unit.conftest import API_KEY
from tests.unit.test_intake_api import assert_problem, post

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
REQUEST = GradingRequest(submission_id="s1", answer="light", rubric=("c1",), max_score=10)
AUTH = {"Authorization": f"Bearer {API_KEY}"}


class StaleReads(SqliteJobStore):
    """A store whose reads return the job as it was first read: a racing cancel's view."""

    def __init__(self, db: SqliteDatabase) -> None:
        super().__init__(db)
        self.first: dict[str, Job] = {}

    def get(self, job_id: str) -> Job | None:
        job = super().get(job_id)
        if job is not None:
            self.first.setdefault(job_id, job)
        return self.first.get(job_id, job)


@pytest.fixture
def client(settings: Settings, adapters: Adapters, clock: FrozenClock) -> FlaskClient:
    return create_app(settings, adapters, clock).test_client()


def test_a_second_cancel_answers_200_with_the_same_job_and_announces_nothing_more(
    client: FlaskClient, adapters: Adapters
) -> None:
    location = post(client).headers["Location"]
    first = client.post(location + "/cancel", headers=AUTH)
    assert first.status_code == 200, first.get_json()
    again = client.post(location + "/cancel", headers=AUTH)
    assert again.status_code == 200, again.get_json()
    assert again.get_json() == first.get_json()
    assert again.get_json()["status"] == "CANCELLED"
    publisher = adapters.publisher
    assert isinstance(publisher, FakePublisher)
    assert [e.outcome.value for e in publisher.completions()] == ["cancelled"]


def test_cancelling_a_succeeded_job_is_still_409(
    client: FlaskClient, adapters: Adapters, clock: FrozenClock
) -> None:
    location = post(client).headers["Location"]
    job_id = location.rsplit("/", 1)[-1]
    adapters.store.update(job_id, lambda j: j.claim("w", clock.now(), timedelta(seconds=30)))
    result = GradeResult(7.0, 10.0, "fine", ())
    adapters.store.update(job_id, lambda j: j.succeed("w", result, clock.now()))
    assert_problem(client.post(location + "/cancel", headers=AUTH), 409, "job-already-final")


def test_a_cancel_that_lost_a_race_answers_the_winners_job(tmp_path: Path) -> None:
    store = StaleReads(SqliteDatabase(tmp_path / "jobs.sqlite3"))
    publisher = FakePublisher()
    service = IntakeService(store, FakeTaskQueue(), publisher, FrozenClock(T0))
    job = service.submit("client-a", "key-1", REQUEST).job
    assert service.get("client-a", job.id).status is JobStatus.PENDING  # the stale view
    winner = service.cancel("client-a", job.id)  # reads PENDING, as the loser will
    loser = service.cancel("client-a", job.id)
    assert loser == winner and loser.status is JobStatus.CANCELLED
    assert [e.job_id for e in publisher.completions()] == [job.id]


def test_a_cancel_stored_but_not_announced_is_announced_by_the_repeat(tmp_path: Path) -> None:
    store = SqliteJobStore(SqliteDatabase(tmp_path / "jobs.sqlite3"))
    publisher = FakePublisher()
    service = IntakeService(store, FakeTaskQueue(), publisher, FrozenClock(T0))
    job = service.submit("client-a", "key-1", REQUEST).job
    store.update(job.id, lambda j: j.cancel(T0))  # the first cancel died before announcing
    repeated = service.cancel("client-a", job.id)
    assert repeated.status is JobStatus.CANCELLED and repeated.event_published
    assert [e.job_id for e in publisher.completions()] == [job.id]
    with pytest.raises(JobAlreadyFinal):
        store.update(job.id, lambda j: j.cancel(T0))  # the domain rule itself is unchanged
