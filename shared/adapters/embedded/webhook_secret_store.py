"""WebhookSecretStore on SQLite: one row per secret id, holding the sealed secret only."""

from __future__ import annotations

import sqlite3
from datetime import datetime

from shared.adapters.embedded.sqlite import SqliteDatabase, unavailable_on_error
from shared.domain.webhook_secrets import WebhookSecret, WebhookSecretNotFound

SCHEMA = """
CREATE TABLE IF NOT EXISTS webhook_secrets (
    secret_id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    key_id TEXT NOT NULL,
    sealed TEXT NOT NULL,
    created_at TEXT NOT NULL,
    expires_at TEXT
);
CREATE INDEX IF NOT EXISTS webhook_secrets_by_client ON webhook_secrets (client_id, created_at)
"""


def _text(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def _decode(row: sqlite3.Row) -> WebhookSecret:
    return WebhookSecret(
        secret_id=row["secret_id"],
        client_id=row["client_id"],
        key_id=row["key_id"],
        sealed=row["sealed"],
        created_at=datetime.fromisoformat(row["created_at"]),
        expires_at=datetime.fromisoformat(row["expires_at"]) if row["expires_at"] else None,
    )


class SqliteWebhookSecretStore:
    """Webhook secrets in the shared SQLite file."""

    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db
        db.ensure_schema(SCHEMA)

    def add(self, secret: WebhookSecret) -> None:
        with unavailable_on_error("store webhook secret"):
            try:
                with self._db.transaction() as conn:
                    conn.execute(
                        "INSERT INTO webhook_secrets (secret_id, client_id, key_id, sealed,"
                        " created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)",
                        (
                            secret.secret_id,
                            secret.client_id,
                            secret.key_id,
                            secret.sealed,
                            _text(secret.created_at),
                            _text(secret.expires_at),
                        ),
                    )
            except sqlite3.IntegrityError as exc:
                raise ValueError(f"webhook secret id {secret.secret_id} already exists") from exc

    def list(self, client_id: str | None = None) -> list[WebhookSecret]:
        query = "SELECT * FROM webhook_secrets"
        params: tuple[str, ...] = ()
        if client_id is not None:
            query, params = query + " WHERE client_id = ?", (client_id,)
        with unavailable_on_error("list webhook secrets"):
            rows = self._db.connection().execute(query + " ORDER BY created_at, secret_id", params)
            return [_decode(r) for r in rows.fetchall()]

    def expire(self, secret_id: str, at: datetime) -> WebhookSecret:
        with unavailable_on_error("expire webhook secret"), self._db.transaction() as conn:
            row = conn.execute(
                "SELECT * FROM webhook_secrets WHERE secret_id = ?", (secret_id,)
            ).fetchone()
            if row is None:
                raise WebhookSecretNotFound(f"no webhook secret {secret_id}")
            expired = _decode(row).expire(at)
            conn.execute(
                "UPDATE webhook_secrets SET expires_at = ? WHERE secret_id = ?",
                (_text(expired.expires_at), secret_id),
            )
        return expired
