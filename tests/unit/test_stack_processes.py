"""The local stack's processes: they die with the runner, and a taken port is named."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from localcloud.ports import check_free, free_ports, holder, is_free
from localcloud.stack import LocalStack, StackConfig

RUNNER = """
import subprocess, sys, time
child = subprocess.Popen(
    [sys.executable, "-m", "localcloud.child", sys.executable, "-c", "import time; time.sleep(60)"],
    start_new_session=True,
)
print(child.pid, flush=True)
time.sleep(60)
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead too (its parent, the killed runner, never reaped it).
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "\nState:\tZ" in status.read_text())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal is Linux")
def test_a_child_dies_when_its_runner_is_killed_hard() -> None:
    runner = subprocess.Popen([sys.executable, "-c", RUNNER], stdout=subprocess.PIPE, text=True)
    assert runner.stdout is not None
    child = int(runner.stdout.readline())
    assert alive(child)
    runner.send_signal(signal.SIGKILL)
    runner.wait(10)
    runner.stdout.close()
    deadline = time.monotonic() + 10
    while alive(child):
        assert time.monotonic() < deadline, f"child {child} outlived its runner"
        time.sleep(0.05)


def test_a_taken_port_is_refused_naming_the_process(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert holder(port) is not None and f"pid {os.getpid()}" in str(holder(port))
        stack = LocalStack(StackConfig(tmp_path, ports={"intake": port}))
        with pytest.raises(
            RuntimeError, match=rf"port {port} \(intake\) is held by pid {os.getpid()}"
        ):
            stack.start()
    check_free({"intake": port})  # free again once the socket is closed


def test_the_ports_of_one_stack_are_all_different() -> None:
    # Asked one at a time, a port is free again once its socket closes; picked together,
    # never twice. 200 stacks' worth, so a repeat handed out by the OS would show.
    for _ in range(200):
        ports = free_ports(7)
        assert len(set(ports)) == 7
        assert all(is_free(port) for port in ports)


def test_a_port_named_for_two_services_is_refused(tmp_path: Path) -> None:
    port = free_ports(1)[0]
    stack = LocalStack(StackConfig(tmp_path, ports={"intake": port, "worker": port}))
    with pytest.raises(RuntimeError, match=rf"port {port} is named for intake and worker"):
        stack.start()


def test_a_stack_on_free_ports_names_each_port_once(tmp_path: Path) -> None:
    ports = StackConfig.on_free_ports(tmp_path).ports
    assert len(set(ports.values())) == len(ports) == 7
