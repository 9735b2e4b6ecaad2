"""The drain's hand-back, decision by decision, on a clock the test drives."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from pathlib import Path
from typing import cast

import pytest

from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.clock import SystemClock
from shared.config.budget import Budget
from shared.domain.errors import DependencyUnavailable, GradeqError, JobNotFound, LeaseLost
from shared.domain.job import Job
from shared.domain.status import JobStatus
from shared.ports import JobStore
from shared.service_layer.heartbeat import WORKER_SHUTDOWN, Attempt, AttemptState, Heartbeat
from tests.unit.test_heartbeat_lease import budget, seed


class DownStore:
    """A job store whose writes fail as an outage does."""

    def __init__(self, inner: JobStore) -> None:
        self.inner = inner

    def get(self, job_id: str) -> Job | None:
        return self.inner.get(job_id)

    def update_each(
        self, mutations: Mapping[str, Callable[[Job], Job]]
    ) -> dict[str, Job | GradeqError]:
        raise DependencyUnavailable("the job store is down")


@pytest.fixture
def inner(tmp_path: Path) -> JobStore:
    return SqliteJobStore(SqliteDatabase(tmp_path / "jobs.sqlite3"))


def claimed(
    inner: JobStore, heartbeat: Heartbeat, keys: list[str], with_budget: Budget | None = None
) -> list[Attempt]:
    clock = SystemClock()
    lease = (with_budget or budget()).lease
    attempts = []
    for key in keys:
        job_id = seed(inner, key)
        owner = f"o-{key}"

        def claim(job: Job, owner: str = owner) -> Job:
            return job.claim(owner, clock.now(), lease)

        inner.update(job_id, claim)
        attempts.append(heartbeat.begin(job_id, owner))
    return attempts


class OneByOneStore:
    """A job store that writes one job at a time (no batched updates), as the heartbeat
    sees one; a job in `gone` is no longer there."""

    def __init__(self, inner: JobStore) -> None:
        self.inner = inner
        self.gone: set[str] = set()

    def get(self, job_id: str) -> Job | None:
        return self.inner.get(job_id)

    def update(self, job_id: str, mutate: Callable[[Job], Job]) -> Job:
        if job_id in self.gone:
            raise JobNotFound(f"no grading job {job_id}")
        return self.inner.update(job_id, mutate)


def heartbeat_on(
    store: object, now: list[float] | None = None, with_budget: Budget | None = None
) -> Heartbeat:
    """A heartbeat without its timer thread: the test calls `tick` (at `now[0]`)."""
    at = now if now is not None else [100.0]
    return Heartbeat(
        cast(JobStore, store),
        SystemClock(),
        with_budget or budget(),
        background=False,
        monotonic=lambda: at[0],
    )


def state_of(attempt: Attempt) -> AttemptState:
    """The attempt's state as read now (a type checker would keep a narrowed
    `attempt.state` across the `tick` that changes it)."""
    return attempt.state


@pytest.mark.parametrize("one_by_one", [False, True])
def test_a_lost_hand_back_loses_that_attempt_and_still_hands_back_the_next(
    inner: JobStore, one_by_one: bool
) -> None:
    heartbeat = heartbeat_on(OneByOneStore(inner) if one_by_one else inner)
    first, second = claimed(inner, heartbeat, ["a", "b"])
    # Another delivery took the first job over after its lease ran out.
    later = SystemClock().now() + timedelta(hours=1)
    inner.update(first.job_id, lambda j: j.claim("thief", later, budget().lease))
    assert heartbeat.drain(0.0)
    heartbeat.tick()

    assert first.state is AttemptState.LOST and first.settled.is_set()
    assert first.lost is not None and first.lost.slug == LeaseLost.slug
    assert first.released is None
    taken = inner.get(first.job_id)
    assert taken is not None and taken.lease_owner == "thief"

    assert second.state is AttemptState.RELEASED and second.settled.is_set()
    handed_back = inner.get(second.job_id)
    assert handed_back is not None and second.released == handed_back
    assert handed_back.status is JobStatus.RETRYING and handed_back.lease_owner is None
    assert handed_back.error is not None and handed_back.error.type == WORKER_SHUTDOWN


def test_a_hand_back_the_store_cannot_take_still_lets_every_delivery_answer(
    inner: JobStore,
) -> None:
    heartbeat = heartbeat_on(DownStore(inner))
    attempts = claimed(inner, heartbeat, ["a", "b"])
    assert heartbeat.drain(0.0)
    heartbeat.tick()
    # The leases run out on their own; the deliveries answer without waiting for them.
    for attempt in attempts:
        assert attempt.state is AttemptState.RELEASED and attempt.settled.is_set()
        assert attempt.released is None and attempt.lost is None
        job = inner.get(attempt.job_id)
        assert job is not None and job.lease_owner == attempt.owner


def test_only_the_first_drain_starts_draining(inner: JobStore) -> None:
    heartbeat = heartbeat_on(inner)
    assert not heartbeat.draining
    assert heartbeat.drain(5.0) is True
    assert heartbeat.drain(5.0) is False  # already draining: the first grace stands
    assert heartbeat.draining


def test_renewals_written_one_by_one_renew_the_held_and_lose_the_taken(inner: JobStore) -> None:
    now = [100.0]
    store = OneByOneStore(inner)
    heartbeat = heartbeat_on(store, now)
    held, taken, gone = claimed(inner, heartbeat, ["a", "b", "c"])
    later = SystemClock().now() + timedelta(hours=1)
    inner.update(taken.job_id, lambda j: j.claim("thief", later, budget().lease))
    store.gone.add(gone.job_id)
    now[0] += budget().heartbeat_s
    heartbeat.tick()

    assert held.state is AttemptState.LIVE and held.renewed_at == now[0]
    renewed = inner.get(held.job_id)
    assert renewed is not None and renewed.lease_owner == held.owner
    for lost in (taken, gone):
        assert lost.state is AttemptState.LOST and lost.settled.is_set()
        assert isinstance(lost.lost, LeaseLost)
        assert lost.lost.detail == f"attempt {lost.owner} no longer owns job {lost.job_id}"


def test_an_attempt_is_let_go_once_it_reaches_the_dispatch_deadline(inner: JobStore) -> None:
    now = [100.0]
    heartbeat = heartbeat_on(inner, now)
    [attempt] = claimed(inner, heartbeat, ["a"])
    deadline = budget().queue.dispatch_deadline.total_seconds()
    now[0] = 100.0 + deadline - budget().heartbeat_s
    heartbeat.tick()
    assert state_of(attempt) is AttemptState.LIVE  # renewed just before the deadline
    now[0] = 100.0 + deadline
    heartbeat.tick()
    assert attempt.state is AttemptState.LOST and attempt.lost is not None
    assert attempt.lost.detail == f"attempt {attempt.owner} no longer owns job {attempt.job_id}"
