"""The whole pipeline as local processes (no account, no Docker).

`LocalStack` starts intake, worker, notification, analytics and gradebook under
gunicorn, the local Cloud Tasks dispatcher and a recovery ticker. On the embedded backend
(the default) everything shares one SQLite file and the local bus delivers events: it
pushes them to notification and gradebook (posted grades only, by its subscription's
filter) and, as Pub/Sub's BigQuery subscription does on Google Cloud, writes them
into the analytics records itself (the analytics service serves its reports from them).
On the `google-emulators` backend the services use the Google adapters against the
official Firestore and Pub/Sub emulators, and the dispatcher serves the Cloud Tasks API;
the Pub/Sub emulator has no BigQuery subscriptions, so it pushes to analytics.
`make run`, `make run-google-emulators` and the end-to-end tests all use it.

Push authentication runs as in production: the worker and the subscribers check the
claims of ID tokens shaped as Cloud Run forwards them (`GRADEQ_PUSH_AUTH=oidc`, signature
removed), and every caller sends such a token for its own service account: the
dispatcher (Cloud Tasks), the bus (Pub/Sub push), the recovery ticker (Cloud Scheduler).
The Pub/Sub emulator pushes without a token, so on that backend each subscriber gets a
`CloudRunFront` that adds it.
"""

from __future__ import annotations

import base64
import collections
import functools
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import requests

from localcloud.cloudrun import PENDING_S, CloudRunFront, forwarded_authorization
from localcloud.emulators import Emulator
from localcloud.ports import check_free, free_ports

HTTP_SERVICES = ("intake", "worker", "notification", "analytics", "gradebook")
#: The reference web frontend (localcloud.frontend); part of a stack whose ports name it.
FRONTEND = "frontend"
#: The uploads bucket the Cloud Storage emulator holds on the google-emulators backend.
UPLOADS_BUCKET = "gradeq-uploads"
#: The services that receive the jobs' events (the embedded bus writes analytics' itself).
SUBSCRIBERS = ("notification", "analytics")
#: Every service with a subscription on the topic: the job subscribers, and the gradebook
#: (posted grades only).
TOPIC_SUBSCRIBERS = (*SUBSCRIBERS, "gradebook")
EMBEDDED = "embedded"
GOOGLE_EMULATORS = "google-emulators"
EMULATOR_PROJECT = "demo-gradeq"
# The service accounts that call the worker and the subscribers, as terraform names them.
TASKS_ACCOUNT = f"tasks-invoker@{EMULATOR_PROJECT}.iam.gserviceaccount.com"
SCHEDULER_ACCOUNT = f"scheduler@{EMULATOR_PROJECT}.iam.gserviceaccount.com"
PUSH_ACCOUNT = f"pubsub-push@{EMULATOR_PROJECT}.iam.gserviceaccount.com"
#: Who may push to each service (GRADEQ_PUSH_SERVICE_ACCOUNTS); the first one by default.
PUSH_CALLERS = {
    "worker": (TASKS_ACCOUNT, SCHEDULER_ACCOUNT),
    "notification": (PUSH_ACCOUNT,),
    "analytics": (PUSH_ACCOUNT,),
    "gradebook": (PUSH_ACCOUNT,),
}
#: Request limits and problem+json refusals, as in the container image.
GUNICORN_CONFIG = "python:shared.http.gunicorn_conf"


def free_port() -> int:
    """Ask the OS for a free loopback port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class StackConfig:
    """Ports, folders and settings of one local stack."""

    data_dir: Path
    ports: dict[str, int] = field(
        default_factory=lambda: {
            "intake": 8080,
            "worker": 8081,
            "notification": 8082,
            "analytics": 8083,
            "gradebook": 8084,
            "dispatcher_grpc": 8123,
            FRONTEND: 8090,
        }
    )
    backend: str = EMBEDDED
    #: The client the development API key (made at start) belongs to.
    client_id: str = "demo"
    worker_threads: int = 16
    recover_every_s: float = 30.0
    env: dict[str, str] = field(default_factory=dict)
    # Extra options of the local bus (e.g. shorter backoffs for tests and the soak).
    bus_args: list[str] = field(default_factory=list)
    #: How long a subscriber's Cloud Run front keeps a push pending while the subscriber
    #: is down (google-emulators backend; 0: refuse at once).
    front_pending_s: float = PENDING_S

    @classmethod
    def on_free_ports(cls, data_dir: Path, **kwargs: object) -> StackConfig:
        names = (*HTTP_SERVICES, "dispatcher_grpc", FRONTEND)
        ports = dict(zip(names, free_ports(len(names)), strict=True))
        return cls(data_dir=data_dir, ports=ports, **kwargs)  # type: ignore[arg-type]

    def url(self, service: str) -> str:
        return f"http://127.0.0.1:{self.ports[service]}"


class LocalStack:
    """Start, watch, kill and restart the local processes; stream their prefixed output."""

    def __init__(self, config: StackConfig, output: IO[str] | None = None) -> None:
        self.config = config
        #: Seals the stack's webhook secrets; kept in the data directory (see start).
        self.webhook_secrets_key = ""
        #: The webhook secret of `config.client_id`, issued when the stack starts.
        self.webhook_secret = ""
        self.processes: dict[str, subprocess.Popen[str]] = {}
        self._output = output or sys.stdout
        self._lines: dict[str, list[str]] = {name: [] for name in self.process_names()}
        self._emulators: list[Emulator] = []
        self._fronts: list[CloudRunFront] = []
        self._emulator_env: dict[str, str] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        #: What the recovery ticker's calls answered: a status code, or the error's name.
        self._sweeps: collections.Counter[str] = collections.Counter()
        #: A working API key of `config.client_id`, issued when the stack starts.
        self.api_key = ""

    @property
    def emulator_env(self) -> dict[str, str]:
        """The emulator hosts the services are given (google-emulators backend; else empty)."""
        return dict(self._emulator_env)

    # --- process management ------------------------------------------------------------

    def process_names(self) -> tuple[str, ...]:
        """The processes of this backend, in start order."""
        local_bus = ("bus",) if self.config.backend == EMBEDDED else ()
        frontend = (FRONTEND,) if FRONTEND in self.config.ports else ()
        return (*HTTP_SERVICES, "dispatcher", *local_bus, *frontend)

    def web_processes(self) -> list[str]:
        """The processes answering /healthz over HTTP."""
        return [n for n in self.process_names() if n in HTTP_SERVICES or n == FRONTEND]

    def environment(self, name: str) -> dict[str, str]:
        cfg = self.config
        env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "GRADEQ_BACKEND": "embedded",
            "GRADEQ_DATA_DIR": str(cfg.data_dir),
            "GRADEQ_WORKER_URL": cfg.url("worker"),
            "GRADEQ_PUSH_AUTH": "oidc",
            "GRADEQ_PUSH_VERIFY_SIGNATURE": "false",
            # The local callers and fronts stand in for Cloud Run's front.
            "GRADEQ_PUSH_ALLOW_CLAIMS_OUTSIDE_CLOUD_RUN": "true",
            "GRADEQ_TASKS_SERVICE_ACCOUNT": TASKS_ACCOUNT,
            "GRADEQ_BUS_SERVICE_ACCOUNT": PUSH_ACCOUNT,
            "GRADEQ_WEBHOOK_SECRETS_KEY": self.webhook_secrets_key,
            # The development key may read the analytics reports.
            "GRADEQ_ANALYTICS_READERS": cfg.client_id,
            # Local runs may call back to a receiver on this machine.
            "GRADEQ_CALLBACK_ALLOW_LOOPBACK": "true",
        }
        if name == "intake" and FRONTEND in cfg.ports:
            # The page PUTs files to the intake's signed upload URLs (Cloud Storage's CORS
            # in production): the frontend's origin may.
            env["GRADEQ_CORS_ORIGINS"] = cfg.url(FRONTEND)
        if name == FRONTEND:
            # The frontend's backend holds the first client's key; browsers never see it.
            env["GRADEQ_FRONTEND_API_KEY"] = self.api_key
            env["GRADEQ_FRONTEND_INTAKE_URL"] = cfg.url("intake")
        if name in PUSH_CALLERS:
            env["GRADEQ_PUSH_AUDIENCE"] = cfg.url(name)
            env["GRADEQ_PUSH_SERVICE_ACCOUNTS"] = ",".join(PUSH_CALLERS[name])
        if cfg.backend == GOOGLE_EMULATORS:
            env.update(self._emulator_env)
            env.update(
                GRADEQ_BACKEND="google",
                GRADEQ_PROJECT_ID=EMULATOR_PROJECT,
                CLOUD_TASKS_EMULATOR_HOST=f"127.0.0.1:{cfg.ports['dispatcher_grpc']}",
                # Failure injection is off by default on the Google backend; a local run
                # on the emulators keeps it, as the embedded backend does.
                GRADEQ_GRADER_SIMULATE="true",
            )
        env.update(cfg.env)
        return env

    def push_authorization(self, service: str, account: str | None = None) -> dict[str, str]:
        """The Authorization a push to `service` carries once through Cloud Run's front."""
        caller = account or PUSH_CALLERS[service][0]
        return forwarded_authorization(self.config.url(service), caller)

    def command(self, name: str) -> list[str]:
        cfg = self.config
        if name in HTTP_SERVICES:
            threads = cfg.worker_threads if name == "worker" else 4
            return [
                sys.executable, "-m", "gunicorn",
                "--config", GUNICORN_CONFIG,
                "--bind", f"127.0.0.1:{cfg.ports[name]}",
                "--workers", "1", "--worker-class", "gthread", "--threads", str(threads),
                "--timeout", "0", "--graceful-timeout", "8", "--log-level", "warning",
                f"services.{name}.app:create_app()",
            ]  # fmt: skip
        if name == FRONTEND:
            return [
                sys.executable, "-m", "gunicorn",
                "--bind", f"127.0.0.1:{cfg.ports[name]}",
                "--workers", "1", "--worker-class", "gthread", "--threads", "4",
                "--log-level", "warning", "--no-control-socket",
                "localcloud.frontend.app:create_app()",
            ]  # fmt: skip
        if name == "dispatcher":
            # The stack's dispatcher is its database's only one: a restarted dispatcher
            # resends at once what a killed one had in flight.
            return [
                sys.executable, "-m", "localcloud.tasks",
                "--grpc-port", str(cfg.ports["dispatcher_grpc"]), "--reclaim-leases",
            ]  # fmt: skip
        if name == "bus":
            # analytics is a BigQuery subscription: the bus writes it into the database.
            return [
                sys.executable, "-m", "localcloud.pubsub", "run",
                "--subscription", f"notification={cfg.url('notification')}/pubsub/push",
                "--subscription", f"gradebook={cfg.url('gradebook')}/pubsub/push",
                *cfg.bus_args,
            ]  # fmt: skip
        raise ValueError(f"unknown process {name!r}")

    def start(self, wait: bool = True) -> None:
        check_free(self.config.ports)
        self.config.data_dir.mkdir(parents=True, exist_ok=True)
        self.webhook_secrets_key = self._sealing_key()
        if self.config.backend == GOOGLE_EMULATORS:
            self._start_emulators()
        self.api_key = self.issue_api_key(self.config.client_id)
        self.webhook_secret = self.issue_webhook_secret(self.config.client_id)
        names = self.process_names()
        try:
            for name in names:
                self._spawn(name)
            if wait:
                self.wait_healthy(self.web_processes())
        except BaseException:
            self.stop()  # a stack that cannot start leaves nothing running behind it
            raise
        if self._ticker is None and self.config.recover_every_s > 0:
            self._ticker = threading.Thread(target=self._recover_loop, daemon=True)
            self._ticker.start()

    def issue_api_key(self, client_id: str) -> str:
        """Issue a key with the admin command, in the store the intake reads."""
        made = subprocess.run(
            [sys.executable, "-m", "services.intake.auth.keys", "create", "--client", client_id],
            env=self.environment("intake"),
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        key: str = json.loads(made.stdout)["key"]
        return key

    def _sealing_key(self) -> str:
        """The data directory's key for webhook secrets, made on its first run, so secrets
        issued in an earlier run still open."""
        path = self.config.data_dir / "webhook-secrets.key"
        if not path.exists():
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(base64.urlsafe_b64encode(secrets.token_bytes(32)).decode())
        return path.read_text().strip()

    def issue_webhook_secret(self, client_id: str) -> str:
        """Issue the client's webhook secret with the admin command (rotating away any
        secret an earlier run left in the same data directory)."""
        made = subprocess.run(
            [
                sys.executable, "-m", "services.notification.webhook_secrets",
                "rotate", "--client", client_id, "--overlap-hours", "0",
            ],
            env=self.environment("notification"),
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )  # fmt: skip
        secret: str = json.loads(made.stdout)["secret"]
        return secret

    def _spawn(self, name: str) -> None:
        # Through localcloud.child: the process dies with this one, even on SIGKILL. Spawn
        # only from long-lived threads (the signal follows the thread that started it).
        process = subprocess.Popen(
            [sys.executable, "-m", "localcloud.child", *self.command(name)],
            env=self.environment(name),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            start_new_session=True,  # Ctrl-C reaches the supervisor, which stops each child
        )
        self.processes[name] = process
        threading.Thread(target=self._pump, args=(name, process), daemon=True).start()

    def _pump(self, name: str, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        with process.stdout:
            for line in process.stdout:
                self._line(name, line)

    def _line(self, name: str, line: str) -> None:
        """Keep and show one output line of a process (or of a Cloud Run front)."""
        line = line if line.endswith("\n") else line + "\n"
        with self._lock:
            self._lines.setdefault(name, []).append(line)
            self._output.write(f"{name:>12} | {line}")
            self._output.flush()

    def wait_healthy(self, names: list[str], timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        for name in names:
            while True:
                process = self.processes[name]
                if process.poll() is not None:
                    raise RuntimeError(f"{name} exited with {process.returncode}")
                try:
                    if requests.get(self.config.url(name) + "/healthz", timeout=1).ok:
                        break
                except requests.RequestException:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{name} did not become healthy in {timeout_s}s")
                time.sleep(0.1)

    def kill(self, name: str) -> None:
        """SIGKILL one process group, as a crashed container would die."""
        process = self.processes[name]
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)

    def restart(self, name: str) -> None:
        self._spawn(name)
        if name in self.web_processes():
            self.wait_healthy([name])

    def _start_emulators(self) -> None:
        from google.cloud import pubsub_v1

        from localcloud.emulators import (
            EmulatorUnavailable,
            start_firestore,
            start_pubsub,
            start_storage,
        )
        from localcloud.signing_key import local_signing_key
        from localcloud.topology import create_pubsub_topology
        from shared.config.subscriptions import load_subscriptions

        self._emulators.append(start_firestore(EMULATOR_PROJECT))
        self._emulators.append(start_pubsub())
        firestore, pubsub = self._emulators
        self._emulator_env = {
            "FIRESTORE_EMULATOR_HOST": firestore.host,
            "PUBSUB_EMULATOR_HOST": pubsub.host,
        }
        try:
            storage = start_storage(UPLOADS_BUCKET)
        except EmulatorUnavailable as exc:  # jobs still run; only uploads are unavailable
            print(f"[stack] uploads off: {exc}", file=sys.stderr)
        else:
            self._emulators.append(storage)
            self._emulator_env.update(
                STORAGE_EMULATOR_HOST=f"http://{storage.host}",
                GRADEQ_UPLOADS_BUCKET=UPLOADS_BUCKET,
                # No IAM here to sign through: a key made for this run signs upload URLs.
                GRADEQ_UPLOAD_SIGNING_KEY_FILE=str(local_signing_key(self.config.data_dir)),
            )
        os.environ["PUBSUB_EMULATOR_HOST"] = pubsub.host  # read by the clients below
        try:
            publisher, subscriber = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()
            # The emulator pushes without a token: a front per subscriber adds the one
            # Pub/Sub would send, as Cloud Run forwards it.
            fronts = {
                n: CloudRunFront(
                    self.config.url(n),
                    self.config.url(n),
                    PUSH_ACCOUNT,
                    on_answer=functools.partial(self._line, f"{n}-front"),
                    pending_s=self.config.front_pending_s,
                ).start()
                for n in TOPIC_SUBSCRIBERS
            }
            self._fronts.extend(fronts.values())
            endpoints = {n: front.url + "/pubsub/push" for n, front in fronts.items()}
            create_pubsub_topology(
                publisher, subscriber, EMULATOR_PROJECT, load_subscriptions(), endpoints
            )
            subscriber.close()
        finally:
            del os.environ["PUBSUB_EMULATOR_HOST"]

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM every process, then SIGKILL what is still running after the timeout."""
        self._stop.set()
        for process in self.processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for process in self.processes.values():
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        for front in self._fronts:
            front.stop()
        for emulator in self._emulators:
            emulator.stop()

    def settle(self, quiet_s: float = 0.5, timeout_s: float = 5.0) -> None:
        """Wait until no process has printed for `quiet_s`, or `timeout_s` at most.

        What is printed next then is not lost among the processes' start-up lines.
        """
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                printed = sum(map(len, self._lines.values()))
            if self._stop.wait(quiet_s):
                return
            with self._lock:
                if sum(map(len, self._lines.values())) == printed:
                    return

    def lines(self, name: str) -> list[str]:
        with self._lock:
            return list(self._lines[name])

    def watch(self, stopped: Callable[[], bool]) -> str | None:
        """Block until `stopped()` or a process dies; return the dead process's name."""
        while not stopped():
            for name, process in self.processes.items():
                if process.poll() is not None:
                    return name
            time.sleep(0.2)
        return None

    # --- recovery ticker ---------------------------------------------------------------

    def _recover_loop(self) -> None:
        # Stands in for the Cloud Scheduler job that calls /tasks/recover in production.
        while not self._stop.wait(self.config.recover_every_s):
            try:
                answer = requests.post(
                    self.config.url("worker") + "/tasks/recover",
                    headers=self.push_authorization("worker", SCHEDULER_ACCOUNT),
                    timeout=30,
                )
            except Exception as exc:  # Cloud Scheduler fires on, whatever one call met
                self._tally(type(exc).__name__)
                if not isinstance(exc, requests.RequestException):
                    self._line("scheduler", f"recovery call failed: {exc!r}")
            else:
                self._tally(str(answer.status_code))

    def _tally(self, answer: str) -> None:
        with self._lock:
            self._sweeps[answer] += 1

    def sweeps(self) -> dict[str, int]:
        """What the recovery ticker's calls answered so far, by status code or error."""
        with self._lock:
            return dict(self._sweeps)
