"""Handle one GradingCompleted for the notification subscriber: webhook once, then record."""

from __future__ import annotations

import logging
from enum import StrEnum

from services.notification.webhook import WebhookSender
from shared.domain.events import GradingCompleted
from shared.ports import ProcessedEvents

SUBSCRIBER = "notification"
log = logging.getLogger(__name__)


class Handled(StrEnum):
    """What handling an event amounted to."""

    DUPLICATE = "duplicate"
    DELIVERED = "delivered"
    NO_CALLBACK = "no-callback"


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
            record["callback_status"] = self._sender.send(event, event.callback_url)
            handled = Handled.DELIVERED
        else:
            handled = Handled.NO_CALLBACK
        # Two concurrent deliveries may both send; the client dedupes on webhook-id.
        self._processed.add(SUBSCRIBER, event.event_id, record)
        log.info(
            "event notified" if handled is Handled.DELIVERED else "event has no callback_url",
            extra={"event_id": event.event_id, "outcome": event.outcome.value},
        )
        return handled
