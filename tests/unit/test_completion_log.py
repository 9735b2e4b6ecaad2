"""The completion line the log-based metrics read: one per announced job, stable names."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest

from shared.clock import FrozenClock
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest, Job, JobError
from shared.service_layer.completion import announce
from tests.fakes import FakePublisher

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=60)


class OneJobStore:
    """Just enough of a JobStore for announce: update applies the change."""

    def __init__(self, job: Job) -> None:
        self.job = job

    def update(self, job_id: str, mutate: object) -> Job:
        assert job_id == self.job.id and callable(mutate)
        self.job = mutate(self.job)
        return self.job


def finished(ok: bool) -> Job:
    request = GradingRequest(submission_id="s", answer="a", rubric="r")
    job = Job.new("job-1", "c", request, "fp", T0).claim("w", T0 + timedelta(seconds=3), LEASE)
    end = T0 + timedelta(seconds=10)
    if ok:
        return job.succeed("w", GradeResult(1, 10, "ok"), end)
    return job.fail("w", JobError("grading-permanent", "no"), end)


def completion_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "event", None) == "job_completed"]


@pytest.mark.parametrize(("ok", "outcome", "error_type"), [
    (True, "succeeded", None), (False, "failed", "grading-permanent"),
])  # fmt: skip
def test_announcing_logs_one_completion_line_with_the_timings(
    caplog: pytest.LogCaptureFixture, ok: bool, outcome: str, error_type: str | None
) -> None:
    caplog.set_level(logging.INFO)
    store = OneJobStore(finished(ok))
    publisher = FakePublisher()
    announce(store.job, store, publisher, FrozenClock(T0))  # type: ignore[arg-type]
    announce(store.job, store, FakePublisher(), FrozenClock(T0))  # type: ignore[arg-type]
    [line] = completion_lines(caplog)
    [event] = publisher.events
    # The line names the event subscribers dedupe on and the bus's message.
    assert line.event_id == event.event_id  # type: ignore[attr-defined]
    assert line.message_id == "m1"  # type: ignore[attr-defined]
    assert line.getMessage() == "job completed"
    assert line.outcome == outcome  # type: ignore[attr-defined]
    assert line.error_type == error_type  # type: ignore[attr-defined]
    assert line.queue_wait_ms == 3000  # type: ignore[attr-defined]
    assert line.processing_ms == 7000  # type: ignore[attr-defined]
    assert line.total_ms == 10000  # type: ignore[attr-defined]
    assert line.attempts == 1  # type: ignore[attr-defined]
    assert line.generation == 0  # type: ignore[attr-defined]
