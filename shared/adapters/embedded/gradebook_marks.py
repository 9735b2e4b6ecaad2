"""GradebookMarks on SQLite: one row per grade mark, one per school's gradebook health."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from shared.adapters.embedded.sqlite import SqliteDatabase, unavailable_on_error
from shared.domain.gradebook import (
    Begin,
    GradebookHealth,
    GradeMark,
    MarkKey,
    MarkStatus,
)

SCHEMA = """
CREATE TABLE IF NOT EXISTS gradebook_marks (
    mark_id TEXT PRIMARY KEY,
    school TEXT NOT NULL,
    status TEXT NOT NULL,
    updated_at TEXT,
    record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS gradebook_marks_by_status ON gradebook_marks (status, school);
CREATE TABLE IF NOT EXISTS gradebook_health (
    school TEXT PRIMARY KEY,
    record TEXT NOT NULL
)
"""

_MARK_TIMES = ("updated_at", "lease_until")
_HEALTH_TIMES = ("since", "last_success_at")


def _dump(record: dict[str, Any], times: tuple[str, ...]) -> str:
    out = dict(record)
    for name in times:
        if out.get(name) is not None:
            out[name] = out[name].isoformat()
    return json.dumps(out, sort_keys=True)


def _load(text: str, times: tuple[str, ...]) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(text)
    for name in times:
        if record.get(name) is not None:
            record[name] = datetime.fromisoformat(record[name])
    return record


class SqliteGradebookMarks:
    """Grade marks and gradebook health in the shared SQLite file."""

    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db
        db.ensure_schema(SCHEMA)

    def _read(self, conn: sqlite3.Connection, key: MarkKey) -> GradeMark:
        row = conn.execute(
            "SELECT record FROM gradebook_marks WHERE mark_id = ?", (key.document_id(),)
        ).fetchone()
        return GradeMark.from_record(_load(row["record"], _MARK_TIMES)) if row else GradeMark(key)

    def _write(self, conn: sqlite3.Connection, mark: GradeMark) -> None:
        conn.execute(
            "INSERT INTO gradebook_marks (mark_id, school, status, updated_at, record)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT (mark_id) DO UPDATE SET"
            " status = excluded.status, updated_at = excluded.updated_at,"
            " record = excluded.record",
            (
                mark.key.document_id(),
                mark.key.school,
                mark.status.value,
                mark.updated_at.isoformat() if mark.updated_at else None,
                _dump(mark.to_record(), _MARK_TIMES),
            ),
        )

    def begin(
        self, key: MarkKey, version: int, holder: str, now: datetime, lease: timedelta
    ) -> Begin:
        with unavailable_on_error("begin a gradebook write"), self._db.transaction() as conn:
            answer, leased = self._read(conn, key).begin(version, holder, now, lease)
            if answer is Begin.WRITE:
                self._write(conn, leased)
            return answer

    def finish(
        self,
        key: MarkKey,
        version: int,
        holder: str,
        status: MarkStatus,
        detail: str | None,
        at: datetime,
    ) -> GradeMark:
        with unavailable_on_error("finish a gradebook write"), self._db.transaction() as conn:
            mark = self._read(conn, key).finish(version, holder, status, detail, at)
            self._write(conn, mark)
            return mark

    def release(self, key: MarkKey, holder: str) -> None:
        with unavailable_on_error("release a gradebook write"), self._db.transaction() as conn:
            before = self._read(conn, key)
            after = before.release(holder)
            if after != before:
                self._write(conn, after)

    def mark(self, key: MarkKey) -> GradeMark | None:
        with unavailable_on_error("read a grade mark"):
            row = (
                self._db.connection()
                .execute(
                    "SELECT record FROM gradebook_marks WHERE mark_id = ?", (key.document_id(),)
                )
                .fetchone()
            )
        return GradeMark.from_record(_load(row["record"], _MARK_TIMES)) if row else None

    def rejected(self, school: str | None = None) -> list[GradeMark]:
        query = "SELECT record FROM gradebook_marks WHERE status = ?"
        params: tuple[str, ...] = (MarkStatus.REJECTED.value,)
        if school is not None:
            query, params = query + " AND school = ?", (*params, school)
        with unavailable_on_error("list rejected grades"):
            rows = self._db.connection().execute(query, params).fetchall()
        marks = [GradeMark.from_record(_load(r["record"], _MARK_TIMES)) for r in rows]
        return sorted(marks, key=_oldest_first)

    def _change_health(
        self, school: str, change: Callable[[GradebookHealth], GradebookHealth]
    ) -> tuple[GradebookHealth, GradebookHealth]:
        with unavailable_on_error("record gradebook health"), self._db.transaction() as conn:
            row = conn.execute(
                "SELECT record FROM gradebook_health WHERE school = ?", (school,)
            ).fetchone()
            before = (
                GradebookHealth.from_record(_load(row["record"], _HEALTH_TIMES))
                if row
                else GradebookHealth(school)
            )
            after = change(before)
            conn.execute(
                "INSERT INTO gradebook_health (school, record) VALUES (?, ?)"
                " ON CONFLICT (school) DO UPDATE SET record = excluded.record",
                (school, _dump(after.to_record(), _HEALTH_TIMES)),
            )
            return before, after

    def record_success(self, school: str, at: datetime) -> tuple[GradebookHealth, GradebookHealth]:
        return self._change_health(school, lambda h: h.after_success(at))

    def record_busy(
        self, school: str, at: datetime, error: str, retry_after_s: float | None
    ) -> GradebookHealth:
        return self._change_health(school, lambda h: h.after_busy(at, error, retry_after_s))[1]

    def health(self) -> list[GradebookHealth]:
        with unavailable_on_error("read gradebook health"):
            rows = (
                self._db.connection()
                .execute("SELECT record FROM gradebook_health ORDER BY school")
                .fetchall()
            )
        return [GradebookHealth.from_record(_load(r["record"], _HEALTH_TIMES)) for r in rows]


def _oldest_first(mark: GradeMark) -> tuple[str, str]:
    return (mark.updated_at.isoformat() if mark.updated_at else "", mark.key.document_id())
