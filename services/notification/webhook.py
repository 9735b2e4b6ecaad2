"""Signed webhooks to the client's callback_url (Standard Webhooks).

The body is the event as a structured-mode CloudEvent; `webhook-id` is the event id, so
a client that sees the same id twice (redelivery) can drop the repeat.
"""

from __future__ import annotations

import binascii
from datetime import UTC, datetime
from urllib.parse import urlsplit

import requests
from standardwebhooks.webhooks import EmptyWebhookSecretError, Webhook

from shared.codecs.cloudevent import STRUCTURED_CONTENT_TYPE, to_structured_json
from shared.domain.errors import GradeqError
from shared.domain.events import GradingCompleted
from shared.http.callback_guard import (
    CallbackGuard,
    CallbackRefused,
    guarded_session,
    refused_by_guard,
)

USER_AGENT = "Gradeq-Webhooks/1"


class CallbackFailed(GradeqError):
    """The client's endpoint did not accept the webhook; the bus should redeliver."""

    slug = "callback-failed"
    title = "The client's callback endpoint did not accept the event"
    status = 502


class WebhookSender:
    """POST events to callback URLs, signed with the `whsec_...` webhook secret."""

    def __init__(
        self,
        secret: str,
        timeout_s: float,
        guard: CallbackGuard,
        session: requests.Session | None = None,
    ) -> None:
        if not secret:
            raise ValueError("GRADEQ_WEBHOOK_SECRET must be set (a whsec_... secret)")
        try:
            self._webhook = Webhook(secret)
        except (binascii.Error, ValueError, EmptyWebhookSecretError) as exc:
            # The message never includes the secret itself.
            raise ValueError("GRADEQ_WEBHOOK_SECRET is not a whsec_<base64> secret") from exc
        self._timeout_s = timeout_s
        self._guard = guard
        # The guarded session connects only to addresses vetted when it connects.
        self._session = session or guarded_session(guard)

    def send(self, event: GradingCompleted, url: str) -> int:
        """Deliver the event to `url`; return the 2xx status or raise CallbackFailed.

        Raise CallbackRefused, without connecting, when `url` now resolves to a
        non-public address.
        """
        self._guard.check(url)
        body = to_structured_json(event).decode("utf-8")
        now = datetime.now(UTC)
        headers = {
            "Content-Type": STRUCTURED_CONTENT_TYPE,
            "User-Agent": USER_AGENT,
            "webhook-id": event.event_id,
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": self._webhook.sign(event.event_id, now, body),
        }
        # Only the host is named in errors: a callback URL may carry a token in its query.
        host = urlsplit(url).netloc
        try:
            response = self._session.post(
                url,
                data=body.encode("utf-8"),
                headers=headers,
                timeout=self._timeout_s,
                allow_redirects=False,
            )
        except requests.RequestException as exc:
            refused = refused_by_guard(exc)
            if refused is not None:
                raise CallbackRefused(refused.detail) from exc
            raise CallbackFailed(f"callback at {host} unreachable: {type(exc).__name__}") from exc
        if not 200 <= response.status_code < 300:
            raise CallbackFailed(
                f"callback at {host} answered HTTP {response.status_code}",
                callback_status=response.status_code,
            )
        return response.status_code
