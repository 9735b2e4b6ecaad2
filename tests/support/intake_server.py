"""The intake under gunicorn on a loopback port, as deployed (same gunicorn config).

`config=False` starts it with plain gunicorn instead, as someone running the app
without the project's config would.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import requests

from localcloud.stack import GUNICORN_CONFIG, free_port


@dataclass(frozen=True)
class RunningIntake:
    """Where the intake listens."""

    url: str
    host: str
    port: int
    #: The gunicorn master's process id (its workers are its children).
    pid: int


def _start(
    port: int,
    data_dir: Path,
    env: dict[str, str] | None,
    sink: IO[bytes] | int,
    config: bool,
    memory_limit: int | None = None,
) -> subprocess.Popen[bytes]:
    def limit_memory() -> None:  # in the child: gunicorn's master and its worker
        if memory_limit is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))

    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            *(["--config", GUNICORN_CONFIG] if config else []),
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "1",
            "--worker-class",
            "gthread",
            "--threads",
            "4",
            "--log-level",
            "warning",
            "services.intake.app:create_app()",
        ],
        env={
            **os.environ,
            "GRADEQ_BACKEND": "embedded",
            "GRADEQ_DATA_DIR": str(data_dir),
            "GRADEQ_LOG_LEVEL": "WARNING",
            **(env or {}),
        },
        stdout=sink,
        stderr=sink,
        preexec_fn=limit_memory if memory_limit is not None else None,
    )


@contextmanager
def running_intake(
    data_dir: Path,
    env: dict[str, str] | None = None,
    output: Path | None = None,
    config: bool = True,
    memory_limit: int | None = None,
) -> Iterator[RunningIntake]:
    """Start the intake (embedded backend in `data_dir`) and stop it afterwards.

    With `output`, the server's stdout and stderr go to that file, else nowhere; with
    `memory_limit`, its processes may map at most that many bytes (RLIMIT_AS).
    """
    port = free_port()
    if output is None:
        process = _start(port, data_dir, env, subprocess.DEVNULL, config, memory_limit)
    else:
        with output.open("wb") as sink:  # the server keeps its own copy of the file
            process = _start(port, data_dir, env, sink, config, memory_limit)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"intake exited with {process.returncode}")
            try:
                if requests.get(url + "/healthz", timeout=1).ok:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("intake did not become healthy")
            time.sleep(0.1)
        yield RunningIntake(url, "127.0.0.1", port, process.pid)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
