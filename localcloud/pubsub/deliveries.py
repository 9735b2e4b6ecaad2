"""The bus's side of the embedded Pub/Sub: leases, acks, redelivery and dead letters.

Deliveries are leased for the ack deadline plus a grace period; a lease that expires
without an outcome (the bus died mid-push) counts as a failed attempt and the delivery
becomes due again, so nothing published is lost across restarts.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from shared.adapters.embedded.bus_tables import SCHEMA, rfc3339
from shared.adapters.embedded.sqlite import SqliteDatabase, unavailable_on_error
from shared.config.subscriptions import SubscriptionConfig

LEASE_EXPIRED = "no outcome recorded before the lease expired (the bus stopped mid-delivery?)"


@dataclass(frozen=True)
class PushDelivery:
    """One leased push of one message to one subscription."""

    message_id: str
    subscription: str
    attempt: int
    data: bytes
    attributes: dict[str, str]
    publish_time: str
    lease_token: str


@dataclass(frozen=True)
class DeadLetter:
    """A message a subscription gave up on after its delivery budget."""

    message_id: str
    subscription: str
    attempts: int
    last_status: int | None
    last_error: str | None
    dead_at: str
    attributes: dict[str, str]
    data: bytes

    @property
    def event_id(self) -> str | None:
        return self.attributes.get("ce-id")

    @property
    def job_id(self) -> str | None:
        return self.attributes.get("ce-subject")


class SqliteDeliveryStore:
    """Leases, acknowledgements, redelivery schedules and dead letters of the bus."""

    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db
        db.ensure_schema(SCHEMA)

    def claim(
        self,
        subscriptions: Mapping[str, SubscriptionConfig],
        limit: int,
        now: float,
        lease_grace_s: float = 5.0,
    ) -> tuple[list[PushDelivery], list[DeadLetter]]:
        """Lease up to `limit` due deliveries; also settle leases that expired.

        An expired lease counts as a failed attempt: it is due again at once, or
        dead-lettered when its budget is spent (those are returned for logging).
        """
        if not subscriptions or limit < 1:
            return [], []
        names = json.dumps(list(subscriptions))
        with unavailable_on_error("claim"), self._db.transaction() as conn:
            dead = self._settle_expired(conn, subscriptions, names, now)
            rows = conn.execute(
                "SELECT d.message_id, d.subscription, d.attempts, m.data, m.attributes,"
                " m.publish_time FROM bus_deliveries d JOIN bus_messages m USING (message_id)"
                " WHERE d.subscription IN (SELECT value FROM json_each(?))"
                " AND d.lease_until IS NULL AND d.next_attempt_at <= ?"
                " ORDER BY d.next_attempt_at LIMIT ?",
                (names, now, limit),
            ).fetchall()
            claimed = []
            for row in rows:
                token = uuid.uuid4().hex
                deadline = subscriptions[row["subscription"]].ack_deadline.total_seconds()
                conn.execute(
                    "UPDATE bus_deliveries SET attempts = attempts + 1, lease_until = ?,"
                    " lease_token = ? WHERE message_id = ? AND subscription = ?",
                    (now + deadline + lease_grace_s, token, row["message_id"], row["subscription"]),
                )
                claimed.append(
                    PushDelivery(
                        message_id=row["message_id"],
                        subscription=row["subscription"],
                        attempt=row["attempts"] + 1,
                        data=bytes(row["data"]),
                        attributes=json.loads(row["attributes"]),
                        publish_time=row["publish_time"],
                        lease_token=token,
                    )
                )
        return claimed, dead

    def _settle_expired(
        self,
        conn: sqlite3.Connection,
        subscriptions: Mapping[str, SubscriptionConfig],
        names: str,
        now: float,
    ) -> list[DeadLetter]:
        expired = conn.execute(
            "SELECT message_id, subscription, attempts, lease_token FROM bus_deliveries"
            " WHERE subscription IN (SELECT value FROM json_each(?)) AND lease_until < ?",
            (names, now),
        ).fetchall()
        dead = []
        for row in expired:
            key = (row["message_id"], row["subscription"])
            if row["attempts"] >= subscriptions[row["subscription"]].max_delivery_attempts:
                self._bury(conn, key, row["lease_token"], None, LEASE_EXPIRED)
                dead.append(self._dead_letter(conn, key))
            else:
                conn.execute(
                    "UPDATE bus_deliveries SET lease_until = NULL, lease_token = NULL,"
                    " last_status = NULL, last_error = ?, next_attempt_at = ?"
                    " WHERE message_id = ? AND subscription = ?",
                    (LEASE_EXPIRED, now, *key),
                )
        return dead

    def ack(self, delivery: PushDelivery) -> None:
        """Forget a delivery the subscriber accepted."""
        with unavailable_on_error("ack"), self._db.transaction() as conn:
            conn.execute(
                "DELETE FROM bus_deliveries WHERE message_id = ? AND subscription = ?"
                " AND lease_token = ?",
                (delivery.message_id, delivery.subscription, delivery.lease_token),
            )
            self._drop_message_if_done(conn, delivery.message_id)

    def retry_at(
        self, delivery: PushDelivery, when: float, status: int | None, error: str | None
    ) -> None:
        """Schedule the next push of a failed delivery at epoch second `when`."""
        with unavailable_on_error("retry"), self._db.transaction() as conn:
            conn.execute(
                "UPDATE bus_deliveries SET lease_until = NULL, lease_token = NULL,"
                " next_attempt_at = ?, last_status = ?, last_error = ?"
                " WHERE message_id = ? AND subscription = ? AND lease_token = ?",
                (
                    when,
                    status,
                    error,
                    delivery.message_id,
                    delivery.subscription,
                    delivery.lease_token,
                ),
            )

    def dead_letter(
        self, delivery: PushDelivery, status: int | None, error: str | None
    ) -> DeadLetter | None:
        """Move a delivery whose budget is spent to the dead letters."""
        key = (delivery.message_id, delivery.subscription)
        with unavailable_on_error("dead-letter"), self._db.transaction() as conn:
            if not self._bury(conn, key, delivery.lease_token, status, error):
                return None
            return self._dead_letter(conn, key)

    def _bury(
        self,
        conn: sqlite3.Connection,
        key: tuple[str, str],
        token: str | None,
        status: int | None,
        error: str | None,
    ) -> bool:
        moved = conn.execute(
            "INSERT OR REPLACE INTO bus_dead_letters"
            " (message_id, subscription, attempts, last_status, last_error, dead_at)"
            " SELECT message_id, subscription, attempts, ?, ?, ? FROM bus_deliveries"
            " WHERE message_id = ? AND subscription = ? AND lease_token IS ?",
            (status, error, rfc3339(datetime.now(UTC)), *key, token),
        ).rowcount
        conn.execute(
            "DELETE FROM bus_deliveries WHERE message_id = ? AND subscription = ?"
            " AND lease_token IS ?",
            (*key, token),
        )
        return moved == 1

    @staticmethod
    def _drop_message_if_done(conn: sqlite3.Connection, message_id: str) -> None:
        conn.execute(
            "DELETE FROM bus_messages WHERE message_id = ?"
            " AND NOT EXISTS (SELECT 1 FROM bus_deliveries WHERE message_id = ?)"
            " AND NOT EXISTS (SELECT 1 FROM bus_dead_letters WHERE message_id = ?)",
            (message_id, message_id, message_id),
        )

    def _dead_letter(self, conn: sqlite3.Connection, key: tuple[str, str]) -> DeadLetter:
        return self._dead_letter_rows(conn, subscription=key[1], message_id=key[0])[0]

    def dead_letters(self, subscription: str | None = None) -> list[DeadLetter]:
        """List dead letters, oldest first, of one subscription or of all."""
        with unavailable_on_error("list dead letters"):
            return self._dead_letter_rows(self._db.connection(), subscription=subscription)

    @staticmethod
    def _dead_letter_rows(
        conn: sqlite3.Connection, subscription: str | None = None, message_id: str | None = None
    ) -> list[DeadLetter]:
        rows = conn.execute(
            "SELECT x.*, m.data, m.attributes FROM bus_dead_letters x"
            " JOIN bus_messages m USING (message_id)"
            " WHERE (:sub IS NULL OR x.subscription = :sub)"
            " AND (:msg IS NULL OR x.message_id = :msg)"
            " ORDER BY x.dead_at, x.message_id",
            {"sub": subscription, "msg": message_id},
        ).fetchall()
        return [
            DeadLetter(
                message_id=row["message_id"],
                subscription=row["subscription"],
                attempts=row["attempts"],
                last_status=row["last_status"],
                last_error=row["last_error"],
                dead_at=row["dead_at"],
                attributes=json.loads(row["attributes"]),
                data=bytes(row["data"]),
            )
            for row in rows
        ]

    def pending(self, subscription: str | None = None) -> int:
        """Count deliveries not yet acknowledged nor dead-lettered."""
        with unavailable_on_error("count"):
            row = (
                self._db.connection()
                .execute(
                    "SELECT COUNT(*) FROM bus_deliveries"
                    " WHERE (:sub IS NULL OR subscription = :sub)",
                    {"sub": subscription},
                )
                .fetchone()
            )
        return int(row[0])
