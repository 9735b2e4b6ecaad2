"""LtiStore on SQLite: registrations by (issuer, client id); signing keys by kid, sealed."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime

from shared.adapters.embedded.sqlite import SqliteDatabase, unavailable_on_error
from shared.domain.lti import (
    AssignmentLink,
    LtiRegistration,
    ToolKey,
    ToolKeyNotFound,
    link_id,
    registration_id,
)

SCHEMA = """
CREATE TABLE IF NOT EXISTS lti_registrations (
    registration_id TEXT PRIMARY KEY,
    school TEXT NOT NULL,
    issuer TEXT NOT NULL,
    client_id TEXT NOT NULL,
    record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS lti_registrations_by_school ON lti_registrations (school);
CREATE TABLE IF NOT EXISTS lti_tool_keys (
    kid TEXT PRIMARY KEY,
    sealing_key_id TEXT NOT NULL,
    sealed TEXT NOT NULL,
    public_jwk TEXT NOT NULL,
    created_at TEXT NOT NULL,
    signs_from TEXT NOT NULL,
    expires_at TEXT
);
CREATE TABLE IF NOT EXISTS lti_assignment_links (
    link_id TEXT PRIMARY KEY,
    record TEXT NOT NULL
)
"""


def _key(row: sqlite3.Row) -> ToolKey:
    return ToolKey(
        kid=row["kid"],
        sealing_key_id=row["sealing_key_id"],
        sealed=row["sealed"],
        public_jwk=json.loads(row["public_jwk"]),
        created_at=datetime.fromisoformat(row["created_at"]),
        signs_from=datetime.fromisoformat(row["signs_from"]),
        expires_at=datetime.fromisoformat(row["expires_at"]) if row["expires_at"] else None,
    )


class SqliteLtiStore:
    """LTI registrations and signing keys in the shared SQLite file."""

    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db
        db.ensure_schema(SCHEMA)

    def put_registration(self, registration: LtiRegistration) -> None:
        with unavailable_on_error("store LTI registration"), self._db.transaction() as conn:
            conn.execute(
                "INSERT INTO lti_registrations (registration_id, school, issuer, client_id,"
                " record) VALUES (?, ?, ?, ?, ?) ON CONFLICT (registration_id) DO UPDATE SET"
                " school = excluded.school, record = excluded.record",
                (
                    registration.registration_id,
                    registration.school,
                    registration.issuer,
                    registration.client_id,
                    json.dumps(registration.to_record()),
                ),
            )

    def registration(self, issuer: str, client_id: str) -> LtiRegistration | None:
        with unavailable_on_error("read LTI registration"):
            row = (
                self._db.connection()
                .execute(
                    "SELECT record FROM lti_registrations WHERE registration_id = ?",
                    (registration_id(issuer, client_id),),
                )
                .fetchone()
            )
        return LtiRegistration.from_record(json.loads(row["record"])) if row else None

    def registrations(self, school: str | None = None) -> list[LtiRegistration]:
        query = "SELECT record FROM lti_registrations"
        params: tuple[str, ...] = ()
        if school is not None:
            query, params = query + " WHERE school = ?", (school,)
        with unavailable_on_error("list LTI registrations"):
            rows = self._db.connection().execute(query, params).fetchall()
        found = [LtiRegistration.from_record(json.loads(r["record"])) for r in rows]
        return sorted(found, key=lambda r: (r.issuer, r.client_id))

    def add_key(self, key: ToolKey) -> None:
        with unavailable_on_error("store LTI signing key"):
            try:
                with self._db.transaction() as conn:
                    conn.execute(
                        "INSERT INTO lti_tool_keys (kid, sealing_key_id, sealed, public_jwk,"
                        " created_at, signs_from, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (
                            key.kid,
                            key.sealing_key_id,
                            key.sealed,
                            json.dumps(key.public_jwk),
                            key.created_at.isoformat(),
                            key.signs_from.isoformat(),
                            key.expires_at.isoformat() if key.expires_at else None,
                        ),
                    )
            except sqlite3.IntegrityError as exc:
                raise ValueError(f"LTI signing key {key.kid} already exists") from exc

    def tool_keys(self) -> list[ToolKey]:
        with unavailable_on_error("list LTI signing keys"):
            rows = self._db.connection().execute(
                "SELECT * FROM lti_tool_keys ORDER BY created_at, kid"
            )
            return [_key(r) for r in rows.fetchall()]

    def expire_key(self, kid: str, at: datetime) -> ToolKey:
        with unavailable_on_error("expire LTI signing key"), self._db.transaction() as conn:
            row = conn.execute("SELECT * FROM lti_tool_keys WHERE kid = ?", (kid,)).fetchone()
            if row is None:
                raise ToolKeyNotFound(f"no LTI signing key {kid}")
            expired = _key(row).expire(at)
            assert expired.expires_at is not None
            conn.execute(
                "UPDATE lti_tool_keys SET expires_at = ? WHERE kid = ?",
                (expired.expires_at.isoformat(), kid),
            )
        return expired

    def put_link(self, link: AssignmentLink) -> None:
        key = link_id(link.school, link.assignment_id)
        with unavailable_on_error("store LTI assignment link"), self._db.transaction() as conn:
            row = conn.execute(
                "SELECT record FROM lti_assignment_links WHERE link_id = ?", (key,)
            ).fetchone()
            if row is not None and link.lineitem_url is None:
                known = AssignmentLink.from_record(json.loads(row["record"]))
                if (known.issuer, known.client_id, known.context_id) == (
                    link.issuer,
                    link.client_id,
                    link.context_id,
                ) and known.lineitem_url:
                    link = link.with_line_item(known.lineitem_url)
            conn.execute(
                "INSERT INTO lti_assignment_links (link_id, record) VALUES (?, ?)"
                " ON CONFLICT (link_id) DO UPDATE SET record = excluded.record",
                (key, json.dumps(link.to_record())),
            )

    def link(self, school: str, assignment_id: str) -> AssignmentLink | None:
        with unavailable_on_error("read LTI assignment link"):
            row = (
                self._db.connection()
                .execute(
                    "SELECT record FROM lti_assignment_links WHERE link_id = ?",
                    (link_id(school, assignment_id),),
                )
                .fetchone()
            )
        return AssignmentLink.from_record(json.loads(row["record"])) if row else None
