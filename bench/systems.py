"""The systems under test: Gradeq's local stack and the peers (Flask, Celery, RQ on Redis).

Each system starts on free loopback ports, takes submissions over HTTP at SUBMIT_PATH,
names its processes by role (front, worker, queue; Gradeq also bus, notification,
analytics) for the CPU and memory figures, and reports when and how many jobs became
final, from its own records: the job store for Gradeq, Celery's result backend, RQ's
job hashes and registries.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import psutil
from redis import Redis
from rq import Queue
from rq.job import Job
from rq.registry import FailedJobRegistry, FinishedJobRegistry

from bench import processes
from bench.celery_tasks import STARTED_KEY
from bench.settings import (
    CELERY,
    FLASK,
    GRADEQ,
    PRODUCTION_FRONT,
    RQ,
    Front,
    gunicorn_args,
    gunicorn_limit_args,
)

FINAL = ("SUCCEEDED", "FAILED", "CANCELLED")
#: Roles whose CPU counts from submission to the last final job, and after it.
CORE_ROLES = ("worker", "queue")
FRONT_ROLE = "front"
SUBSCRIBER_ROLES = ("bus", "notification", "analytics", "gradebook")


def epoch(text: str) -> float:
    """Seconds since the epoch of an ISO 8601 time; a time without offset is UTC."""
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def iso(seconds: float) -> str:
    """The store's sortable form of a time: UTC, microseconds, offset."""
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="microseconds")


class System:
    """What every system offers the scenarios."""

    name: str
    url: str = ""
    headers: dict[str, str]

    def __init__(self) -> None:
        self.headers = {}

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def roles(self) -> dict[str, psutil.Process]:
        """Role -> root process of that role's tree."""
        raise NotImplementedError

    def begin(self) -> None:
        """Mark the start of a run: `finished()` counts from here."""

    def finished(self) -> int:
        """Jobs final since `begin()`."""
        raise NotImplementedError

    def completed_at(self, ids: Sequence[str]) -> list[float | None]:
        """When each job became final (epoch seconds), None for a job not final yet."""
        raise NotImplementedError

    def held(self) -> int:
        """Jobs being graded right now."""
        raise NotImplementedError

    def facts(self) -> dict[str, Any]:
        return {}


# --- Gradeq ----------------------------------------------------------------------------


@dataclass(frozen=True)
class GradeqProfile:
    """The stack's settings for one group of scenarios (bench.gradeq_stack's options)."""

    grader_latency_s: float
    rate: float
    concurrency: int
    worker_threads: int
    only: tuple[str, ...] = ()
    stop_timeout_s: float = 10.0
    front: Front = PRODUCTION_FRONT


class GradeqSystem(System):
    """Gradeq's embedded default, started from Gradeq's venv by bench.gradeq_stack."""

    name = GRADEQ
    ROLE_OF: ClassVar[dict[str, str]] = {
        "intake": FRONT_ROLE,
        "worker": "worker",
        "dispatcher": "queue",
        "bus": "bus",
        "notification": "notification",
        "analytics": "analytics",
        "gradebook": "gradebook",
    }

    def __init__(self, python: Path, workdir: Path, profile: GradeqProfile) -> None:
        super().__init__()
        self.python = python
        self.workdir = workdir
        self.profile = profile
        self._launcher: subprocess.Popen[str] | None = None
        self._pids: dict[str, int] = {}
        self._database = Path()
        self._since = ""
        self._python_version = ""

    def start(self) -> None:
        p = self.profile
        command = [
            str(self.python), "-m", "bench.gradeq_stack", "--data-dir", str(self.workdir),
            "--grader-latency-s", str(p.grader_latency_s), "--rate", str(p.rate),
            "--concurrency", str(p.concurrency), "--worker-threads", str(p.worker_threads),
            "--only", ",".join(p.only), "--stop-timeout-s", str(p.stop_timeout_s),
            "--front-workers", str(p.front.workers), "--front-threads", str(p.front.threads),
        ]  # fmt: skip
        self._launcher = processes.spawn(
            command,
            self.workdir.parent / f"{self.workdir.name}-launcher.log",
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self._launcher.stdout is not None
        line = self._launcher.stdout.readline()
        if not line:
            self._launcher.wait()
            raise RuntimeError(f"Gradeq's stack did not start (see {self.workdir}/stack.log)")
        ready = json.loads(line)
        self.url = ready["intake_url"]
        self.headers = {"Authorization": f"Bearer {ready['api_key']}"}
        self._database = Path(ready["database"])
        self._pids = ready["pids"]
        self._python_version = ready["python"]

    def stop(self) -> None:
        launcher = self._launcher
        if launcher is None:
            return
        assert launcher.stdin is not None
        launcher.stdin.close()  # the launcher stops the stack when its stdin closes
        processes.stop(launcher, timeout_s=self.profile.stop_timeout_s + 15)
        self._launcher = None

    def roles(self) -> dict[str, psutil.Process]:
        return {self.ROLE_OF[name]: psutil.Process(pid) for name, pid in self._pids.items()}

    def pending_deliveries(self) -> int:
        """Bus deliveries not yet acknowledged (pushed or written), to any subscription."""
        return int(self._query("SELECT count(*) FROM bus_deliveries")[0][0])

    def _query(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        # Read-only, as an observer: the stack's processes are the only writers.
        conn = sqlite3.connect(f"file:{self._database}?mode=ro", uri=True, timeout=30)
        try:
            return conn.execute(sql, tuple(params)).fetchall()
        finally:
            conn.close()

    def begin(self) -> None:
        self._since = iso(time.time())

    def finished(self) -> int:
        rows = self._query("SELECT count(*) FROM jobs WHERE completed_at >= ?", (self._since,))
        return int(rows[0][0])

    def completed_at(self, ids: Sequence[str]) -> list[float | None]:
        found: dict[str, float] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            sql = f"SELECT id, status, completed_at FROM jobs WHERE id IN ({marks})"  # noqa: S608
            for job_id, status, completed in self._query(sql, chunk):
                if status in FINAL and completed:
                    found[job_id] = epoch(completed)
        return [found.get(i) for i in ids]

    def subscribers(self) -> dict[str, tuple[int, float | None]]:
        """Per subscriber: events recorded since `begin()` and when it recorded the last."""
        rows = self._query(
            "SELECT subscriber, count(*), max(processed_at) FROM processed_events"
            " WHERE processed_at >= ? GROUP BY subscriber",
            (self._since,),
        )
        return {name: (int(n), epoch(last) if last else None) for name, n, last in rows}

    def held(self) -> int:
        return int(self._query("SELECT count(*) FROM jobs WHERE status = 'RUNNING'")[0][0])

    def refused(self) -> int:
        """Replies to deliveries of the tasks made since `begin()`.

        Asked before any grading can have ended, every reply is a refusal (a 503 the queue
        retries after its backoff). The code itself is not kept: a new attempt clears it.
        """
        rows = self._query(
            "SELECT COALESCE(SUM(response_count), 0) FROM tasks WHERE created_at >= ?",
            (epoch(self._since),),
        )
        return int(rows[0][0])

    def facts(self) -> dict[str, Any]:
        return {"python": self._python_version}


# --- Redis and the peers ---------------------------------------------------------------


class RedisServer:
    """A throwaway Redis on a free loopback port: no persistence, its own folder."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = 0
        self._process: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = processes.free_port()
        command = [
            "redis-server", "--bind", "127.0.0.1", "--port", str(self.port),
            "--protected-mode", "yes", "--save", "", "--appendonly", "no",
            "--dir", str(self.workdir), "--daemonize", "no",
        ]  # fmt: skip
        self._process = processes.spawn(command, self.workdir / "redis.log")
        processes.wait_for_port(self.port, self._process)
        processes.wait_until(lambda: bool(Redis.from_url(self.url).ping()), 10, what="redis")

    def process(self) -> psutil.Process:
        assert self._process is not None
        return psutil.Process(self._process.pid)

    def stop(self) -> None:
        if self._process is not None:
            processes.stop(self._process)
            self._process = None


@dataclass(frozen=True)
class PeerProfile:
    """A peer's settings for one group of scenarios."""

    grade_s: float
    #: Celery: threads of the one worker process; RQ: worker processes. 0: no worker.
    concurrency: int
    #: Celery's task rate limit, e.g. "20/s" (RQ has none).
    rate_limit: str = ""
    count_starts: bool = False
    #: How long the worker may finish its jobs when stopped.
    stop_timeout_s: float = 10.0
    front: Front = PRODUCTION_FRONT


class PeerSystem(System):
    """A Flask producer under the intake's gunicorn settings, Redis, and a worker."""

    def __init__(self, name: str, workdir: Path, profile: PeerProfile) -> None:
        super().__init__()
        self.name = name
        self.workdir = workdir
        self.profile = profile
        self.redis = RedisServer(workdir / "redis") if name != FLASK else None
        self._producer: subprocess.Popen[str] | None = None
        self._worker: subprocess.Popen[str] | None = None
        self._client: Redis | None = None

    def _env(self) -> dict[str, str]:
        env = {"BENCH_PEER": self.name, "BENCH_GRADE_S": str(self.profile.grade_s)}
        if self.redis is not None:
            env["BENCH_REDIS_URL"] = self.redis.url
        if self.profile.rate_limit:
            env["BENCH_RATE_LIMIT"] = self.profile.rate_limit
        if self.profile.count_starts:
            env["BENCH_COUNT_STARTS"] = "1"
        return env

    def _bin(self, name: str) -> str:
        return str(Path(sys.executable).parent / name)

    def start(self) -> None:
        if self.redis is not None:
            self.redis.start()
            self._client = Redis.from_url(self.redis.url)
        port = processes.free_port()
        producer = [
            sys.executable, "-m", "gunicorn", "--bind", f"127.0.0.1:{port}",
            *gunicorn_args(self.profile.front), *gunicorn_limit_args(),
            "bench.peer_producer:create_app()",
        ]  # fmt: skip
        self._producer = processes.spawn(producer, self.workdir / "producer.log", self._env())
        processes.wait_for_port(port, self._producer)
        self.url = f"http://127.0.0.1:{port}"
        if self.profile.concurrency:
            self._worker = processes.spawn(
                self._worker_command(), self.workdir / "worker.log", self._env()
            )
            self._wait_worker_ready()

    def _worker_command(self) -> list[str]:
        n = str(self.profile.concurrency)
        if self.name == CELERY:
            return [
                self._bin("celery"), "-A", "bench.celery_tasks", "worker",
                "--pool", "threads", "--concurrency", n, "--loglevel", "INFO",
            ]  # fmt: skip
        if self.name == RQ:
            assert self.redis is not None
            return [self._bin("rq"), "worker-pool", "--num-workers", n, "--url", self.redis.url]
        raise ValueError(f"{self.name} has no worker")

    def _wait_worker_ready(self) -> None:
        assert self._client is not None and self._worker is not None
        worker = self._worker
        client = self._client
        n = self.profile.concurrency

        def ready() -> bool:
            if worker.poll() is not None:
                raise RuntimeError(f"{self.name} worker exited with {worker.returncode}")
            if self.name == RQ:
                return len(client.smembers("rq:workers")) >= n
            # Celery logs "celery@<host> ready." once its consumer takes tasks.
            return " ready." in (self.workdir / "worker.log").read_text()

        processes.wait_until(ready, 60, 0.2, f"{self.name} workers")

    def stop(self) -> None:
        for process in (self._worker, self._producer):
            if process is not None:
                processes.stop(process, self.profile.stop_timeout_s)
        self._worker = self._producer = None
        if self.redis is not None:
            self.redis.stop()

    def roles(self) -> dict[str, psutil.Process]:
        assert self._producer is not None
        found = {FRONT_ROLE: psutil.Process(self._producer.pid)}
        if self._worker is not None:
            found["worker"] = psutil.Process(self._worker.pid)
        if self.redis is not None:
            found["queue"] = self.redis.process()
        return found

    def facts(self) -> dict[str, Any]:
        if self._client is None:
            return {}
        return {"redis_server": self._client.info("server").get("redis_version")}


class CelerySystem(PeerSystem):
    """Flask + Celery: results seen as the backend publishes them (it always does)."""

    def __init__(self, workdir: Path, profile: PeerProfile) -> None:
        super().__init__(CELERY, workdir, profile)
        self._done: dict[str, float] = {}
        self._lock = threading.Lock()
        self._listener: Any = None

    def start(self) -> None:
        super().start()
        assert self._client is not None
        pubsub = self._client.pubsub(ignore_subscribe_messages=True)
        pubsub.psubscribe(**{"celery-task-meta-*": self._on_result})
        self._listener = pubsub.run_in_thread(sleep_time=0.01, daemon=True)

    def _on_result(self, message: dict[str, Any]) -> None:
        meta = json.loads(message["data"])
        if meta.get("status") not in ("SUCCESS", "FAILURE", "REVOKED"):
            return
        task_id = message["channel"].decode().removeprefix("celery-task-meta-")
        with self._lock:
            self._done[task_id] = epoch(meta["date_done"])

    def stop(self) -> None:
        if self._listener is not None:
            self._listener.stop()
            self._listener = None
        super().stop()

    def begin(self) -> None:
        assert self._client is not None
        with self._lock:
            self._done.clear()
        self._client.set(STARTED_KEY, 0)

    def finished(self) -> int:
        with self._lock:
            return len(self._done)

    def completed_at(self, ids: Sequence[str]) -> list[float | None]:
        with self._lock:
            return [self._done.get(i) for i in ids]

    def held(self) -> int:
        assert self._client is not None
        # Started tasks (counted by the task itself) less those already done.
        return int(self._client.get(STARTED_KEY) or 0) - self.finished()


class RqSystem(PeerSystem):
    """Flask + RQ: jobs counted in RQ's finished and failed registries."""

    def __init__(self, workdir: Path, profile: PeerProfile) -> None:
        super().__init__(RQ, workdir, profile)
        self._baseline = 0

    def _registries(self) -> tuple[str, str]:
        assert self._client is not None
        queue = Queue(connection=self._client)
        return (
            FinishedJobRegistry(queue=queue).key,
            FailedJobRegistry(queue=queue).key,
        )

    def _count(self) -> int:
        assert self._client is not None
        return sum(int(self._client.zcard(key)) for key in self._registries())

    def begin(self) -> None:
        self._baseline = self._count()

    def finished(self) -> int:
        return self._count() - self._baseline

    def completed_at(self, ids: Sequence[str]) -> list[float | None]:
        assert self._client is not None
        jobs = Job.fetch_many(list(ids), connection=self._client)
        return [
            job.ended_at.timestamp() if job is not None and job.ended_at is not None else None
            for job in jobs
        ]

    def held(self) -> int:
        raise NotImplementedError("an RQ worker process holds one job at a time")


def peer(name: str, workdir: Path, profile: PeerProfile) -> PeerSystem:
    """The peer system called `name`."""
    if name == CELERY:
        return CelerySystem(workdir, profile)
    if name == RQ:
        return RqSystem(workdir, profile)
    return PeerSystem(name, workdir, profile)
