"""Every push a subscriber receives leaves one log line saying what became of it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.analytics.app import create_app
from shared.adapters.embedded.api_key_store import SqliteApiKeyStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.config.settings import Settings
from shared.domain.errors import DependencyUnavailable
from tests.contract.harness_events import sample_event
from tests.fakes import FakeProcessedEvents
from tests.support.push import AUTH, PUSH_TOKEN, pubsub_push_body, restored_root_logger


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    with restored_root_logger():
        yield


class FlakyProcessedEvents(FakeProcessedEvents):
    """Refuses the first `failures` records as an unreachable store would."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    def add(self, subscriber: str, event_id: str, record: dict[str, object]) -> bool:
        if self.failures:
            self.failures -= 1
            raise DependencyUnavailable("Firestore create failed: unavailable")
        return super().add(subscriber, event_id, record)


def push_lines(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    return [line for line in lines if line.get("message") == "push answered"]


def test_each_push_is_logged_with_its_message_delivery_and_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = Settings(data_dir=tmp_path, push_token=PUSH_TOKEN)  # type: ignore[arg-type]
    keys = SqliteApiKeyStore(SqliteDatabase(settings.database_path))
    processed = FlakyProcessedEvents(failures=1)
    client = create_app(settings, processed, None, keys).test_client()
    event = sample_event()
    body = pubsub_push_body(event, "analytics", "m-1")
    body["deliveryAttempt"] = 1
    assert client.post("/pubsub/push", json=body, headers=AUTH).status_code == 503
    body["deliveryAttempt"] = 2
    assert client.post("/pubsub/push", json=body, headers=AUTH).status_code == 204
    assert client.post("/pubsub/push", json={"message": {}}, headers=AUTH).status_code == 204
    failed, acknowledged, malformed = push_lines(capsys)
    for line, attempt, status in ((failed, 1, 503), (acknowledged, 2, 204)):
        assert line["status"] == status
        assert line["message_id"] == "m-1" and line["delivery_attempt"] == attempt
        assert line["event_id"] == event.event_id and line["job_id"] == event.job_id
        assert line["subscription"] == "projects/local/subscriptions/analytics"
    assert malformed["status"] == 204 and malformed["message_id"] is None
