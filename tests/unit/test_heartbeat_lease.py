"""The heartbeat lease: renewed while grading, taken over soon after its holder dies.

These run on the real clock with a lease of a fraction of a second (the shipped
settings scaled down); none depends on which thread gets there first. The timing of
renewals, drains and lease waits, and two deliveries meeting, are pinned step by step
in test_worker_decisions.py.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path
from typing import cast

import pytest

from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.clock import SystemClock
from shared.config.budget import Budget
from shared.config.queues import load_queues
from shared.domain.errors import (
    DependencyUnavailable,
    GradeqError,
    JobNotFound,
    LeaseLost,
    TransientGradingError,
)
from shared.domain.grade import GradeResult
from shared.domain.ids import job_id_for
from shared.domain.job import ATTEMPTS_EXHAUSTED, GradingRequest, Job
from shared.domain.status import JobStatus
from shared.ports import Grader, JobStore
from shared.service_layer.heartbeat import WORKER_SHUTDOWN, AttemptState, Heartbeat
from shared.service_layer.worker import DeliveryResult, TaskDelivery, Verdict, WorkerService
from tests.fakes import FakePublisher

REPO = Path(__file__).resolve().parents[2]
LEASE_S = 0.6
HEARTBEAT_S = 0.2


class GateGrader:
    """Blocks each call until `release` is set (or a call's own `fail` is scripted)."""

    name = "gate"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = threading.Semaphore(0)
        self.calls = 0
        self.errors: list[Exception] = []

    def grade(self, request: GradingRequest, *, attempt: int, timeout_s: float) -> GradeResult:
        self.calls += 1
        self.started.release()
        if self.errors:
            raise self.errors.pop(0)
        assert self.release.wait(timeout_s), "the grader was never released"
        return GradeResult(5, request.max_score, "ok", grader=self.name)


def budget(**changes: float) -> Budget:
    queue = load_queues()["grading"]
    values: dict[str, float] = {
        "grader_timeout_s": 5.0,
        "lease_s": LEASE_S,
        "heartbeat_s": HEARTBEAT_S,
        "result_write_retry_s": 1.0,
        "drain_grace_s": 0.3,
        "job_max_attempts": queue.retry_config.max_attempts,
    }
    values.update(changes)
    return Budget(
        grader_timeout_s=values["grader_timeout_s"],
        lease_s=values["lease_s"],
        heartbeat_s=values["heartbeat_s"],
        result_write_retry_s=values["result_write_retry_s"],
        drain_grace_s=values["drain_grace_s"],
        job_max_attempts=int(values["job_max_attempts"]),
        queue=queue,
    ).check()


@pytest.fixture
def store(tmp_path: Path) -> JobStore:
    return SqliteJobStore(SqliteDatabase(tmp_path / "jobs.sqlite3"))


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(max_workers=4) as executor:
        yield executor


def worker(store: JobStore, grader: Grader, **changes: float) -> WorkerService:
    b = budget(**changes)
    return WorkerService(
        store,
        FakePublisher(),
        grader,
        SystemClock(),
        b.queue.retry_config,
        b,
    )


def seed(store: JobStore, key: str = "k") -> str:
    job_id = job_id_for("c", key)
    request = GradingRequest(submission_id="s", answer="a", rubric="r")
    store.create(Job.new(job_id, "c", request, "fp", SystemClock().now()))
    return job_id


def test_a_dead_attempt_is_taken_over_within_one_lease(
    store: JobStore, pool: ThreadPoolExecutor
) -> None:
    job_id = seed(store)
    # A claim whose process died at once: nobody renews it.
    store.update(job_id, lambda j: j.claim("dead", SystemClock().now(), timedelta(seconds=LEASE_S)))
    grader = GateGrader()
    grader.release.set()
    # One delivery: it waits for the lease instead of answering 409 and burning a retry.
    result = worker(store, grader).handle(TaskDelivery(job_id, "t", 1))
    assert result.verdict is Verdict.DONE
    job = store.get(job_id)
    assert job is not None and job.status is JobStatus.SUCCEEDED and job.attempts == 2


def test_attempts_count_across_replays_and_the_budget_is_the_worst_case(
    store: JobStore,
) -> None:
    grader = GateGrader()
    grader.release.set()
    service = worker(store, grader, job_max_attempts=3)
    job_id = seed(store)
    grader.errors = [TransientGradingError("429") for _ in range(10)]
    verdicts = []
    for generation in range(4):  # the sweep replays with a fresh task each time
        store.update(job_id, lambda j: j if j.status.is_final else j.replay(SystemClock().now()))
        verdicts.append(service.handle(TaskDelivery(job_id, f"t{generation}", 0)).verdict)
    assert verdicts == [Verdict.RETRY, Verdict.RETRY, Verdict.DONE, Verdict.DONE]
    assert grader.calls == 3 == budget(job_max_attempts=3).worst_case_grader_calls
    job = store.get(job_id)
    assert job is not None and job.status is JobStatus.FAILED and job.attempts == 3


def test_a_job_whose_last_attempt_died_is_failed_not_graded_again(store: JobStore) -> None:
    grader = GateGrader()
    service = worker(store, grader, job_max_attempts=3)
    job_id = seed(store)
    past = SystemClock().now() - timedelta(hours=1)
    for n in range(3):
        at = past + timedelta(minutes=n)

        def dead_claim(j: Job, n: int = n, at: datetime = at) -> Job:
            return j.claim(f"dead{n}", at, timedelta(seconds=1))

        store.update(job_id, dead_claim)
    result = service.handle(TaskDelivery(job_id, "t", 0))
    assert result.verdict is Verdict.DONE and grader.calls == 0
    job = store.get(job_id)
    assert job is not None and job.status is JobStatus.FAILED
    assert job.error is not None and job.error.type == ATTEMPTS_EXHAUSTED


class FlakyStore:
    """A store whose next `fail_updates` updates raise DependencyUnavailable."""

    def __init__(self, inner: JobStore) -> None:
        self.inner = inner
        self.fail_updates = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def update(self, job_id: str, mutate: object) -> Job:
        if self.fail_updates > 0:
            self.fail_updates -= 1
            raise DependencyUnavailable("database is locked")
        return self.inner.update(job_id, mutate)  # type: ignore[arg-type]


def test_a_result_is_stored_after_a_short_store_hiccup_without_grading_again(
    store: JobStore,
) -> None:
    flaky = FlakyStore(store)
    grader = GateGrader()
    job_id = seed(store)

    def grade_then_hiccup(
        request: GradingRequest, *, attempt: int, timeout_s: float
    ) -> GradeResult:
        flaky.fail_updates = 2
        return GradeResult(5, request.max_score, "ok")

    grader.grade = grade_then_hiccup  # type: ignore[method-assign]
    service = worker(flaky, grader)  # type: ignore[arg-type]
    assert service.handle(TaskDelivery(job_id, "t", 0)).verdict is Verdict.DONE
    job = store.get(job_id)
    assert job is not None and job.status is JobStatus.SUCCEEDED and job.attempts == 1


# --- a grader call beside its delivery ---------------------------------------------------


def _in_flight(store: JobStore, job_ids: list[str]) -> Callable[[], bool]:
    def all_running() -> bool:
        jobs = [store.get(j) for j in job_ids]
        return all(j is not None and j.status is JobStatus.RUNNING for j in jobs)

    return all_running


def _until(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.01)


def test_n_gradings_in_flight_hold_their_n_deliveries_n_grader_calls_and_one_timer(
    store: JobStore,
) -> None:
    n = 25
    grader = GateGrader()
    service = worker(store, grader)
    job_ids = [seed(store, f"k{i}") for i in range(n)]
    # Threads of earlier tests that end meanwhile must not count: new threads are counted.
    before = set(threading.enumerate())
    deliveries = [
        threading.Thread(target=service.handle, args=(TaskDelivery(j, f"t{j}", 0),))
        for j in job_ids
    ]
    for delivery in deliveries:
        delivery.start()
    for _ in range(n):
        assert grader.started.acquire(timeout=10), "a grading never started"
    in_flight = len(set(threading.enumerate()) - before)
    grader.release.set()
    for delivery in deliveries:
        delivery.join(10)
    # Each grader call has a thread beside its delivery's, which stays free to answer;
    # one heartbeat renews them all (not one timer per grading).
    assert in_flight == 2 * n + 1
    assert all(j.status is JobStatus.SUCCEEDED for j in map(store.get, job_ids) if j)


class CountingStore:
    """Counts the store's writes: single updates and batched ones."""

    def __init__(self, inner: SqliteJobStore) -> None:
        self.inner = inner
        self.updates = 0
        self.batches: list[int] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def update(self, job_id: str, mutate: Callable[[Job], Job]) -> Job:
        self.updates += 1
        return self.inner.update(job_id, mutate)

    def update_each(
        self, mutations: Mapping[str, Callable[[Job], Job]]
    ) -> dict[str, Job | GradeqError]:
        self.batches.append(len(mutations))
        return self.inner.update_each(mutations)


def test_renewals_due_together_are_one_store_write(tmp_path: Path) -> None:
    inner = SqliteJobStore(SqliteDatabase(tmp_path / "jobs.sqlite3"))
    store = CountingStore(inner)
    now = [100.0]
    b = budget()
    clock = SystemClock()
    heartbeat = Heartbeat(
        cast(JobStore, store), clock, b, background=False, monotonic=lambda: now[0]
    )
    attempts = []
    for i in range(5):
        job_id = seed(inner, f"k{i}")

        def claim(j: Job, i: int = i) -> Job:
            return j.claim(f"o{i}", clock.now(), b.lease)

        inner.update(job_id, claim)
        attempts.append(heartbeat.begin(job_id, f"o{i}"))
        now[0] += 0.01  # each claimed a little after the one before
    assert heartbeat.wait_s() == pytest.approx(HEARTBEAT_S - 0.05)
    now[0] = 100.0 + HEARTBEAT_S  # the first is due; the others within the window
    heartbeat.tick()
    assert store.batches == [5] and store.updates == 0
    assert all(a.state is AttemptState.LIVE and a.renewed_at == now[0] for a in attempts)
    assert heartbeat.wait_s() == pytest.approx(HEARTBEAT_S)
    # One lost lease stops its own attempt only.
    later = clock.now() + timedelta(hours=1)  # past the lease: a takeover
    inner.update(attempts[2].job_id, lambda j: j.claim("thief", later, b.lease))
    now[0] += HEARTBEAT_S
    heartbeat.tick()
    assert store.batches == [5, 5]
    assert [a.state for a in attempts] == [AttemptState.LIVE] * 2 + [AttemptState.LOST] + [
        AttemptState.LIVE
    ] * 2
    assert all(heartbeat.end(a) is a.state for a in attempts)
    assert heartbeat.in_flight() == [] and heartbeat.wait_s() == float("inf")


def test_a_hung_grader_has_its_job_handed_back_when_the_drain_grace_ends(
    store: JobStore,
) -> None:
    grader = GateGrader()
    service = worker(store, grader, drain_grace_s=0.3)
    job_id = seed(store)
    results: list[DeliveryResult] = []
    delivery = threading.Thread(
        target=lambda: results.append(service.handle(TaskDelivery(job_id, "t", 0)))
    )
    delivery.start()
    assert grader.started.acquire(timeout=10)
    service.drain(0.3)
    # The heartbeat hands the job back while the grader still hangs, and the delivery
    # answers RETRY right then: the queue hears of it before the process stops.
    delivery.join(10)
    assert not delivery.is_alive(), "the delivery waited for its hung grader"
    assert service.gradings_in_flight == 1
    handed_back = store.get(job_id)
    assert handed_back is not None and handed_back.status is JobStatus.RETRYING
    assert handed_back.error is not None
    assert handed_back.error.type == WORKER_SHUTDOWN and handed_back.lease_owner is None
    [result] = results
    assert result.verdict is Verdict.RETRY and result.job == handed_back
    # A grader returning late stores nothing.
    grader.release.set()
    _until(lambda: service.gradings_in_flight == 0)
    assert store.get(job_id) == handed_back


def test_a_grading_whose_lease_was_taken_stores_nothing_when_its_grader_returns(
    store: JobStore,
) -> None:
    grader = GateGrader()
    service = worker(store, grader)
    job_id = seed(store)
    results: list[DeliveryResult] = []
    delivery = threading.Thread(
        target=lambda: results.append(service.handle(TaskDelivery(job_id, "t", 0)))
    )
    delivery.start()
    assert grader.started.acquire(timeout=10)
    later = SystemClock().now() + timedelta(hours=1)
    store.update(job_id, lambda j: j.claim("thief", later, timedelta(hours=1)))
    # The next renewal finds the lease lost: the delivery answers without its grader.
    delivery.join(10)
    assert not delivery.is_alive() and service.gradings_in_flight == 1
    [result] = results
    assert result.verdict is Verdict.LOCKED and isinstance(result.reason, LeaseLost)
    grader.release.set()
    _until(lambda: service.gradings_in_flight == 0)
    job = store.get(job_id)
    assert job is not None and job.lease_owner == "thief" and job.result is None


class CountedHeartbeat(Heartbeat):
    passes = 0

    def tick(self) -> float:
        self.passes += 1
        return super().tick()


def test_short_gradings_cost_the_timer_no_pass_while_it_sleeps(store: JobStore) -> None:
    b = budget(lease_s=60.0, heartbeat_s=20.0)
    heartbeat = CountedHeartbeat(store, SystemClock(), b)
    long = heartbeat.begin("long", "o")  # keeps the timer asleep until it is due
    _until(lambda: heartbeat.passes == 1)
    for n in range(50):
        heartbeat.end(heartbeat.begin(f"short{n}", "o"))
        time.sleep(0.002)  # time enough for a woken timer to make its pass
    heartbeat.drain(30.0)  # wakes it once: the grace ends before the next renewal
    _until(lambda: heartbeat.passes == 2)
    time.sleep(0.2)
    assert heartbeat.passes == 2
    assert heartbeat.end(long) is AttemptState.LIVE


def test_the_timer_thread_ends_once_idle_and_the_next_attempt_starts_it(
    store: JobStore,
) -> None:
    heartbeat = Heartbeat(store, SystemClock(), budget())
    assert not heartbeat.running
    attempt = heartbeat.begin("a", "o")
    assert heartbeat.running
    heartbeat.end(attempt)
    _until(lambda: not heartbeat.running)  # one idle heartbeat later
    heartbeat.end(heartbeat.begin("b", "o"))
    assert heartbeat.running


def test_a_stopping_gunicorn_worker_whose_grader_hangs_hands_the_job_back_and_exits(
    tmp_path: Path,
) -> None:
    database = tmp_path / "jobs.sqlite3"
    store = SqliteJobStore(SqliteDatabase(database))
    job_id = seed(store)
    command = [sys.executable, "-m", "tests.support.hung_grading_process", str(database), job_id]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=REPO) as process:
        try:
            assert process.stdout is not None and process.stdout.readline() == "grading\n"
            process.send_signal(signal.SIGTERM)
            # The delivery answers once the drain's grace hands its job back, and the
            # interpreter, which waits for the delivery's thread as gunicorn's worker
            # does for its request threads, ends at once: the grader's thread is a daemon.
            assert process.stdout.readline() == "answered retry\n"
            assert process.wait(timeout=30) == 0
        finally:
            process.kill()
    job = store.get(job_id)
    assert job is not None and job.status is JobStatus.RETRYING
    assert job.error is not None and job.error.type == WORKER_SHUTDOWN


def test_a_batched_update_answers_each_jobs_error_and_writes_the_others(tmp_path: Path) -> None:
    store = SqliteJobStore(SqliteDatabase(tmp_path / "jobs.sqlite3"))
    clock = SystemClock()
    b = budget()
    ours, theirs = seed(store, "a"), seed(store, "b")
    for job_id in (ours, theirs):
        store.update(job_id, lambda j: j.claim("me", clock.now(), b.lease))
    store.update(theirs, lambda j: j.claim("thief", clock.now() + timedelta(hours=1), b.lease))
    later = clock.now() + timedelta(seconds=1)
    outcomes = store.update_each(
        {job_id: (lambda j: j.renew("me", later, b.lease)) for job_id in (ours, theirs, "nope")}
    )
    renewed = outcomes[ours]
    assert isinstance(renewed, Job) and renewed.lease_expires_at == later + b.lease
    assert store.get(ours) == renewed
    assert isinstance(outcomes[theirs], LeaseLost) and isinstance(outcomes["nope"], JobNotFound)
    stolen = store.get(theirs)
    assert stolen is not None and stolen.lease_owner == "thief"
