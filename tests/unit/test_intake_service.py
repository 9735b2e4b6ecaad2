"""The intake use case: what it derives, stores and enqueues for each request."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.clock import FrozenClock
from shared.domain.errors import IdempotencyConflict, JobNotFound
from shared.domain.ids import job_id_for, task_name_for
from shared.domain.job import GradingRequest
from shared.domain.status import JobStatus
from shared.ports import TaskSpec
from shared.service_layer.intake import IntakeService, fingerprint
from tests.fakes import FakePublisher, FakeTaskQueue

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _request(
    answer: str = "an answer", metadata: dict[str, object] | None = None
) -> GradingRequest:
    return GradingRequest(
        submission_id="s1",
        answer=answer,
        rubric=("c1", "c2"),
        max_score=10,
        metadata=metadata or {},
    )


@pytest.fixture
def queue() -> FakeTaskQueue:
    return FakeTaskQueue()


@pytest.fixture
def publisher() -> FakePublisher:
    return FakePublisher()


@pytest.fixture
def service(tmp_path: Path, queue: FakeTaskQueue, publisher: FakePublisher) -> IntakeService:
    store = SqliteJobStore(SqliteDatabase(tmp_path / "jobs.sqlite3"))
    return IntakeService(store, queue, publisher, FrozenClock(T0))


def test_the_fingerprint_is_pinned_and_ignores_key_order() -> None:
    # Stored with every job and compared on each retry, possibly by a newer release.
    request = _request("a", {"b": 1, "a": 2})
    assert (
        fingerprint(request) == "9679197fbe5518c5d837260b68c060b18330a1b00609bf258c464b8bfb401ef7"
    )


def test_a_new_key_makes_a_job_and_its_first_task(
    service: IntakeService, queue: FakeTaskQueue
) -> None:
    submission = service.submit("client-a", "key-1", _request())
    assert submission.created is True
    job = submission.job
    assert job.id == job_id_for("client-a", "key-1")
    assert job.client_id == "client-a"
    assert job.status is JobStatus.PENDING
    assert job.created_at == T0
    assert job.fingerprint == fingerprint(_request())
    assert queue.tasks == [TaskSpec(task_name_for(job.id, 0), job.id, T0)]


def test_two_keys_of_one_client_make_two_jobs(service: IntakeService, queue: FakeTaskQueue) -> None:
    first = service.submit("client-a", "key-1", _request()).job
    second = service.submit("client-a", "key-2", _request()).job
    assert first.id != second.id
    assert [t.job_id for t in queue.tasks] == [first.id, second.id]


def test_a_retry_returns_the_job_and_re_enqueues_the_same_task_name(
    service: IntakeService, queue: FakeTaskQueue
) -> None:
    first = service.submit("client-a", "key-1", _request())
    again = service.submit("client-a", "key-1", _request())
    assert again.created is False
    assert again.job == first.job
    assert len(queue.tasks) == 1  # the same name: the queue deduplicated the second enqueue


def test_key_order_in_metadata_is_the_same_request(service: IntakeService) -> None:
    service.submit("client-a", "key-1", _request("x", {"a": 1, "b": 2}))
    again = service.submit("client-a", "key-1", _request("x", {"b": 2, "a": 1}))
    assert again.created is False


def test_the_same_key_with_another_body_is_a_conflict(service: IntakeService) -> None:
    service.submit("client-a", "key-1", _request("first"))
    with pytest.raises(IdempotencyConflict) as raised:
        service.submit("client-a", "key-1", _request("second"))
    assert raised.value.detail == (
        "this Idempotency-Key was already used with a different request body"
    )


def test_another_clients_job_is_not_found(service: IntakeService) -> None:
    job = service.submit("client-a", "key-1", _request()).job
    with pytest.raises(JobNotFound) as raised:
        service.get("client-b", job.id)
    assert raised.value.detail == f"no grading job {job.id}"
    assert service.get("client-a", job.id) == job


def test_cancel_announces_the_cancelled_job(
    service: IntakeService, publisher: FakePublisher
) -> None:
    job = service.submit("client-a", "key-1", _request()).job
    cancelled = service.cancel("client-a", job.id)
    assert cancelled.status is JobStatus.CANCELLED
    assert cancelled.event_published is True
    assert [e.job_id for e in publisher.completions()] == [job.id]
