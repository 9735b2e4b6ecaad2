"""Which redelivered task the worker treats as handed on (`Job.defer`): only the task just
before the job's current one, of a job not final and not held by a live lease. That one
is acknowledged untouched; any other delivery goes on as usual."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from shared.domain.events import GradingCompleted
from shared.domain.ids import completion_event_id, task_name_for
from shared.domain.job import ANNOUNCE_LEASE
from shared.domain.status import JobStatus
from shared.service_layer.worker import DeliveryResult, TaskDelivery, Verdict
from tests.unit.test_worker_decisions import LEASE, RESULT, Harness

LONG_AGO = timedelta(hours=1)


@pytest.fixture
def h(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Harness]:
    harness = Harness(tmp_path, monkeypatch)
    yield harness
    harness.gate.set()


def deferred(h: Harness, times: int) -> str:
    """A job handed on `times` times for lack of quota (RETRYING, no lease)."""
    job_id = h.seed()
    at = h.clock.now() - LONG_AGO
    for _ in range(times):
        h.put(job_id, lambda j: j.claim("deferring", at, timedelta(seconds=LEASE)))
        h.put(job_id, lambda j: j.defer("deferring", at))
    assert h.job(job_id).deferrals == times
    return job_id


def test_the_task_just_before_the_current_one_is_acknowledged_untouched(h: Harness) -> None:
    service = h.service()
    job_id = deferred(h, 2)
    before = h.job(job_id)
    h.beats.finish_on = 0  # were it graded, the grading would end at once
    result = service.handle(TaskDelivery(job_id, task_name_for(job_id, 0, 1)))
    assert result == DeliveryResult(Verdict.DONE, None)
    assert h.grader.received == []
    assert h.job(job_id) == before
    assert h.publisher.events == []


def test_an_older_task_than_the_one_before_is_not_handed_on_and_grades(h: Harness) -> None:
    service = h.service()
    job_id = deferred(h, 2)
    h.beats.finish_on = 0
    result = service.handle(TaskDelivery(job_id, task_name_for(job_id, 0, 0)))
    assert result.verdict is Verdict.DONE
    done = h.job(job_id)
    assert result.job == done
    assert done.status is JobStatus.SUCCEEDED and done.result == RESULT
    assert len(h.grader.received) == 1


def test_a_final_job_is_announced_even_by_the_task_before_its_current_one(h: Harness) -> None:
    service = h.service()
    job_id = deferred(h, 1)
    at = h.clock.now() - LONG_AGO
    h.put(job_id, lambda j: j.claim("grading", at, timedelta(seconds=LEASE)))
    h.put(job_id, lambda j: j.succeed("grading", RESULT, at))
    # The finishing attempt died before announcing; its announce lease is long over.
    finished = h.job(job_id)
    assert not finished.event_published
    assert finished.lease_expires_at == at + ANNOUNCE_LEASE < h.clock.now()

    result = service.handle(TaskDelivery(job_id, task_name_for(job_id, 0, 0)))
    assert result.verdict is Verdict.DONE
    announced = h.job(job_id)
    assert result.job == announced and announced.event_published
    [event] = h.publisher.events
    assert isinstance(event, GradingCompleted)
    assert event.event_id == completion_event_id(job_id)
    assert h.grader.received == []


def test_the_task_before_is_handed_on_over_a_dead_attempts_expired_lease(h: Harness) -> None:
    service = h.service()
    job_id = deferred(h, 1)
    at = h.clock.now() - LONG_AGO
    # The current task's attempt started, then its worker died: the lease ran out.
    h.put(job_id, lambda j: j.claim("dead", at, timedelta(seconds=LEASE)))
    before = h.job(job_id)
    assert before.status is JobStatus.RUNNING and before.lease_expires_at is not None
    assert not before.lease_is_live(h.clock.now())
    h.beats.finish_on = 0
    result = service.handle(TaskDelivery(job_id, task_name_for(job_id, 0, 0)))
    assert result == DeliveryResult(Verdict.DONE, None)
    assert h.job(job_id) == before
    assert h.grader.received == []
