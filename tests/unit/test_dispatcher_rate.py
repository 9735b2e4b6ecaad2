"""Per-queue rate limits: dispatches per second and the cap on requests in flight."""

from __future__ import annotations

import pytest

from localcloud.tasks.rate_limit import TokenBucket, burst_size
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.adapters.embedded.task_queue import SqliteTaskQueue
from shared.ports import TaskSpec
from tests.contract.harness import fast_queue, running_dispatcher
from tests.support.http_target import RecordingTarget, Reply


def test_dispatch_rate_is_limited(db: SqliteDatabase, target: RecordingTarget) -> None:
    queue = fast_queue(rate=10)  # burst of 1: one dispatch every 0.1 s
    tq = SqliteTaskQueue(db, queue, target.url)
    for i in range(16):
        tq.enqueue(TaskSpec(name=f"t-{i}", job_id=f"j-{i}"))
    with running_dispatcher(db, queue):
        received = target.wait_for(16, timeout=6)
    span = received[-1].received_at - received[0].received_at
    assert 1.2 <= span <= 3.0  # 15 intervals of 0.1 s


def test_requests_in_flight_are_capped(db: SqliteDatabase, target: RecordingTarget) -> None:
    target.responder = lambda _r: Reply(200, delay_s=0.3)
    queue = fast_queue(rate=500, concurrency=3)
    tq = SqliteTaskQueue(db, queue, target.url)
    for i in range(9):
        tq.enqueue(TaskSpec(name=f"t-{i}", job_id=f"j-{i}"))
    with running_dispatcher(db, queue):
        received = target.wait_for(9, timeout=6)
    assert target.max_in_flight == 3
    assert received[-1].received_at - received[0].received_at >= 0.55  # three waves


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_token_bucket_refills_at_the_rate_up_to_the_burst() -> None:
    clock = FakeClock()
    bucket = TokenBucket(rate=5, burst=2, clock=clock)
    assert bucket.available() == 2
    bucket.take()
    bucket.take()
    assert bucket.available() == 0
    assert bucket.wait_time() == pytest.approx(0.2)
    clock.now = 10.0
    assert bucket.available() == 2  # capped at the burst


def test_burst_is_a_tenth_of_the_rate_and_at_least_one() -> None:
    assert burst_size(1) == 1
    assert burst_size(20) == 2
    assert burst_size(500) == 50
