"""The timer thread's sleep: it waits for the next due renewal (never spins while one is
less than a second away), and an attempt begun after the drain's grace wakes it from an
idle wait, to be handed back at once."""

from __future__ import annotations

import time

from shared.clock import SystemClock
from shared.ports import JobStore
from shared.service_layer.heartbeat import AttemptState
from tests.unit import test_heartbeat_lease
from tests.unit.test_heartbeat_lease import CountedHeartbeat, _until, budget

store = test_heartbeat_lease.store  # the job store fixture, shared


def test_the_timer_sleeps_until_a_renewal_due_within_the_second(store: JobStore) -> None:
    heartbeat = CountedHeartbeat(store, SystemClock(), budget(lease_s=60.0, heartbeat_s=1.0))
    attempt = heartbeat.begin("a", "o")  # due one second from now
    try:
        _until(lambda: heartbeat.passes >= 1)
        time.sleep(0.3)
        # One pass when it started, perhaps a second if the machine stalled a second:
        # a timer that did not sleep would have made thousands by now.
        assert heartbeat.passes <= 2
    finally:
        heartbeat.end(attempt)


def test_an_attempt_begun_after_the_grace_wakes_the_idle_timer_to_hand_it_back(
    store: JobStore,
) -> None:
    heartbeat = CountedHeartbeat(store, SystemClock(), budget(lease_s=60.0, heartbeat_s=20.0))
    first = heartbeat.begin("first", "o")
    _until(lambda: heartbeat.passes >= 1)
    heartbeat.drain(0.05)
    assert first.settled.wait(5) and first.state is AttemptState.RELEASED
    # Nothing live is left: the timer waits out one idle heartbeat (20 s) before ending.
    heartbeat.end(first)
    late = heartbeat.begin("late", "o")
    assert late.settled.wait(5), "the late attempt waited for the timer's idle heartbeat"
    assert heartbeat.end(late) is AttemptState.RELEASED
