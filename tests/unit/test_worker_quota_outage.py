"""A provider quota outage longer than the queue's retry window grades every job later.

Cloud Tasks counts every delivery against the queue's max_attempts whatever the worker
answers, and deletes the task after the last one. `QueueModel` plays those rules over the
worker app: a 2xx deletes the task; anything else retries it after the queue's backoff
(or the Retry-After of a 429/503) until its attempts are spent.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from flask.testing import FlaskClient

from services.worker.app import create_app
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.queues import RetryConfig
from shared.config.settings import Settings
from shared.domain.errors import ProviderQuotaExhausted
from shared.domain.grade import GradeResult
from shared.domain.ids import task_name_for
from shared.domain.job import GradingRequest
from shared.domain.status import JobStatus
from tests.fakes import FakeTaskQueue
from tests.unit.test_worker_api import AUTH, seed

#: How long the provider's quota has no room, and the wait it asks for each time.
OUTAGE = timedelta(hours=2)
RETRY_AFTER_S = 60


class QuotaOutageGrader:
    """No quota until the outage ends, then a fixed grade; counts the grader calls made."""

    name = "quota-outage"

    def __init__(self, clock: FrozenClock, until: datetime) -> None:
        self._clock = clock
        self._until = until
        self.graded = 0

    def grade(self, request: GradingRequest, *, attempt: int, timeout_s: float) -> GradeResult:
        if self._clock.now() < self._until:
            raise ProviderQuotaExhausted("no room", retry_after_s=RETRY_AFTER_S)
        self.graded += 1
        return GradeResult(7.0, request.max_score, "ok", grader=self.name)


@dataclass
class Pending:
    name: str
    job_id: str
    due: datetime
    retry_count: int = 0


class QueueModel:
    """Cloud Tasks' delivery rules for the tasks of `queue`, on the test's clock."""

    def __init__(self, queue: FakeTaskQueue, retry: RetryConfig, clock: FrozenClock) -> None:
        self.queue = queue
        self.retry = retry
        self.clock = clock
        self.pending: dict[str, Pending] = {}
        self.deleted_after_last_attempt: list[str] = []
        self.deliveries = 0

    def add(self, name: str, job_id: str) -> None:
        self.pending[name] = Pending(name, job_id, self.clock.now())

    def _adopt_new_tasks(self) -> None:
        for task in self.queue.tasks:
            if task.name not in self.pending and task.name not in self.queue.gone:
                self.pending[task.name] = Pending(
                    task.name, task.job_id, task.schedule_time or self.clock.now()
                )

    def run(self, client: FlaskClient, until: datetime) -> None:
        while self.pending:
            task = min(self.pending.values(), key=lambda p: p.due)
            if task.due > until:
                return
            if task.due > self.clock.now():
                self.clock.advance(task.due - self.clock.now())
            self.deliveries += 1
            response = client.post(
                "/tasks/grade",
                json={"job_id": task.job_id},
                headers={
                    **AUTH,
                    "X-CloudTasks-TaskName": task.name,
                    "X-CloudTasks-TaskRetryCount": str(task.retry_count),
                },
            )
            self._adopt_new_tasks()
            if 200 <= response.status_code < 300:
                self._remove(task)
                continue
            task.retry_count += 1
            if 0 <= self.retry.max_attempts <= task.retry_count:
                self.deleted_after_last_attempt.append(task.name)
                self._remove(task)
                continue
            wait = self.retry.backoff(task.retry_count - 1)
            hint = response.headers.get("Retry-After")
            if response.status_code in (429, 503) and hint:
                wait = max(wait, timedelta(seconds=int(hint)))
            task.due = self.clock.now() + wait

    def _remove(self, task: Pending) -> None:
        del self.pending[task.name]
        self.queue.gone.add(task.name)


def test_a_quota_outage_longer_than_the_retry_window_spends_no_task_and_no_attempt(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    retry = settings.queue_config().retry_config
    window = sum((retry.backoff(n) for n in range(retry.max_attempts - 1)), timedelta())
    assert 10 * window < OUTAGE  # the queue alone gives up long before the quota is back
    grader = QuotaOutageGrader(clock, clock.now() + OUTAGE)
    client = create_app(settings, adapters, grader, clock).test_client()
    assert isinstance(adapters.queue, FakeTaskQueue)
    model = QueueModel(adapters.queue, retry, clock)
    jobs = [seed(adapters, clock, key=f"k{i}") for i in range(3)]
    for job_id in jobs:
        model.add(task_name_for(job_id, 0), job_id)

    model.run(client, until=clock.now() + OUTAGE + timedelta(hours=1))

    assert model.deleted_after_last_attempt == []
    assert grader.graded == len(jobs)
    for job_id in jobs:
        job = adapters.store.get(job_id)
        assert job is not None and job.status is JobStatus.SUCCEEDED
        # The waits cost nothing: the grading was the job's first and only attempt.
        assert job.attempts == 1
        assert job.deferrals >= OUTAGE.total_seconds() // RETRY_AFTER_S
    # Each wait was one delivery a minute, not a tight loop.
    assert model.deliveries <= len(jobs) * (OUTAGE.total_seconds() // RETRY_AFTER_S + 2)
