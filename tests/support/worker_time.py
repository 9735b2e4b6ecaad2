"""Drive the worker's waits step by step: a fake monotonic clock and scripted waits.

`WorkerService` measures its heartbeat, drain grace, lease waits and result-write
retries with `time.monotonic`/`time.sleep`, and waits for its grading thread with
`threading.Event.wait`. `install` replaces those names in the worker module, so:

- `time.sleep(s)` and every wait of the delivery advance `TestTime` (a monotonic
  clock and the service's `FrozenClock` together) by exactly what was asked, and are
  recorded; nothing waits in real time;
- the grading thread really runs, but the grader blocks on its gate, so it ends only
  on the beat the test names (`finish_on`): the outcome never depends on a race.
"""

from __future__ import annotations

import threading
import types
from collections.abc import Callable
from datetime import timedelta

import pytest

from shared.clock import FrozenClock
from shared.service_layer import worker as worker_module


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


class Beats:
    """The delivery's waits for its grading thread, each one a numbered beat.

    On beat n the hook `before[n]` runs first (time has not moved yet); then, if n is
    `finish_on`, the grader's gate opens. While the gate is open a beat lasts until the
    grading ended, else exactly the timeout the delivery asked for.
    """

    def __init__(self, time: TestTime, gate: threading.Event) -> None:
        self.time = time
        self.gate = gate
        self.waits: list[float] = []
        self.finish_on: int | None = None
        self.before: dict[int, Callable[[], object]] = {}

    def wait(self, event: threading.Event, timeout: float) -> bool:
        beat = len(self.waits)
        self.waits.append(timeout)
        assert beat < 1000, "the delivery never stopped waiting"
        if beat in self.before:
            self.before[beat]()
        if beat == self.finish_on:
            self.gate.set()
        if self.gate.is_set():  # the grader was let go: the grading ends now
            assert threading.Event.wait(event, 30), "the grading never ended"
        else:
            self.time.advance(timeout)
        return event.is_set()


def install(monkeypatch: pytest.MonkeyPatch, time: TestTime, beats: Beats) -> None:
    """Make the worker module wait on `time` and `beats` (undone after the test)."""

    class BeatEvent(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            if timeout is None or self.is_set():
                return super().wait(timeout)
            return beats.wait(self, timeout)

    fake_time = types.SimpleNamespace(monotonic=time.monotonic, sleep=time.sleep)
    fake_threading = types.SimpleNamespace(Event=BeatEvent, Thread=threading.Thread)
    monkeypatch.setattr(worker_module, "time", fake_time)
    monkeypatch.setattr(worker_module, "threading", fake_threading)
