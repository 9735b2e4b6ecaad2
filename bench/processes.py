"""Processes of the benchmark: start them on loopback, measure them (psutil), stop them.

Every process is started through `localcloud.child`, so it dies with the driver even when
the driver is killed, and in its own session, so a stop reaches its whole group.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO

import psutil

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def spawn(
    command: list[str],
    log: Path,
    env: Mapping[str, str] | None = None,
    stdin: int | None = subprocess.DEVNULL,
    stdout: int | IO[str] | None = None,
    repo: Path = REPO,
) -> subprocess.Popen[str]:
    """Start `command` from a checkout's root (this one's), its output appended to `log`."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as sink:
        return subprocess.Popen(
            [sys.executable, "-m", "localcloud.child", *command],
            cwd=repo,
            env={**os.environ, "PYTHONPATH": str(repo), **(env or {})},
            stdin=stdin,
            stdout=stdout if stdout is not None else sink,
            stderr=sink,
            text=True,
            start_new_session=True,
        )


def stop(process: subprocess.Popen[str], timeout_s: float = 10.0) -> None:
    """SIGTERM the process's group, SIGKILL it after the timeout."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def wait_until(
    check: Callable[[], bool], timeout_s: float, interval_s: float = 0.05, what: str = ""
) -> None:
    """Poll `check` until it holds; raise TimeoutError after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what or 'condition'} not reached within {timeout_s:g} s")
        time.sleep(interval_s)


def wait_for_port(port: int, process: subprocess.Popen[str], timeout_s: float = 30.0) -> None:
    """Wait until something listens on 127.0.0.1:`port`; fail if `process` exits first."""

    def listening() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args!r} exited with {process.returncode}")
        with socket.socket() as sock:
            sock.settimeout(0.2)
            return sock.connect_ex(("127.0.0.1", port)) == 0

    wait_until(listening, timeout_s, 0.1, f"a listener on port {port}")


def _tree(root: psutil.Process) -> list[psutil.Process]:
    try:
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def cpu_seconds(root: psutil.Process) -> float:
    """User + system CPU of a process and all its descendants, the exited ones included.

    A live process counts its own time and that of its exited, reaped children
    (children_user/children_system); live children are counted once, as themselves.
    """
    total = 0.0
    for process in _tree(root):
        with contextlib.suppress(psutil.NoSuchProcess, psutil.ZombieProcess):
            times = process.cpu_times()
            total += times.user + times.system + times.children_user + times.children_system
    return total


def largest_rss(root: psutil.Process) -> int:
    """Resident bytes of the largest process in the tree (the one holding the work)."""
    sizes = [0]
    for process in _tree(root):
        with contextlib.suppress(psutil.NoSuchProcess, psutil.ZombieProcess):
            sizes.append(process.memory_info().rss)
    return max(sizes)


def snapshot(roles: Mapping[str, psutil.Process]) -> dict[str, float]:
    """CPU seconds of each role's process tree, now."""
    return {role: cpu_seconds(process) for role, process in roles.items()}
