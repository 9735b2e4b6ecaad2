"""Signed webhooks to the client's callback URL (Standard Webhooks).

The body is the event as a structured-mode CloudEvent; `webhook-id` is the event id, so
a client that sees the same id twice (redelivery) can drop the repeat. Each webhook is
signed with the job's client's own secrets: one `v1,...` signature per secret that signs
now, space-separated, so a receiver holding either secret of a rotation verifies it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

import requests
from standardwebhooks.webhooks import Webhook

from services.notification.transport import callback_session, deadline
from shared.codecs.cloudevent import STRUCTURED_CONTENT_TYPE, to_structured_json
from shared.domain.errors import GradeqError
from shared.domain.events import GradePosted, GradingCompleted
from shared.http.callback_guard import CallbackGuard, CallbackRefused, refused_by_guard

USER_AGENT = "Gradeq-Webhooks/1"


class CallbackFailed(GradeqError):
    """The client's endpoint did not accept the webhook; the bus should redeliver."""

    slug = "callback-failed"
    title = "The client's callback endpoint did not accept the event"
    status = 502


def signature(secrets: Sequence[str], event_id: str, now: datetime, body: str) -> str:
    """The webhook-signature header: a signature by each secret."""
    return " ".join(Webhook(secret).sign(event_id, now, body) for secret in secrets)


class WebhookSender:
    """POST events to callback URLs; each delivery ends within `timeout_s`, answer or not."""

    def __init__(
        self,
        timeout_s: float,
        guard: CallbackGuard,
        session: requests.Session | None = None,
        extra_ca_bundle: Path | None = None,
    ) -> None:
        self._timeout_s = timeout_s
        self._guard = guard
        # The session connects only to addresses vetted when it connects.
        self._session = session or callback_session(guard, extra_ca_bundle)

    def send(self, event: GradingCompleted | GradePosted, url: str, secrets: Sequence[str]) -> int:
        """Deliver the event to `url`, signed by each of `secrets`; return the 2xx status
        or raise CallbackFailed.

        Raise CallbackRefused, without connecting, when `url` now resolves to a
        non-public address.
        """
        if not secrets:
            raise ValueError("a webhook is never sent unsigned")
        self._guard.check(url)
        body = to_structured_json(event).decode("utf-8")
        now = datetime.now(UTC)
        headers = {
            "Content-Type": STRUCTURED_CONTENT_TYPE,
            "User-Agent": USER_AGENT,
            "webhook-id": event.event_id,
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": signature(secrets, event.event_id, now, body),
        }
        # Only the host is named in errors: a callback URL may carry a token in its query
        # (or credentials before the host).
        parts = urlsplit(url)
        host = f"{parts.hostname}:{parts.port}" if parts.port else str(parts.hostname)
        with deadline(self._timeout_s) as delivery:
            try:
                response = self._session.post(
                    url,
                    data=body.encode("utf-8"),
                    headers=headers,
                    timeout=self._timeout_s,
                    allow_redirects=False,
                    stream=True,
                )
                # The status is the whole answer: the body is never read, however long.
                response.close()
                # Headers cut short by the deadline may still parse: they are no answer.
                expired = delivery.expired
            except requests.RequestException as exc:
                refused = refused_by_guard(exc)
                if refused is not None:
                    raise CallbackRefused(refused.detail) from exc
                if delivery.expired:
                    raise CallbackFailed(
                        f"callback at {host} did not answer within {self._timeout_s:g} s"
                    ) from exc
                raise CallbackFailed(
                    f"callback at {host} unreachable: {type(exc).__name__}"
                ) from exc
        if expired:
            raise CallbackFailed(f"callback at {host} did not answer within {self._timeout_s:g} s")
        if not 200 <= response.status_code < 300:
            raise CallbackFailed(
                f"callback at {host} answered HTTP {response.status_code}",
                callback_status=response.status_code,
            )
        return response.status_code
