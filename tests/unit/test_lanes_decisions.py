"""What the operator's lane use cases decide, pinned value by value: the lanes' order,
the purge's reason, which jobs it cancels, what it tells and what it reports."""

from __future__ import annotations

from datetime import timedelta

import pytest

from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.queues import load_queues
from shared.domain.errors import LaneNotFound
from shared.domain.events import GradingCompleted
from shared.domain.ids import job_id_for
from shared.domain.job import GradingRequest, Job, JobError
from shared.domain.status import JobStatus
from shared.service_layer.lanes import LANE_PURGED, LaneService
from tests.fakes import FakePublisher
from tests.unit.test_lanes_admin import fake, seed


class Lanes:
    """A lane service on the embedded adapters, recording the jobs it tells of."""

    def __init__(self, adapters: Adapters, clock: FrozenClock) -> None:
        self.adapters, self.clock = adapters, clock
        self.told: list[Job] = []
        self.service = LaneService(
            adapters.store,
            adapters.queue,
            adapters.publisher,
            clock,
            load_queues(),
            "grading",
            on_final=self.told.append,
        )

    def job(self, job_id: str) -> Job:
        job = self.adapters.store.get(job_id)
        assert job is not None
        return job

    @property
    def publisher(self) -> FakePublisher:
        assert isinstance(self.adapters.publisher, FakePublisher)
        return self.adapters.publisher


@pytest.fixture
def lanes(adapters: Adapters, clock: FrozenClock) -> Lanes:
    return Lanes(adapters, clock)


def test_the_lanes_are_named_the_highest_priority_first(lanes: Lanes) -> None:
    assert lanes.service.names() == ["exam", "grading", "bulk"]


def test_a_purge_without_a_reason_names_the_lane_and_the_operator_only(lanes: Lanes) -> None:
    job_id = seed(lanes.adapters, lanes.clock, "b", "bulk")
    report = lanes.service.purge("bulk", "alice")
    assert report.as_dict() == {"lane": "bulk", "cancelled": [job_id], "skipped": {}}
    assert fake(lanes.adapters).purged == ["bulk"]
    assert lanes.job(job_id).error == JobError(LANE_PURGED, "lane bulk purged by alice")


def test_a_purge_with_a_reason_appends_it(lanes: Lanes) -> None:
    job_id = seed(lanes.adapters, lanes.clock, "b", "bulk")
    lanes.service.purge("bulk", "alice", "bad rubric")
    error = JobError(LANE_PURGED, "lane bulk purged by alice: bad rubric")
    assert lanes.job(job_id).error == error


def test_each_cancelled_job_is_announced_and_told_to_on_final(lanes: Lanes) -> None:
    ids = [seed(lanes.adapters, lanes.clock, f"b{i}", "bulk") for i in range(2)]
    report = lanes.service.purge("bulk", "alice")
    assert report.cancelled == ids
    assert [j.id for j in lanes.told] == ids
    assert all(j.status is JobStatus.CANCELLED for j in lanes.told)
    completed = [e for e in lanes.publisher.events if isinstance(e, GradingCompleted)]
    assert [e.job_id for e in completed] == ids


def test_a_job_whose_announcement_fails_is_skipped_with_its_slug_and_the_purge_goes_on(
    lanes: Lanes,
) -> None:
    first, second = (seed(lanes.adapters, lanes.clock, f"b{i}", "bulk") for i in range(2))
    lanes.publisher.failures = 1
    report = lanes.service.purge("bulk", "alice")
    assert report.as_dict() == {
        "lane": "bulk",
        "cancelled": [second],
        "skipped": {first: "dependency-unavailable"},
    }
    # The skipped job is cancelled all the same; the recovery sweep announces it.
    assert lanes.job(first).status is JobStatus.CANCELLED
    assert not lanes.job(first).event_published and lanes.job(second).event_published


def test_a_purge_cancels_jobs_stored_up_to_its_instant_not_after(lanes: Lanes) -> None:
    now = lanes.clock.now()
    request = GradingRequest(submission_id="s", answer="a", rubric="r")
    at_now = job_id_for("client-a", "now")
    later = job_id_for("client-a", "later")
    lanes.adapters.store.create(Job.new(at_now, "client-a", request, "fp", now, lane="bulk"))
    after = now + timedelta(microseconds=1)
    lanes.adapters.store.create(Job.new(later, "client-a", request, "fp", after, lane="bulk"))
    report = lanes.service.purge("bulk", "alice")
    assert report.cancelled == [at_now]
    assert lanes.job(later).status is JobStatus.PENDING


def test_an_undeclared_lane_is_refused_naming_it_and_the_declared_lanes(lanes: Lanes) -> None:
    with pytest.raises(LaneNotFound) as refused:
        lanes.service.purge("nope", "alice")
    assert refused.value.detail == "no lane 'nope'; lanes are bulk, exam, grading"
    assert fake(lanes.adapters).purged == []
