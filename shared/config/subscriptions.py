"""Topic and subscriptions, read from the JSON file terraform also reads.

`shared/config/subscriptions.json` is the single source: the embedded bus enforces its
ack deadline, retry policy and dead-letter budget, and terraform builds the Pub/Sub
subscriptions from it, so local runs and Google Cloud cannot drift apart. Each names its
`kind`: `push` (Pub/Sub POSTs every message to a subscriber service) or `bigquery`
(Pub/Sub writes every message into a table itself; the embedded bus writes it into the
local records). An optional `filter` (Pub/Sub filter syntax, on message attributes)
admits only the messages the subscription acts on; the others are acknowledged for it
and never delivered (shared.config.subscription_filter).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from pathlib import Path

from shared.config.queues import parse_duration
from shared.config.subscription_filter import SubscriptionFilter

DEFAULT_SUBSCRIPTIONS_FILE = Path(__file__).parent / "subscriptions.json"


class SubscriptionKind(StrEnum):
    """How a subscription delivers: to a service over HTTP, or into a table."""

    PUSH = "push"
    BIGQUERY = "bigquery"


@dataclass(frozen=True)
class SubscriptionConfig:
    """One subscription's delivery policy."""

    name: str
    push_path: str
    ack_deadline: timedelta
    minimum_backoff: timedelta
    maximum_backoff: timedelta
    max_delivery_attempts: int
    kind: SubscriptionKind = SubscriptionKind.PUSH
    filter: SubscriptionFilter | None = None

    def admits(self, attributes: Mapping[str, str]) -> bool:
        """Whether the subscription's filter (if any) lets a message with these through."""
        return self.filter is None or self.filter.admits(attributes)

    def backoff(self, failed_attempts: int) -> timedelta:
        """Delay before the next delivery after `failed_attempts` failures (no jitter).

        Doubles from minimum_backoff and is capped at maximum_backoff, like Pub/Sub's
        exponential retry policy.
        """
        if failed_attempts < 1:
            return timedelta(0)
        seconds = self.minimum_backoff.total_seconds() * 2 ** min(failed_attempts - 1, 32)
        return timedelta(seconds=min(seconds, self.maximum_backoff.total_seconds()))


@dataclass(frozen=True)
class TopicConfig:
    """The topic and every subscription attached to it."""

    topic: str
    subscriptions: dict[str, SubscriptionConfig]


def load_subscriptions(path: Path | str = DEFAULT_SUBSCRIPTIONS_FILE) -> TopicConfig:
    """Read the topic and its subscriptions from the settings file."""
    raw = json.loads(Path(path).read_text())
    subscriptions = {}
    for name, sub in raw["subscriptions"].items():
        policy = sub["retry_policy"]
        expression = sub.get("filter")
        subscriptions[name] = SubscriptionConfig(
            name=name,
            push_path=sub["push_path"],
            ack_deadline=timedelta(seconds=int(sub["ack_deadline_seconds"])),
            minimum_backoff=parse_duration(policy["minimum_backoff"]),
            maximum_backoff=parse_duration(policy["maximum_backoff"]),
            max_delivery_attempts=int(sub["max_delivery_attempts"]),
            kind=SubscriptionKind(sub["kind"]),
            filter=SubscriptionFilter.parse(expression) if expression else None,
        )
    return TopicConfig(topic=raw["topic"], subscriptions=subscriptions)


def bigquery_subscriptions(topic: TopicConfig) -> frozenset[str]:
    """The names of the subscriptions that write into a table rather than push."""
    return frozenset(
        name
        for name, config in topic.subscriptions.items()
        if config.kind is SubscriptionKind.BIGQUERY
    )
