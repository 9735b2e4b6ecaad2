"""The embedded bus pushing to a real loopback HTTP target: envelope, retries, dead letters."""

from __future__ import annotations

import base64
import itertools
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from localcloud.pubsub.deliveries import (
    LEASE_EXPIRED,
    DeadLetter,
    PushDelivery,
    SqliteDeliveryStore,
)
from localcloud.pubsub.push_bus import Bus, Endpoint, backoff_delay
from shared.adapters.embedded.event_publisher import SqliteEventPublisher
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.codecs.cloudevent import to_pubsub
from shared.config.subscriptions import SubscriptionConfig, TopicConfig
from tests.contract.harness import eventually
from tests.contract.harness_events import sample_event
from tests.support.failing_commit import fail_every_transaction_while
from tests.support.http_target import RecordingTarget, Reply, replies

TOKEN = "bus-push-token"


def subscription(
    name: str = "notification",
    attempts: int = 3,
    min_s: float = 0.01,
    max_s: float = 0.04,
    ack_s: float = 2.0,
) -> SubscriptionConfig:
    return SubscriptionConfig(
        name=name,
        push_path="/pubsub/push",
        ack_deadline=timedelta(seconds=ack_s),
        minimum_backoff=timedelta(seconds=min_s),
        maximum_backoff=timedelta(seconds=max_s),
        max_delivery_attempts=attempts,
    )


@pytest.fixture
def db(tmp_path: Path) -> SqliteDatabase:
    """The bus file; each thread (publisher, pump, pushes) opens its own connection."""
    return SqliteDatabase(tmp_path / "bus.sqlite3")


def publisher(db: SqliteDatabase, *configs: SubscriptionConfig) -> SqliteEventPublisher:
    topic = TopicConfig("grading-completed", {c.name: c for c in configs})
    return SqliteEventPublisher(db, topic)


@contextmanager
def running_bus(db: SqliteDatabase, *endpoints: Endpoint, token: str = TOKEN) -> Iterator[Bus]:
    bus = Bus(
        db,
        {e.config.name: e for e in endpoints},
        push_token=token,
        poll_interval_s=0.01,
        lease_grace_s=0.0,
    )
    bus.start()
    try:
        yield bus
    finally:
        bus.stop(timeout_s=5)


def test_push_envelope_matches_pubsub(db: SqliteDatabase) -> None:
    config = subscription()
    event = sample_event()
    message_id = publisher(db, config).publish(event)
    with RecordingTarget() as target, running_bus(db, Endpoint(config, target.url)):
        [request] = target.wait_for(1, timeout=5)
    data, attributes = to_pubsub(event)
    body = request.json
    message = body["message"]
    assert request.path == "/pubsub/push"
    assert request.header("Authorization") == f"Bearer {TOKEN}"
    assert request.header("Content-Type") == "application/json"
    assert base64.b64decode(message["data"]) == data
    assert message["attributes"] == attributes
    assert message["messageId"] == message["message_id"] == message_id
    assert message["publishTime"] == message["publish_time"]
    assert message["publishTime"].endswith("Z")
    assert body["subscription"] == "projects/local/subscriptions/notification"
    assert body["deliveryAttempt"] == 1


def test_without_a_token_no_authorization_is_sent(db: SqliteDatabase) -> None:
    config = subscription()
    publisher(db, config).publish(sample_event())
    with (
        RecordingTarget() as target,
        running_bus(db, Endpoint(config, target.url + "/custom/path"), token=""),
    ):
        [request] = target.wait_for(1, timeout=5)
    assert request.header("Authorization") is None
    assert request.path == "/custom/path"


@pytest.mark.parametrize("status", [200, 201, 202, 204])
def test_success_codes_acknowledge(db: SqliteDatabase, status: int) -> None:
    config = subscription()
    publisher(db, config).publish(sample_event())
    with (
        RecordingTarget(replies(status)) as target,
        running_bus(db, Endpoint(config, target.url)) as bus,
    ):
        target.wait_for(1, timeout=5)
        eventually(lambda: bus.store.pending() == 0)
        time.sleep(0.1)
    assert len(target.requests) == 1
    assert bus.store.dead_letters() == []


def test_failures_are_redelivered_with_growing_backoff(db: SqliteDatabase) -> None:
    config = subscription(attempts=5, min_s=0.1, max_s=0.5)
    publisher(db, config).publish(sample_event())
    with (
        RecordingTarget(replies(500, 503, 204)) as target,
        running_bus(db, Endpoint(config, target.url)) as bus,
    ):
        requests = target.wait_for(3, timeout=5)
        eventually(lambda: bus.store.pending() == 0)
    assert [r.json["deliveryAttempt"] for r in requests] == [1, 2, 3]
    gaps = [b.received_at - a.received_at for a, b in itertools.pairwise(requests)]
    assert gaps[0] >= 0.1  # minimum_backoff is a floor, whatever the jitter
    assert gaps[1] >= 0.16  # 2 x 0.1 s, less at most 20% jitter
    assert len({r.json["message"]["messageId"] for r in requests}) == 1


@pytest.mark.parametrize(
    ("first", "config"),
    [
        (Reply(status=302, headers={"Location": "/elsewhere"}), subscription()),
        (Reply(status=204, delay_s=0.6), subscription(ack_s=0.2)),  # answered too late
        (Reply(status=400), subscription()),
    ],
    ids=["redirect", "ack-deadline", "client-error"],
)
def test_other_outcomes_are_failures(
    db: SqliteDatabase, first: Reply, config: SubscriptionConfig
) -> None:
    publisher(db, config).publish(sample_event())
    with (
        RecordingTarget(replies(first, Reply(status=204))) as target,
        running_bus(db, Endpoint(config, target.url)) as bus,
    ):
        requests = target.wait_for(2, timeout=5)
        eventually(lambda: bus.store.pending() == 0)
    assert [r.path for r in requests] == ["/pubsub/push", "/pubsub/push"]
    assert bus.store.dead_letters() == []


def test_dead_letter_after_max_delivery_attempts(
    db: SqliteDatabase, caplog: pytest.LogCaptureFixture
) -> None:
    config = subscription(attempts=3)
    event = sample_event()
    message_id = publisher(db, config).publish(event)
    with (
        caplog.at_level(logging.INFO),
        RecordingTarget(replies(500)) as target,
        running_bus(db, Endpoint(config, target.url)) as bus,
    ):
        target.wait_for(3, timeout=5)
        eventually(lambda: bus.store.dead_letters() != [])
        time.sleep(0.15)  # several backoffs: nothing more may arrive
    assert len(target.requests) == 3
    [letter] = bus.store.dead_letters()
    assert (letter.message_id, letter.subscription) == (message_id, "notification")
    assert (letter.attempts, letter.last_status) == (3, 500)
    assert letter.last_error is not None and letter.last_error.startswith("HTTP 500")
    assert (letter.event_id, letter.job_id) == (event.event_id, event.job_id)
    assert bus.store.pending() == 0
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert [r.getMessage().split(":")[0] for r in errors] == [
        "message dead-lettered after 3 attempts"
    ]


def test_connection_errors_are_failures(db: SqliteDatabase) -> None:
    config = subscription(attempts=2)
    publisher(db, config).publish(sample_event())
    with RecordingTarget() as closed:
        url = closed.url  # the port is free again once the server has stopped
    with running_bus(db, Endpoint(config, url)) as bus:
        eventually(lambda: bus.store.dead_letters() != [], timeout=5)
    [letter] = bus.store.dead_letters()
    assert letter.last_status is None
    assert letter.last_error is not None and "ConnectionError" in letter.last_error


def test_published_before_the_bus_starts_is_delivered(db: SqliteDatabase) -> None:
    config = subscription()
    publisher(db, config).publish(sample_event())
    with RecordingTarget() as target, running_bus(db, Endpoint(config, target.url)):
        target.wait_for(1, timeout=5)


def test_pending_redelivery_survives_a_restart(db: SqliteDatabase) -> None:
    config = subscription(min_s=0.3, max_s=0.3)
    publisher(db, config).publish(sample_event())
    with RecordingTarget(replies(500, 204)) as target:
        with running_bus(db, Endpoint(config, target.url)) as first:
            target.wait_for(1, timeout=5)
            eventually(lambda: first.store.pending() == 1 and _unleased(db))
        reopened = SqliteDatabase(db.path)  # as a restarted process would
        with running_bus(reopened, Endpoint(config, target.url)) as second:
            requests = target.wait_for(2, timeout=5)
            eventually(lambda: second.store.pending() == 0)
    assert [r.json["deliveryAttempt"] for r in requests] == [1, 2]


def _unleased(db: SqliteDatabase) -> bool:
    sql = "SELECT COUNT(*) FROM bus_deliveries WHERE lease_until IS NULL"
    return int(db.connection().execute(sql).fetchone()[0]) == 1


def test_a_delivery_leased_by_a_dead_bus_is_redelivered(db: SqliteDatabase) -> None:
    config = subscription(ack_s=0.05)
    publisher(db, config).publish(sample_event())
    store = SqliteDeliveryStore(db)
    [abandoned], _ = store.claim({"notification": config}, 10, time.time(), lease_grace_s=0.0)
    time.sleep(0.1)  # the lease runs out without an outcome: the bus died mid-push
    # The next bus leases for longer, so a slow machine cannot expire its push too.
    patient = subscription(ack_s=5)
    with RecordingTarget() as target, running_bus(db, Endpoint(patient, target.url)) as bus:
        [request] = target.wait_for(1, timeout=5)
        eventually(lambda: bus.store.pending() == 0)
    assert abandoned.attempt == 1
    assert request.json["deliveryAttempt"] == 2


def test_an_expired_lease_on_the_last_attempt_is_dead_lettered(db: SqliteDatabase) -> None:
    config = subscription(attempts=1, ack_s=0.05)
    publisher(db, config).publish(sample_event())
    store = SqliteDeliveryStore(db)
    store.claim({"notification": config}, 10, time.time(), lease_grace_s=0.0)
    time.sleep(0.1)
    with RecordingTarget() as target, running_bus(db, Endpoint(config, target.url)) as bus:
        eventually(lambda: bus.store.dead_letters() != [])
    assert target.requests == []
    [letter] = store.dead_letters()
    assert (letter.attempts, letter.last_error) == (1, LEASE_EXPIRED)


def test_a_late_outcome_of_a_lost_lease_changes_nothing(db: SqliteDatabase) -> None:
    config = subscription(ack_s=0.01)
    publisher(db, config).publish(sample_event())
    store = SqliteDeliveryStore(db)
    [stale], _ = store.claim({"notification": config}, 10, time.time(), lease_grace_s=0.0)
    time.sleep(0.05)
    [fresh], _ = store.claim({"notification": config}, 10, time.time(), lease_grace_s=5.0)
    store.dead_letter(stale, 500, "too late")
    store.ack(stale)
    assert store.pending() == 1 and store.dead_letters() == []
    store.ack(fresh)
    assert store.pending() == 0


def test_publishing_twice_makes_two_messages_with_one_event_id(db: SqliteDatabase) -> None:
    config = subscription()
    bus_publisher = publisher(db, config)
    event = sample_event()
    ids = {bus_publisher.publish(event), bus_publisher.publish(event)}
    with RecordingTarget() as target, running_bus(db, Endpoint(config, target.url)):
        requests = target.wait_for(2, timeout=5)
    assert len(ids) == 2
    assert {r.json["message"]["messageId"] for r in requests} == ids
    assert {r.json["message"]["attributes"]["ce-id"] for r in requests} == {event.event_id}


def test_every_subscription_gets_its_own_copy(db: SqliteDatabase) -> None:
    notification, analytics = subscription("notification"), subscription("analytics")
    publisher(db, notification, analytics).publish(sample_event())
    with (
        RecordingTarget(replies(500)) as failing,
        RecordingTarget() as ok,
        running_bus(db, Endpoint(notification, failing.url), Endpoint(analytics, ok.url)) as bus,
    ):
        ok.wait_for(1, timeout=5)
        eventually(lambda: bus.store.dead_letters() != [])
    assert len(ok.requests) == 1 and len(failing.requests) == 3
    assert [d.subscription for d in bus.store.dead_letters()] == ["notification"]
    assert ok.requests[0].json["subscription"].endswith("/analytics")


def test_stop_lets_an_in_flight_push_finish(db: SqliteDatabase) -> None:
    config = subscription()
    publisher(db, config).publish(sample_event())
    with RecordingTarget(lambda _r: Reply(status=204, delay_s=0.3)) as target:
        with running_bus(db, Endpoint(config, target.url)) as bus:
            target.wait_for(1, timeout=5)
        assert bus.store.pending() == 0


def test_backoff_doubles_up_to_the_maximum() -> None:
    config = subscription(min_s=10, max_s=600)
    assert [config.backoff(n).total_seconds() for n in (1, 2, 3, 6, 7, 50)] == [
        10,
        20,
        40,
        320,
        600,
        600,
    ]
    delays = [backoff_delay(config, 3, jitter=0.2) for _ in range(200)]
    assert all(32 <= d <= 40 for d in delays)
    assert len(set(delays)) > 1
    assert backoff_delay(config, 1, jitter=0.5) == 10  # never below minimum_backoff


def _counting_claims(bus: Bus) -> list[int]:
    """Record how many deliveries each of the pump's turns claimed."""
    claims: list[int] = []
    claim = bus.store.claim

    def counted(*args: Any, **kwargs: Any) -> tuple[list[PushDelivery], list[DeadLetter]]:
        found = claim(*args, **kwargs)
        claims.append(len(found[0]))
        return found

    bus.store.claim = counted  # type: ignore[method-assign]
    return claims


def test_a_push_that_ends_leaves_its_outcome_for_the_next_turn(db: SqliteDatabase) -> None:
    # With slots still free, an ended push does not cost a turn (a transaction) of its
    # own: its ack is recorded with the next turn's work, within record_delay_s. The
    # answer takes a moment, so the push ends after the pump's follow-up turn (a turn
    # that claimed something looks again at once) and only a turn of its own could
    # record it.
    config = subscription(ack_s=10.0)
    with RecordingTarget(lambda _request: Reply(204, delay_s=0.3)) as target:
        bus = Bus(
            db,
            {"notification": Endpoint(config, target.url)},
            poll_interval_s=30.0,
            record_delay_s=30.0,
        )
        bus.start()
        try:
            claims = _counting_claims(bus)
            publisher(db, config).publish(sample_event())
            target.wait_for(1, timeout=5)
            time.sleep(0.8)
            assert sum(claims) == 1
            assert bus.store.pending() == 1  # acknowledged, not yet recorded
        finally:
            bus.stop(timeout_s=5)
    assert bus.store.pending() == 0  # recorded on the way out


def test_outcomes_are_recorded_within_the_record_delay(db: SqliteDatabase) -> None:
    config = subscription(ack_s=10.0)
    with RecordingTarget() as target:
        bus = Bus(
            db,
            {"notification": Endpoint(config, target.url)},
            poll_interval_s=30.0,
            record_delay_s=0.05,
        )
        bus.start()
        try:
            publisher(db, config).publish(sample_event())
            target.wait_for(1, timeout=5)
            eventually(lambda: bus.store.pending() == 0, timeout=5)
        finally:
            bus.stop(timeout_s=5)


def test_a_push_that_frees_the_last_slot_wakes_the_pump(db: SqliteDatabase) -> None:
    config = subscription(ack_s=10.0)
    events = publisher(db, config)
    with RecordingTarget() as target:
        bus = Bus(
            db,
            {"notification": Endpoint(config, target.url)},
            concurrency=1,
            poll_interval_s=30.0,
            record_delay_s=30.0,
        )
        for key in ("key-1", "key-2", "key-3"):
            events.publish(sample_event(key=key))
        bus.start()
        try:
            target.wait_for(3, timeout=5)
        finally:
            bus.stop(timeout_s=5)
    assert bus.store.pending() == 0


def test_a_slow_push_in_flight_costs_no_turns(db: SqliteDatabase) -> None:
    # While a push is in flight the pump looks every record_delay_s for outcomes, but
    # takes a turn (a transaction) only when there is one or once per poll interval.
    config = subscription(ack_s=10.0)
    with RecordingTarget(replies(Reply(delay_s=1.0))) as target:
        bus = Bus(
            db,
            {"notification": Endpoint(config, target.url)},
            poll_interval_s=30.0,
            record_delay_s=0.01,
        )
        bus.start()
        try:
            claims = _counting_claims(bus)
            publisher(db, config).publish(sample_event())
            target.wait_for(1, timeout=5)
            time.sleep(0.5)
            turns_while_in_flight = len(claims)
            eventually(lambda: bus.store.pending() == 0, timeout=5)
        finally:
            bus.stop(timeout_s=5)
    # The publish's wake-up, the turn after its claim; none of the ~50 looks in between.
    assert turns_while_in_flight <= 3, claims


def test_a_failing_store_is_retried_after_the_poll_interval(
    db: SqliteDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Outcomes waiting to be recorded do not make the pump retry a failing store at once.
    config = subscription(ack_s=10.0)
    broken = threading.Event()

    def break_then_answer(_request: object) -> Reply:
        broken.set()  # the store fails from the push on: its outcome cannot be recorded
        return Reply()

    publisher(db, config).publish(sample_event())
    with RecordingTarget(break_then_answer) as target:
        bus = Bus(
            db,
            {"notification": Endpoint(config, target.url)},
            poll_interval_s=0.3,
            record_delay_s=0.01,
        )
        failed = fail_every_transaction_while(db, monkeypatch, broken)
        bus.start()
        try:
            target.wait_for(1, timeout=5)
            time.sleep(0.7)
            attempts = len(failed)
        finally:
            broken.clear()
            bus.stop(timeout_s=5)
    assert 1 <= attempts <= 4, attempts
