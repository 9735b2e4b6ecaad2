"""The grader gate's decisions: a probe refused again keeps the gate closed on the new
refusal until the next, longer wait is over."""

from __future__ import annotations

from datetime import timedelta

from shared.clock import FrozenClock
from shared.domain.errors import GraderMisconfigured
from shared.service_layer.grader_gate import GraderGate


def test_a_probe_refused_again_keeps_the_gate_closed_on_the_new_refusal() -> None:
    clock = FrozenClock()
    first = GraderMisconfigured("openai answered HTTP 401: invalid key")
    again = GraderMisconfigured("openai answered HTTP 404: unknown model")
    probes: list[int] = []

    def probe() -> None:
        probes.append(1)
        raise again

    gate = GraderGate(probe, clock.now, first_wait_s=10, max_wait_s=60)
    gate.trip(first)
    clock.advance(timedelta(seconds=10))
    assert gate.check() is again and probes == [1]
    assert gate.fault is again
    assert gate.retry_after_s() == 20
    clock.advance(timedelta(seconds=19))
    assert gate.check() is again and probes == [1]  # closed, and no probe before the wait
    clock.advance(timedelta(milliseconds=500))  # half a second before the next probe
    assert gate.retry_after_s() == 1.0  # asked to wait a second at the least


def test_a_gate_whose_probe_is_due_asks_for_a_second() -> None:
    clock = FrozenClock()
    gate = GraderGate(lambda: None, clock.now, first_wait_s=10, max_wait_s=60)
    gate.trip(GraderMisconfigured("openai answered HTTP 401: invalid key"))
    clock.advance(timedelta(seconds=30))  # past the probe time, nothing asked yet
    assert gate.retry_after_s() == 1.0


def test_while_one_probe_runs_another_check_gets_the_refusal_and_probes_nothing() -> None:
    clock = FrozenClock()
    fault = GraderMisconfigured("openai answered HTTP 401: invalid key")
    seen_meanwhile: list[GraderMisconfigured | None] = []
    probes: list[int] = []

    def probe() -> None:  # a delivery checks the gate while the probe is out
        probes.append(1)
        if len(probes) == 1:
            seen_meanwhile.append(gate.check())

    gate = GraderGate(probe, clock.now, first_wait_s=10, max_wait_s=60)
    gate.trip(fault)
    clock.advance(timedelta(seconds=10))
    assert gate.check() is None  # the probe passed: grading goes on
    assert probes == [1] and seen_meanwhile == [fault]


def test_by_default_the_wait_starts_at_half_a_minute_and_doubles_up_to_ten() -> None:
    clock = FrozenClock()

    def probe() -> None:
        raise GraderMisconfigured("openai answered HTTP 404: unknown model")

    gate = GraderGate(probe, clock.now)
    gate.trip(GraderMisconfigured("openai answered HTTP 401: invalid key"))
    waits = [gate.retry_after_s()]
    for _ in range(6):
        clock.advance(timedelta(seconds=waits[-1]))
        assert gate.check() is not None
        waits.append(gate.retry_after_s())
    assert waits == [30, 60, 120, 240, 480, 600, 600]


def test_a_reopened_gate_probes_no_more_and_a_new_refusal_starts_the_waits_afresh() -> None:
    clock = FrozenClock()
    probes: list[int] = []
    gate = GraderGate(lambda: probes.append(1), clock.now, first_wait_s=10, max_wait_s=60)
    gate.trip(GraderMisconfigured("openai answered HTTP 401: invalid key"))
    clock.advance(timedelta(seconds=10))
    assert gate.check() is None and gate.fault is None
    assert gate.check() is None and probes == [1]  # open: nothing left to probe

    gate.trip(GraderMisconfigured("openai answered HTTP 401: invalid key"))
    assert gate.retry_after_s() == 10
    clock.advance(timedelta(seconds=10))
    assert gate.check() is None and probes == [1, 1]  # the new refusal's probe ran
