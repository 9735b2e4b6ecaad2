"""The Python client against the real intake on loopback: submit, read, list, cancel."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from gradeq.client import GradeqClient, GradeqError
from shared.adapters.embedded.api_key_store import SqliteApiKeyStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.domain.api_keys import ApiKey
from tests.support.intake_server import RunningIntake, running_intake

API_KEY, _RECORD = ApiKey.issue(
    "client-py", datetime(2025, 1, 1, tzinfo=UTC), key_id="clientpy", secret="c" * 43
)
REQUEST = {"submission_id": "s-1", "answer": "Chlorophyll absorbs light.", "rubric": ["light"]}


@pytest.fixture(scope="module")
def intake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningIntake]:
    data = tmp_path_factory.mktemp("client")
    SqliteApiKeyStore(SqliteDatabase(data / "gradeq.sqlite3")).add(_RECORD)
    with running_intake(data) as running:
        yield running


def test_the_client_drives_the_intake(intake: RunningIntake) -> None:
    client = GradeqClient(intake.url, API_KEY)
    job = client.submit(REQUEST, idempotency_key="py-1")
    assert job.status == "PENDING" and job.retry_after_s is not None
    assert client.submit(REQUEST, idempotency_key="py-1").id == job.id  # a safe retry
    assert client.get(job.id).data["submission_id"] == "s-1"
    assert [j.id for j in client.jobs(submission_id="s-1")] == [job.id]
    assert client.cancel(job.id).status == "CANCELLED"
    assert client.wait(job.id, timeout_s=5).status == "CANCELLED"
    with pytest.raises(GradeqError) as refused:
        client.submit({**REQUEST, "rubric": " "})
    assert refused.value.type.endswith("/validation-error")


def test_a_wrong_key_is_refused(intake: RunningIntake) -> None:
    with pytest.raises(GradeqError) as refused:
        GradeqClient(intake.url, "gq_nobody_" + "x" * 43).get("anything")
    assert refused.value.status == 401
