"""EventPublisher on Pub/Sub: a binary-mode CloudEvent per message, confirmed before return."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable

from google.api_core import exceptions as gexc
from google.cloud.pubsub_v1 import PublisherClient

from shared.adapters.google import metering
from shared.domain.errors import DependencyUnavailable
from shared.domain.events import AssignmentGraded, GradePosted, GradeReviewed, GradingCompleted

#: Turns an event into (data, attributes): `shared.codecs.cloudevent.to_pubsub`.
Encoder = Callable[
    [GradingCompleted | AssignmentGraded | GradeReviewed | GradePosted],
    tuple[bytes, dict[str, str]],
]


class PubSubEventPublisher:
    """Publishes GradingCompleted and waits for the message id (with a timeout)."""

    def __init__(
        self,
        client: PublisherClient,
        topic_path: str,
        timeout_s: float,
        encode: Encoder | None = None,
    ) -> None:
        if encode is None:
            from shared.codecs.cloudevent import to_pubsub

            encode = to_pubsub
        self._client = client
        self._topic_path = topic_path
        self._timeout_s = timeout_s
        self._encode = encode
        self.meter = metering.Meter()

    def publish(
        self, event: GradingCompleted | AssignmentGraded | GradeReviewed | GradePosted
    ) -> str:
        data, attributes = self._encode(event)
        self.meter.add(metering.PUBSUB_PUBLISHES)
        size = len(data) + sum(len(k) + len(v) for k, v in attributes.items())
        self.meter.add(metering.PUBSUB_BYTES, size)
        try:
            future = self._client.publish(self._topic_path, data, **attributes)
            # Resolving the future is what makes the event durable: only then may the
            # worker report success. A timed-out publish may still land later; the
            # stable event id lets subscribers drop that duplicate.
            message_id: str = future.result(timeout=self._timeout_s)
        except concurrent.futures.TimeoutError as exc:
            raise DependencyUnavailable(
                f"Pub/Sub publish not confirmed within {self._timeout_s}s"
            ) from exc
        except (gexc.GoogleAPICallError, gexc.RetryError) as exc:
            raise DependencyUnavailable(f"Pub/Sub publish failed: {exc}") from exc
        return message_id

    def ping(self) -> None:
        try:
            # No retry: a readiness probe answers within its own timeout.
            self._client.get_topic(topic=self._topic_path, retry=None, timeout=self._timeout_s)
        except gexc.PermissionDenied:
            # Reachable: the publisher role lacks pubsub.topics.get, and a probe must
            # not need more rights than the work itself.
            return
        except (gexc.GoogleAPICallError, gexc.RetryError) as exc:
            raise DependencyUnavailable(f"Pub/Sub topic unreachable: {exc}") from exc
