"""Measure the billable Google Cloud operations of one job, and price them per million jobs.

    .venv/bin/python bench/cost_per_job.py

Runs the service layer as the intake wires it (the client's API key looked up, admission
limits and fair spacing from the shipped settings, IntakeService.submit), then
WorkerService.handle per delivery, on the Google adapters against the official Firestore
and Pub/Sub emulators and the local Cloud Tasks API server. The adapters count their own
calls (`adapter.meter`); this script plays Cloud Tasks' push (counting each delivery
attempt it makes) and pulls what each subscription of `shared/config/subscriptions.json`
receives, applying the subscription's filter as Pub/Sub does (the emulator keeps a filter
but does not apply it): a message the filter does not admit is acknowledged and only
counted (Pub/Sub bills its delivery, but pushes nothing); a push subscription's event is
handled by the `notification` service's `Notifier` on its own Firestore stores (its dedup
check and record, its read of the job, and for a job with a callback URL the client's
webhook secrets and a signed webhook to an HTTPS receiver on loopback); a BigQuery
subscription's is only counted (terraform/pubsub.tf: Pub/Sub writes it into the table
itself). Prices: docs/cost.md.
"""

from __future__ import annotations

import base64
import logging
import os
import sys
import tempfile
from contextlib import ExitStack
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
from shared.config.subscriptions import bigquery_subscriptions, load_subscriptions
from shared.domain.admission import AdmissionLimits
from shared.domain.api_keys import ApiKey
from shared.domain.ids import task_name_for
from shared.domain.job import GradingRequest
from shared.http.client_keys import ApiKeyAuthenticator
from shared.service_layer.intake import IntakeService
from shared.service_layer.worker import TaskDelivery, Verdict, WorkerService

PROJECT = "demo-gradeq-cost"

# List prices in USD (see docs/cost.md for sources and date).
FIRESTORE_READ = 0.03 / 100_000
FIRESTORE_WRITE = 0.09 / 100_000
FIRESTORE_DELETE = 0.01 / 100_000
TASKS_OPERATION = 0.40 / 1_000_000
PUBSUB_BYTE = 40.0 / 2**40
BIGQUERY_SUBSCRIPTION_BYTE = 50.0 / 2**40
PUBSUB_MIN_REQUEST_BYTES = 1000

#: Subscriptions that are Pub/Sub BigQuery subscriptions on Google Cloud (`"kind":
#: "bigquery"` in the subscriptions file; terraform/pubsub.tf gives them a
#: `bigquery_config`); the others push to a subscriber service.
BIGQUERY_SUBSCRIPTIONS = bigquery_subscriptions(load_subscriptions())


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
    bigquery_writes: int
    pubsub_message_bytes: int
    subscriber_writes: int
    #: Messages a subscription's filter acknowledged at once: billed as deliveries, no push.
    pubsub_filtered: int = 0

    def dollars_per_million(self) -> dict[str, float]:
        million = 1_000_000
        # Billed as at least 1000 bytes a request; for BigQuery subscriptions an upper bound.
        billed = max(PUBSUB_MIN_REQUEST_BYTES, self.pubsub_message_bytes)
        pubsub_dollars = billed * (
            (self.pubsub_publishes + self.pubsub_deliveries + self.pubsub_filtered) * PUBSUB_BYTE
            + self.bigquery_writes * BIGQUERY_SUBSCRIPTION_BYTE
        )
        return {
            "firestore": million
            * (
                (self.firestore_reads) * FIRESTORE_READ
                + (self.firestore_writes + self.subscriber_writes) * FIRESTORE_WRITE
                + self.firestore_ttl_deletes * FIRESTORE_DELETE
            ),
            "cloud_tasks": million * (self.tasks_creates + self.tasks_deliveries) * TASKS_OPERATION,
            "pubsub": million * pubsub_dollars,
        }


def run() -> list[JobCost]:
    """Drive a successful job, a once-retried one, a job whose API key is remembered, and
    a job with a webhook."""
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

    from localcloud.tls_receiver import make_private_ca, tls_receiver
    from services.notification.client_secrets import ClientSecrets
    from services.notification.notifier import Notifier
    from services.notification.sealing import Sealer
    from services.notification.webhook import WebhookSender
    from shared.adapters.google.api_key_store import FirestoreApiKeyStore
    from shared.adapters.google.clients import publisher_client
    from shared.adapters.google.event_publisher import PubSubEventPublisher
    from shared.adapters.google.job_store import FirestoreJobStore
    from shared.adapters.google.processed_events import FirestoreProcessedEvents
    from shared.adapters.google.task_queue import CloudTasksQueue
    from shared.adapters.google.webhook_secret_store import FirestoreWebhookSecretStore
    from shared.adapters.key_cache import FoundKeys
    from shared.codecs.cloudevent import from_pubsub
    from shared.http.callback_guard import CallbackGuard

    queues = load_queues()
    grading = queues["grading"]
    topic_config = load_subscriptions()
    dispatcher = Dispatcher(SqliteDatabase(tmp / "tasks.sqlite3"), queues, paused=True)
    dispatcher.start()
    db = firestore.Client(project=PROJECT)
    publisher_api, subscriber = publisher_client(), pubsub_v1.SubscriberClient()
    ca = make_private_ca(tmp)
    receiver = ExitStack()
    webhook_url, webhooks = receiver.enter_context(tls_receiver(ca))
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
        settings = Settings(grader_timeout_s=60.0)

        def job_store() -> FirestoreJobStore:
            return FirestoreJobStore(
                db,
                settings.jobs_collection,
                ttl=timedelta(days=settings.job_ttl_days),
                counters_collection=settings.counters_collection,
            )

        # The intake and the worker are separate services: each has its own store, so the
        # worker's claim reads the job the intake wrote, as deployed.
        store, worker_store = job_store(), job_store()
        # The intake remembers a key it found for KEY_CACHE_S; here time stands still, so
        # whether a job's key is read is the row's choice (`key_remembered`), not timing's.
        found_keys = FoundKeys(clock=lambda: 0.0)
        keys = FirestoreApiKeyStore(db, settings.api_keys_collection, found=found_keys)
        processed = FirestoreProcessedEvents(db)
        # The notification service, as services/notification/app.py builds it: its own job
        # store (it reads the job's callback URL) and webhook secrets. Its filter admits only
        # the job with a callback URL, whose webhook goes to the receiver on loopback.
        notification_jobs = job_store()
        sealer = Sealer.from_setting(base64.b64encode(os.urandom(32)).decode())
        secret_store = FirestoreWebhookSecretStore(db)
        client_secrets = ClientSecrets(secret_store, sealer, SystemClock())
        client_secrets.create("client-a")
        notifier = Notifier(
            processed,
            notification_jobs,
            client_secrets,
            WebhookSender(
                settings.webhook_timeout_s,
                CallbackGuard(allow_loopback=True),
                extra_ca_bundle=ca.bundle,
            ),
        )
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
        # As services/intake/app.py builds it, with the shipped settings.
        limits = AdmissionLimits(
            settings.max_active_jobs_per_client,
            settings.max_backlog,
            settings.admission_retry_after_s,
        )
        intake = IntakeService(store, queue, publisher, clock, limits, settings.fair_spacing())
        authenticator = ApiKeyAuthenticator(keys, clock)
        api_key, record = ApiKey.issue("client-a", clock.now())
        keys.add(record)
        worker = WorkerService(
            worker_store, publisher, RubricGrader(), clock, grading.retry_config, settings.budget()
        )
        meters = (
            store.meter,
            worker_store.meter,
            queue.meter,
            publisher.meter,
            processed.meter,
            keys.meter,
            notification_jobs.meter,
            secret_store.meter,
        )

        def one_job(
            label: str,
            key: str,
            simulate: dict[str, object],
            key_remembered: bool = False,
            callback_url: str | None = None,
        ) -> JobCost:
            if not key_remembered:
                found_keys.clear()  # a client's first job, or past the key's memory
            for meter in meters:
                meter.reset()
            request = GradingRequest(
                submission_id=f"sub-{key}",
                answer="Plants turn light into chemical energy with chlorophyll.",
                rubric=("mentions light", "mentions chlorophyll"),
                metadata={"simulate": simulate} if simulate else {},
                callback_url=callback_url,
            )
            client_id = authenticator.client_for(api_key)  # each request's key lookup
            job = intake.submit(client_id, key, request).job
            deliveries = 0
            verdict = Verdict.RETRY
            while verdict is Verdict.RETRY:  # Cloud Tasks redelivers the same task
                outcome = worker.handle(
                    TaskDelivery(job.id, task_name_for(job.id, 0), retry_count=deliveries)
                )
                deliveries += 1
                verdict = outcome.verdict
            received, pushes, bigquery_writes, filtered = [], 0, 0, 0
            for path in subscriptions:  # each subscription receives the event once
                response = subscriber.pull(subscription=path, max_messages=10, timeout=10)
                subscriber.acknowledge(
                    subscription=path, ack_ids=[m.ack_id for m in response.received_messages]
                )
                name = path.rsplit("/", 1)[1]
                for m in response.received_messages:
                    received.append(m.message)
                    if not topic_config.subscriptions[name].admits(dict(m.message.attributes)):
                        filtered += 1  # Pub/Sub acknowledges it for the subscription
                        continue
                    if name in BIGQUERY_SUBSCRIPTIONS:
                        bigquery_writes += 1
                        continue
                    pushes += 1
                    assert name == "notification", f"no subscriber here for {name}"
                    notifier.handle(from_pubsub(m.message.data, dict(m.message.attributes)))
            intake_fs, worker_fs, tq, ps, pe, ak, nj, ws = (m.snapshot() for m in meters)
            fs = {k: intake_fs.get(k, 0) + worker_fs.get(k, 0) for k in {*intake_fs, *worker_fs}}
            size = max((len(m.data) + sum(len(k) + len(v) for k, v in m.attributes.items())
                        for m in received), default=0)  # fmt: skip
            return JobCost(
                label=label,
                firestore_reads=fs.get(metering.FIRESTORE_READS, 0)
                + ak.get(metering.FIRESTORE_READS, 0)
                + pe.get(metering.FIRESTORE_READS, 0)
                + nj.get(metering.FIRESTORE_READS, 0)
                + ws.get(metering.FIRESTORE_READS, 0),
                firestore_writes=fs.get(metering.FIRESTORE_WRITES, 0),
                # The job and each dedup record expire; the counters never do.
                firestore_ttl_deletes=1 + pe.get(metering.FIRESTORE_WRITES, 0),
                tasks_creates=tq.get(metering.TASKS_CREATE_CALLS, 0),
                tasks_deliveries=deliveries,
                pubsub_publishes=ps.get(metering.PUBSUB_PUBLISHES, 0),
                pubsub_deliveries=pushes,
                bigquery_writes=bigquery_writes,
                pubsub_message_bytes=size,
                subscriber_writes=pe.get(metering.FIRESTORE_WRITES, 0),
                pubsub_filtered=filtered,
            )

        costs = [
            one_job("succeeds at once", "cost-ok", {}),
            one_job("retried once", "cost-retry", {"failure": "transient", "times": 1}),
            # The same client's next job within KEY_CACHE_S of its last request.
            one_job("next job, key remembered", "cost-next", {}, key_remembered=True),
            # A job naming a callback URL: the one notification's filter admits.
            one_job("with a webhook", "cost-hook", {}, callback_url=webhook_url),
        ]
        if len(webhooks) != 1:
            raise SystemExit(f"expected one webhook, the receiver got {len(webhooks)}")
        return costs
    finally:
        receiver.close()
        publisher_api.stop()
        subscriber.close()
        db.close()  # type: ignore[no-untyped-call]
        dispatcher.stop(grace_s=1.0)


def main() -> None:
    logging.basicConfig(level=logging.ERROR)  # the worker's per-attempt logs are noise here
    costs = run()
    print(f"{'':26}{'reads':>6}{'writes':>7}{'TTL del':>8}{'task ops':>9}{'publish':>8}"
          f"{'push':>5}{'BQ wr':>6}{'bytes':>6}{'sub wr':>7}{'filt':>5}"
          "   $ per million jobs")  # fmt: skip
    for c in costs:
        dollars = c.dollars_per_million()
        total = sum(dollars.values())
        print(
            f"{c.label:<26}{c.firestore_reads:>6}{c.firestore_writes:>7}"
            f"{c.firestore_ttl_deletes:>8}{c.tasks_creates + c.tasks_deliveries:>9}"
            f"{c.pubsub_publishes:>8}{c.pubsub_deliveries:>5}{c.bigquery_writes:>6}"
            f"{c.pubsub_message_bytes:>6}{c.subscriber_writes:>7}{c.pubsub_filtered:>5}"
            f"   {total:6.2f} = " + " + ".join(f"{k} {v:.2f}" for k, v in dollars.items())
        )
    print(
        "Firestore writes: the job path (writes) plus the subscribers' dedup records (sub wr); "
        f"{sorted(BIGQUERY_SUBSCRIPTIONS)}: BigQuery subscriptions (BQ wr), as deployed; "
        "filt: acknowledged by a subscription's filter (billed as a delivery, not pushed)"
    )


if __name__ == "__main__":
    main()
