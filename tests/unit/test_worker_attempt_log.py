"""The worker's log accounts for a job's attempt budget, a provider batch's attempt included.

Each claim logs "grading started" with its attempt. An attempt the grader's quota refuses
before anything is sent (the shared limiter of a process that was stopped past its grant,
say) is given back uncounted, and the next claim starts it again: the line that gives it
back takes that "grading started" back, so that the log never shows more attempts (nor
provider calls) than the job's budget.

Played on the service layer with a clock the test moves: a job of the `bulk` lane is
gathered into a provider batch (its first attempt), the batch expires, and the job is graded
one request at a time by a model grader whose provider answers 5xx to every request, its
quota refusing one admission on the way, until its budget is spent.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import cast

import pytest

from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.adapters.graders.limiter import QuotaShare, Reservation, RollingLimiter
from shared.adapters.graders.llm import Completion, ModelGrader
from shared.adapters.graders.prompt import GradingPrompt, RenderedPrompt
from shared.adapters.graders.provider_batch import BatchState
from shared.clock import FrozenClock
from shared.config.budget import Budget
from shared.config.queues import load_queues
from shared.domain.errors import (
    GraderMisconfigured,
    ProviderQuotaExhausted,
    ProviderUnavailable,
)
from shared.domain.ids import job_id_for
from shared.domain.job import GradingRequest, Job
from shared.domain.status import JobStatus
from shared.ports import Grader, JobStore
from shared.service_layer.provider_batches import BatchPolicy, BatchService
from shared.service_layer.worker import (
    ATTEMPT_GIVEN_BACK,
    TaskDelivery,
    Verdict,
    WorkerService,
)
from tests.fakes import FakePublisher, FakeTaskQueue, ScriptedGrader
from tests.support.worker_time import Beats, TestTime, install, manual_heartbeat
from tests.unit.test_provider_batches import ScriptedBatches

MAX_ATTEMPTS = 8
#: How many times the queue delivers one task (the soak's queues: as many).
QUEUE_ATTEMPTS = 8
REQUEST = GradingRequest("s-1", "The mitochondria produce ATP.", "mentions ATP", 10)
#: The limiter's admission (1-based) it refuses, and the wait it names (the pool's lease).
REFUSED_ADMISSION, REFUSED_WAIT_S = 3, 2.0


class DownProvider:
    """A chat model whose provider answers 5xx to every request; counts the requests."""

    provider = "openai-compatible"
    model = "soak-grader"

    def __init__(self) -> None:
        self.requests = 0

    def complete(self, prompt: RenderedPrompt, *, timeout_s: float) -> Completion:
        self.requests += 1
        raise ProviderUnavailable("openai-compatible answered HTTP 500 server_error")

    def probe(self, *, timeout_s: float) -> None:
        return None


class StarvedOnceLimiter:
    """Admits every request but one, which it refuses as a limiter woken past its grant does."""

    def __init__(self) -> None:
        self.share = QuotaShare(10_000, 0)
        self._inner = RollingLimiter(self.share)
        self.asked = 0

    def acquire(self, tokens: int) -> Reservation:
        self.asked += 1
        if self.asked == REFUSED_ADMISSION:
            raise ProviderQuotaExhausted("woken past the grant", retry_after_s=REFUSED_WAIT_S)
        return self._inner.acquire(tokens)


def budget() -> Budget:
    """The soak's budget: 8 attempts of a job, on a queue that delivers each task 8 times."""
    grading = load_queues()["grading"]
    retry = dataclasses.replace(grading.retry_config, max_attempts=QUEUE_ATTEMPTS)
    return Budget(
        grader_timeout_s=30.0,
        lease_s=12.0,
        heartbeat_s=4.0,
        result_write_retry_s=5.0,
        drain_grace_s=5.0,
        job_max_attempts=MAX_ATTEMPTS,
        queue=dataclasses.replace(grading, retry_config=retry),
    ).check()


@dataclasses.dataclass
class Stage:
    """A worker on a SQLite store and a task queue, its waits on a clock the test moves."""

    clock: FrozenClock
    store: JobStore
    queue: FakeTaskQueue
    worker: WorkerService

    def seed(self, lane: str | None = None) -> str:
        job_id = job_id_for("client-a", "k")
        self.store.create(Job.new(job_id, "client-a", REQUEST, "fp", self.clock.now(), lane=lane))
        return job_id

    def job(self, job_id: str) -> Job:
        job = self.store.get(job_id)
        assert job is not None
        return job


def stage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, grader: Grader) -> Stage:
    clock = FrozenClock()
    time = TestTime(clock)
    beats = Beats(time)
    install(monkeypatch, time, beats)
    store = cast(JobStore, SqliteJobStore(SqliteDatabase(tmp_path / "jobs.sqlite3")))
    queue = FakeTaskQueue()
    limits = budget()
    worker = WorkerService(
        store,
        FakePublisher(),
        grader,
        clock,
        limits.queue.retry_config,
        limits,
        queue=queue,
        heartbeat=manual_heartbeat(store, clock, limits, time, beats),
    )
    return Stage(clock, store, queue, worker)


def given_back(records: list[logging.LogRecord]) -> list[tuple[str, object]]:
    """The lines that take a started attempt back: their reason and attempt."""
    return [
        (str(getattr(r, "reason", None)), getattr(r, "attempt", None))
        for r in records
        if getattr(r, "event", None) == ATTEMPT_GIVEN_BACK
    ]


def started(records: list[logging.LogRecord]) -> list[object]:
    return [getattr(r, "attempt", None) for r in records if r.getMessage() == "grading started"]


def test_the_log_takes_back_an_attempt_the_quota_gave_back_and_stays_within_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    provider, limiter = DownProvider(), StarvedOnceLimiter()
    grader = ModelGrader(provider, limiter, GradingPrompt.load(), max_output_tokens=256)
    st = stage(tmp_path, monkeypatch, grader)
    clock, store, worker = st.clock, st.store, st.worker
    batches = ScriptedBatches(state=BatchState.EXPIRED)
    policy = BatchPolicy(lanes=frozenset({"bulk"}), window=timedelta(seconds=1))
    worker.batches = BatchService(
        store, st.queue, clock, batches, policy, worker.record_batch_answer
    )
    job_id = st.seed(lane="bulk")
    caplog.set_level(logging.INFO)

    # The first attempt goes into a provider batch, which expires: graded one by one.
    first = worker.handle(TaskDelivery(job_id, "t-first", queue="bulk"))
    assert first.verdict is Verdict.DONE and first.job is not None and first.job.waits_in_batch
    clock.advance(timedelta(seconds=2))
    assert len(worker.batches.tick().submitted) == 1
    assert worker.batches.tick().returned == [job_id]

    verdicts: list[Verdict] = []
    for _ in range(2 * MAX_ATTEMPTS):
        job = st.job(job_id)
        if job.status.is_final:
            break
        clock.advance(timedelta(seconds=REFUSED_WAIT_S))  # each task's time has come
        verdicts.append(worker.handle(TaskDelivery(job_id, job.task_name, queue="bulk")).verdict)

    job = st.job(job_id)
    assert job.status is JobStatus.FAILED and job.attempts == MAX_ATTEMPTS and job.event_published
    # The refused admission sent nothing: the batch's request and seven one by one.
    assert [len(requests) for requests in batches.submitted.values()] == [1]
    assert provider.requests == MAX_ATTEMPTS - 1 and limiter.asked == MAX_ATTEMPTS
    assert verdicts.count(Verdict.DEFERRED) == 1 and verdicts[-1] is Verdict.DONE

    # The job's lines (it is the only job): the refused claim was attempt 4 (after the
    # batch's and two one by one), started twice and taken back once.
    starts = started(caplog.records)
    assert starts == [1, 2, 3, 4, 4, 5, 6, 7, 8]
    assert given_back(caplog.records) == [("provider-quota-exhausted", 4)]
    calls = Counter(starts)
    calls.subtract(attempt for _, attempt in given_back(caplog.records))
    assert sum(calls.values()) == 1 + provider.requests == MAX_ATTEMPTS
    assert set(calls.values()) == {1}


@pytest.mark.parametrize("last", [False, True], ids=["released", "deferred"])
def test_a_configuration_the_provider_refuses_takes_its_started_attempt_back_on_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, last: bool
) -> None:
    # Given back uncounted while grading is suspended: on the task's last delivery the job
    # goes to a new task, else the queue retries the task.
    refused = GraderMisconfigured("openai-compatible answered HTTP 401")
    st = stage(tmp_path, monkeypatch, ScriptedGrader(refused))
    job_id = st.seed()
    caplog.set_level(logging.INFO)
    retry_count = QUEUE_ATTEMPTS - 1 if last else 0
    verdict = st.worker.handle(TaskDelivery(job_id, "t-1", retry_count)).verdict

    assert verdict is (Verdict.DEFERRED if last else Verdict.SUSPENDED)
    job = st.job(job_id)
    assert job.status is JobStatus.RETRYING and job.attempts == 0
    assert started(caplog.records) == [1]
    assert given_back(caplog.records) == [("grader-misconfigured", 1)]


def test_a_job_handed_on_before_its_attempt_starts_takes_nothing_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The task's last delivery while grading is suspended: handed on before it starts.
    st = stage(tmp_path, monkeypatch, ScriptedGrader())
    st.worker.gate.trip(GraderMisconfigured("openai-compatible answered HTTP 401"))
    job_id = st.seed()
    caplog.set_level(logging.INFO)
    last = TaskDelivery(job_id, "t-1", QUEUE_ATTEMPTS - 1)
    assert st.worker.handle(last).verdict is Verdict.DEFERRED

    messages = [r.getMessage() for r in caplog.records]
    assert "grading suspended; job deferred to a new task" in messages
    assert started(caplog.records) == [] and given_back(caplog.records) == []
    assert st.job(job_id).attempts == 0


def test_the_attempt_is_taken_back_once_given_back_even_if_no_new_task_can_be_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # No quota, and the queue is down: the job is given back (the queue retries this
    # task), and the log says so before the new task is asked for.
    refused = ProviderQuotaExhausted("no room", retry_after_s=REFUSED_WAIT_S)
    st = stage(tmp_path, monkeypatch, ScriptedGrader(refused))
    st.queue.available = False
    job_id = st.seed()
    caplog.set_level(logging.INFO)
    assert st.worker.handle(TaskDelivery(job_id, "t-1")).verdict is Verdict.THROTTLED

    job = st.job(job_id)
    assert job.status is JobStatus.RETRYING and job.attempts == 0 and st.queue.tasks == []
    assert started(caplog.records) == [1]
    assert given_back(caplog.records) == [("provider-quota-exhausted", 1)]
