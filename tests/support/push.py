"""Pub/Sub pushes as the subscriber apps (notification, analytics) receive them."""

from __future__ import annotations

import base64
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from shared.codecs.cloudevent import to_pubsub
from shared.domain.events import AssignmentGraded, GradePosted, GradingCompleted

PUSH_TOKEN = "push-token-for-tests"
AUTH = {"Authorization": f"Bearer {PUSH_TOKEN}"}
PUBLISH_TIME = "2025-03-04T05:06:13.5Z"


def pubsub_push_body(
    event: GradingCompleted | AssignmentGraded | GradePosted, subscription: str, message_id: str
) -> dict[str, Any]:
    """The JSON body Pub/Sub pushes for `event` to `projects/local/subscriptions/<subscription>`."""
    data, attributes = to_pubsub(event)
    return {
        "message": {
            "data": base64.b64encode(data).decode(),
            "attributes": attributes,
            "messageId": message_id,
            "publishTime": PUBLISH_TIME,
        },
        "subscription": f"projects/local/subscriptions/{subscription}",
    }


@contextmanager
def restored_root_logger() -> Iterator[None]:
    """Put back the root logger's handlers and level (create_app configures logging)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
