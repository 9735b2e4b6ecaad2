"""The embedded bus's BigQuery subscriptions: the bus writes each message into the records.

On Google Cloud a BigQuery subscription (terraform/pubsub.tf, `bigquery_config`) has no
subscriber service: Pub/Sub writes each message into the table itself. The bus does the
same for a subscription of kind `bigquery`: it decodes the message's GradingCompleted and
records it with the analytics recorder (services/analytics/recorder.py) in the shared
SQLite file, where the analytics service reads its reports. As the table keeps every
message (use_table_schema=false), a message that does not decode is recorded as
malformed, once per message id; an event recorded before (a redelivery, or the same
event published again) is not recorded twice. Events of the topic's other types are
acknowledged without a record, as the analytics push route does. A write that fails
raises: the bus retries it with the subscription's retry policy and dead-letters it
after max_delivery_attempts, as a failed push.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from localcloud.pubsub.deliveries import PushDelivery
from services.analytics.recorder import SUBSCRIBER, record_event
from shared.codecs.cloudevent import from_pubsub
from shared.codecs.push_envelope import ReceivedEvent
from shared.config.subscriptions import SubscriptionConfig
from shared.domain.errors import GradeqError
from shared.http.subscriber import IGNORED_TYPES, record_malformed_message
from shared.ports import ProcessedEvents

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TableSubscription:
    """A subscription the bus delivers by writing into `processed`'s analytics records."""

    config: SubscriptionConfig
    processed: ProcessedEvents
    project: str = "local"

    def write(self, delivery: PushDelivery) -> None:
        """Record the message's event, or the message as malformed; raise when the store fails."""
        kind = _event_type(delivery)
        if kind in IGNORED_TYPES:
            log.info("event of another type acknowledged", extra={"type": kind})
            return
        try:
            received = self._received(delivery)
        except GradeqError as exc:
            key, size = "message:" + delivery.message_id, len(delivery.data)
            record_malformed_message(self.processed, SUBSCRIBER, key, exc.detail, size)
            return
        record_event(self.processed, received)

    def _received(self, delivery: PushDelivery) -> ReceivedEvent:
        return ReceivedEvent(
            event=from_pubsub(delivery.data, delivery.attributes),
            message_id=delivery.message_id,
            publish_time=datetime.fromisoformat(delivery.publish_time),
            subscription=f"projects/{self.project}/subscriptions/{delivery.subscription}",
            delivery_attempt=delivery.attempt,
            attributes=delivery.attributes,
        )


def _event_type(delivery: PushDelivery) -> str | None:
    found = {k.lower(): v for k, v in delivery.attributes.items()}.get("ce-type")
    return found if isinstance(found, str) else None
