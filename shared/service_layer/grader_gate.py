"""Grading suspended while the provider refuses the grader's configuration.

An unknown or retired model, a revoked key or a disabled API refuses every request
alike: grading job after job would only fail them all. The first refusal closes the
gate; deliveries then hand their job back untouched, and the queue is asked to back off.
When the wait is over, one delivery probes the provider (a cheap call naming the model):
success reopens the gate, another refusal doubles the wait (up to `max_wait_s`).

The log lines below are stable: a log-based metric on `jsonPayload.event` =
"grader_suspended" alerts the operator.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from shared.domain.errors import GraderMisconfigured

log = logging.getLogger(__name__)

SUSPENDED = "grading suspended: the provider refuses the grader's configuration"
STILL_REFUSED = "grading stays suspended: the provider still refuses the configuration"
RESUMED = "grading resumed: the provider accepts the grader's configuration again"


class GraderGate:
    """Open while the grader may be called; closed from a configuration refusal to a probe.

    Thread-safe: one gate serves every request thread of the worker, and only one of
    them probes at a time.
    """

    def __init__(
        self,
        probe: Callable[[], None] | None,
        now: Callable[[], datetime],
        first_wait_s: float = 30.0,
        max_wait_s: float = 600.0,
    ) -> None:
        self._probe = probe
        self._now = now
        self._first_wait = timedelta(seconds=first_wait_s)
        self._max_wait = timedelta(seconds=max_wait_s)
        self._wait = self._first_wait
        self._fault: GraderMisconfigured | None = None
        self._probe_at = now()
        self._probing = False
        self._lock = threading.Lock()

    @property
    def fault(self) -> GraderMisconfigured | None:
        """The refusal that closed the gate; None while it is open."""
        return self._fault

    def trip(self, fault: GraderMisconfigured) -> None:
        """Close the gate (a grader call was refused); the first probe waits `first_wait_s`."""
        with self._lock:
            first = self._fault is None
            self._fault = fault
            if first:
                self._wait = self._first_wait
                self._probe_at = self._now() + self._wait
        if first:
            log.critical(
                SUSPENDED,
                extra={
                    "event": "grader_suspended",
                    "error_type": fault.slug,
                    "error": fault.detail,
                    "probe_in_s": self._wait.total_seconds(),
                },
            )

    def check(self) -> GraderMisconfigured | None:
        """None when grading may go on; else the refusal. Probes once the wait is over."""
        with self._lock:
            if self._fault is None:
                return None
            if self._probing or self._now() < self._probe_at:
                return self._fault
            self._probing = True
        try:
            if self._probe is not None:
                self._probe()
        except GraderMisconfigured as refused:
            self._wait_longer(refused)
            log.error(
                STILL_REFUSED,
                extra={
                    "event": "grader_still_suspended",
                    "error_type": refused.slug,
                    "error": refused.detail,
                    "probe_in_s": self._wait.total_seconds(),
                },
            )
            return refused
        except Exception as unsure:  # the provider could not say: ask again later
            self._wait_longer(None)
            log.warning(
                "the grader's probe got no answer; grading stays suspended",
                extra={"error_type": type(unsure).__name__},
            )
            return self._fault
        with self._lock:
            self._fault = None
            self._probing = False
        log.warning(RESUMED, extra={"event": "grader_resumed"})
        return None

    def retry_after_s(self) -> float:
        """Seconds until the next probe (at least 1)."""
        with self._lock:
            return max(1.0, (self._probe_at - self._now()).total_seconds())

    def _wait_longer(self, fault: GraderMisconfigured | None) -> None:
        with self._lock:
            if fault is not None:
                self._fault = fault
            self._wait = min(self._wait * 2, self._max_wait)
            self._probe_at = self._now() + self._wait
            self._probing = False
