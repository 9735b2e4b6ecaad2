"""Record each GradingCompleted once for reporting (BigQuery does this on Google Cloud)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from shared.codecs.push_envelope import ReceivedEvent
from shared.ports import ProcessedEvents

SUBSCRIBER = "analytics"
log = logging.getLogger(__name__)


#: Never kept for reporting: a callback URL may carry the client's token (events from
#: before it was left out of the event carried it).
PRIVATE_FIELDS = frozenset({"callback_url"})


def public_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """The record without the fields reports never show."""
    return {k: v for k, v in record.items() if k not in PRIVATE_FIELDS}


def analytics_record(received: ReceivedEvent) -> dict[str, Any]:
    """The stored row: the event data plus when it happened and was published."""
    event = received.event
    return {
        **public_record(event.data()),
        "event_id": event.event_id,
        "occurred_at": event.occurred_at.isoformat(),
        "publish_time": received.publish_time.isoformat() if received.publish_time else None,
    }


def record_event(processed: ProcessedEvents, received: ReceivedEvent) -> bool:
    """Store the event unless it already was; True when this call stored it."""
    created = processed.add(SUBSCRIBER, received.event.event_id, analytics_record(received))
    log.info(
        "event recorded" if created else "event already recorded",
        extra={"event_id": received.event.event_id, "outcome": received.event.outcome.value},
    )
    return created
