"""`make soak`: the whole local stack under load and faults, then its invariants and figures.

    python -m localcloud.soak [--seed N] [--jobs N] [--duration S] [--data-dir DIR]
        [--fault-every S] [--settle S] [--report FILE] [--batch] [--gradebook]
        [--budgets] [--quota-rpm N]

Seeded and time-bounded. Clients submit `--jobs` jobs over `--duration` seconds, mixing
quick, slow, transient, permanent, hanging and always-failing gradings, with duplicate
POSTs (same body: the same job; another body: 422) and cancels. Meanwhile one fault at a
time hits a random process (intake, worker, dispatcher, bus, notification, analytics):
SIGKILL then a restart, or SIGSTOP then SIGCONT; or an operator pauses the `bulk` lane
and resumes it a moment later, every second time purging it while paused (a third of the
jobs go through the `bulk` lane). Then the faults stop and every accepted job must become
final. `--classes` assignments of `--class-size` answers arrive in batches, each cut off
half way and sent again (localcloud.soak_assignments). Checked at the end:

- every accepted job is final, and no job exists that was not accepted;
- no result was overwritten (what a client saw final stays as it was);
- exactly one event id per final job at each subscriber whose filter admits the job's
  event, matching the job's outcome, and none at one whose filter does not (half the jobs
  name a callback URL, served by the soak's HTTPS receiver: notification's filter admits
  only those); on the embedded backend the analytics records are written by the bus
  itself; the Pub/Sub emulator does not apply filters, so there every subscriber has it;
- every job with a callback URL got its webhook, under one webhook id;
- no task, bus delivery or dead letter left behind, no final job left unannounced;
- no job cost more grader calls than its attempt budget (an attempt given back
  uncounted, the quota having refused it before anything was sent, is no call);
- of the classes: 0 answers lost, 0 doubled, one AssignmentGraded each, published.

With `--batch` a loopback OpenAI-compatible provider grades instead of the offline
grader, acting each kind out from markers in the answer, and batch mode is on: the `bulk`
lane's jobs, a quarter of the others (`"deadline": "hours"`) and the classes' regrades go
to provider batches, which complete, expire or fail as each fault draws; the same
invariants hold, a batch's grading counting as one grader call.

With `--gradebook` the school's posted grades also go to its LMS, a local LTI 1.3 platform
that answers 429 and 503 for a share of the scores, while the gradebook subscriber is
killed and stopped like the other processes; every posted grade must arrive, the latest
version winning, and nothing unposted may (localcloud.soak_gradebook).

With `--budgets` a second client's budget runs out while its jobs are queued: its new
submissions must be refused (429 budget-exhausted), its queued jobs held (not failed),
then released by a raised budget, each to one final state and one event
(localcloud.soak_budgets). With `--quota-rpm N` the loopback provider grades (batch mode
only with `--batch`) and answers 429 past N requests in any rolling window of a scaled
"minute"; the worker declares that quota in `shared` mode, and the provider must never
see more than N requests in any window, the worker's SIGKILLs and SIGSTOPs included
(localcloud.soak_quota).

It prints the figures (jobs, faults by kind, crash-to-rescue p50/p99, violations) as JSON
and exits 1 on any violation. The stack runs with the shipped rules on scaled-down
durations (lease 2 s, grader timeout 4 s, queue backoff 0.2..2 s).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import sqlite3
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import requests

from localcloud import soak_quota
from localcloud.cloudrun import PENDING_S
from localcloud.soak_assignments import Classes
from localcloud.soak_budgets import BUDGET_CLIENT, BUDGET_ENV, BudgetHolds
from localcloud.stack import (
    EMBEDDED,
    EMULATOR_PROJECT,
    GOOGLE_EMULATORS,
    HTTP_SERVICES,
    SUBSCRIBERS,
    LocalStack,
    StackConfig,
)
from localcloud.tls_receiver import Received, make_private_ca, tls_receiver
from shared.codecs.cloudevent import callback_attribute
from shared.config.subscriptions import load_subscriptions
from shared.domain.grade import GradeResult
from shared.service_layer.worker import ATTEMPT_GIVEN_BACK

if TYPE_CHECKING:
    from tests.support.fake_openai import FakeOpenAIServer

LEASE_S = 2.0
GRADER_TIMEOUT_S = 4.0
MAX_ATTEMPTS = 8
QUEUES = {
    "grading": {
        "target_path": "/tasks/grade",
        "dispatch_deadline": "20s",
        "rate_limits": {"max_dispatches_per_second": 100, "max_concurrent_dispatches": 50},
        "retry_config": {
            "max_attempts": MAX_ATTEMPTS,
            "max_retry_duration": "0s",
            "min_backoff": "0.2s",
            "max_backoff": "2s",
            "max_doublings": 3,
        },
    }
}
ENV = {
    "GRADEQ_GRADER_LATENCY_S": "0.05",
    "GRADEQ_GRADER_TIMEOUT_S": str(GRADER_TIMEOUT_S),
    "GRADEQ_LEASE_S": str(LEASE_S),
    "GRADEQ_HEARTBEAT_S": "0.5",
    "GRADEQ_RESULT_WRITE_RETRY_S": "2",
    "GRADEQ_DRAIN_GRACE_S": "0.5",
    "GRADEQ_STORE_WAIT_S": "2",
    "GRADEQ_RETRY_AFTER_S": "1",
    # One client submits the whole soak: its submission rate is not what is under test.
    "GRADEQ_SUBMIT_BURST": "100000",
    "GRADEQ_SUBMIT_RATE_PER_S": "1000",
}
# A second lane, on the same settings, that the operator faults pause and purge.
QUEUES["bulk"] = {**QUEUES["grading"], "lane": {"priority": 100, "min_quota_share": 0.1}}
LANE = "bulk"
OPERATOR_KEY = "soak-operator-key"
ENV["GRADEQ_OPERATOR_KEYS"] = f"soak-ops={OPERATOR_KEY}"
#: Of the faults, the share that are an operator's lane actions (pause, purge).
LANE_FAULTS = 0.3
BUS_ARGS = ["--ack-deadline", "10", "--min-backoff", "0.3", "--max-backoff", "2"]
BUS_ARGS += ["--max-delivery-attempts", "100"]
#: Kinds of job and their weights; each maps to the offline grader's simulation.
KINDS = {
    "quick": 30,
    "slow": 15,
    "transient": 20,
    "permanent": 10,
    "hanging": 8,
    "doomed": 5,
    "cancelled": 12,
}
FINAL = ("SUCCEEDED", "FAILED", "CANCELLED")
#: Every process, the worker weighted up: its crashes are what the rescue figures measure.
PROCESSES = (*HTTP_SERVICES, "dispatcher", "bus", "worker", "worker")


#: How the provider's batches end, by weight, in batch mode (`--batch`).
BATCH_OUTCOMES = {"completed": 6, "expired": 2, "failed": 2}
#: The loopback provider as the worker's grader (a quota that never binds unless
#: `--quota-rpm` declares one).
PROVIDER_ENV = {
    "GRADEQ_GRADER": "openai",
    "GRADEQ_GRADER_MODEL": "soak-grader",
    "GRADEQ_GRADER_API_KEY": "sk-soak",
    "GRADEQ_GRADER_QUOTA_RPM": "100000",
    "GRADEQ_GRADER_REQUEST_TIMEOUT_S": str(GRADER_TIMEOUT_S),
}
#: Batch mode, on the soak's scaled-down durations.
BATCH_ENV = {
    "GRADEQ_BATCH_MODE": "true",
    "GRADEQ_BATCH_WINDOW_S": "1",
    "GRADEQ_BATCH_MAX_SIZE": "20",
    "GRADEQ_BATCH_TICK_S": "3",
}


def provider_marker(kind: str, rng: random.Random) -> str:
    """The loopback provider's marker acting out `kind` (tests/support/fake_openai.py)."""
    if kind == "slow":
        return "#slowx1=2"
    if kind == "transient":
        return f"#500x{rng.randint(1, 3)}"
    if kind == "permanent":
        return "#status=400"
    if kind == "hanging":
        return f"#slowx1={GRADER_TIMEOUT_S + 2:g}"
    if kind == "doomed":
        return f"#500x{MAX_ATTEMPTS * 2}"
    if kind == "cancelled":
        return "#slowx1=3"
    return ""


def simulation(kind: str, rng: random.Random) -> dict[str, Any]:
    if kind == "slow":
        return {"latency_s": round(rng.uniform(1.0, 3.0), 2)}
    if kind == "transient":
        return {"failure": "transient", "times": rng.randint(1, 3)}
    if kind == "permanent":
        return {"failure": "permanent"}
    if kind == "hanging":
        return {"failure": "hang", "times": 1}
    if kind == "doomed":
        return {"failure": "transient"}
    if kind == "cancelled":
        return {"latency_s": round(rng.uniform(2.0, 3.5), 2)}
    return {"latency_s": round(rng.uniform(0.05, 0.5), 2)}


@dataclass
class Planned:
    """One job the clients will submit, and what they will do around it."""

    index: int
    kind: str
    key: str
    body: dict[str, Any]
    at: float
    duplicate: str | None  # None, "same" or "different"
    cancel_after: float | None


def _result(data: dict[str, Any] | None) -> GradeResult | None:
    """A result as the domain reads it: the API view and the stored record compare equal
    whatever optional fields each spells out."""
    return GradeResult.from_dict(data) if data else None


class EmbeddedObserver:
    """What the embedded backend holds: everything is in the stack's SQLite file."""

    def __init__(self, stack: LocalStack) -> None:
        self._path = stack.config.data_dir / "gradeq.sqlite3"

    def _db(self) -> sqlite3.Connection:
        conn = sqlite3.connect(f"file:{self._path}?mode=ro", uri=True, timeout=30)
        conn.row_factory = sqlite3.Row
        return conn

    def jobs(self) -> dict[str, dict[str, Any]]:
        with self._db() as conn:
            rows = conn.execute("SELECT id, record FROM jobs").fetchall()
        return {r["id"]: json.loads(r["record"]) for r in rows}

    def pending_tasks(self) -> int:
        with self._db() as conn:
            return int(conn.execute(_PENDING_TASKS).fetchone()[0])

    def bus_backlog(self, final: bool = False) -> tuple[int, int]:
        """Deliveries not yet acknowledged, and dead letters."""
        with self._db() as conn:
            deliveries = conn.execute("SELECT COUNT(*) FROM bus_deliveries").fetchone()[0]
            dead = conn.execute("SELECT COUNT(*) FROM bus_dead_letters").fetchone()[0]
        return int(deliveries), int(dead)

    def events(self) -> list[tuple[str, str, dict[str, Any]]]:
        with self._db() as conn:
            rows = conn.execute("SELECT subscriber, event_id, record FROM processed_events")
            return [(r["subscriber"], r["event_id"], json.loads(r["record"])) for r in rows]

    def check_classes(self, classes: Classes, jobs: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """The classes' invariants, read from the assignments' tables."""
        with self._db() as conn:
            return classes.check(conn, jobs)


class GoogleObserver:
    """What the google-emulators backend holds: Firestore and Pub/Sub emulators, tasks in SQLite.

    Pub/Sub has no call that counts a push subscription's backlog; at the end
    (`bus_backlog(final=True)`) each push subscription is turned into a pull one and its
    backlog pulled (not acknowledged), with the dead-letter subscription's.
    """

    def __init__(self, stack: LocalStack) -> None:
        from google.cloud import firestore

        self._stack = stack
        self._tasks = EmbeddedObserver(stack)
        #: By subscription, the message ids its backlog still held at the end.
        self.held: dict[str, set[str]] = {}
        host = stack.emulator_env["FIRESTORE_EMULATOR_HOST"]
        with _env("FIRESTORE_EMULATOR_HOST", host):
            self._firestore = firestore.Client(project=EMULATOR_PROJECT)

    def jobs(self) -> dict[str, dict[str, Any]]:
        from shared.adapters.google.firestore_codec import from_document

        jobs = {}
        for snapshot in self._firestore.collection("grading_jobs").stream():
            record = from_document(snapshot.id, snapshot.to_dict() or {}).to_record()
            jobs[snapshot.id] = {
                k: v.isoformat() if hasattr(v, "isoformat") else v for k, v in record.items()
            }
        return jobs

    def pending_tasks(self) -> int:
        return self._tasks.pending_tasks()

    def bus_backlog(self, final: bool = False) -> tuple[int, int]:
        if not final:
            return 0, 0
        from google.cloud import pubsub_v1

        from localcloud.topology import dead_letter_name
        from shared.config.subscriptions import load_subscriptions

        topic = load_subscriptions()
        host = self._stack.emulator_env["PUBSUB_EMULATOR_HOST"]
        with _env("PUBSUB_EMULATOR_HOST", host):
            subscriber = pubsub_v1.SubscriberClient()
        try:

            def pull(name: str) -> list[Any]:
                path = subscriber.subscription_path(EMULATOR_PROJECT, name)
                response = subscriber.pull(subscription=path, max_messages=1000, timeout=10)
                return list(response.received_messages)

            left = 0
            for name in topic.subscriptions:
                path = subscriber.subscription_path(EMULATOR_PROJECT, name)
                subscriber.modify_push_config(subscription=path, push_config={})
                held = pull(name)
                self.held[name] = {m.message.message_id for m in held}
                left += len(held)
            return left, len(pull(dead_letter_name(topic)))
        finally:
            subscriber.close()

    def events(self) -> list[tuple[str, str, dict[str, Any]]]:
        events = []
        for snapshot in self._firestore.collection("processed_events").stream():
            data: dict[str, Any] = snapshot.to_dict() or {}
            events.append((str(data["subscriber"]), str(data["event_id"]), dict(data["record"])))
        return events


@contextlib.contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    """Set an emulator variable while a client is built (clients read it then)."""
    saved = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if saved is None:
            del os.environ[name]
        else:
            os.environ[name] = saved


Observer = EmbeddedObserver | GoogleObserver
_PENDING_TASKS = "SELECT COUNT(*) FROM tasks WHERE state = 'pending'"


@dataclass
class Soak:
    """One seeded run: the plan, what happened, and what was checked."""

    seed: int
    jobs: int
    duration_s: float
    fault_every_s: float
    settle_s: float
    stack: LocalStack
    #: The processes faults may hit.
    targets: tuple[str, ...] = PROCESSES
    rng: random.Random = field(init=False)
    accepted: dict[str, Planned] = field(default_factory=dict)
    seen_final: dict[str, dict[str, Any]] = field(default_factory=dict)
    faults: Counter[str] = field(default_factory=Counter)
    rescues: list[float] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    duplicates: Counter[str] = field(default_factory=Counter)
    cancels: Counter[str] = field(default_factory=Counter)
    #: Jobs a purge of their lane cancelled.
    purged: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _watch: list[tuple[str, int, float]] = field(default_factory=list)
    _done: threading.Event = field(default_factory=threading.Event)
    #: Classes: assignments whose answers arrive in batches (localcloud.soak_assignments).
    class_count: int = 0
    class_size: int = 0
    classes: Classes = field(init=False)
    class_figures: dict[str, Any] = field(default_factory=dict)
    #: Where half the jobs ask to be called back, and what arrived there (None: no jobs do).
    webhook_url: str | None = None
    webhooks: list[Received] = field(default_factory=list)
    #: The loopback OpenAI-compatible provider (its Batch API included) that grades
    #: instead of the offline grader; None: the offline grader.
    provider: FakeOpenAIServer | None = None
    #: Batch mode on (with `provider`).
    batch: bool = False
    #: A client's budget runs out mid-run (localcloud.soak_budgets); None: no budgets.
    holds: BudgetHolds | None = None
    budget_figures: dict[str, Any] = field(default_factory=dict)
    #: The declared quota the provider enforces, per `soak_quota.QUOTA_WINDOW_S`.
    quota_rpm: int | None = None
    quota_figures: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.topic = load_subscriptions()
        self.rng = random.Random(self.seed)
        self.classes = Classes(
            random.Random(self.seed + 1),
            self.class_count,
            self.class_size,
            self.duration_s,
            self._call,
            self._auth,
            self._violation,
            simulation,
        )

        google = self.stack.config.backend == GOOGLE_EMULATORS
        self.observer: Observer = (
            GoogleObserver(self.stack) if google else EmbeddedObserver(self.stack)
        )

    # --- the plan ----------------------------------------------------------------------

    def plan(self) -> list[Planned]:
        kinds, weights = zip(*KINDS.items(), strict=True)
        planned = []
        for i in range(self.jobs):
            kind = self.rng.choices(kinds, weights)[0]
            roll = self.rng.random()
            duplicate = "same" if roll < 0.2 else "different" if roll < 0.3 else None
            body = {
                "submission_id": f"soak-{self.seed}-{i}",
                "answer": "The mitochondria produce ATP through cellular respiration.",
                "rubric": ["mentions mitochondria", "names ATP", "explains glycolysis"],
                "max_score": 9,
                "metadata": {"simulate": simulation(kind, self.rng)},
            }
            if self.rng.random() < 1 / 3:
                body["lane"] = LANE
            if self.provider is not None:
                # The provider acts the kind out from the answer's markers, per answer.
                body["answer"] = f"{body['answer']} [{i}] {provider_marker(kind, self.rng)}"
                if self.batch and "lane" not in body and self.rng.random() < 1 / 4:
                    body["deadline"] = "hours"
            if self.webhook_url is not None and self.rng.random() < 0.5:
                body["callback_url"] = self.webhook_url
            cancel = self.rng.uniform(0.0, 2.0) if kind == "cancelled" else None
            at = self.rng.uniform(0, self.duration_s * 0.8)
            planned.append(Planned(i, kind, f"soak-{self.seed}-{i}", body, at, duplicate, cancel))
        return sorted(planned, key=lambda p: p.at)

    # --- clients -----------------------------------------------------------------------

    def _auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.stack.api_key}"}

    def _call(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        """A patient client: retries connection errors, timeouts and 5xx (honouring Retry-After)."""
        deadline = time.monotonic() + self.settle_s
        while True:
            try:
                response = requests.request(
                    method, self.stack.config.url("intake") + path, timeout=5, **kwargs
                )
                if response.status_code < 500:
                    return response
                wait = float(response.headers.get("Retry-After", "0.5"))
            except requests.RequestException:
                wait = 0.3
            if time.monotonic() > deadline:
                raise RuntimeError(f"{method} {path}: no answer within {self.settle_s}s")
            time.sleep(min(wait, 2.0))

    def _submit(self, job: Planned, started: float) -> None:
        time.sleep(max(0.0, started + job.at - time.monotonic()))
        headers = {**self._auth(), "Idempotency-Key": job.key}
        response = self._call("POST", "/v1/grading-jobs", json=job.body, headers=headers)
        if response.status_code != 202:
            self._violation(f"{job.key}: POST answered {response.status_code}")
            return
        job_id = response.json()["id"]
        with self._lock:
            self.accepted[job_id] = job
        if job.duplicate == "same":
            again = self._call("POST", "/v1/grading-jobs", json=job.body, headers=headers)
            self.duplicates["same"] += 1
            if again.status_code != 202 or again.json()["id"] != job_id:
                self._violation(f"{job.key}: same-body duplicate answered {again.status_code}")
        elif job.duplicate == "different":
            other = {**job.body, "answer": "another answer"}
            again = self._call("POST", "/v1/grading-jobs", json=other, headers=headers)
            self.duplicates["different"] += 1
            if again.status_code != 422:
                self._violation(f"{job.key}: other-body duplicate answered {again.status_code}")
        if job.cancel_after is not None:
            time.sleep(job.cancel_after)
            cancel = self._call("POST", f"/v1/grading-jobs/{job_id}/cancel", headers=self._auth())
            self.cancels[str(cancel.status_code)] += 1
            if cancel.status_code not in (200, 409):
                self._violation(f"{job.key}: cancel answered {cancel.status_code}")
        self._follow(job_id)

    def accept_held(self, job_id: str, key: str, body: dict[str, Any]) -> None:
        """A job of the budget holds' client, checked like every accepted job."""
        with self._lock:
            self.accepted[job_id] = Planned(-1, "held", key, body, 0.0, None, None)

    def _follow(self, job_id: str, auth: dict[str, str] | None = None) -> None:
        """Poll like a client (`auth`: another client's) until the job is final, and
        remember what it said."""
        started = time.monotonic()
        deadline = started + self.duration_s + self.settle_s
        headers = auth or self._auth()
        status = None
        while time.monotonic() < deadline:
            job = self._call("GET", f"/v1/grading-jobs/{job_id}", headers=headers).json()
            status = job["status"]
            if status in FINAL:
                with self._lock:
                    self.seen_final[job_id] = job
                return
            time.sleep(0.3)
        # Told apart by the check's line on the stored job: still open there (a stall), or
        # final there while its client was shown otherwise (a stale read).
        waited = time.monotonic() - started
        self._violation(f"{job_id}: its client gave up after {waited:.0f} s, last shown {status}")

    def _violation(self, what: str) -> None:
        with self._lock:
            self.violations.append(what)

    # --- faults ------------------------------------------------------------------------

    def _running_jobs(self) -> list[tuple[str, int]]:
        return [
            (job_id, int(r["attempts"]))
            for job_id, r in self.observer.jobs().items()
            # A job waiting in a provider batch is held by its batch, not by a worker.
            if r["status"] == "RUNNING" and not r.get("provider_batch")
        ]

    def _lane_fault(self) -> None:
        """An operator pauses the lane and resumes it a moment later; every second time
        they purge it before resuming, cancelling what queued up meanwhile."""
        operator = {"Authorization": f"Bearer {OPERATOR_KEY}"}
        purge = self.faults[f"pause {LANE}"] % 2 == 1
        self.faults[f"pause {LANE}"] += 1
        paused = self._call("POST", f"/admin/v1/lanes/{LANE}/pause", headers=operator)
        if paused.status_code != 200 or paused.json()["paused"] is not True:
            self._violation(f"pause answered {paused.status_code}")
        time.sleep(self.rng.uniform(0.3, 3.0))
        if purge:
            self.faults[f"purge {LANE}"] += 1
            body = {"reason": "soak"}
            answer = self._call(
                "POST", f"/admin/v1/lanes/{LANE}/purge", json=body, headers=operator
            )
            if answer.status_code != 200:
                self._violation(f"purge answered {answer.status_code}")
            else:
                with self._lock:
                    self.purged.update(answer.json()["cancelled"])
        resumed = self._call("POST", f"/admin/v1/lanes/{LANE}/resume", headers=operator)
        if resumed.status_code != 200 or resumed.json()["paused"] is not False:
            self._violation(f"resume answered {resumed.status_code}")

    def _fault(self) -> None:
        if self.provider is not None and self.batch:
            # How the provider's batches sent from now on end.
            outcomes, weights = zip(*BATCH_OUTCOMES.items(), strict=True)
            self.provider.batch_outcome = self.rng.choices(outcomes, weights)[0]
        if self.rng.random() < LANE_FAULTS:
            self._lane_fault()
            return
        name = self.rng.choice([p for p in self.targets if p in self.stack.processes])
        kind = self.rng.choice(("SIGKILL", "SIGSTOP"))
        process = self.stack.processes[name]
        if process.poll() is not None:
            return
        at = time.monotonic()
        running = self._running_jobs() if name == "worker" else []
        self.faults[f"{kind} {name}"] += 1
        if kind == "SIGKILL":
            self.stack.kill(name)
            time.sleep(self.rng.uniform(0.1, 1.0))
            self.stack.restart(name)  # from this (the main) thread: see LocalStack._spawn
        else:
            os.killpg(process.pid, signal.SIGSTOP)
            time.sleep(self.rng.uniform(0.3, 2 * LEASE_S))
            os.killpg(process.pid, signal.SIGCONT)
        if kind == "SIGKILL":
            with self._lock:
                self._watch.extend((job_id, attempts, at) for job_id, attempts in running)

    def _watch_rescues(self) -> None:
        """Time from a worker's death to the next attempt (or end) of each job it held."""
        while not self._done.is_set():
            with self._lock:
                watched = list(self._watch)
            if watched:
                jobs = self.observer.jobs()
                now = time.monotonic()
                for entry in watched:
                    job_id, attempts, at = entry
                    job = jobs.get(job_id)
                    if job and (job["attempts"] > attempts or job["status"] in FINAL):
                        with self._lock:
                            self._watch.remove(entry)
                            self.rescues.append(now - at)
            self._done.wait(0.05)

    # --- the run -----------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        planned = self.plan()
        started = time.monotonic()
        watcher = threading.Thread(target=self._watch_rescues, daemon=True)
        watcher.start()
        with ThreadPoolExecutor(max_workers=24) as clients:
            futures = [clients.submit(self._submit, job, started) for job in planned]
            futures += [
                clients.submit(self.classes.submit, c, started) for c in self.classes.plan()
            ]
            if self.holds is not None:
                futures.append(clients.submit(self.holds.run, started))
            # Faults come from this thread, which also restarts what it kills.
            while time.monotonic() < started + self.duration_s:
                time.sleep(self.rng.expovariate(1.0 / self.fault_every_s))
                if time.monotonic() < started + self.duration_s:
                    self._fault()
            for future in futures:
                try:
                    future.result()
                except Exception as exc:  # a client that never got an answer
                    self._violation(f"client failed: {exc}")
        self._settle()
        self._done.set()
        watcher.join()
        self._check()
        return self.figures(time.monotonic() - started)

    def _settle(self) -> None:
        """Wait until every accepted job is final and nothing is left in flight."""
        deadline = time.monotonic() + self.settle_s
        while time.monotonic() < deadline:
            jobs = self.observer.jobs()
            open_jobs = [j for j in jobs.values() if j["status"] not in FINAL]
            unannounced = [j for j in jobs.values() if not j["event_published"]]
            busy = self.observer.pending_tasks() + self.observer.bus_backlog()[0]
            # Every final job's event at every subscriber (what the bus has in flight is
            # not countable on every backend; what arrived is).
            arrived = {(sub, r["job_id"]) for sub, _, r in self.observer.events()}
            missing = [
                (sub, job_id)
                for job_id, job in jobs.items()
                for sub in SUBSCRIBERS
                if self._expected(sub, job) and (sub, job_id) not in arrived
            ]
            if not open_jobs and not unannounced and busy == 0 and not missing:
                return
            time.sleep(0.5)

    def _check(self) -> None:
        jobs = self.observer.jobs()
        pending_tasks = self.observer.pending_tasks()
        events = self.observer.events()
        deliveries, dead = self.observer.bus_backlog(final=True)
        if isinstance(self.observer, EmbeddedObserver):
            self.class_figures = self.observer.check_classes(self.classes, jobs)
        for job_id in set(jobs) - set(self.accepted) - self.classes.accepted_jobs():
            self._violation(f"{job_id}: stored but never accepted")
        per_subscriber: dict[tuple[str, str], set[str]] = {}
        outcomes: dict[tuple[str, str], str] = {}
        for subscriber, event_id, record in events:
            key = (subscriber, record["job_id"])
            per_subscriber.setdefault(key, set()).add(event_id)
            outcomes[key] = record.get("outcome", "")
        for job_id in self.accepted:
            job = jobs.get(job_id)
            if job is None or job["status"] not in FINAL:
                self._violation(
                    f"{job_id}: not final ({job and job['status']})"
                    + (self._stall_trace(job_id, job) if job else "")
                )
                continue
            seen = self.seen_final.get(job_id)
            if seen is not None and (
                seen["status"] != job["status"]
                or _result(seen.get("result")) != _result(job["result"])
                or seen.get("completed_at", "")[:19] != job["completed_at"][:19]
            ):
                self._violation(f"{job_id}: final state changed after a client saw it")
            if job["attempts"] > MAX_ATTEMPTS:
                self._violation(f"{job_id}: {job['attempts']} attempts > {MAX_ATTEMPTS}")
            for subscriber in SUBSCRIBERS:
                ids = per_subscriber.get((subscriber, job_id), set())
                expected = self._expected(subscriber, job)
                if len(ids) != expected:
                    trace = self._push_trace(subscriber, job_id) if not ids else ""
                    self._violation(
                        f"{job_id}: {len(ids)} event ids at {subscriber}, {expected} expected"
                        + trace
                    )
                elif ids and outcomes[(subscriber, job_id)] != job["status"].lower():
                    self._violation(f"{job_id}: {subscriber} saw another outcome")
        self._check_webhooks(jobs)
        for job_id in self.purged:
            job = jobs.get(job_id) or {}
            if job.get("status") != "CANCELLED" or (job.get("error") or {}).get("type") != (
                "lane-purged"
            ):
                self._violation(f"{job_id}: purged, yet {job.get('status')} {job.get('error')}")
        calls = self._grader_calls()
        for job_id, n in calls.items():
            if n > MAX_ATTEMPTS:
                self._violation(f"{job_id}: {n} grader calls > budget {MAX_ATTEMPTS}")
        if pending_tasks or deliveries or dead:
            self._violation(
                f"left behind: {pending_tasks} tasks, {deliveries} bus deliveries, "
                f"{dead} dead letters"
            )
        if self._watch:
            self._violation(f"{len(self._watch)} jobs of a killed worker never rescued")
        if self.holds is not None:
            self.budget_figures = self.holds.check(jobs)
        if self.provider is not None and self.quota_rpm is not None:
            self.quota_figures = soak_quota.check(self.provider, self.quota_rpm, self._violation)
            self.quota_figures["deliveries_deferred_for_quota"] = sum(
                1
                for line in self.stack.lines("worker")
                if '"no provider quota; job deferred to a new task"' in line
            )

    def _expected(self, subscriber: str, job: dict[str, Any]) -> int:
        """How many event ids of `job` the subscriber must have: 1 if its filter admits the
        job's event (always on the emulator, which does not apply filters), else 0."""
        if self.stack.config.backend == GOOGLE_EMULATORS:
            return 1
        attributes = callback_attribute(bool(job["request"].get("callback_url")))
        return int(self.topic.subscriptions[subscriber].admits(attributes))

    def _check_webhooks(self, jobs: dict[str, dict[str, Any]]) -> None:
        """Each job with a callback URL got its webhook; redeliveries repeat its webhook id."""
        ids: dict[str, set[str]] = {}
        for hook in list(self.webhooks):
            job_id = json.loads(hook.body)["data"]["job_id"]
            ids.setdefault(job_id, set()).add(hook.headers.get("webhook-id", ""))
        for job_id in self.accepted:
            job = jobs.get(job_id)
            wanted = job is not None and bool(job["request"].get("callback_url"))
            got = ids.get(job_id, set())
            if wanted and len(got) != 1:
                self._violation(f"{job_id}: {len(got)} webhook ids for its callback")
            if not wanted and got:
                self._violation(f"{job_id}: a webhook without a callback URL")

    def _stall_trace(self, job_id: str, job: dict[str, Any]) -> str:
        """Where a job that never became final stands: its record, the processes that are
        down, what the recovery ticker's calls answered, and the last lines every log wrote
        about it."""
        fields = ("attempts", "generation", "lane", "updated_at", "lease_expires_at")
        record = {k: job.get(k) for k in fields} | {"batch": job.get("provider_batch")}
        down = sorted(n for n, p in self.stack.processes.items() if p.poll() is not None)
        said = [
            f"{name}: {r.get('severity')} {r.get('message')}"
            for name in sorted(self.stack.processes)
            for r in _json_lines(self.stack.lines(name))
            if r.get("job_id") == job_id
        ]
        sweeps = self.stack.sweeps()
        return f"; {record}; down: {down}; sweeps: {sweeps}; last lines: {said[-6:]}"

    def _push_trace(self, subscriber: str, job_id: str) -> str:
        """What became of a job's event on its way to `subscriber`, from every log that saw it."""
        messages = {
            record.get("message_id")
            for record in _json_lines(self.stack.lines("worker"))
            if record.get("job_id") == job_id and record.get("message") == "job completed"
        }
        front = [
            (r.get("status"), r.get("upstream_error"))
            for r in _json_lines(self.stack.lines(f"{subscriber}-front"))
            if r.get("message_id") in messages
        ]
        answered = [
            r.get("status")
            for r in _json_lines(self.stack.lines(subscriber))
            if r.get("job_id") == job_id and r.get("message") == "push answered"
        ]
        held = getattr(self.observer, "held", {}).get(subscriber, set())
        where = "held in" if messages & held else "not in"
        return (
            f" (published as {sorted(map(str, messages))}; the front answered {front};"
            f" the subscriber answered {answered}; {where} the subscription's backlog)"
        )

    def _grader_calls(self) -> Counter[str]:
        """Each job's attempts that reached the grader, from the worker's log.

        A "grading started" line counts one; a line that gives the attempt back uncounted
        (the grader's quota refused before anything was sent) takes it back. A job handed
        to a provider batch started its attempt too: the batch grades it.
        """
        calls: Counter[str] = Counter()
        for line in self.stack.lines("worker"):
            started = '"grading started"' in line
            if not started and ATTEMPT_GIVEN_BACK not in line:
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if "job_id" not in record:
                continue
            if started:
                calls[record["job_id"]] += 1
            elif record.get("event") == ATTEMPT_GIVEN_BACK:
                calls[record["job_id"]] -= 1
        return calls

    def _batch_figures(self) -> dict[str, Any]:
        if self.provider is None or not self.batch:
            return {}
        lines = _json_lines(self.stack.lines("worker"))
        return {
            "batches_by_status": dict(Counter(b["status"] for b in self.provider.batches.values())),
            "jobs_gathered": sum(
                1 for r in lines if r.get("message") == "job gathered for a provider batch"
            ),
            "jobs_returned": sum(
                1 for r in lines if r.get("message") == "job returned from its provider batch"
            ),
            "requests_one_by_one": self.provider.graded,
        }

    def figures(self, elapsed_s: float) -> dict[str, Any]:
        rescues = sorted(self.rescues)
        statuses = Counter(j["status"] for j in self.seen_final.values())
        calls = self._grader_calls()
        return {
            "seed": self.seed,
            "backend": self.stack.config.backend,
            "elapsed_s": round(elapsed_s, 1),
            "jobs": {
                "accepted": len(self.accepted),
                "by_kind": dict(Counter(p.kind for p in self.accepted.values())),
                "final_by_status": dict(statuses),
                "duplicate_posts": dict(self.duplicates),
                "cancels_by_answer": dict(self.cancels),
                "by_lane": dict(
                    Counter(p.body.get("lane", "grading") for p in self.accepted.values())
                ),
                "cancelled_by_purge": len(self.purged),
                "with_callback": sum(1 for p in self.accepted.values() if "callback_url" in p.body),
                "webhooks_received": len(self.webhooks),
                "max_grader_calls_per_job": max(calls.values(), default=0),
                "grader_call_budget": MAX_ATTEMPTS,
            },
            "classes": self.class_figures,
            "provider_batches": self._batch_figures(),
            "budget_holds": self.budget_figures,
            "quota": self.quota_figures,
            "faults": dict(sorted(self.faults.items())),
            "crash_to_rescue_s": {
                "n": len(rescues),
                "p50": _percentile(rescues, 50),
                "p99": _percentile(rescues, 99),
                "max": round(rescues[-1], 2) if rescues else None,
                "lease_s": LEASE_S,
            },
            "violations": len(self.violations),
            "violation_details": self.violations[:20],
        }


def _json_lines(lines: list[str]) -> list[dict[str, Any]]:
    records = []
    for line in lines:
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                records.append(json.loads(line))
    return records


def _percentile(values: list[float], pct: float) -> float | None:
    """Nearest-rank percentile of sorted values."""
    if not values:
        return None
    rank = max(1, -(-len(values) * pct // 100))
    return round(values[int(rank) - 1], 2)


def soak_stack(
    data_dir: Path,
    output: Any,
    backend: str = EMBEDDED,
    front_pending_s: float = PENDING_S,
    ca_bundle: Path | None = None,
    provider_url: str | None = None,
    extra_env: dict[str, str] | None = None,
    *,
    batch: bool = False,
    budgets: bool = False,
    quota_rpm: int | None = None,
) -> LocalStack:
    """The local stack on free ports with the soak's durations; webhooks trust `ca_bundle`.

    `provider_url`: the worker grades with that OpenAI-compatible provider, in batch mode
    if `batch`, declaring `quota_rpm` (shared mode) if given; `budgets`: budgets read
    again every second and held jobs looked at every two."""
    data_dir.mkdir(parents=True, exist_ok=True)
    queues = data_dir / "queues.json"
    queues.write_text(json.dumps(QUEUES))
    env = {**ENV, "GRADEQ_QUEUES_FILE": str(queues)}
    if ca_bundle is not None:
        env["GRADEQ_WEBHOOK_CA_BUNDLE"] = str(ca_bundle)
    if provider_url is not None:
        env.update(PROVIDER_ENV, GRADEQ_GRADER_BASE_URL=provider_url)
        if batch:
            env.update(BATCH_ENV)
        if quota_rpm is not None:
            env.update(soak_quota.quota_env(quota_rpm))
    if budgets:
        env.update(BUDGET_ENV)
    env.update(extra_env or {})
    config = StackConfig.on_free_ports(
        data_dir / "data",
        backend=backend,
        front_pending_s=front_pending_s,
        recover_every_s=3.0,
        bus_args=BUS_ARGS,
        env=env,
    )
    return LocalStack(config, output=output)


def run_soak(
    seed: int,
    jobs: int,
    duration_s: float,
    data_dir: Path,
    fault_every_s: float = 2.0,
    settle_s: float = 120.0,
    classes: int = 0,
    class_size: int = 0,
    backend: str = EMBEDDED,
    targets: tuple[str, ...] = PROCESSES,
    front_pending_s: float = PENDING_S,
    batch: bool = False,
    gradebook: bool = False,
    budgets: int = 0,
    quota_rpm: int | None = None,
) -> dict[str, Any]:
    """Run one soak and return its figures (`violations` is 0 when every invariant held).

    `batch`: grade with a loopback OpenAI-compatible provider in batch mode instead of the
    offline grader (its fake, tests/support/fake_openai.py, ships with the repository).
    `gradebook`: the school's posted grades also go to its LMS, a local LTI platform that
    answers 429 and 503 (localcloud.soak_gradebook; embedded backend).
    `budgets`: that many jobs of a second client are held by its spent budget, then
    released (localcloud.soak_budgets). `quota_rpm`: the provider grades (in batch mode
    only with `batch`) and enforces that quota per scaled window (localcloud.soak_quota).
    """
    from localcloud import soak_gradebook

    if gradebook and backend != EMBEDDED:
        raise ValueError("the gradebook soak runs on the embedded backend")
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "ca").mkdir(exist_ok=True)
    ca = make_private_ca(data_dir / "ca")
    provider: FakeOpenAIServer | None = None
    if batch or quota_rpm is not None:
        from tests.support.fake_openai import FakeOpenAIServer

        provider = FakeOpenAIServer()
        if quota_rpm is not None:
            soak_quota.enforce(provider, quota_rpm)
    with (
        (data_dir / "stack.log").open("w") as log,
        tls_receiver(ca) as (webhook_url, webhooks),
        provider or contextlib.nullcontext(),
    ):
        url = provider.url if provider is not None else None
        extra = soak_gradebook.stack_env() if gradebook else {}
        stack = soak_stack(
            data_dir,
            log,
            backend,
            front_pending_s,
            ca.bundle,
            url,
            extra_env=extra,
            batch=batch,
            budgets=budgets > 0,
            quota_rpm=quota_rpm,
        )
        stack.start()
        try:
            soak = Soak(
                seed,
                jobs,
                duration_s,
                fault_every_s,
                settle_s,
                stack,
                targets,
                class_count=classes,
                class_size=class_size,
                webhook_url=webhook_url,
                webhooks=webhooks,
                provider=provider,
                batch=batch,
                quota_rpm=quota_rpm,
            )
            if budgets:
                soak.holds = _budget_holds(soak, budgets)
                soak.holds.api_key = stack.issue_api_key(BUDGET_CLIENT)
            if gradebook:
                return soak_gradebook.run_with_lms(soak, extra)
            return soak.run()
        finally:
            for process in stack.processes.values():
                if process.poll() is None:
                    os.killpg(process.pid, signal.SIGCONT)
            stack.stop()


def _budget_holds(soak: Soak, count: int) -> BudgetHolds:
    """The budget holds' client, run by the soak's clients and checked with its jobs."""
    return BudgetHolds(
        count,
        soak.duration_s * 0.15,
        soak._call,
        {"Authorization": f"Bearer {OPERATOR_KEY}"},
        soak._violation,
        soak.accept_held,
        soak._follow,
        # In the provider's hands, a plain answer (no marker) is graded at once.
        answer=lambda i: f"The mitochondria produce ATP. [held {i}]",
    )


def shipped_rescue(kills: int, data_dir: Path) -> dict[str, Any]:
    """Crash-to-rescue with the shipped settings: kill the worker mid-grading, time the takeover.

    The stack runs the shipped queue (backoff from 10 s) and lease (45 s, renewed every
    15 s); each job grades for a minute, the worker is SIGKILLed 20-35 s into it and
    restarted at once; the figure is the time to the job's next "grading started".
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(kills)
    times = []
    with (data_dir / "stack.log").open("w") as log:
        config = StackConfig.on_free_ports(data_dir / "data", recover_every_s=0)
        stack = LocalStack(config, output=log)
        stack.start()
        try:
            for n in range(kills):
                body = {
                    "submission_id": f"rescue-{n}",
                    "answer": "ATP",
                    "rubric": "names ATP",
                    "metadata": {"simulate": {"latency_s": 60}},
                }
                headers = {
                    "Authorization": f"Bearer {stack.api_key}",
                    "Idempotency-Key": f"rescue-{n}",
                }
                url = config.url("intake") + "/v1/grading-jobs"
                job_id = requests.post(url, json=body, headers=headers, timeout=10).json()["id"]
                while _started(stack, job_id) < 1:
                    time.sleep(0.1)
                time.sleep(rng.uniform(20, 35))
                stack.kill("worker")
                killed = time.monotonic()
                stack.restart("worker")
                while _started(stack, job_id) < 2:
                    time.sleep(0.1)
                times.append(round(time.monotonic() - killed, 1))
                stack.kill("worker")  # end the job's grading; the next one starts clean
                stack.restart("worker")
        finally:
            stack.stop()
    return {"kills": kills, "crash_to_rescue_s": times, "lease_s": 45, "first_backoff_s": 10}


def _started(stack: LocalStack, job_id: str) -> int:
    return sum(
        1 for line in stack.lines("worker") if '"grading started"' in line and job_id in line
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m localcloud.soak",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--duration", type=float, default=180.0, help="seconds of load + faults")
    parser.add_argument("--fault-every", type=float, default=2.0, help="mean seconds between")
    parser.add_argument("--settle", type=float, default=180.0, help="max seconds to settle")
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument(
        "--classes", type=int, default=3, help="assignments sent in batches (embedded backend)"
    )
    parser.add_argument("--class-size", type=int, default=40, help="answers per class")
    parser.add_argument("--report", type=Path, default=None, help="also write the JSON here")
    parser.add_argument(
        "--backend",
        choices=(EMBEDDED, GOOGLE_EMULATORS),
        default=EMBEDDED,
        help="the stack's backend (google-emulators: the official emulators)",
    )
    parser.add_argument(
        "--faults",
        nargs="+",
        choices=sorted(set(PROCESSES)),
        default=None,
        help="only these processes are hit (default: all, the worker twice as often)",
    )
    parser.add_argument(
        "--front-pending",
        type=float,
        default=PENDING_S,
        help="google-emulators: seconds a push waits for a restarting subscriber (0: none)",
    )
    parser.add_argument(
        "--batch",
        action="store_true",
        help="grade with a loopback OpenAI-compatible provider in batch mode (bulk lane, "
        "deadline hours, regrades go to provider batches that complete, expire or fail)",
    )
    parser.add_argument(
        "--gradebook",
        action="store_true",
        help="posted grades also go to the school's LMS (a local LTI platform answering 429 "
        "and 503); the gradebook subscriber is among the processes hit (embedded backend)",
    )
    parser.add_argument(
        "--budgets",
        type=int,
        nargs="?",
        const=8,
        default=0,
        metavar="N",
        help="a second client's budget runs out with N (default 8) jobs queued: refused, "
        "held, then released by a raised budget",
    )
    parser.add_argument(
        "--quota-rpm",
        type=int,
        default=None,
        metavar="N",
        help="the loopback provider grades and answers 429 past N requests per "
        f"{soak_quota.QUOTA_WINDOW_S:g} s window; the worker declares that quota (shared)",
    )
    parser.add_argument(
        "--shipped-rescue",
        type=int,
        metavar="N",
        help="instead: kill the worker mid-grading N times with the shipped settings",
    )
    args = parser.parse_args()
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="gradeq-soak-"))
    if args.shipped_rescue:
        print(json.dumps(shipped_rescue(args.shipped_rescue, data_dir), indent=2), flush=True)
        return
    print(f"soak: seed {args.seed}, {args.jobs} jobs over {args.duration:g}s on the "
          f"{args.backend} backend; logs in {data_dir}/stack.log", flush=True)  # fmt: skip
    figures = run_soak(
        args.seed,
        args.jobs,
        args.duration,
        data_dir,
        args.fault_every,
        args.settle,
        args.classes if args.backend == EMBEDDED else 0,
        args.class_size,
        args.backend,
        tuple(args.faults) if args.faults else PROCESSES,
        args.front_pending,
        args.batch,
        args.gradebook,
        args.budgets,
        args.quota_rpm,
    )
    text = json.dumps(figures, indent=2)
    print(text, flush=True)
    if args.report:
        args.report.write_text(text + "\n")
    sys.exit(1 if figures["violations"] else 0)


if __name__ == "__main__":
    main()
