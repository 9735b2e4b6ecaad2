"""Drive the worker's waits step by step: a fake monotonic clock and scripted passes.

`WorkerService` measures its lease waits and result-write retries with
`time.monotonic`/`time.sleep`; its heartbeat renews leases and ends the drain grace on a
timer. Here:

- `time.sleep(s)` in the worker module advances `TestTime` (a monotonic clock and the
  service's `FrozenClock` together) by exactly what was asked, and is recorded; nothing
  waits in real time;
- the heartbeat has no thread of its own: while the grader (on its call's thread, as in
  production, its delivery waiting for it) waits on its gate, the gate makes the
  heartbeat's passes one beat at a time, so the grading ends on the beat the test names
  (`finish_on`) and the outcome never depends on a race.
"""

from __future__ import annotations

import threading
import types
from collections.abc import Callable
from datetime import timedelta

import pytest

from shared.clock import FrozenClock
from shared.config.budget import Budget
from shared.ports import JobStore
from shared.service_layer import worker as worker_module
from shared.service_layer.heartbeat import AttemptState, Heartbeat


class TestTime:
    """A monotonic clock that moves with the service's FrozenClock, only when told."""

    __test__ = False  # not a pytest class

    def __init__(self, clock: FrozenClock, start: float = 1000.0) -> None:
        self.clock = clock
        self.now = start
        self.sleeps: list[float] = []
        #: Called after each sleep with the sleep's index (e.g. to renew a holder's lease).
        self.on_sleep: Callable[[int], object] | None = None

    def monotonic(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
        self.clock.advance(timedelta(seconds=seconds))

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.advance(seconds)
        if self.on_sleep is not None:
            self.on_sleep(len(self.sleeps) - 1)


class Beats(threading.Event):
    """The gate the grader waits on: each heartbeat pass during the grading is a beat.

    The grader runs on its call's thread; while it "grades", the heartbeat's passes
    are driven from here, one per beat: on beat n the hook `before[n]` runs first (time
    has not moved yet); if n is `finish_on` the grading ends there; otherwise time moves
    by exactly the wait the heartbeat asked for, and the heartbeat makes its pass. The
    grading also ends once the heartbeat took the attempt away (lost or handed back).
    """

    def __init__(self, time: TestTime) -> None:
        super().__init__()
        self.time = time
        self.heartbeat: Heartbeat | None = None
        self.waits: list[float] = []
        self.finish_on: int | None = None
        self.before: dict[int, Callable[[], object]] = {}

    def wait(self, timeout: float | None = None) -> bool:
        if self.is_set():
            return True
        assert self.heartbeat is not None, "install the heartbeat first"
        [*_, mine] = self.heartbeat.in_flight()  # the attempt that just began
        while True:
            beat = len(self.waits)
            wait = self.heartbeat.wait_s()
            self.waits.append(wait)
            assert beat < 1000, "the grading never ended"
            if beat in self.before:
                self.before[beat]()
            if beat == self.finish_on:
                self.set()
                return True
            self.time.advance(wait)
            self.heartbeat.tick()
            if mine.state is not AttemptState.LIVE:
                return True


def install(monkeypatch: pytest.MonkeyPatch, time: TestTime, beats: Beats) -> None:
    """Make the worker module sleep on `time` (undone after the test)."""
    fake_time = types.SimpleNamespace(monotonic=time.monotonic, sleep=time.sleep)
    monkeypatch.setattr(worker_module, "time", fake_time)


def manual_heartbeat(
    store: JobStore, clock: FrozenClock, budget: Budget, time: TestTime, beats: Beats
) -> Heartbeat:
    """A heartbeat without its thread, on `time`, whose passes `beats` makes."""
    heartbeat = Heartbeat(store, clock, budget, background=False, monotonic=time.monotonic)
    beats.heartbeat = heartbeat
    return heartbeat
