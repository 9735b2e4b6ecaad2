"""What the operator's calls cost on Firestore (the emulator, metered by the adapter):
bounded by the page size and the health window's sample, never by the collection."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from shared.adapters.google import metering
from shared.clock import FrozenClock
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest, Job
from shared.ports import JobFilter
from shared.service_layer.queue_health import HealthQuery, QueueHealth

pytestmark = pytest.mark.emulator

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=30)


def seed(store: Any, waiting: int, done: int) -> None:
    request = GradingRequest(submission_id="s", answer="a", rubric="r")
    for n in range(waiting + done):
        store.create(Job.new(f"job{n:02d}", "c", request, "fp", T0 + timedelta(seconds=n)))
    for n in range(waiting, waiting + done):
        at = T0 + timedelta(minutes=5)
        store.update(f"job{n:02d}", lambda j, at=at: j.claim("w", at, LEASE))
        store.update(f"job{n:02d}", lambda j, at=at: j.succeed("w", GradeResult(1, 10, "ok"), at))


def test_queue_health_costs_one_read_per_count_and_oldest_and_one_per_recent_job(
    firestore_job_store: Any,
) -> None:
    store = firestore_job_store
    seed(store, waiting=4, done=3)
    store.meter.reset()
    health = QueueHealth(store, FrozenClock(T0 + timedelta(minutes=10))).compute(HealthQuery())
    assert health["counts"]["PENDING"] == 4 and health["completed"] == 3
    costs = store.meter.snapshot()
    # 6 capped counts (1 read each under 1,000 matches) + 2 oldest-waiting queries + 3 jobs
    assert costs[metering.FIRESTORE_READS] == 6 + 2 + 3
    assert costs[metering.FIRESTORE_QUERIES] == 6 + 2 + 1


def test_a_listing_page_costs_its_jobs(firestore_job_store: Any) -> None:
    store = firestore_job_store
    seed(store, waiting=7, done=0)
    store.meter.reset()
    assert len(store.find_jobs(JobFilter(), limit=5)) == 5
    assert store.meter.snapshot()[metering.FIRESTORE_READS] == 5
