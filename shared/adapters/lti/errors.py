"""What a platform's answer means for the caller: try again later, or never."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import requests


class LtiBusy(Exception):
    """The platform cannot answer now (429, 5xx, timeout, connection): try again later."""

    def __init__(self, detail: str, retry_after_s: float | None = None) -> None:
        super().__init__(detail)
        self.retry_after_s = retry_after_s


class LtiRefused(Exception):
    """The platform refused the request for good (a 4xx other than 429)."""

    def __init__(self, detail: str, status: int) -> None:
        super().__init__(detail)
        self.status = status


def retry_after_s(value: str | None) -> float | None:
    """Retry-After as seconds (delta-seconds or an HTTP date); None when absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (moment - datetime.now(UTC)).total_seconds())


def check(response: requests.Response, what: str) -> requests.Response:
    """The response when it is 2xx; else the error it means. The body is quoted briefly:
    platforms' error bodies carry no secrets, the request's do (never quoted)."""
    if response.ok:
        return response
    detail = f"{what}: HTTP {response.status_code} {response.text[:200]!r}"
    if response.status_code == 429 or response.status_code >= 500:
        raise LtiBusy(detail, retry_after_s(response.headers.get("Retry-After")))
    raise LtiRefused(detail, response.status_code)


def call(what: str, send: Callable[[], requests.Response]) -> requests.Response:
    """Send, and read a timeout or a lost connection as the platform being busy."""
    try:
        return check(send(), what)
    except (requests.Timeout, requests.ConnectionError) as exc:
        raise LtiBusy(f"{what}: {type(exc).__name__}") from exc
