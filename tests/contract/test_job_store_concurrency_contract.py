"""What every JobStore guarantees when writers race or die: no contention, hard ceilings.

Deliveries of one job that arrive together are decided one after the other (one grades,
the others find the lease and answer 409 or wait), never failed for contention; a writer
killed in the middle of an update leaves nothing locked; racing creates never pass an
admission ceiling and the counters stay exact.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from shared.adapters.embedded.job_store import SqliteJobStore
from shared.clock import SystemClock
from shared.config.budget import Budget
from shared.config.queues import load_queues
from shared.domain.admission import ActiveCounts, AdmissionLimits
from shared.domain.errors import BacklogFull, GradeqError, TooManyActiveJobs
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest, Job
from shared.domain.status import JobStatus
from shared.ports import JobStore
from shared.service_layer.worker import DeliveryResult, TaskDelivery, Verdict, WorkerService
from tests.contract.test_job_store_contract import make_job
from tests.fakes import FakePublisher

ROOT = Path(__file__).resolve().parents[2]
LEASE = timedelta(seconds=30)


def race(n: int, action: Callable[[int], object]) -> list[object]:
    """Run `action(i)` on n threads released together; each outcome or the error raised."""
    barrier = threading.Barrier(n)
    outcomes: list[object] = [None] * n

    def run(i: int) -> None:
        barrier.wait()
        try:
            outcomes[i] = action(i)
        except Exception as exc:  # every outcome is asserted on by the caller
            outcomes[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcomes


# --- twenty deliveries of one job ----------------------------------------------------


class HeldGrader:
    """Grades once released; counts its calls."""

    name = "held"

    def __init__(self) -> None:
        self.calls = 0
        self.release = threading.Event()

    def grade(self, request: GradingRequest, *, attempt: int, timeout_s: float) -> GradeResult:
        self.calls += 1
        assert self.release.wait(timeout_s), "the grader was never released"
        return GradeResult(5, request.max_score, "ok", grader=self.name)


def worker(store: JobStore, grader: HeldGrader) -> WorkerService:
    queue = load_queues()["grading"]
    budget = Budget(
        grader_timeout_s=60.0,
        lease_s=6.0,
        heartbeat_s=2.0,
        result_write_retry_s=2.0,
        drain_grace_s=1.0,
        job_max_attempts=queue.retry_config.max_attempts,
        queue=queue,
    ).check()
    return WorkerService(store, FakePublisher(), grader, SystemClock(), queue.retry_config, budget)


def test_twenty_deliveries_of_one_job_grade_it_once_and_none_fails(job_store: JobStore) -> None:
    job = Job.new("job1", "client-a", make_job().request, "fp", datetime.now(UTC))
    job_store.create(job)
    grader = HeldGrader()
    service = worker(job_store, grader)
    answered: list[DeliveryResult] = []
    lock = threading.Lock()

    def deliver(i: int) -> DeliveryResult:
        result = service.handle(TaskDelivery(job.id, f"task-{i}", retry_count=0))
        with lock:
            answered.append(result)
        return result

    outcomes: list[object] = []
    racing = threading.Thread(target=lambda: outcomes.extend(race(20, deliver)))
    racing.start()
    # The grading is held until the other nineteen have answered: each met the lease and
    # answered LOCKED once it saw the lease renewed.
    deadline = time.monotonic() + 90
    while len(answered) < 19 and time.monotonic() < deadline:
        time.sleep(0.05)
    grader.release.set()
    racing.join(timeout=120)
    assert not racing.is_alive()

    errors = [o for o in outcomes if isinstance(o, BaseException)]
    assert errors == []
    results = [o for o in outcomes if isinstance(o, DeliveryResult)]
    assert len(results) == 20
    assert grader.calls == 1
    assert sorted(r.verdict for r in results) == [Verdict.DONE] + [Verdict.LOCKED] * 19
    stored = job_store.get(job.id)
    assert stored is not None
    assert stored.status is JobStatus.SUCCEEDED and stored.attempts == 1


# --- a writer killed mid-update ------------------------------------------------------


def _writer_command(job_store: JobStore, request: pytest.FixtureRequest) -> list[str]:
    if isinstance(job_store, SqliteJobStore):
        db: Any = job_store._db  # the child opens the same file
        return ["embedded", str(db.path)]
    from tests.google_fixtures import PROJECT

    host: str = request.getfixturevalue("firestore_emulator")
    return ["google", host, PROJECT, "grading_jobs"]


def test_a_writer_killed_mid_update_leaves_the_job_claimable_within_a_lease(
    job_store: JobStore, request: pytest.FixtureRequest
) -> None:
    t0 = datetime.now(UTC)
    job_store.create(make_job(now=t0))
    job_store.update("job1", lambda j: j.claim("w1", t0, LEASE))
    args = [*_writer_command(job_store, request), "job1", "w1"]
    with subprocess.Popen(
        [sys.executable, "-m", "tests.contract.killed_writer", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    ) as child:
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "inside"
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=30)

    # Once w1's lease is over, the next claim succeeds at its first try: nothing the
    # dead writer began is left holding the job.
    started = time.monotonic()
    taken = job_store.update("job1", lambda j: j.claim("w2", t0 + LEASE, LEASE))
    elapsed = time.monotonic() - started
    assert taken.lease_owner == "w2" and taken.attempts == 2
    # A dead transaction's lock would hold the claim for tens of seconds (until the
    # store times the transaction out); a store that locks nothing answers at once.
    assert elapsed < 10.0


# --- fifty racing creates ------------------------------------------------------------


def _job(client: str, job_id: str) -> Job:
    return dataclasses.replace(make_job(job_id), client_id=client)


def _admitted(outcomes: list[object], refusal: type[GradeqError]) -> int:
    created = [o for o in outcomes if isinstance(o, tuple) and o[1] is True]
    refused = [o for o in outcomes if isinstance(o, refusal)]
    assert len(created) + len(refused) == len(outcomes), outcomes
    return len(created)


def test_fifty_racing_creates_never_pass_the_clients_ceiling(job_store: JobStore) -> None:
    limits = AdmissionLimits(per_client=20, backlog=1000)
    outcomes = race(50, lambda i: job_store.create(_job("a", f"j{i}"), limits))
    assert _admitted(outcomes, TooManyActiveJobs) == 20
    assert job_store.active_counts("a") == ActiveCounts(20, 20)


def test_fifty_racing_creates_never_pass_the_backlog_ceiling(job_store: JobStore) -> None:
    limits = AdmissionLimits(per_client=10, backlog=20)
    outcomes = race(50, lambda i: job_store.create(_job(f"c{i}", f"j{i}"), limits))
    assert _admitted(outcomes, BacklogFull) == 20
    assert job_store.active_counts("c0").total == 20
    # The counts go down as exactly: room for one more after one job ends.
    admitted = next(i for i, o in enumerate(outcomes) if isinstance(o, tuple))
    job_store.update(f"j{admitted}", lambda j: j.cancel(make_job().created_at))
    assert job_store.active_counts("c0").total == 19
    assert job_store.create(_job("late", "late"), limits)[1] is True
    with pytest.raises(BacklogFull):
        job_store.create(_job("later", "later"), limits)


def test_one_client_may_fill_the_whole_backlog(job_store: JobStore) -> None:
    # However the backlog is divided inside the store, one busy client is not held to a
    # part of it: its 21st job is refused by the backlog ceiling, not before (its own
    # ceiling is above the backlog's).
    limits = AdmissionLimits(per_client=50, backlog=20)
    for i in range(20):
        assert job_store.create(_job("busy", f"j{i}"), limits)[1] is True, i
    with pytest.raises(BacklogFull):
        job_store.create(_job("busy", "j20"), limits)
    assert job_store.get("j20") is None
    assert job_store.active_counts("busy") == ActiveCounts(20, 20)
    # Once one of its jobs ends, there is room for exactly one more, from anyone.
    job_store.update("j0", lambda j: j.cancel(make_job().created_at))
    assert job_store.create(_job("other", "o1"), limits)[1] is True
    with pytest.raises(BacklogFull):
        job_store.create(_job("busy", "j21"), limits)


def test_racing_creates_of_a_few_busy_clients_fill_the_backlog_and_never_pass_it(
    job_store: JobStore,
) -> None:
    limits = AdmissionLimits(per_client=20, backlog=20)
    outcomes = race(48, lambda i: job_store.create(_job(f"c{i % 4}", f"j{i}"), limits))
    assert _admitted(outcomes, BacklogFull) == 20
    counts = [job_store.active_counts(f"c{c}") for c in range(4)]
    assert {c.total for c in counts} == {20}
    assert sum(c.client for c in counts) == 20
