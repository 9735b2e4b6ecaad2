"""The queue health's decisions: a failed job is counted under its error's type, and one
that lost its error is a broken invariant, not a type of its own."""

from __future__ import annotations

import dataclasses

import pytest

from shared.clock import FrozenClock
from shared.domain.job import GradingRequest, Job, JobError
from shared.service_layer.queue_health import _error_type

CLOCK = FrozenClock()
REQUEST = GradingRequest("s", "an answer", ("c1",), 1)


def test_a_failed_job_counts_under_its_errors_type_and_never_without_one() -> None:
    job = Job.new("job-1", "client-a", REQUEST, "fp", CLOCK.now())
    failed = job.fail(None, JobError("grading-permanent", "refused"), CLOCK.now())
    assert _error_type(failed) == "grading-permanent"
    with pytest.raises(AssertionError) as raised:
        _error_type(dataclasses.replace(failed, error=None))
    assert str(raised.value) == "a failed job always records its error"
