"""The bus command line: graceful shutdown on SIGTERM, the BigQuery subscription written
into the database, and the dead-letters listing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

from localcloud.pubsub.cli import main
from localcloud.pubsub.deliveries import SqliteDeliveryStore
from shared.adapters.embedded.event_publisher import SqliteEventPublisher
from shared.adapters.embedded.processed_events import SqliteProcessedEvents
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.config.settings import Settings
from shared.config.subscriptions import (
    DEFAULT_SUBSCRIPTIONS_FILE,
    SubscriptionConfig,
    TopicConfig,
    load_subscriptions,
)
from tests.contract.harness_events import sample_event

ONE_SHOT = SubscriptionConfig(
    name="notification",
    push_path="/pubsub/push",
    ack_deadline=timedelta(seconds=1),
    minimum_backoff=timedelta(seconds=0.01),
    maximum_backoff=timedelta(seconds=0.01),
    max_delivery_attempts=1,
)


def _dead_letter(db_path: Path) -> str:
    db = SqliteDatabase(db_path)
    topic = TopicConfig("grading-completed", {"notification": ONE_SHOT})
    message_id = SqliteEventPublisher(db, topic).publish(sample_event())
    store = SqliteDeliveryStore(db)
    [delivery], _ = store.claim(topic.subscriptions, 1, time.time())
    store.dead_letter(delivery, 500, "HTTP 500: boom")
    return message_id


def test_dead_letters_are_listed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    message_id = _dead_letter(tmp_path / "bus.sqlite3")
    assert main(["dead-letters", "--db", str(tmp_path / "bus.sqlite3")]) == 0
    line = capsys.readouterr().out.strip()
    assert f"message={message_id}" in line
    assert "attempts=1" in line and "status=500" in line


def test_dead_letters_as_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    message_id = _dead_letter(tmp_path / "bus.sqlite3")
    main(["dead-letters", "--db", str(tmp_path / "bus.sqlite3"), "--json"])
    [row] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert row["message_id"] == message_id
    assert row["subscription"] == "notification"
    assert json.loads(row["data"])["outcome"] == "succeeded"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--subscription", "billing=http://127.0.0.1:1"], "unknown subscription 'billing'"),
        (["--subscription", "notification"], "NAME=URL"),
        (["--subscription", "analytics=http://127.0.0.1:1"], "analytics is a bigquery"),
    ],
)
def test_bad_subscriptions_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str], message: str
) -> None:
    monkeypatch.delenv("GRADEQ_BUS_SUBSCRIPTIONS", raising=False)
    with pytest.raises(SystemExit, match=message):
        main(["--db", str(tmp_path / "bus.sqlite3"), *argv])


def test_without_any_subscription_to_deliver_the_bus_refuses_to_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GRADEQ_BUS_SUBSCRIPTIONS", raising=False)
    raw = json.loads(DEFAULT_SUBSCRIPTIONS_FILE.read_text())
    del raw["subscriptions"]["analytics"]  # push subscriptions only, and no URL for them
    only_push = tmp_path / "subscriptions.json"
    only_push.write_text(json.dumps(raw))
    argv = ["--db", str(tmp_path / "bus.sqlite3"), "--subscriptions-file", str(only_push)]
    with pytest.raises(SystemExit, match="no endpoints"):
        main(argv)


def test_sigterm_stops_the_bus_gracefully(tmp_path: Path) -> None:
    env = {**os.environ, "GRADEQ_DATA_DIR": str(tmp_path), "GRADEQ_PUSH_TOKEN": "t"}
    # Published before the bus starts: the analytics records get it without any URL.
    db = SqliteDatabase(Settings(data_dir=tmp_path).database_path)
    event = sample_event()
    SqliteEventPublisher(db, load_subscriptions()).publish(event)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "localcloud.pubsub",
            "--subscription",
            "notification=http://127.0.0.1:9",
            "--subscription",
            "gradebook=http://127.0.0.1:9",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    try:
        started = json.loads(process.stdout.readline())
        assert started["message"] == "bus started"
        assert started["subscriptions"] == ["analytics", "gradebook", "notification"]
        records = SqliteProcessedEvents(db)
        deadline = time.monotonic() + 10
        while not records.records("analytics") and time.monotonic() < deadline:
            time.sleep(0.05)
        [record] = records.records("analytics")
        assert record["event_id"] == event.event_id
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    rest = process.stdout.read()
    assert "received SIGTERM, stopping" in rest and "bus stopped" in rest
    process.stdout.close()
