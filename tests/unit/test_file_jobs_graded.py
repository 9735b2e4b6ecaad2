"""A job of uploaded files from the intake to the worker, with the offline grader the
settings build: a text file is read and graded; a photo alone is a permanent, named
failure (`grading-file-unusable`)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest
from flask.testing import FlaskClient

from services.intake.app import create_app as create_intake
from services.worker.app import create_app as create_worker
from shared.bootstrap import Adapters
from shared.bootstrap.graders import grader_for
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.status import JobStatus
from tests.support import files
from tests.unit.conftest import API_KEY
from tests.unit.test_worker_api import deliver

RUBRIC = ["mentions the chloroplast", "states that oxygen is released"]


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"grader_latency_s": 0.0})


def _submit_files(client: FlaskClient, *uploads: tuple[str, str, bytes]) -> str:
    refs: list[dict[str, Any]] = []
    for name, content_type, data in uploads:
        grant = client.post(
            "/v1/uploads",
            json={"content_type": content_type, "size": len(data)},
            headers={"Authorization": f"Bearer {API_KEY}"},
        ).get_json()
        url = urlsplit(grant["upload_url"])
        put = client.put(url.path, query_string=url.query, data=data, headers=grant["headers"])
        assert put.status_code == 200
        refs.append(
            {"upload_id": grant["upload_id"], "content_type": content_type, "size": len(data)}
            | {"name": name}
        )
    response = client.post(
        "/v1/grading-jobs",
        json={"submission_id": "s1", "rubric": RUBRIC, "files": refs},
        headers={"Authorization": f"Bearer {API_KEY}", "Idempotency-Key": "k1"},
    )
    assert response.status_code == 202, response.json
    job_id: str = response.get_json()["id"]
    return job_id


def _grade(settings: Settings, adapters: Adapters, clock: FrozenClock, job_id: str) -> Any:
    worker = create_worker(settings, adapters, grader_for(settings), clock).test_client()
    deliver(worker, job_id)
    return adapters.store.get(job_id)


def test_a_text_file_is_read_and_graded(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    intake = create_intake(settings, adapters, clock).test_client()
    notes = b"Light is absorbed in the chloroplast and oxygen is released.\n"
    job_id = _submit_files(intake, ("notes.txt", "text/plain", notes))
    job = _grade(settings, adapters, clock, job_id)
    assert job.status is JobStatus.SUCCEEDED
    assert job.result.score == 10


def test_a_photo_alone_fails_permanently_naming_the_file(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    intake = create_intake(settings, adapters, clock).test_client()
    job_id = _submit_files(intake, ("page-1.png", "image/png", files.png()))
    job = _grade(settings, adapters, clock, job_id)
    assert job.status is JobStatus.FAILED
    assert job.attempts == 1  # permanent: not retried
    assert job.error.type == "grading-file-unusable"
    assert "page-1.png (image/png)" in job.error.message
