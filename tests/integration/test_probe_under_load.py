"""A busy instance still answers Cloud Run's probes: the real entrypoint, gunicorn and config.

Cloud Run sends an instance at most its request concurrency at a time, and its probes
come on top of that. The container entrypoint is run as deployed, with `gunicorn` on
PATH serving a service-shaped app instead of a Gradeq service.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from localcloud.stack import free_port
from shared.http.gunicorn_conf import PROBE_THREADS, threads_for

ROOT = Path(__file__).resolve().parents[2]
ENTRYPOINT = ROOT / "scripts" / "container-entrypoint.sh"
#: What terraform/run.tf gives the worker by default (var.worker.concurrency).
CONCURRENCY = 8


@pytest.fixture
def busy_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "busy"
    folder.mkdir()
    return folder


@pytest.fixture
def instance(tmp_path: Path, busy_dir: Path) -> Iterator[str]:
    """The entrypoint as Cloud Run starts it (SERVICE=worker, CONCURRENCY), on loopback."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "gunicorn"
    # The entrypoint's flags pass through untouched; only the app it names is swapped.
    shim.write_text(
        f"#!{sys.executable}\n"
        "import os, sys\n"
        "os.execv(sys.executable, [sys.executable, '-m', 'gunicorn', *sys.argv[1:-1],\n"
        "         'tests.support.busy_app:create_app()'])\n"
    )
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    port = free_port()
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
        "SERVICE": "worker",
        "PORT": str(port),
        "CONCURRENCY": str(CONCURRENCY),
        "BUSY_DIR": str(busy_dir),
    }
    env.pop("THREADS", None)
    process = subprocess.Popen(
        ["sh", str(ENTRYPOINT)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, f"gunicorn exited with {process.returncode}"
            try:
                if requests.get(url + "/healthz", timeout=1).ok:
                    break
            except requests.RequestException:
                pass
            assert time.monotonic() < deadline, "gunicorn did not start"
            time.sleep(0.1)
        yield url
    finally:
        (busy_dir / "release").touch()
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_threads_are_the_concurrency_plus_spare_ones_for_probes() -> None:
    assert threads_for({"CONCURRENCY": "80"}) == 80 + PROBE_THREADS
    assert threads_for({}) == 8 + PROBE_THREADS
    assert PROBE_THREADS >= 1
    with pytest.raises(ValueError, match="CONCURRENCY"):
        threads_for({"CONCURRENCY": "0"})


def test_the_entrypoint_leaves_the_thread_count_to_the_config() -> None:
    # A --threads flag would override the config's count with the bare concurrency.
    assert "--threads" not in ENTRYPOINT.read_text()


def test_the_liveness_probe_is_answered_while_every_request_slot_is_busy(
    instance: str, busy_dir: Path
) -> None:
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        busy = [
            pool.submit(requests.post, instance + "/busy", timeout=90) for _ in range(CONCURRENCY)
        ]
        deadline = time.monotonic() + 30
        while len(list(busy_dir.glob("started-*"))) < CONCURRENCY:
            assert time.monotonic() < deadline, "the busy requests did not all start"
            time.sleep(0.05)
        # Cloud Run's default probe waits 1 s; allow far more under a loaded machine,
        # while every busy request still holds its thread.
        probe = requests.get(instance + "/healthz", timeout=15)
        still_busy = not (busy_dir / "release").exists() and not any(f.done() for f in busy)
        (busy_dir / "release").touch()
        assert [f.result().status_code for f in busy] == [200] * CONCURRENCY
    assert probe.status_code == 200
    assert still_busy
