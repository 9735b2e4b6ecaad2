"""What the operator's lane use cases decide, pinned value by value: the lanes' order,
the purge's reason, which jobs it cancels, what it tells and what it reports."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.queues import load_queues
from shared.domain.errors import LaneNotFound
from shared.domain.events import GradingCompleted
from shared.domain.grade import GradeResult
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


def _graded(lanes: Lanes, key: str, lane: str, waited: float) -> None:
    """A job of `lane` created now, claimed `waited` seconds later and graded at once."""
    job_id = seed(lanes.adapters, lanes.clock, key, lane)  # one second passes
    lanes.clock.advance(timedelta(seconds=waited - 1))
    store, now = lanes.adapters.store, lanes.clock.now()
    store.update(job_id, lambda j: j.claim("w", now, timedelta(seconds=30)))
    store.update(job_id, lambda j: j.succeed("w", GradeResult(1, 1, "ok"), now))


def _row(lane: str, priority: int, objective: float, **figures: object) -> dict[str, object]:
    row: dict[str, object] = {
        "lane": lane,
        "priority": priority,
        "paused": False,
        "backlog": 0,
        "oldest_age_s": None,
        "oldest_age_objective_s": objective,
        "objective_breached": False,
        "queue_wait_ms": {"p50": None, "p99": None, "completed": 0},
        "max_dispatches_per_second": 20,
        "grader_model": None,
    }
    return {**row, **figures}


def test_the_figures_count_each_lanes_backlog_oldest_job_and_queue_waits(
    adapters: Adapters, clock: FrozenClock
) -> None:
    lanes = Lanes(adapters, clock)
    service = LaneService(
        adapters.store, adapters.queue, adapters.publisher, clock, load_queues(), "grading", batch=2
    )
    t0 = clock.now()
    for i in range(5):  # more than two pages of two
        seed(adapters, clock, f"b{i}", "bulk")
    seed(adapters, clock, "legacy", None)  # made before lanes: the default lane's
    seed(adapters, clock, "gone", "retired")  # a lane no longer declared: not counted
    _graded(lanes, "e1", "exam", 1)
    _graded(lanes, "e2", "exam", 5)
    adapters.queue.pause("bulk")
    clock.advance(t0 + timedelta(seconds=100) - clock.now())
    exam = _row("exam", 300, 60.0, queue_wait_ms={"p50": 1000, "p99": 5000, "completed": 2})
    grading = _row("grading", 200, 900.0, backlog=1, oldest_age_s=95.0)
    bulk = _row("bulk", 100, 86400.0, paused=True, backlog=5, oldest_age_s=100.0)
    assert service.figures() == [exam, grading, bulk]
    # Only the jobs completed within the window, at most `sample` of them (newest first).
    recent = {"p50": 5000, "p99": 5000, "completed": 1}
    assert service.figures(window=timedelta(seconds=90))[0]["queue_wait_ms"] == recent
    assert service.figures(sample=1)[0]["queue_wait_ms"] == recent
    assert lanes.service.report() == [exam, grading, bulk]


def test_a_lane_breaches_its_objective_only_once_its_oldest_job_is_older(
    adapters: Adapters, clock: FrozenClock
) -> None:
    lanes = Lanes(adapters, clock)
    seed(adapters, clock, "g", "grading")
    clock.advance(timedelta(seconds=899))  # the job is 900 s old: at the objective
    [_, grading, _] = lanes.service.figures()
    assert (grading["oldest_age_s"], grading["objective_breached"]) == (900.0, False)
    clock.advance(timedelta(microseconds=1))
    [_, grading, _] = lanes.service.figures()
    assert grading["objective_breached"] is True


def test_a_scan_reads_whole_pages_until_it_read_max_scan_jobs_of_a_status(
    adapters: Adapters, clock: FrozenClock
) -> None:
    for i in range(7):
        seed(adapters, clock, f"b{i}", "bulk")
    service = LaneService(
        adapters.store,
        adapters.queue,
        adapters.publisher,
        clock,
        load_queues(),
        "grading",
        batch=2,
        max_scan=5,
    )
    assert service.purge("bulk", "alice").cancelled == [
        job_id_for("client-a", f"b{i}") for i in range(6)
    ]


def test_the_figures_count_the_jobs_stored_up_to_their_instant_not_after(lanes: Lanes) -> None:
    now = lanes.clock.now()
    request = GradingRequest(submission_id="s", answer="a", rubric="r")
    for key, at in (("now", now), ("later", now + timedelta(microseconds=1))):
        job = Job.new(job_id_for("client-a", key), "client-a", request, "fp", at, lane="bulk")
        lanes.adapters.store.create(job)
    [_, _, bulk] = lanes.service.figures()
    assert (bulk["backlog"], bulk["oldest_age_s"]) == (1, 0.0)


def test_jobs_of_a_retired_lane_are_left_out_without_stopping_the_count(lanes: Lanes) -> None:
    # The retired lane's jobs come first in the scan and in the completed sample.
    _graded(lanes, "gone-graded", "retired", 2)
    seed(lanes.adapters, lanes.clock, "gone", "retired")
    _graded(lanes, "e1", "exam", 3)
    for i in range(2):
        seed(lanes.adapters, lanes.clock, f"b{i}", "bulk")
    [exam, _, bulk] = lanes.service.figures()
    assert exam["queue_wait_ms"] == {"p50": 3000, "p99": 3000, "completed": 1}
    assert bulk["backlog"] == 2


def test_a_lane_without_an_age_objective_shows_none_and_never_breaches(
    adapters: Adapters, clock: FrozenClock
) -> None:
    queues = load_queues()
    bulk = queues["bulk"]
    queues["bulk"] = replace(bulk, lane=replace(bulk.lane, oldest_age_objective=None))
    service = LaneService(
        adapters.store, adapters.queue, adapters.publisher, clock, queues, "grading"
    )
    seed(adapters, clock, "b", "bulk")
    clock.advance(timedelta(days=30))
    [_, _, row] = service.figures()
    assert row["oldest_age_objective_s"] is None and row["objective_breached"] is False
    assert row["oldest_age_s"] == pytest.approx(30 * 86400 + 1)


def test_the_p99_wait_is_the_nearest_rank_not_the_longest(lanes: Lanes) -> None:
    for waited in range(1, 102):  # 101 waits of 1 s .. 101 s
        _graded(lanes, f"e{waited}", "exam", waited)
    lanes.clock.advance(timedelta(seconds=1))  # the window ends before its instant
    [exam, _, _] = lanes.service.figures(window=timedelta(days=1))
    assert exam["queue_wait_ms"] == {"p50": 51_000, "p99": 100_000, "completed": 101}


def test_the_figures_sample_at_most_a_thousand_completed_jobs_by_default(
    lanes: Lanes, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = lanes.adapters.store
    asked: list[int] = []
    completed_between = store.completed_between

    def recording(since: datetime, until: datetime, limit: int) -> list[Job]:
        asked.append(limit)
        return completed_between(since, until, limit)

    monkeypatch.setattr(store, "completed_between", recording)
    lanes.service.figures()
    lanes.service.figures(sample=7)
    assert asked == [1000, 7]


def _paging(adapters: Adapters, clock: FrozenClock, batch: int, max_scan: int) -> LaneService:
    return LaneService(
        adapters.store,
        adapters.queue,
        adapters.publisher,
        clock,
        load_queues(),
        "grading",
        batch=batch,
        max_scan=max_scan,
    )


def test_a_scan_that_read_max_scan_jobs_on_a_page_boundary_reads_no_further_page(
    adapters: Adapters, clock: FrozenClock
) -> None:
    for i in range(7):
        seed(adapters, clock, f"b{i}", "bulk")
    service = _paging(adapters, clock, batch=2, max_scan=4)
    assert service.purge("bulk", "alice").cancelled == [
        job_id_for("client-a", f"b{i}") for i in range(4)
    ]


@pytest.mark.parametrize(
    "apart", [timedelta(seconds=1), timedelta(0)], ids=["a-second-apart", "at-one-instant"]
)
def test_each_page_of_a_scan_starts_after_the_last_job_of_the_page_before(
    adapters: Adapters, clock: FrozenClock, apart: timedelta
) -> None:
    # Pages of three over five jobs stored a second apart, or all at one instant (then
    # ordered by id): each job is counted once.
    request = GradingRequest(submission_id="s", answer="a", rubric="r")
    start = clock.now()
    for i in range(5):
        job = Job.new(
            job_id_for("client-a", f"b{i}"), "client-a", request, "fp", start + i * apart, "bulk"
        )
        adapters.store.create(job)
    clock.advance(timedelta(seconds=10))
    [_, _, bulk] = _paging(adapters, clock, batch=3, max_scan=100).figures()
    assert (bulk["backlog"], bulk["oldest_age_s"]) == (5, 10.0)
