"""Event-bus harnesses for the EventPublisher contract, and real GradingCompleted samples."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

from localcloud.pubsub.deliveries import SqliteDeliveryStore
from shared.adapters.embedded.event_publisher import SqliteEventPublisher
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.config.subscriptions import SubscriptionConfig, TopicConfig
from shared.domain.events import GradingCompleted, Outcome
from shared.domain.grade import GradeResult
from shared.domain.ids import job_id_for
from shared.domain.job import GradingRequest, Job, JobError
from shared.ports import EventPublisher

Message = tuple[bytes, dict[str, str]]
CALLBACK_URL = "https://client.example/hooks/grading?token=abc"
T0 = datetime(2025, 3, 4, 5, 6, 7, 123456, tzinfo=UTC)


def sample_job(
    outcome: Outcome = Outcome.SUCCEEDED,
    key: str = "key-1",
    callback_url: str | None = CALLBACK_URL,
    client_id: str = "client-a",
) -> Job:
    """A job driven to a final state the real way."""
    request = GradingRequest(
        submission_id=f"submission-{key}",
        answer="Photosynthesis turns light into chemical energy.",
        rubric=("mentions light", "mentions energy"),
        max_score=10.0,
        assignment_id="biology-1",
        callback_url=callback_url,
    )
    job = Job.new(job_id_for(client_id, key), client_id, request, "fingerprint", T0)
    if outcome is Outcome.CANCELLED:
        return job.cancel(T0 + timedelta(seconds=1))
    job = job.claim("worker-1", T0 + timedelta(seconds=2), timedelta(minutes=5))
    done = T0 + timedelta(seconds=5, milliseconds=250)
    if outcome is Outcome.SUCCEEDED:
        return job.succeed("worker-1", GradeResult(7.5, 10.0, "Good."), done)
    return job.fail("worker-1", JobError("grading-permanent", "the answer is empty"), done)


def sample_event(
    outcome: Outcome = Outcome.SUCCEEDED,
    key: str = "key-1",
    callback_url: str | None = CALLBACK_URL,
    client_id: str = "client-a",
) -> GradingCompleted:
    """The GradingCompleted of `sample_job` (the callback URL stays in the job)."""
    return GradingCompleted.from_job(sample_job(outcome, key, callback_url, client_id))


class EventBusHarness(Protocol):
    """A publisher under test, and a way to see what reached a subscription of its topic."""

    @property
    def publisher(self) -> EventPublisher: ...

    def received(self, n: int, timeout: float) -> list[Message]:
        """Wait for `n` messages; return (data, attributes) of each (fails on timeout)."""
        ...


CONTRACT_SUBSCRIPTION = SubscriptionConfig(
    name="contract",
    push_path="/pubsub/push",
    ack_deadline=timedelta(seconds=10),
    minimum_backoff=timedelta(seconds=0.01),
    maximum_backoff=timedelta(seconds=0.05),
    max_delivery_attempts=5,
)


@dataclass
class EmbeddedEventBusHarness:
    """SqliteEventPublisher on a topic with one subscription, read through the bus's store."""

    publisher: SqliteEventPublisher
    store: SqliteDeliveryStore

    @classmethod
    def on(cls, db: SqliteDatabase) -> EmbeddedEventBusHarness:
        topic = TopicConfig("grading-completed", {"contract": CONTRACT_SUBSCRIPTION})
        return cls(SqliteEventPublisher(db, topic), SqliteDeliveryStore(db))

    def received(self, n: int, timeout: float) -> list[Message]:
        got: list[Message] = []
        deadline = time.monotonic() + timeout
        while len(got) < n:
            deliveries, _ = self.store.claim(
                {"contract": CONTRACT_SUBSCRIPTION}, n - len(got), time.time()
            )
            for delivery in deliveries:
                got.append((delivery.data, delivery.attributes))
                self.store.ack(delivery)
            if len(got) < n:
                assert time.monotonic() < deadline, f"{len(got)} of {n} messages in {timeout}s"
                time.sleep(0.01)
        return got
