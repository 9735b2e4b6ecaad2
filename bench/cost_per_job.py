"""Measure the billable Google Cloud operations of one job, and price them per million jobs.

    .venv/bin/python bench/cost_per_job.py

Runs the service layer (IntakeService.submit, then WorkerService.handle per delivery)
on the Google adapters against the official Firestore and Pub/Sub emulators and the local
Cloud Tasks API server. The adapters count their own calls (`adapter.meter`); this script
plays Cloud Tasks' push (counting each delivery attempt it makes) and pulls what each
subscription of `shared/config/subscriptions.json` receives. Prices: docs/cost.md.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from localcloud import emulators
from localcloud.tasks.dispatcher import Dispatcher
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.adapters.google import metering
from shared.adapters.google.clients import cloud_tasks_client
from shared.adapters.graders.rubric import RubricGrader
from shared.clock import SystemClock
from shared.config.queues import load_queues
from shared.config.settings import Settings
from shared.config.subscriptions import load_subscriptions
from shared.domain.ids import task_name_for
from shared.domain.job import GradingRequest
from shared.service_layer.intake import IntakeService
from shared.service_layer.worker import TaskDelivery, Verdict, WorkerService

PROJECT = "demo-gradeq-cost"

# List prices in USD (see docs/cost.md for sources and date).
FIRESTORE_READ = 0.03 / 100_000
FIRESTORE_WRITE = 0.09 / 100_000
FIRESTORE_DELETE = 0.01 / 100_000
TASKS_OPERATION = 0.40 / 1_000_000
PUBSUB_BYTE = 40.0 / 2**40
PUBSUB_MIN_REQUEST_BYTES = 1000


@dataclass
class JobCost:
    """What one job cost, by operation."""

    label: str
    firestore_reads: int
    firestore_writes: int
    firestore_ttl_deletes: int
    tasks_creates: int
    tasks_deliveries: int
    pubsub_publishes: int
    pubsub_deliveries: int
    pubsub_message_bytes: int
    subscriber_writes: int

    def dollars_per_million(self) -> dict[str, float]:
        million = 1_000_000
        billed = max(PUBSUB_MIN_REQUEST_BYTES, self.pubsub_message_bytes)
        pubsub_bytes = billed * (self.pubsub_publishes + self.pubsub_deliveries)
        return {
            "firestore": million
            * (
                (self.firestore_reads) * FIRESTORE_READ
                + (self.firestore_writes + self.subscriber_writes) * FIRESTORE_WRITE
                + self.firestore_ttl_deletes * FIRESTORE_DELETE
            ),
            "cloud_tasks": million * (self.tasks_creates + self.tasks_deliveries) * TASKS_OPERATION,
            "pubsub": million * pubsub_bytes * PUBSUB_BYTE,
        }


def run() -> list[JobCost]:
    """Drive one successful and one once-retried job; return their measured costs."""
    reason = emulators.missing_reason()
    if reason:
        raise SystemExit(f"cannot measure: {reason}")
    firestore_emulator = emulators.start_firestore(PROJECT)
    pubsub_emulator = emulators.start_pubsub()
    try:
        os.environ[emulators.FIRESTORE_HOST_ENV] = firestore_emulator.host
        os.environ[emulators.PUBSUB_HOST_ENV] = pubsub_emulator.host
        with tempfile.TemporaryDirectory() as tmp:
            return _measure(Path(tmp))
    finally:
        firestore_emulator.stop()
        pubsub_emulator.stop()


def _measure(tmp: Path) -> list[JobCost]:
    from google.cloud import firestore, pubsub_v1

    from shared.adapters.google.clients import publisher_client
    from shared.adapters.google.event_publisher import PubSubEventPublisher
    from shared.adapters.google.job_store import FirestoreJobStore
    from shared.adapters.google.processed_events import FirestoreProcessedEvents
    from shared.adapters.google.task_queue import CloudTasksQueue
    from shared.codecs.cloudevent import from_pubsub

    queues = load_queues()
    grading = queues["grading"]
    topic_config = load_subscriptions()
    dispatcher = Dispatcher(SqliteDatabase(tmp / "tasks.sqlite3"), queues, paused=True)
    dispatcher.start()
    db = firestore.Client(project=PROJECT)
    publisher_api, subscriber = publisher_client(), pubsub_v1.SubscriberClient()
    try:
        topic = publisher_api.create_topic(
            name=publisher_api.topic_path(PROJECT, topic_config.topic)
        ).name
        subscriptions = [
            subscriber.create_subscription(
                name=subscriber.subscription_path(PROJECT, name), topic=topic
            ).name
            for name in topic_config.subscriptions
        ]
        store = FirestoreJobStore(db, "grading_jobs", ttl=timedelta(days=30))
        processed = FirestoreProcessedEvents(db)
        queue = CloudTasksQueue(
            cloud_tasks_client(f"127.0.0.1:{dispatcher.grpc_port}"),
            f"projects/{PROJECT}/locations/europe-west1/queues/grading",
            target_url="https://worker.example" + grading.target_path,
            queue=grading,
            service_account="tasks@example.iam.gserviceaccount.com",
            audience="https://worker.example",
        )
        publisher = PubSubEventPublisher(publisher_api, topic, timeout_s=30.0)
        clock = SystemClock()
        intake = IntakeService(store, queue, publisher, clock)
        budget = Settings(grader_timeout_s=60.0).budget()
        worker = WorkerService(
            store, publisher, RubricGrader(), clock, grading.retry_config, budget
        )
        meters = (store.meter, queue.meter, publisher.meter, processed.meter)

        def one_job(label: str, key: str, simulate: dict[str, object]) -> JobCost:
            for meter in meters:
                meter.reset()
            request = GradingRequest(
                submission_id=f"sub-{key}",
                answer="Plants turn light into chemical energy with chlorophyll.",
                rubric=("mentions light", "mentions chlorophyll"),
                metadata={"simulate": simulate} if simulate else {},
            )
            job = intake.submit("client-a", key, request).job
            deliveries = 0
            verdict = Verdict.RETRY
            while verdict is Verdict.RETRY:  # Cloud Tasks redelivers the same task
                outcome = worker.handle(
                    TaskDelivery(job.id, task_name_for(job.id, 0), retry_count=deliveries)
                )
                deliveries += 1
                verdict = outcome.verdict
            received = []
            for path in subscriptions:  # each push subscription receives the event once
                response = subscriber.pull(subscription=path, max_messages=10, timeout=10)
                subscriber.acknowledge(
                    subscription=path, ack_ids=[m.ack_id for m in response.received_messages]
                )
                for m in response.received_messages:
                    event = from_pubsub(m.message.data, dict(m.message.attributes))
                    processed.add(path.rsplit("/", 1)[1], event.event_id, {"job_id": job.id})
                    received.append(m.message)
            fs, tq, ps, pe = (m.snapshot() for m in meters)
            size = max((len(m.data) + sum(len(k) + len(v) for k, v in m.attributes.items())
                        for m in received), default=0)  # fmt: skip
            return JobCost(
                label=label,
                firestore_reads=fs.get(metering.FIRESTORE_READS, 0),
                firestore_writes=fs.get(metering.FIRESTORE_WRITES, 0),
                firestore_ttl_deletes=1 + pe.get(metering.FIRESTORE_WRITES, 0),
                tasks_creates=tq.get(metering.TASKS_CREATE_CALLS, 0),
                tasks_deliveries=deliveries,
                pubsub_publishes=ps.get(metering.PUBSUB_PUBLISHES, 0),
                pubsub_deliveries=len(received),
                pubsub_message_bytes=size,
                subscriber_writes=pe.get(metering.FIRESTORE_WRITES, 0),
            )

        return [
            one_job("succeeded first time", "cost-ok", {}),
            one_job("retried once", "cost-retry", {"failure": "transient", "times": 1}),
        ]
    finally:
        publisher_api.stop()
        subscriber.close()
        db.close()  # type: ignore[no-untyped-call]
        dispatcher.stop(grace_s=1.0)


def main() -> None:
    logging.basicConfig(level=logging.ERROR)  # the worker's per-attempt logs are noise here
    costs = run()
    print(f"{'':24}{'reads':>6}{'writes':>7}{'TTL del':>8}{'task ops':>9}{'publish':>8}"
          f"{'push':>5}{'bytes':>6}{'sub wr':>7}   $ per million jobs")  # fmt: skip
    for c in costs:
        dollars = c.dollars_per_million()
        total = sum(dollars.values())
        print(
            f"{c.label:<24}{c.firestore_reads:>6}{c.firestore_writes:>7}"
            f"{c.firestore_ttl_deletes:>8}{c.tasks_creates + c.tasks_deliveries:>9}"
            f"{c.pubsub_publishes:>8}{c.pubsub_deliveries:>5}{c.pubsub_message_bytes:>6}"
            f"{c.subscriber_writes:>7}   {total:6.2f} = "
            + " + ".join(f"{k} {v:.2f}" for k, v in dollars.items())
        )


if __name__ == "__main__":
    main()
