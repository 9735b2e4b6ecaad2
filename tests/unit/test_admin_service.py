"""The operator use cases' own decisions: page bounds, a replay racing another, the health
figures' edges."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest, Job, JobError
from shared.domain.status import JobStatus
from shared.ports import JobFilter, JobStore
from shared.service_layer.admin import MAX_PAGE, AdminService
from shared.service_layer.queue_health import HealthQuery, QueueHealth

LEASE = timedelta(seconds=30)


def seed(store: JobStore, clock: FrozenClock, n: int) -> list[str]:
    ids = []
    for i in range(n):
        request = GradingRequest(submission_id=f"s{i}", answer="a", rubric="r")
        store.create(Job.new(f"job{i:03d}", "c", request, "fp", clock.now()))
        clock.advance(timedelta(milliseconds=10))
        ids.append(f"job{i:03d}")
    return ids


def service(adapters: Adapters, clock: FrozenClock, store: JobStore | None = None) -> AdminService:
    return AdminService(store or adapters.store, adapters.queue, adapters.publisher, clock)


def test_a_page_holds_at_least_one_and_at_most_max_page_jobs(
    adapters: Adapters, clock: FrozenClock
) -> None:
    seed(adapters.store, clock, MAX_PAGE + 1)
    admin = service(adapters, clock)
    one = admin.list_jobs(JobFilter(), 0)
    assert [j.id for j in one.jobs] == [f"job{MAX_PAGE:03d}"]
    assert one.next_cursor is not None and one.next_cursor.job_id == f"job{MAX_PAGE:03d}"
    full = admin.list_jobs(JobFilter(), 10_000)
    assert len(full.jobs) == MAX_PAGE
    rest = admin.list_jobs(JobFilter(), MAX_PAGE, full.next_cursor)
    assert [j.id for j in rest.jobs] == ["job000"] and rest.next_cursor is None


class RacingStore:
    """A store where another operator replays the job just before this update runs."""

    def __init__(self, inner: JobStore, clock: FrozenClock) -> None:
        self._inner = inner
        self._clock = clock

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)

    def update(self, job_id: str, mutate: Callable[[Job], Job]) -> Job:
        self._inner.update(job_id, lambda j: j.replay_failed(self._clock.now(), "other"))
        return self._inner.update(job_id, mutate)


def test_a_replay_that_loses_the_race_answers_the_winners_generation(
    adapters: Adapters, clock: FrozenClock
) -> None:
    [job_id] = seed(adapters.store, clock, 1)
    adapters.store.update(job_id, lambda j: j.claim("w", clock.now(), LEASE))
    adapters.store.update(job_id, lambda j: j.fail("w", JobError("x", "y"), clock.now()))
    adapters.store.update(job_id, lambda j: j.mark_event_published(clock.now()))
    racing = RacingStore(adapters.store, clock)
    outcome = service(adapters, clock, racing).replay(job_id, "me", generation=0)  # type: ignore[arg-type]
    assert outcome.replayed is False
    assert outcome.job.generation == 1
    assert [r.by for r in outcome.job.replays] == ["other"]


def test_health_of_an_empty_store_has_no_percentiles_and_no_failures(
    adapters: Adapters, clock: FrozenClock
) -> None:
    health = QueueHealth(adapters.store, clock).compute()
    assert health["completed"] == 0
    assert health["failure_rate"] == 0.0
    assert health["failures_by_type"] == {}
    assert health["timings_ms"]["total_ms"] == {"p50": None, "p95": None, "p99": None}
    assert health["oldest_waiting_age_s"] == {"PENDING": None, "RETRYING": None}
    assert health["sample_truncated"] is False


def test_health_says_when_the_window_held_more_than_its_sample(
    adapters: Adapters, clock: FrozenClock
) -> None:
    ids = seed(adapters.store, clock, 3)
    for job_id in ids:
        adapters.store.update(job_id, lambda j: j.claim("w", clock.now(), LEASE))
        adapters.store.update(
            job_id, lambda j: j.succeed("w", GradeResult(1, 10, "ok"), clock.now())
        )
    clock.advance(timedelta(seconds=1))
    health = QueueHealth(adapters.store, clock)
    assert health.compute(HealthQuery(sample_limit=3))["sample_truncated"] is True
    assert health.compute(HealthQuery(sample_limit=4))["sample_truncated"] is False
    capped = health.compute(HealthQuery(count_cap=2))
    assert capped["counts"][JobStatus.SUCCEEDED.value] == 2
    assert capped["counts_capped_at"] == 2


def test_cancelled_jobs_count_as_completed_but_not_as_work(
    adapters: Adapters, clock: FrozenClock
) -> None:
    [job_id] = seed(adapters.store, clock, 1)
    adapters.store.update(job_id, lambda j: j.cancel(clock.now()))
    clock.advance(timedelta(seconds=1))
    health = QueueHealth(adapters.store, clock).compute()
    assert health["completed"] == 1
    assert health["failure_rate"] == 0.0
    assert health["timings_ms"]["total_ms"]["p50"] is None


def test_dead_letters_page_on_by_cursor(adapters: Adapters, clock: FrozenClock) -> None:
    ids = seed(adapters.store, clock, 3)
    for job_id in ids:
        adapters.store.update(job_id, lambda j: j.claim("w", clock.now(), LEASE))
        adapters.store.update(job_id, lambda j: j.fail("w", JobError("x", "y"), clock.now()))
    admin = service(adapters, clock)
    first = admin.dead_letters(JobFilter(), 2)
    second = admin.dead_letters(JobFilter(), 2, first.next_cursor)
    assert [j.id for j in first.jobs + second.jobs] == ids[::-1]


def test_a_batch_replay_skips_a_job_another_replay_took(
    adapters: Adapters, clock: FrozenClock
) -> None:
    [job_id] = seed(adapters.store, clock, 1)
    adapters.store.update(job_id, lambda j: j.claim("w", clock.now(), LEASE))
    adapters.store.update(job_id, lambda j: j.fail("w", JobError("x", "y"), clock.now()))
    adapters.store.update(job_id, lambda j: j.mark_event_published(clock.now()))
    racing = RacingStore(adapters.store, clock)
    batch = service(adapters, clock, racing).replay_failed(JobFilter(), "me", 10)  # type: ignore[arg-type]
    assert batch.replayed == []
    assert batch.skipped == {job_id: "already-replayed"}


class FindSpy:
    """Records the limits of the store's `find` calls."""

    def __init__(self, inner: JobStore) -> None:
        self._inner = inner
        self.limits: list[int] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)

    def find(self, *args: object, **kwargs: object) -> list[Job]:
        self.limits.append(int(args[2]))  # type: ignore[call-overload]
        return self._inner.find(*args, **kwargs)  # type: ignore[arg-type]


def test_health_reads_one_job_per_waiting_status_and_ages_the_oldest_exactly(
    adapters: Adapters, clock: FrozenClock
) -> None:
    seed(adapters.store, clock, 3)
    clock.advance(timedelta(milliseconds=-10))  # now is the newest job's creation
    spy = FindSpy(adapters.store)
    health = QueueHealth(spy, clock).compute()  # type: ignore[arg-type]
    assert spy.limits == [1, 1]
    assert health["oldest_waiting_age_s"]["PENDING"] == 0.02


def test_a_job_in_the_windows_last_instant_lands_in_the_last_bucket(
    adapters: Adapters, clock: FrozenClock
) -> None:
    [job_id] = seed(adapters.store, clock, 1)
    adapters.store.update(job_id, lambda j: j.claim("w", clock.now(), LEASE))
    adapters.store.update(job_id, lambda j: j.succeed("w", GradeResult(1, 10, "ok"), clock.now()))
    clock.advance(timedelta(microseconds=1))
    # 100 s / 7 rounds down to whole microseconds: 7 widths end before the window does.
    query = HealthQuery(window=timedelta(seconds=100), buckets=7)
    series = QueueHealth(adapters.store, clock).compute(query)["series"]
    assert [b["completed"] for b in series] == [0, 0, 0, 0, 0, 0, 1]


def test_a_batch_replay_goes_on_after_a_job_it_skips(
    adapters: Adapters, clock: FrozenClock
) -> None:
    older, newer = seed(adapters.store, clock, 2)
    for job_id in (older, newer):
        adapters.store.update(job_id, lambda j: j.claim("w", clock.now(), LEASE))
        adapters.store.update(job_id, lambda j: j.fail("w", JobError("x", "y"), clock.now()))
    adapters.store.update(older, lambda j: j.mark_event_published(clock.now()))
    batch = service(adapters, clock).replay_failed(JobFilter(), "me", 10)
    assert batch.skipped == {newer: "job-locked"}  # its failure is still being announced
    assert batch.replayed == [older]
