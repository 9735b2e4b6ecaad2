"""Create the Pub/Sub topic and subscriptions of `subscriptions.json` on an emulator.

Mirrors terraform/pubsub.tf for local runs: the events topic, a dead-letter topic with a
pull subscription (so parked events are kept), and one push subscription per subscriber
with its filter, ack deadline, retry policy and dead-letter budget. Safe to run twice.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from google.api_core import exceptions as gexc
from google.cloud.pubsub_v1 import PublisherClient, SubscriberClient

from shared.config.subscriptions import TopicConfig


def dead_letter_name(topic: TopicConfig) -> str:
    """The id of the dead-letter topic and of its subscription."""
    return f"{topic.topic}-dead-letter"


def _create(call: Any, **request: Any) -> None:
    with contextlib.suppress(gexc.AlreadyExists):  # created by an earlier run
        call(request=request)


def create_pubsub_topology(
    publisher: PublisherClient,
    subscriber: SubscriberClient,
    project: str,
    topic: TopicConfig,
    push_endpoints: Mapping[str, str],
) -> dict[str, str]:
    """Create everything; `push_endpoints` maps a subscription name to its full push URL.

    Returns the resource names by role: "topic", "dead_letter_topic",
    "dead_letter_subscription", and one entry per push subscription.
    """
    topic_path = publisher.topic_path(project, topic.topic)
    dead_topic = publisher.topic_path(project, dead_letter_name(topic))
    dead_subscription = subscriber.subscription_path(project, dead_letter_name(topic))
    _create(publisher.create_topic, name=topic_path)
    _create(publisher.create_topic, name=dead_topic)
    _create(subscriber.create_subscription, name=dead_subscription, topic=dead_topic)
    names = {
        "topic": topic_path,
        "dead_letter_topic": dead_topic,
        "dead_letter_subscription": dead_subscription,
    }
    for name, config in topic.subscriptions.items():
        path = subscriber.subscription_path(project, name)
        _create(
            subscriber.create_subscription,
            name=path,
            topic=topic_path,
            push_config={"push_endpoint": push_endpoints[name]},
            ack_deadline_seconds=int(config.ack_deadline.total_seconds()),
            filter=config.filter.expression if config.filter is not None else "",
            retry_policy={
                "minimum_backoff": config.minimum_backoff,
                "maximum_backoff": config.maximum_backoff,
            },
            dead_letter_policy={
                "dead_letter_topic": dead_topic,
                "max_delivery_attempts": config.max_delivery_attempts,
            },
        )
        names[name] = path
    return names
