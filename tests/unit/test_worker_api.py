"""The worker's delivery semantics: claim, grade once, record, announce, then 2xx."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from services.worker.app import create_app
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.errors import PermanentGradingError, TransientGradingError
from shared.domain.ids import job_id_for
from shared.domain.job import ANNOUNCE_LEASE, GradingRequest, Job
from shared.domain.status import JobStatus
from tests.fakes import FakePublisher, ScriptedGrader
from tests.unit.conftest import PUSH_TOKEN

AUTH = {"Authorization": f"Bearer {PUSH_TOKEN}"}


def seed(adapters: Adapters, clock: FrozenClock, key: str = "k") -> str:
    job_id = job_id_for("client-a", key)
    request = GradingRequest(submission_id="s", answer="a", rubric="r", max_score=10)
    adapters.store.create(Job.new(job_id, "client-a", request, "fp", clock.now()))
    return job_id


def deliver(client: FlaskClient, job_id: str, retry: int = 0, **headers: str) -> Any:
    return client.post(
        "/tasks/grade",
        json={"job_id": job_id},
        headers={
            **AUTH,
            "X-CloudTasks-TaskName": "t-abc",
            "X-CloudTasks-TaskRetryCount": str(retry),
            **headers,
        },
    )


def build(
    settings: Settings, adapters: Adapters, clock: FrozenClock, grader: ScriptedGrader
) -> Flask:
    return create_app(settings, adapters, grader, clock)


def publisher(adapters: Adapters) -> FakePublisher:
    assert isinstance(adapters.publisher, FakePublisher)
    return adapters.publisher


def test_success_stores_result_publishes_once_and_answers_2xx(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    grader = ScriptedGrader(score=8)
    client = build(settings, adapters, clock, grader).test_client()
    job_id = seed(adapters, clock)
    response = deliver(client, job_id)
    assert response.status_code == 200
    job = adapters.store.get(job_id)
    assert job is not None and job.status is JobStatus.SUCCEEDED
    assert job.result is not None and job.result.score == 8
    assert job.event_published and job.attempts == 1
    assert [e.job_id for e in publisher(adapters).completions()] == [job_id]
    # A duplicate delivery afterwards changes nothing and publishes nothing.
    assert deliver(client, job_id).status_code == 200
    assert grader.calls == 1 and len(publisher(adapters).events) == 1


def test_push_without_token_is_rejected(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    client = build(settings, adapters, clock, ScriptedGrader()).test_client()
    job_id = seed(adapters, clock)
    response = client.post("/tasks/grade", json={"job_id": job_id})
    assert response.status_code == 401
    wrong = client.post(
        "/tasks/grade", json={"job_id": job_id}, headers={"Authorization": "Bearer nope"}
    )
    assert wrong.status_code == 401
    job = adapters.store.get(job_id)
    assert job is not None and job.status is JobStatus.PENDING


def test_transient_error_retries_then_succeeds_with_attempts_3(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    grader = ScriptedGrader(TransientGradingError("429"), TransientGradingError("429"))
    client = build(settings, adapters, clock, grader).test_client()
    job_id = seed(adapters, clock)
    first = deliver(client, job_id, retry=0)
    assert first.status_code == 500
    job = adapters.store.get(job_id)
    assert job is not None and job.status is JobStatus.RETRYING
    assert job.error is not None and job.error.type == "grading-transient"
    assert deliver(client, job_id, retry=1).status_code == 500
    assert deliver(client, job_id, retry=2).status_code == 200
    job = adapters.store.get(job_id)
    assert job is not None and job.status is JobStatus.SUCCEEDED and job.attempts == 3
    assert job.error is None


def test_retry_after_from_the_provider_is_passed_on(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    grader = ScriptedGrader(TransientGradingError("429", retry_after_s=42))
    client = build(settings, adapters, clock, grader).test_client()
    response = deliver(client, seed(adapters, clock))
    assert response.status_code == 500
    assert response.headers["Retry-After"] == "42"


def test_permanent_error_fails_the_job_and_answers_2xx(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    grader = ScriptedGrader(PermanentGradingError("refused"))
    client = build(settings, adapters, clock, grader).test_client()
    job_id = seed(adapters, clock)
    assert deliver(client, job_id).status_code == 200
    job = adapters.store.get(job_id)
    assert job is not None and job.status is JobStatus.FAILED
    assert job.error is not None and job.error.type == "grading-permanent"
    assert [e.outcome.value for e in publisher(adapters).completions()] == ["failed"]


def test_transient_error_on_the_final_attempt_fails_the_job(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    max_attempts = settings.queue_config().retry_config.max_attempts
    grader = ScriptedGrader(TransientGradingError("still 429"))
    client = build(settings, adapters, clock, grader).test_client()
    job_id = seed(adapters, clock)
    assert deliver(client, job_id, retry=max_attempts - 1).status_code == 200
    job = adapters.store.get(job_id)
    assert job is not None and job.status is JobStatus.FAILED
    assert len(publisher(adapters).events) == 1


def test_the_final_attempt_is_known_by_the_retry_count_not_the_execution_count(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    # Cloud Tasks counts no 5xx answer as an execution, and the worker answers 5xx to be
    # retried: X-CloudTasks-TaskExecutionCount stays 0 on every attempt of such a job.
    max_attempts = settings.queue_config().retry_config.max_attempts
    assert max_attempts > 1
    grader = ScriptedGrader(*[TransientGradingError("429")] * max_attempts)
    client = build(settings, adapters, clock, grader).test_client()
    job_id = seed(adapters, clock)
    as_sent = {"X-CloudTasks-TaskExecutionCount": "0"}
    for retry in range(max_attempts - 1):
        assert deliver(client, job_id, retry=retry, **as_sent).status_code == 500
    job = adapters.store.get(job_id)
    assert job is not None and job.status is JobStatus.RETRYING
    assert deliver(client, job_id, retry=max_attempts - 1, **as_sent).status_code == 200
    job = adapters.store.get(job_id)
    assert job is not None and job.status is JobStatus.FAILED
    assert job.attempts == max_attempts
    assert [e.outcome.value for e in publisher(adapters).completions()] == ["failed"]


def test_a_high_execution_count_does_not_make_an_attempt_the_last(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    max_attempts = settings.queue_config().retry_config.max_attempts
    grader = ScriptedGrader(TransientGradingError("429"))
    client = build(settings, adapters, clock, grader).test_client()
    job_id = seed(adapters, clock)
    counted = {"X-CloudTasks-TaskExecutionCount": str(max_attempts)}
    assert deliver(client, job_id, retry=0, **counted).status_code == 500
    job = adapters.store.get(job_id)
    assert job is not None and job.status is JobStatus.RETRYING


def test_live_lease_makes_a_second_delivery_wait(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    client = build(settings, adapters, clock, ScriptedGrader()).test_client()
    job_id = seed(adapters, clock)
    adapters.store.update(job_id, lambda j: j.claim("other", clock.now(), timedelta(minutes=1)))
    response = deliver(client, job_id)
    assert response.status_code == 409
    assert response.get_json()["type"].endswith("/job-locked")
    clock.advance(timedelta(minutes=2))
    assert deliver(client, job_id).status_code == 200


def test_publish_failure_answers_5xx_and_the_next_delivery_announces(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    grader = ScriptedGrader()
    client = build(settings, adapters, clock, grader).test_client()
    job_id = seed(adapters, clock)
    publisher(adapters).failures = 1
    assert deliver(client, job_id).status_code == 503
    job = adapters.store.get(job_id)
    assert job is not None and job.status is JobStatus.SUCCEEDED and not job.event_published
    # The finishing attempt's announce lease keeps duplicates from publishing meanwhile.
    assert deliver(client, job_id, retry=1).status_code == 409
    clock.advance(ANNOUNCE_LEASE)
    assert deliver(client, job_id, retry=2).status_code == 200
    assert grader.calls == 1
    assert len(publisher(adapters).events) == 1


def test_unknown_job_and_malformed_body_are_dropped_with_2xx(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    client = build(settings, adapters, clock, ScriptedGrader()).test_client()
    assert deliver(client, "no-such-job").status_code == 200
    bad = client.post("/tasks/grade", json={"job_id": "x", "extra": 1}, headers=AUTH)
    assert bad.status_code == 200 and "dropped" in bad.get_json()


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
def test_health(settings: Settings, adapters: Adapters, clock: FrozenClock, path: str) -> None:
    client = build(settings, adapters, clock, ScriptedGrader()).test_client()
    assert client.get(path).status_code == 200


def test_a_replayed_dead_letter_is_graded_again_and_announced_under_a_new_event(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    grader = ScriptedGrader(PermanentGradingError("refused"))
    client = build(settings, adapters, clock, grader).test_client()
    job_id = seed(adapters, clock)
    assert deliver(client, job_id).status_code == 200
    clock.advance(ANNOUNCE_LEASE)
    adapters.store.update(job_id, lambda j: j.replay_failed(clock.now(), "ops"))
    assert deliver(client, job_id).status_code == 200
    job = adapters.store.get(job_id)
    assert job is not None and job.status is JobStatus.SUCCEEDED and job.attempts == 1
    assert grader.attempts == [1, 2]  # the grader's attempt counts across the replay
    events = publisher(adapters).completions()
    assert [e.outcome.value for e in events] == ["failed", "succeeded"]
    assert events[0].event_id != events[1].event_id
    assert [a.outcome.value for a in job.history] == ["failed", "succeeded"]
