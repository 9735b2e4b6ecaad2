"""A push's outcome survives a bus turn (or the last one, at stop) that fails.

The bus records the outcomes of ended pushes and claims the next deliveries in one
transaction. When that transaction does not commit, the outcomes it held must wait for
the next turn: a lost acknowledgement leaves the delivery leased until the lease runs
out, then pushes it again (a duplicate delivery); a lost refusal forgets the delivery's
backoff and last answer (and, on its last attempt, dead-letters it as an expired lease).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from localcloud.pubsub.deliveries import LEASE_EXPIRED, PushDelivery
from localcloud.pubsub.push_bus import Bus, Endpoint
from localcloud.pubsub.table_subscription import TableSubscription
from services.analytics.recorder import SUBSCRIBER
from shared.adapters.embedded.processed_events import SqliteProcessedEvents
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.config.subscriptions import SubscriptionConfig, SubscriptionKind
from shared.domain.errors import DependencyUnavailable
from tests.contract.harness import eventually
from tests.contract.harness_events import sample_event
from tests.support.failing_commit import fail_the_first_commit_that_grew
from tests.support.http_target import RecordingTarget, Reply, replies
from tests.unit.test_bus_pump import publisher, subscription

# A lease runs out 0.6 s after its claim: a lost outcome shows as a second push soon after,
# while the bus tries a failing store again after its poll interval (0.05 s).
SHORT_ACK_S = 0.5
LEASE_GRACE_S = 0.1
BUS_PUMP = "bus-pump"


@pytest.fixture
def db(tmp_path: Path) -> SqliteDatabase:
    return SqliteDatabase(tmp_path / "bus.sqlite3")


@pytest.fixture
def target() -> Iterator[RecordingTarget]:
    with RecordingTarget() as server:
        yield server


def short_lease(**kwargs: Any) -> SubscriptionConfig:
    return subscription(ack_s=SHORT_ACK_S, **kwargs)


def make_bus(
    db: SqliteDatabase,
    config: SubscriptionConfig,
    url: str = "",
    *,
    record_delay_s: float = 0.05,
    poll_interval_s: float = 0.05,
    tables: dict[str, TableSubscription] | None = None,
) -> Bus:
    return Bus(
        db,
        {} if tables else {config.name: Endpoint(config, url)},
        poll_interval_s=poll_interval_s,
        lease_grace_s=LEASE_GRACE_S,
        record_delay_s=record_delay_s,
        tables=tables,
    )


@contextmanager
def started(bus: Bus) -> Iterator[Bus]:
    bus.start()
    try:
        yield bus
    finally:
        bus.stop(timeout_s=5)


class Recordings:
    """Counts the outcomes the store is asked to record (ack / retry_at / dead_letter)."""

    def __init__(self, bus: Bus, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        self.fail_calls: set[int] = set()
        for name in ("ack", "retry_at", "dead_letter"):
            monkeypatch.setattr(bus.store, name, self._counted(getattr(bus.store, name)))

    def _counted(self, method: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            if self.count in self.fail_calls:
                raise DependencyUnavailable("embedded store: ack failed: database is locked")
            return method(*args, **kwargs)

        return counted


STORE_LOCKED = DependencyUnavailable("embedded store: claim failed: database is locked")


def fail_claims_after_a_recording(
    db: SqliteDatabase,
    bus: Bus,
    monkeypatch: pytest.MonkeyPatch,
    error: Exception = STORE_LOCKED,
) -> list[str]:
    """The first claim of a turn that recorded an outcome raises `error` (the turn rolls back).

    Returns where it failed: the name of the thread whose transaction it was.
    """
    recordings = Recordings(bus, monkeypatch)
    failed: list[str] = []
    claim = bus.store.claim

    def claim_or_fail(*args: Any, **kwargs: Any) -> Any:
        if recordings.count and not failed:
            failed.append(threading.current_thread().name)
            raise error
        return claim(*args, **kwargs)

    monkeypatch.setattr(bus.store, "claim", claim_or_fail)
    return failed


def fail_the_commit_after_a_recording(
    db: SqliteDatabase, bus: Bus, monkeypatch: pytest.MonkeyPatch
) -> list[str]:
    """The first transaction that recorded an outcome does not commit (rolled back).

    Returns where it failed: the name of the thread whose transaction it was.
    """
    recordings = Recordings(bus, monkeypatch)
    return fail_the_first_commit_that_grew(db, monkeypatch, lambda: recordings.count)


FAULTS: dict[str, Callable[[SqliteDatabase, Bus, pytest.MonkeyPatch], list[str]]] = {
    "claim fails": fail_claims_after_a_recording,
    # Not the store's fault (a bug): the pump carries on all the same.
    "claim fails unexpectedly": lambda db, bus, mp: fail_claims_after_a_recording(
        db, bus, mp, RuntimeError("unexpected")
    ),
    "commit fails": fail_the_commit_after_a_recording,
}


def delivery_row(db: SqliteDatabase, message_id: str) -> dict[str, Any] | None:
    sql = "SELECT * FROM bus_deliveries WHERE message_id = ?"
    row = db.connection().execute(sql, (message_id,)).fetchone()
    return dict(row) if row else None


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_an_ack_recorded_in_a_failed_turn_is_recorded_again_not_pushed_again(
    db: SqliteDatabase, target: RecordingTarget, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    config = short_lease()
    publisher(db, config).publish(sample_event())
    bus = make_bus(db, config, target.url)
    failed = FAULTS[fault](db, bus, monkeypatch)
    with started(bus):
        target.wait_for(1, timeout=5)
        eventually(lambda: bus.store.pending() == 0, timeout=8)
    assert failed == [BUS_PUMP]  # the fault did hit a turn holding the outcome
    # An acknowledged delivery is gone from the store: the count is final.
    assert len(target.requests) == 1
    assert bus.store.dead_letters() == []


def test_a_refused_push_keeps_its_backoff_and_answer_across_a_failed_turn(
    db: SqliteDatabase, target: RecordingTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A backoff far longer than the lease: only a lost refusal is pushed again soon.
    target.responder = replies(Reply(500))
    config = short_lease(min_s=30.0, max_s=30.0)
    message_id = publisher(db, config).publish(sample_event())
    bus = make_bus(db, config, target.url)
    failed = fail_claims_after_a_recording(db, bus, monkeypatch)
    with started(bus):
        target.wait_for(1, timeout=5)
        eventually(lambda: (delivery_row(db, message_id) or {}).get("last_status") == 500)
        time.sleep(1.5)  # more than two leases: a lost refusal would be pushed again
    assert failed == [BUS_PUMP]
    assert len(target.requests) == 1
    row = delivery_row(db, message_id)
    assert row is not None
    assert (row["attempts"], row["lease_until"], row["last_status"]) == (1, None, 500)
    assert row["last_error"].startswith("HTTP 500")
    assert row["next_attempt_at"] > time.time() + 20  # the backoff, not a lapsed lease


def test_a_last_refusal_in_a_failed_turn_is_dead_lettered_with_its_answer(
    db: SqliteDatabase, target: RecordingTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    target.responder = replies(Reply(503))
    config = short_lease(attempts=1)
    publisher(db, config).publish(sample_event())
    bus = make_bus(db, config, target.url)
    failed = fail_the_commit_after_a_recording(db, bus, monkeypatch)
    with started(bus):
        target.wait_for(1, timeout=5)
        eventually(lambda: bus.store.dead_letters() != [], timeout=8)
    assert failed == [BUS_PUMP]
    [letter] = bus.store.dead_letters()
    # A lost refusal would read as a lease that ran out: no status, LEASE_EXPIRED.
    assert letter.last_error != LEASE_EXPIRED
    assert (letter.attempts, letter.last_status) == (1, 503)
    assert len(target.requests) == 1


def test_an_outcome_whose_own_recording_fails_loses_none_of_the_turn(
    db: SqliteDatabase, target: RecordingTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two pushes end before the turn (record_delay_s); the second one's ack fails, which
    # rolls the first one's back too: both must be recorded by a later turn.
    config = short_lease()
    events = publisher(db, config)
    for key in ("key-1", "key-2"):
        events.publish(sample_event(key=key))
    bus = make_bus(db, config, target.url, record_delay_s=0.3)
    recordings = Recordings(bus, monkeypatch)
    recordings.fail_calls = {2}
    with started(bus):
        target.wait_for(2, timeout=5)
        eventually(lambda: bus.store.pending() == 0, timeout=8)
    assert recordings.count >= 3  # the failed ack was tried again
    assert len(target.requests) == 2
    assert len({r.json["message"]["messageId"] for r in target.requests}) == 2


def test_the_last_outcomes_survive_a_failed_commit_at_stop(
    db: SqliteDatabase, target: RecordingTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The outcome waits for the stop (no turn records it before); that recording fails
    # once and is tried again within the stop's timeout.
    # (An ack deadline of 10 s: no turn looks at the delivery again before the stop.)
    config = subscription(ack_s=10.0)
    publisher(db, config).publish(sample_event())
    bus = make_bus(db, config, target.url, record_delay_s=30.0, poll_interval_s=30.0)
    failed = fail_the_commit_after_a_recording(db, bus, monkeypatch)
    # The push is answered only once the pump has gone to sleep for its 30 s: however
    # slow the machine, no turn of the pump finds the outcome before the stop.
    idle = threading.Event()
    idle_wait = bus._idle_wait

    def going_idle() -> float:
        idle.set()
        return idle_wait()

    monkeypatch.setattr(bus, "_idle_wait", going_idle)
    target.responder = lambda _request: Reply() if idle.wait(5) else Reply(status=500)
    with started(bus):
        target.wait_for(1, timeout=5)
        # The stop comes only once the pump sleeps: a stop before its second turn ends
        # it without sleeping, and the push would wait in vain.
        assert idle.wait(5), "the pump never went to sleep"
    assert failed == [threading.current_thread().name]  # the stop's recording
    assert bus.store.pending() == 0
    assert bus.store.dead_letters() == []


def test_an_outcome_that_cannot_be_recorded_holds_no_other_back(
    db: SqliteDatabase, target: RecordingTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Recording the poisoned message's ack always fails (not the store's fault, and
    # dooming the turn's transaction): it is dropped alone, its lease runs out and it is
    # pushed again; the outcomes of its turn and the messages after it are recorded.
    config = short_lease()
    events = publisher(db, config)
    poisoned = events.publish(sample_event(key="poisoned"))
    fine = events.publish(sample_event(key="fine"))
    bus = make_bus(db, config, target.url, record_delay_s=0.3)
    ack = bus.store.ack

    def ack_or_fail(delivery: PushDelivery) -> None:
        if delivery.message_id == poisoned:
            with db.transaction():
                raise ValueError("an outcome that cannot be recorded")
        ack(delivery)

    monkeypatch.setattr(bus.store, "ack", ack_or_fail)
    with started(bus):
        target.wait_for(2, timeout=5)
        eventually(lambda: delivery_row(db, fine) is None, timeout=5)
        later = events.publish(sample_event(key="later"))
        eventually(lambda: delivery_row(db, later) is None, timeout=5)
        eventually(lambda: pushed(target).count(poisoned) >= 2, timeout=5)
    assert pushed(target).count(fine) == 1
    assert pushed(target).count(later) == 1


def test_a_table_write_acknowledged_in_a_failed_turn_is_not_written_again(
    db: SqliteDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A BigQuery subscription's outcome waits for the turn as a push's does.
    config = subscription(name="analytics", ack_s=SHORT_ACK_S)
    config = SubscriptionConfig(**{**vars(config), "kind": SubscriptionKind.BIGQUERY})
    records = SqliteProcessedEvents(db)
    writes: list[str] = []
    add = records.add

    def counted_add(subscriber: str, event_id: str, record: dict[str, object]) -> bool:
        writes.append(event_id)
        return add(subscriber, event_id, record)

    monkeypatch.setattr(records, "add", counted_add)
    event = sample_event()
    publisher(db, config).publish(event)
    bus = make_bus(db, config, tables={config.name: TableSubscription(config, records)})
    failed = fail_claims_after_a_recording(db, bus, monkeypatch)
    with started(bus):
        eventually(lambda: bus.store.pending() == 0, timeout=8)
        time.sleep(0.1)
    assert failed == [BUS_PUMP]
    assert writes == [event.event_id]
    assert [r["event_id"] for r in records.records(SUBSCRIBER)] == [event.event_id]


def pushed(target: RecordingTarget) -> list[str]:
    return [r.json["message"]["messageId"] for r in target.requests]
