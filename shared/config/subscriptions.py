"""Topic and push subscriptions, read from the JSON file terraform also reads.

`shared/config/subscriptions.json` is the single source: the embedded bus enforces its
ack deadline, retry policy and dead-letter budget, and terraform builds the Pub/Sub
subscriptions from it, so local runs and Google Cloud cannot drift apart.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from shared.config.queues import parse_duration

DEFAULT_SUBSCRIPTIONS_FILE = Path(__file__).parent / "subscriptions.json"


@dataclass(frozen=True)
class SubscriptionConfig:
    """One push subscription's delivery policy."""

    name: str
    push_path: str
    ack_deadline: timedelta
    minimum_backoff: timedelta
    maximum_backoff: timedelta
    max_delivery_attempts: int

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
        subscriptions[name] = SubscriptionConfig(
            name=name,
            push_path=sub["push_path"],
            ack_deadline=timedelta(seconds=int(sub["ack_deadline_seconds"])),
            minimum_backoff=parse_duration(policy["minimum_backoff"]),
            maximum_backoff=parse_duration(policy["maximum_backoff"]),
            max_delivery_attempts=int(sub["max_delivery_attempts"]),
        )
    return TopicConfig(topic=raw["topic"], subscriptions=subscriptions)
