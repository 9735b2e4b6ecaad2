"""The subscriptions file names how each subscription delivers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shared.config.subscriptions import (
    DEFAULT_SUBSCRIPTIONS_FILE,
    SubscriptionKind,
    bigquery_subscriptions,
    load_subscriptions,
)


def test_analytics_is_a_bigquery_subscription_notification_and_gradebook_pushes() -> None:
    topic = load_subscriptions()
    kinds = {name: config.kind for name, config in topic.subscriptions.items()}
    assert kinds == {
        "notification": SubscriptionKind.PUSH,
        "analytics": SubscriptionKind.BIGQUERY,
        "gradebook": SubscriptionKind.PUSH,
    }
    assert bigquery_subscriptions(topic) == {"analytics"}


def test_an_unknown_kind_is_refused(tmp_path: Path) -> None:
    raw = json.loads(DEFAULT_SUBSCRIPTIONS_FILE.read_text())
    raw["subscriptions"]["analytics"]["kind"] = "cloud-storage"
    path = tmp_path / "subscriptions.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(ValueError, match="cloud-storage"):
        load_subscriptions(path)
