"""When to retry a failed attempt, and when to give up (Cloud Tasks retry_config rules)."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from localcloud.tasks.attempt import AttemptResult
from shared.config.queues import RetryConfig

# Only these statuses ask the queue to slow down; their Retry-After is honoured.
_BACK_OFF_STATUSES = frozenset({429, 503})


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a Retry-After header (delta seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return max(0.0, moment.timestamp() - now)


def retry_delay(config: RetryConfig, attempts: int, result: AttemptResult, now: float) -> float:
    """Seconds before the next attempt, after `attempts` attempts so far."""
    delay = config.backoff(attempts).total_seconds()
    if result.status in _BACK_OFF_STATUSES:
        asked = parse_retry_after(result.retry_after, now)
        if asked is not None:
            delay = max(delay, asked)
    return delay


def exhausted(config: RetryConfig, attempts: int, first_attempt_at: float, now: float) -> bool:
    """Whether retrying stops: only once BOTH max_attempts and max_retry_duration are reached.

    max_attempts <= 0 (-1 in the API) never runs out; a zero max_retry_duration sets no
    time limit, so max_attempts alone decides.
    """
    attempts_reached = config.max_attempts > 0 and attempts >= config.max_attempts
    limit = config.max_retry_duration.total_seconds()
    duration_reached = limit <= 0 or now - first_attempt_at >= limit
    return attempts_reached and duration_reached


def describe(at: float) -> str:
    """Format an epoch time for log lines (past year 9999, as seconds since the epoch).

    A target's Retry-After may ask for any delay, and a log line must not fail the
    recording of the attempt it describes.
    """
    try:
        return datetime.fromtimestamp(at, UTC).isoformat()
    except (OverflowError, OSError, ValueError):
        return f"{at:.0f} s after the epoch"
