"""A bound on the CPU time one hostile request may cost, checked on every request sent.

The hostile-input suites send their requests through `BudgetedClient` (in process: the
test client runs the app on the calling thread, so that thread's CPU time is the
request's) or measure the real server's processes with `ServerCpu` (Linux /proc). A
request past the bound fails the test that sent it, whatever it answered: a refusal that
costs minutes of CPU holds an intake thread as surely as a slow success.

CPU time, not wall time: other processes on a loaded machine do not inflate it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from flask import Flask
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

#: CPU seconds one hostile request may take. A normal request of the largest size takes a
#: few milliseconds; the bound is generous so that only a super-linear path trips it.
HOSTILE_REQUEST_CPU_S = 2.0


class CpuBudgetExceeded(AssertionError):
    """A request took more CPU time than its bound."""


def check_budget(what: str, spent_s: float, bound_s: float) -> None:
    if spent_s > bound_s:
        raise CpuBudgetExceeded(f"{what} took {spent_s:.2f} s of CPU; the bound is {bound_s} s")


class BudgetedClient(FlaskClient):
    """A test client that fails any request costing more than `cpu_bound_s` of CPU."""

    cpu_bound_s: float = HOSTILE_REQUEST_CPU_S

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: CPU seconds of each request sent, in order.
        self.cpu_spent: list[float] = []

    def open(self, *args: Any, **kwargs: Any) -> TestResponse:
        start = time.thread_time()
        response = super().open(*args, **kwargs)
        spent = time.thread_time() - start
        self.cpu_spent.append(spent)
        what = f"{response.request.method} {response.request.path}"
        check_budget(what, spent, self.cpu_bound_s)
        return response


def budgeted_client(app: Flask, bound_s: float = HOSTILE_REQUEST_CPU_S) -> BudgetedClient:
    """`app`'s test client, bounded to `bound_s` CPU seconds per request."""
    app.test_client_class = BudgetedClient
    client = app.test_client()
    assert isinstance(client, BudgetedClient)
    client.cpu_bound_s = bound_s
    return client


_TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat_fields(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None  # the process has gone
    # The command name is in parentheses and may hold spaces: split after its last `)`.
    return raw[raw.rindex(")") + 2 :].split()


def process_tree_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process `pid` and its direct children (gunicorn's workers)."""
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        # After the name: state, ppid, ..., utime (14th field overall), stime (15th).
        if fields is None or (int(entry.name) != pid and fields[1] != str(pid)):
            continue
        total += int(fields[11]) + int(fields[12])
    return total / _TICKS_PER_S


class ServerCpu:
    """The CPU a server process tree spends between `start` and `check`."""

    def __init__(self, pid: int, bound_s: float = HOSTILE_REQUEST_CPU_S) -> None:
        self.pid = pid
        self.bound_s = bound_s
        self._start = 0.0

    def start(self) -> None:
        self._start = process_tree_cpu_s(self.pid)

    def check(self, what: str) -> float:
        spent = process_tree_cpu_s(self.pid) - self._start
        check_budget(what, spent, self.bound_s)
        return spent
