"""When an attempt begins: it is due one heartbeat later, unless the drain's grace is over
(then at once, to be handed back); the timer thread it starts is the daemon "heartbeat";
ending an attempt twice is harmless."""

from __future__ import annotations

import threading

from shared.clock import SystemClock
from shared.ports import JobStore
from shared.service_layer.heartbeat import Heartbeat
from tests.unit import test_heartbeat_decisions
from tests.unit.test_heartbeat_decisions import heartbeat_on
from tests.unit.test_heartbeat_lease import budget

inner = test_heartbeat_decisions.inner  # the job store fixture, shared


def test_an_attempt_begun_is_due_one_heartbeat_later(inner: JobStore) -> None:
    heartbeat = heartbeat_on(inner, [100.0])
    assert heartbeat.begin("j", "o").due == 100.0 + budget().heartbeat_s


def test_an_attempt_begun_while_the_drains_grace_runs_is_due_as_usual(inner: JobStore) -> None:
    heartbeat = heartbeat_on(inner, [100.0])
    assert heartbeat.drain(60.0)
    assert heartbeat.begin("j", "o").due == 100.0 + budget().heartbeat_s


def test_an_attempt_begun_when_the_grace_ends_is_due_at_once(inner: JobStore) -> None:
    now = [100.0]
    heartbeat = heartbeat_on(inner, now)
    assert heartbeat.drain(5.0)
    now[0] = 105.0  # the grace's very end: it is over
    assert heartbeat.begin("j", "o").due == 105.0


def test_ending_an_attempt_twice_is_harmless(inner: JobStore) -> None:
    heartbeat = heartbeat_on(inner, [100.0])
    attempt = heartbeat.begin("j", "o")
    first = heartbeat.end(attempt)
    assert heartbeat.end(attempt) is first and heartbeat.in_flight() == []


def test_the_timer_thread_is_the_daemon_named_heartbeat(inner: JobStore) -> None:
    heartbeat = Heartbeat(inner, SystemClock(), budget())
    before = set(threading.enumerate())
    attempt = heartbeat.begin("j", "o")
    try:
        [timer] = set(threading.enumerate()) - before
        assert timer.name == "heartbeat"
        assert timer.daemon  # a stopping worker process is not kept alive by it
    finally:
        heartbeat.end(attempt)
