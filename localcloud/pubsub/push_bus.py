"""The embedded bus's pump: deliver due messages the way Pub/Sub's subscriptions do.

A push subscription's message is POSTed to its endpoint; a BigQuery subscription's is
written into the local records by the bus itself (localcloud.pubsub.table_subscription),
with the same leases, retries and dead letters: a write that raises is a failed attempt.

Success is HTTP 102, 200, 201, 202 or 204. Anything else, a timeout (the ack deadline)
or a connection error is redelivered after an exponential backoff between the retry
policy's minimum and maximum, shortened by a random jitter of up to `jitter` (20%) so
messages that failed together do not all come back together, never below the minimum.
After `max_delivery_attempts` failed pushes the message is moved to the dead letters.
A subscription's filter is applied when the message is published (the publisher stores
no delivery for a subscription that does not admit it); one stored before is acknowledged
by the bus without a push.

The pump thread claims due deliveries and records the outcomes of finished pushes in one
transaction per turn; a pool of push threads sends them over kept-alive connections. The
publisher signals new messages after its commit (a datagram), and a push that ends wakes
the pump when it frees the last slot, so the bus only polls as a fallback. Outcomes wait
for the next turn, at most `record_delay_s` while pushes are in flight: a lease outlasts
the ack deadline, so recording an ack a little later changes nothing, and recording a
burst's outcomes together saves a transaction per push. An outcome is forgotten only once
the transaction that recorded it has committed (localcloud/outcomes.py): a turn, or the
stop, whose transaction fails keeps it for the next try, so an acknowledged message is
not pushed again when its lease runs out and a refused one keeps its backoff.

With an OIDC service account each push carries the subscription's ID token as Cloud Run
hands it to the container (signature removed), with the endpoint's base URL as audience,
as terraform sets it; otherwise the shared push token, if any.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import random
import sqlite3
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from localcloud.cloudrun import ForwardedTokens, base_url
from localcloud.http_pool import pool, send
from localcloud.outcomes import RETRY_S, PendingOutcomes
from localcloud.pubsub.deliveries import DeadLetter, PushDelivery, SqliteDeliveryStore
from localcloud.pubsub.table_subscription import TableSubscription
from shared.adapters.embedded.sqlite import SqliteDatabase, unavailable_on_error
from shared.adapters.embedded.wakeup import BUS, WakeListener
from shared.config.subscriptions import SubscriptionConfig
from shared.domain.errors import DependencyUnavailable
from shared.logs import job_context

log = logging.getLogger(__name__)

SUCCESS_CODES = frozenset({102, 200, 201, 202, 204})


@dataclass(frozen=True)
class Endpoint:
    """Where one subscription pushes, with its delivery policy."""

    config: SubscriptionConfig
    url: str

    @functools.cached_property
    def push_url(self) -> str:
        """The URL, with the subscription's push_path when only a base URL was given."""
        if urlsplit(self.url).path in ("", "/"):
            return self.url.rstrip("/") + self.config.push_path
        return self.url

    @functools.cached_property
    def audience(self) -> str:
        """The audience of the subscription's OIDC token: the receiving service's URL."""
        return base_url(self.url)


def backoff_delay(config: SubscriptionConfig, failed_attempts: int, jitter: float) -> float:
    """Seconds to wait before the next push: exponential, up to `jitter` shorter."""
    base = config.backoff(failed_attempts).total_seconds()
    jittered = base * (1 - random.uniform(0, jitter))
    return max(jittered, config.minimum_backoff.total_seconds())


@dataclass(frozen=True)
class _Outcome:
    """A finished delivery, waiting for the pump to record it."""

    delivery: PushDelivery
    ok: bool
    status: int | None
    error: str | None


def push_envelope(delivery: PushDelivery, project: str = "local") -> dict[str, Any]:
    """Build the JSON body Pub/Sub POSTs to a push endpoint."""
    data = base64.b64encode(delivery.data).decode("ascii")
    return {
        "message": {
            "data": data,
            "attributes": delivery.attributes,
            "messageId": delivery.message_id,
            "message_id": delivery.message_id,
            "publishTime": delivery.publish_time,
            "publish_time": delivery.publish_time,
        },
        "subscription": f"projects/{project}/subscriptions/{delivery.subscription}",
        "deliveryAttempt": delivery.attempt,
    }


class Bus:
    """Delivers from the shared SQLite file until stopped; start()/stop() in-process.

    `endpoints` are the push subscriptions, `tables` the ones written into the records.
    """

    def __init__(
        self,
        db: SqliteDatabase,
        endpoints: Mapping[str, Endpoint],
        push_token: str = "",
        oidc_account: str | None = None,
        concurrency: int = 8,
        poll_interval_s: float = 1.0,
        jitter: float = 0.2,
        lease_grace_s: float = 5.0,
        record_delay_s: float = 0.05,
        tables: Mapping[str, TableSubscription] | None = None,
    ) -> None:
        self._db = db
        self._store = SqliteDeliveryStore(db)
        self._endpoints = dict(endpoints)
        self._tables = dict(tables or {})
        if both := set(self._endpoints) & set(self._tables):
            raise ValueError(f"subscriptions both pushed and written: {sorted(both)}")
        self._configs = {name: e.config for name, e in self._endpoints.items()}
        self._configs.update({name: t.config for name, t in self._tables.items()})
        self._push_token = push_token
        self._oidc_account = oidc_account
        #: The ID tokens this bus forwards: reused while it runs, never by another.
        self._tokens = ForwardedTokens()
        self._concurrency = concurrency
        self._poll_interval_s = poll_interval_s
        self._jitter = jitter
        self._lease_grace_s = lease_grace_s
        self._record_delay_s = record_delay_s
        self._stopping = threading.Event()
        self._inflight: set[Future[None]] = set()
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._http = pool(concurrency)
        self._thread: threading.Thread | None = None
        self._listener: WakeListener | None = None
        self._outcomes = PendingOutcomes[_Outcome](
            db,
            self._record,
            name=lambda o: f"message {o.delivery.message_id} of {o.delivery.subscription}",
            job_id=lambda o: o.delivery.attributes.get("ce-subject"),
            log=log,
            store_errors=(sqlite3.Error, DependencyUnavailable),
        )

    @property
    def store(self) -> SqliteDeliveryStore:
        return self._store

    def start(self) -> None:
        """Start pumping on a background thread."""
        if self._thread is not None:
            raise RuntimeError("the bus is already running")
        self._stopping.clear()
        self._listener = WakeListener(self._db.path, BUS)
        if not self._listener.bound:
            log.warning("another bus receives this database's wake-ups; polling only")
        self._pool = ThreadPoolExecutor(self._concurrency, thread_name_prefix="bus-push")
        self._thread = threading.Thread(target=self._run, name="bus-pump", daemon=True)
        self._thread.start()
        log.info("bus started", extra={"subscriptions": sorted(self._configs)})

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop claiming, let in-flight pushes finish (their leases cover the rest).

        The outcomes are recorded before returning; a store that fails is tried again
        until `timeout_s` from the call has passed (once at least).
        """
        if self._thread is None or self._pool is None or self._listener is None:
            return
        until = time.monotonic() + timeout_s
        self._stopping.set()
        self._listener.wake()
        self._thread.join(timeout_s)
        with self._lock:
            pending = set(self._inflight)
        wait_for(pending, timeout=timeout_s)
        # A store that fails is tried again until the timeout ends (once at least).
        self._outcomes.record_until(until, "bus", min(self._poll_interval_s, RETRY_S))
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._http.close()
        self._listener.close()
        self._thread = None
        self._pool = None
        self._listener = None
        log.info("bus stopped")

    def _run(self) -> None:
        assert self._listener is not None
        # A turn (a transaction) is taken when signalled, when outcomes wait to be
        # recorded, or once per poll interval; waking only to watch pushes in flight
        # costs none.
        signalled, last_turn = True, float("-inf")
        while not self._stopping.is_set():
            now = time.monotonic()
            if signalled or self._outcomes or now - last_turn >= self._poll_interval_s:
                last_turn = now
                claimed = 0
                try:
                    claimed = self.pump_once()
                except DependencyUnavailable as exc:
                    log.warning("bus store unavailable, will retry: %s", exc.detail)
                    # Outcomes stay queued: try again after the poll interval, not sooner.
                    signalled = self._listener.wait(self._poll_interval_s)
                    continue
                except Exception:
                    # Keep pumping: whatever failed, the outcomes stay queued.
                    log.exception("bus pump error; retrying")
                    signalled = self._listener.wait(self._poll_interval_s)
                    continue
                if claimed:
                    signalled = True  # more may be due at once
                    continue
            signalled = self._listener.wait(self._idle_wait())

    def _idle_wait(self) -> float:
        """How long the pump may sleep: briefly while pushes are in flight, whose
        outcomes are to be recorded within `record_delay_s`."""
        with self._lock:
            busy = bool(self._inflight)
        if busy or self._outcomes:
            return min(self._record_delay_s, self._poll_interval_s)
        return self._poll_interval_s

    def pump_once(self) -> int:
        """Record finished pushes, claim what is due and hand it out; return how many."""
        assert self._pool is not None
        with self._lock:
            free = self._concurrency - len(self._inflight)
        if free <= 0 and not self._outcomes:
            return 0
        with unavailable_on_error("pump"), self._db.transaction():
            self._outcomes.record()
            deliveries, dead = self._store.claim(
                self._configs, free, time.time(), self._lease_grace_s
            )
        # Pushed only once their leases are committed.
        for letter in dead:
            _log_dead_letter(letter)
        for delivery in deliveries:
            if not self._configs[delivery.subscription].admits(delivery.attributes):
                # Stored before the subscription had its filter: acknowledged, as Pub/Sub
                # does for a message its filter does not admit, and never pushed.
                self._outcomes.add(_Outcome(delivery, True, None, None))
                log.debug("filtered out", extra=_facts(delivery, None))
                continue
            future = self._pool.submit(self._deliver, delivery)
            with self._lock:
                self._inflight.add(future)
            future.add_done_callback(self._finished)
        return len(deliveries)

    def _finished(self, future: Future[None]) -> None:
        with self._lock:
            was_full = len(self._inflight) >= self._concurrency
            self._inflight.discard(future)
        if not future.cancelled() and future.exception() is not None:
            log.error("push failed unexpectedly", exc_info=future.exception())
        if was_full and self._listener is not None:
            # A slot is free for a due delivery; otherwise the pump's next turn comes
            # within record_delay_s anyway.
            self._listener.wake()

    def _deliver(self, delivery: PushDelivery) -> None:
        table = self._tables.get(delivery.subscription)
        with job_context(delivery.attributes.get("ce-subject")):
            if table is not None:
                outcome = _write(table, delivery)
            else:
                status, error = self._push(self._endpoints[delivery.subscription], delivery)
                outcome = _Outcome(delivery, status in SUCCESS_CODES, status, error)
        self._outcomes.add(outcome)

    def _record(self, outcome: _Outcome) -> None:
        """Record one finished push (inside the pump's transaction)."""
        delivery, status, error = outcome.delivery, outcome.status, outcome.error
        config = self._configs[delivery.subscription]
        if outcome.ok:
            self._store.ack(delivery)
            log.debug("delivered", extra=_facts(delivery, status))
        elif delivery.attempt >= config.max_delivery_attempts:
            letter = self._store.dead_letter(delivery, status, error)
            if letter is not None:
                _log_dead_letter(letter)
        else:
            delay = backoff_delay(config, delivery.attempt, self._jitter)
            self._store.retry_at(delivery, time.time() + delay, status, error)
            log.warning(
                "delivery failed, retrying in %.1fs: %s",
                delay,
                error,
                extra=_facts(delivery, status),
            )

    def _push(self, endpoint: Endpoint, delivery: PushDelivery) -> tuple[int | None, str | None]:
        headers: dict[str, str] = {}
        if self._oidc_account is not None:
            headers = self._tokens.authorization(endpoint.audience, self._oidc_account)
        elif self._push_token:
            headers = {"Authorization": f"Bearer {self._push_token}"}
        headers["Content-Type"] = "application/json"
        body = json.dumps(push_envelope(delivery)).encode()
        timeout = endpoint.config.ack_deadline.total_seconds()
        reply = send(self._http, "POST", endpoint.push_url, body, headers, timeout)
        if reply.status is None:
            return None, reply.detail
        if reply.status in SUCCESS_CODES:
            return reply.status, None
        text = reply.body[:300].decode(errors="replace")
        return reply.status, f"HTTP {reply.status}: {text}"


def _write(table: TableSubscription, delivery: PushDelivery) -> _Outcome:
    """Write a BigQuery subscription's message; any error is a failed attempt."""
    try:
        table.write(delivery)
    except Exception as exc:  # the store failed, or the write did: retried as a push is
        return _Outcome(delivery, False, None, f"{type(exc).__name__}: {exc}")
    return _Outcome(delivery, True, None, None)


def _facts(delivery: PushDelivery, status: int | None) -> dict[str, object]:
    return {
        "subscription": delivery.subscription,
        "message_id": delivery.message_id,
        "event_id": delivery.attributes.get("ce-id"),
        "attempt": delivery.attempt,
        "status": status,
    }


def _log_dead_letter(letter: DeadLetter) -> None:
    with job_context(letter.job_id):
        log.error(
            "message dead-lettered after %d attempts: %s",
            letter.attempts,
            letter.last_error,
            extra={
                "subscription": letter.subscription,
                "message_id": letter.message_id,
                "event_id": letter.event_id,
                "attempts": letter.attempts,
                "status": letter.last_status,
            },
        )
