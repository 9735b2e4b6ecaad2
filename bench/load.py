"""The clients of `make bench`: wrk for the acceptance rate, a thread pool for job batches.

Every request is a POST of settings.JOB_BODY to SUBMIT_PATH on 127.0.0.1 with its own
Idempotency-Key; a batch retries a 429 or 503 with the same key (the same job), as a
client of Gradeq would, and counts the retries.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import urllib3

from bench.settings import JOB_BODY, SUBMIT_PATH

WRK_SCRIPT = Path(__file__).with_name("wrk_post.lua")
#: How long a batch keeps retrying one submission that is answered 429 or 503.
RETRY_FOR_S = 60.0


def body_bytes() -> bytes:
    return json.dumps(JOB_BODY).encode()


def run_wrk(
    url: str, headers: dict[str, str], seconds: float, clients: int, prefix: str
) -> dict[str, Any]:
    """wrk -c`clients` -t2 for `seconds` against the submit path; its figures."""
    command = [
        "wrk", "-t", "2", "-c", str(clients), "-d", f"{seconds:g}s", "--timeout", "10s",
        "-s", str(WRK_SCRIPT), url + SUBMIT_PATH,
        "--", prefix, body_bytes().decode(), headers.get("Authorization", ""),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=seconds + 60)
    line = next(x for x in reversed(done.stdout.splitlines()) if x.startswith("{"))
    raw: dict[str, Any] = json.loads(line)
    return {
        "rps": raw["requests"] / (raw["duration_us"] / 1e6),
        "requests": raw["requests"],
        "p50_ms": raw["p50_us"] / 1000,
        "p99_ms": raw["p99_us"] / 1000,
        "max_ms": raw["max_us"] / 1000,
        "errors": raw["non_2xx"] + raw["socket_errors"],
    }


@dataclass
class Batch:
    """What a batch of submissions got back."""

    ids: list[str] = field(default_factory=list)
    #: Epoch seconds just before the first request and after the last answer.
    started: float = 0.0
    ended: float = 0.0
    #: Round trip of each accepted POST, seconds.
    latencies: list[float] = field(default_factory=list)
    retries: int = 0


class Submitter:
    """POSTs jobs to one system over a keep-alive connection pool."""

    def __init__(self, url: str, headers: dict[str, str], clients: int) -> None:
        parts = urlsplit(url)
        assert parts.hostname is not None and parts.port is not None
        self._pool = urllib3.HTTPConnectionPool(
            parts.hostname, parts.port, maxsize=clients, block=True, retries=False
        )
        self._headers = {"Content-Type": "application/json", **headers}
        self._body = body_bytes()
        self._clients = clients
        self._lock = threading.Lock()

    def close(self) -> None:
        self._pool.close()

    def submit(self, key: str, batch: Batch) -> str:
        """One job, retried on 429/503 with the same key; its id."""
        headers = {**self._headers, "Idempotency-Key": key}
        give_up = time.monotonic() + RETRY_FOR_S
        while True:
            sent = time.perf_counter()
            reply = self._pool.request(
                "POST", SUBMIT_PATH, body=self._body, headers=headers, timeout=30.0
            )
            elapsed = time.perf_counter() - sent
            if reply.status == 202:
                job_id: str = json.loads(reply.data)["id"]
                with self._lock:
                    batch.latencies.append(elapsed)
                return job_id
            if reply.status not in (429, 503) or time.monotonic() > give_up:
                raise RuntimeError(f"POST {key}: HTTP {reply.status} {reply.data[:300]!r}")
            with self._lock:
                batch.retries += 1
            time.sleep(min(float(reply.headers.get("Retry-After", "0.1")), 1.0))

    def batch(self, count: int, prefix: str) -> Batch:
        """`count` jobs from `clients` concurrent clients; ids in submission order."""
        batch = Batch(started=time.time())
        with ThreadPoolExecutor(self._clients) as pool:
            batch.ids = list(pool.map(lambda i: self.submit(f"{prefix}-{i}", batch), range(count)))
        batch.ended = time.time()
        return batch
