"""The coalescing window, on a clock the test drives: a pass writes nothing early unless
one renewal is really due, renews with it what falls due within the window, and the
timer makes at most one pass per window; a drain with nothing in flight leaves the timer
nothing to wake for; `end` waits for a renewal being written."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from shared.adapters.embedded.job_store import SqliteJobStore
from shared.domain.errors import GradeqError
from shared.domain.job import Job
from shared.ports import JobStore
from shared.service_layer.heartbeat import Attempt, AttemptState, Heartbeat
from tests.unit import test_heartbeat_decisions
from tests.unit.test_heartbeat_decisions import claimed, heartbeat_on
from tests.unit.test_heartbeat_lease import budget

inner = test_heartbeat_decisions.inner  # the job store fixture, shared

#: A heartbeat of four seconds (its coalescing window is one second) and a lease of a
#: minute: no renewal is late however slow the machine.
BUDGET = budget(lease_s=60.0, heartbeat_s=4.0)


def heartbeat_at(store: object, now: list[float]) -> Heartbeat:
    return heartbeat_on(store, now, BUDGET)


def begin(store: JobStore, heartbeat: Heartbeat, key: str) -> Attempt:
    [attempt] = claimed(store, heartbeat, [key], BUDGET)
    return attempt


def test_a_pass_before_any_renewal_is_due_writes_nothing_and_waits_out_the_window(
    inner: JobStore,
) -> None:
    now = [100.0]
    heartbeat = heartbeat_at(inner, now)
    attempt = begin(inner, heartbeat, "a")  # due at 104
    now[0] = 103.5  # due within the window, not yet due
    assert heartbeat.tick() == 1.0  # the next pass: one window after this one, not at 104
    assert attempt.renewed_at == 100.0


def test_a_renewal_due_at_the_windows_edge_is_written_with_the_one_due_now(
    inner: JobStore,
) -> None:
    now = [100.0]
    heartbeat = heartbeat_at(inner, now)
    first = begin(inner, heartbeat, "a")  # due at 104
    now[0] = 101.0
    second = begin(inner, heartbeat, "b")  # due at 105: one window later
    now[0] = 104.0
    heartbeat.tick()
    assert (first.renewed_at, second.renewed_at) == (104.0, 104.0)
    assert (first.due, second.due) == (108.0, 108.0)


def test_a_drain_with_nothing_in_flight_gives_the_timer_nothing_to_wake_for(
    inner: JobStore,
) -> None:
    heartbeat = heartbeat_at(inner, [100.0])
    assert heartbeat.draining is False
    assert heartbeat.drain(5.0)
    assert heartbeat.wait_s() == float("inf")


class HeldStore:
    """A batching job store whose write waits until the test lets it through."""

    def __init__(self, inner: SqliteJobStore) -> None:
        self.inner = inner
        self.writing = threading.Event()
        self.go = threading.Event()

    def get(self, job_id: str) -> Job | None:
        return self.inner.get(job_id)

    def update_each(
        self, mutations: Mapping[str, Callable[[Job], Job]]
    ) -> dict[str, Job | GradeqError]:
        self.writing.set()
        assert self.go.wait(10)
        return self.inner.update_each(mutations)


def test_ending_an_attempt_waits_for_its_renewal_being_written(inner: SqliteJobStore) -> None:
    now = [100.0]
    held = HeldStore(inner)
    heartbeat = heartbeat_at(held, now)
    attempt = begin(inner, heartbeat, "a")
    now[0] = 104.0
    timer = threading.Thread(target=heartbeat.tick)
    timer.start()
    assert held.writing.wait(10)
    ended: list[AttemptState] = []
    delivery = threading.Thread(target=lambda: ended.append(heartbeat.end(attempt)))
    delivery.start()
    delivery.join(0.3)
    assert ended == []  # still waiting: the renewal is being written
    held.go.set()
    delivery.join(10)
    timer.join(10)
    assert ended == [AttemptState.LIVE] and attempt.renewed_at == 104.0
