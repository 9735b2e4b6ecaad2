"""The Google family takes its Firestore collections from the settings (no call is made)."""

from __future__ import annotations

from pathlib import Path

import hcl2
import pytest

from shared.bootstrap.google import GoogleFamily
from shared.config.settings import Backend, Settings

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _emulators(monkeypatch: pytest.MonkeyPatch) -> None:
    # Anonymous credentials and no request: building a client does not connect.
    for name in ("FIRESTORE_EMULATOR_HOST", "PUBSUB_EMULATOR_HOST", "CLOUD_TASKS_EMULATOR_HOST"):
        monkeypatch.setenv(name, "127.0.0.1:9")


def test_adapters_asked_for_twice_share_one_client_per_api() -> None:
    family = GoogleFamily(Settings(backend=Backend.GOOGLE, project_id="demo-gradeq"))
    first, second = family.task_queue(), family.task_queue()
    assert first is not second and first._client is second._client
    publisher = family.event_publisher()
    assert publisher._client is family.event_publisher()._client
    assert family.job_store()._client is family.api_key_store()._client
    publisher._client.stop()


def test_the_processed_events_collection_is_the_one_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GRADEQ_PROCESSED_EVENTS_COLLECTION", "dedup_records_v2")
    settings = Settings(backend=Backend.GOOGLE, project_id="demo-gradeq")
    assert settings.processed_events_collection == "dedup_records_v2"
    family = GoogleFamily(settings)
    processed = family.processed_events()
    assert processed._events.id == "dedup_records_v2"
    assert family.event_records() is processed


def test_the_default_collection_is_terraform_default() -> None:
    """terraform's TTL policy covers the collection the subscribers write by default."""
    options = hcl2.SerializationOptions(strip_string_quotes=True, explicit_blocks=False)
    with (REPO / "terraform" / "variables.tf").open() as handle:
        variables = hcl2.load(handle, serialization_options=options)["variable"]
    [declared] = [
        v["processed_events_collection"] for v in variables if "processed_events_collection" in v
    ]
    family = GoogleFamily(Settings(backend=Backend.GOOGLE, project_id="demo-gradeq"))
    assert family.processed_events()._events.id == declared["default"]
