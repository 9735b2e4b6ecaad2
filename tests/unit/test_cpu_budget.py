"""The CPU bound the hostile-input suites put on every request: it trips, and it measures."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from flask import Flask

from tests.support.cpu_budget import (
    CpuBudgetExceeded,
    ServerCpu,
    budgeted_client,
    process_tree_cpu_s,
)


def burning_app(burn_s: float) -> Flask:
    app = Flask(__name__)

    @app.get("/burn")
    def burn() -> str:
        start = time.thread_time()
        while time.thread_time() - start < burn_s:
            pass
        return "done"

    return app


def test_a_request_past_the_bound_fails_the_test() -> None:
    client = budgeted_client(burning_app(0.2), bound_s=0.05)
    with pytest.raises(CpuBudgetExceeded, match="GET /burn took"):
        client.get("/burn")
    assert client.cpu_spent[0] >= 0.2


def test_a_request_within_the_bound_passes() -> None:
    client = budgeted_client(burning_app(0.01), bound_s=1.0)
    assert client.get("/burn").status_code == 200
    assert 0.01 <= client.cpu_spent[0] < 1.0


BURN_THEN_WAIT = """
import sys, time
while time.process_time() < 0.3:
    pass
print("burnt", flush=True)
sys.stdin.read()
"""


def test_the_server_meter_counts_a_process_and_its_children() -> None:
    # A parent that burns nothing starts a child that burns 0.3 s, like gunicorn's master
    # and its worker.
    script = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {BURN_THEN_WAIT!r}])"
    with subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    ) as parent:
        assert parent.stdin is not None and parent.stdout is not None
        meter = ServerCpu(parent.pid, bound_s=0.1)
        meter.start()
        try:
            assert parent.stdout.readline() == b"burnt\n"
            assert process_tree_cpu_s(parent.pid) >= 0.25  # /proc counts in clock ticks
            with pytest.raises(CpuBudgetExceeded):
                meter.check("the burn")
        finally:
            parent.stdin.close()  # the child reads its end of input and exits, then the parent
