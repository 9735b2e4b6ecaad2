"""Handle one GradingCompleted for the notification subscriber: webhook once, then record."""

from __future__ import annotations

import logging
from enum import StrEnum

from services.notification.webhook import WebhookSender
from shared.domain.events import GradingCompleted
from shared.http.callback_guard import CallbackRefused
from shared.ports import ProcessedEvents

SUBSCRIBER = "notification"
log = logging.getLogger(__name__)


class Handled(StrEnum):
    """What handling an event amounted to."""

    DUPLICATE = "duplicate"
    DELIVERED = "delivered"
    NO_CALLBACK = "no-callback"
    REFUSED = "refused"


class Notifier:
    """Deliver each event's webhook, and record it only after the client accepted it."""

    def __init__(self, processed: ProcessedEvents, sender: WebhookSender) -> None:
        self._processed = processed
        self._sender = sender

    def handle(self, event: GradingCompleted) -> Handled:
        """Raise CallbackFailed (nothing recorded) when the client did not take it."""
        if self._processed.contains(SUBSCRIBER, event.event_id):
            log.info("event already notified", extra={"event_id": event.event_id})
            return Handled.DUPLICATE
        record: dict[str, object] = {"job_id": event.job_id, "outcome": event.outcome.value}
        if event.callback_url:
            try:
                record["callback_status"] = self._sender.send(event, event.callback_url)
                handled = Handled.DELIVERED
            except CallbackRefused as exc:
                # Redelivery cannot make the address public: record the refusal, ack.
                log.warning("callback refused", extra={"reason": exc.detail})
                record["callback_refused"] = exc.detail
                handled = Handled.REFUSED
        else:
            handled = Handled.NO_CALLBACK
        # Two concurrent deliveries may both send; the client dedupes on webhook-id.
        self._processed.add(SUBSCRIBER, event.event_id, record)
        log.info(
            {
                Handled.DELIVERED: "event notified",
                Handled.REFUSED: "event recorded without a webhook",
                Handled.NO_CALLBACK: "event has no callback_url",
            }[handled],
            extra={"event_id": event.event_id, "outcome": event.outcome.value},
        )
        return handled
