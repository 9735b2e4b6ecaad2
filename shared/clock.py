"""Time sources: the system clock, and a settable one for tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


class SystemClock:
    """UTC wall-clock time."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class FrozenClock:
    """A clock that only moves when told to."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)

    def now(self) -> datetime:
        return self._now

    def advance(self, delta: timedelta) -> None:
        self._now += delta
