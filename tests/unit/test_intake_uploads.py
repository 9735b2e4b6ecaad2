"""POST /v1/uploads, the embedded signed-URL PUT, and a job naming its uploads.

Hostile files (an executable declared or dressed as a PNG, a zip bomb, a PDF over the
limit, a path out of a zip) are each refused with a 4xx problem, nothing of them is kept
past its limit, and no request answers 5xx.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from services.intake.app import create_app
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.errors import PROBLEM_BASE
from shared.domain.uploads import object_name
from tests.support import files
from tests.unit.conftest import API_KEY, OTHER_KEY

LIMIT = 64 * 1024


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(
        update={
            "upload_max_file_bytes": LIMIT,
            "upload_max_archive_expanded_bytes": 16 * 1024,
            "upload_burst": 30,
        }
    )


@pytest.fixture
def client(settings: Settings, adapters: Adapters, clock: FrozenClock) -> FlaskClient:
    return create_app(settings, adapters, clock).test_client()


def _auth(key: str = API_KEY) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _upload(client: FlaskClient, content_type: str, size: int, key: str = API_KEY) -> TestResponse:
    body = {"content_type": content_type, "size": size}
    return client.post("/v1/uploads", json=body, headers=_auth(key))


def _put(client: FlaskClient, answer: dict[str, Any], data: bytes, **headers: str) -> TestResponse:
    parts = urlsplit(answer["upload_url"])
    sent = {**answer["headers"], **headers}
    return client.put(parts.path, query_string=parts.query, data=data, headers=sent)


def _uploaded(client: FlaskClient, content_type: str, data: bytes) -> dict[str, Any]:
    """Ask for an upload, PUT the data, and return what a job names."""
    answer = _upload(client, content_type, len(data))
    assert answer.status_code == 201, answer.json
    assert _put(client, answer.get_json(), data).status_code == 200
    return {
        "upload_id": answer.get_json()["upload_id"],
        "content_type": content_type,
        "size": len(data),
    }


def _submit(client: FlaskClient, *refs: dict[str, Any], key: str = "k1") -> TestResponse:
    body = {"submission_id": "s1", "rubric": ["shows the working"], "files": list(refs)}
    return client.post("/v1/grading-jobs", json=body, headers={**_auth(), "Idempotency-Key": key})


def _problem(response: TestResponse, status: int, slug: str) -> None:
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.mimetype == "application/problem+json"
    assert response.get_json()["type"] == PROBLEM_BASE + slug


def _stored(settings: Settings, upload_id: str) -> Path:
    return settings.data_dir / "uploads" / object_name("client-a", upload_id)


def test_an_upload_answers_a_signed_put_url_bound_to_type_and_size(client: FlaskClient) -> None:
    answer = _upload(client, "image/png", 1234)
    assert answer.status_code == 201
    body = answer.get_json()
    assert body["upload_id"].startswith("up_")
    assert body["method"] == "PUT"
    assert body["headers"] == {"Content-Type": "image/png"}
    query = urlsplit(body["upload_url"]).query
    assert "size=1234" in query and "signature=" in query and "expires=" in query


def test_a_job_names_an_uploaded_photo_and_keeps_its_object(
    client: FlaskClient, settings: Settings
) -> None:
    ref = _uploaded(client, "image/png", files.png())
    response = _submit(client, {**ref, "name": "page1.png"})
    assert response.status_code == 202, response.json
    assert response.get_json()["files"] == [{**ref, "name": "page1.png"}]
    assert _stored(settings, ref["upload_id"]).read_bytes() == files.png()


def test_a_text_job_shows_no_files(client: FlaskClient) -> None:
    body = {"submission_id": "s1", "rubric": ["r"], "answer": "a"}
    response = client.post(
        "/v1/grading-jobs", json=body, headers={**_auth(), "Idempotency-Key": "t"}
    )
    assert response.status_code == 202 and "files" not in response.get_json()


def test_a_job_needs_an_answer_or_files(client: FlaskClient) -> None:
    response = _submit(client)
    _problem(response, 400, "validation-error")


def test_another_clients_upload_cannot_be_named(client: FlaskClient) -> None:
    answer = _upload(client, "image/png", len(files.png()), key=OTHER_KEY)
    assert _put(client, answer.get_json(), files.png()).status_code == 200
    ref = {"upload_id": answer.get_json()["upload_id"], "content_type": "image/png"}
    _problem(_submit(client, {**ref, "size": len(files.png())}), 422, "upload-not-found")


def test_a_type_that_cannot_be_graded_is_refused_up_front(client: FlaskClient) -> None:
    _problem(_upload(client, "application/x-msdownload", 100), 415, "upload-type-not-allowed")


def test_a_declared_size_differing_from_the_object_is_refused(client: FlaskClient) -> None:
    ref = _uploaded(client, "image/png", files.png())
    _problem(_submit(client, {**ref, "size": ref["size"] + 1}), 422, "upload-mismatch")


def test_an_executable_declared_as_a_png_is_refused_and_deleted(
    client: FlaskClient, settings: Settings
) -> None:
    ref = _uploaded(client, "image/png", files.EXECUTABLE)
    _problem(_submit(client, ref), 422, "upload-mismatch")
    assert not _stored(settings, ref["upload_id"]).exists()


def test_a_png_signature_pasted_on_an_executable_is_refused(
    client: FlaskClient, settings: Settings
) -> None:
    ref = _uploaded(client, "image/png", files.png()[:8] + files.EXECUTABLE)
    _problem(_submit(client, ref), 422, "upload-mismatch")
    assert not _stored(settings, ref["upload_id"]).exists()


def test_a_zip_bomb_is_refused_without_being_expanded(
    client: FlaskClient, settings: Settings
) -> None:
    bomb = files.zip_bomb(50 * 1024 * 1024)
    assert len(bomb) < LIMIT
    ref = _uploaded(client, "application/zip", bomb)
    _problem(_submit(client, ref), 422, "upload-archive-refused")
    assert not _stored(settings, ref["upload_id"]).exists()


def test_a_path_out_of_a_zip_is_refused(client: FlaskClient) -> None:
    archive = files.zip_of({"src/main.py": b"print(1)\n", "../../etc/cron.d/x.txt": b"* * *"})
    ref = _uploaded(client, "application/zip", archive)
    response = _submit(client, ref)
    _problem(response, 422, "upload-archive-refused")
    assert "outside the archive" in response.get_json()["detail"]


def test_a_zip_of_source_files_is_accepted(client: FlaskClient) -> None:
    archive = files.zip_of({"src/main.py": b"print(1)\n", "README.md": b"# lab 3\n"})
    assert _submit(client, _uploaded(client, "application/zip", archive)).status_code == 202


def test_a_pdf_over_the_limit_gets_no_url(client: FlaskClient) -> None:
    response = _upload(client, "application/pdf", LIMIT + 1)
    _problem(response, 413, "upload-too-large")
    assert response.get_json()["limit"] == LIMIT


def test_a_body_longer_than_signed_is_refused_and_nothing_is_kept(
    client: FlaskClient, settings: Settings
) -> None:
    small = files.pdf()
    answer = _upload(client, "application/pdf", len(small))
    big = files.pdf(padding=LIMIT)
    response = _put(client, answer.get_json(), big)
    assert 400 <= response.status_code < 500
    assert response.mimetype == "application/problem+json"
    uploads = settings.data_dir / "uploads"
    assert not any(p.is_file() for p in uploads.rglob("*")) if uploads.exists() else True


def test_a_put_of_another_type_than_signed_is_refused(client: FlaskClient) -> None:
    answer = _upload(client, "application/pdf", len(files.pdf()))
    response = _put(client, answer.get_json(), files.pdf(), **{"Content-Type": "text/plain"})
    _problem(response, 422, "upload-mismatch")


def test_a_tampered_url_is_refused(client: FlaskClient) -> None:
    answer = _upload(client, "application/pdf", len(files.pdf())).get_json()
    answer["upload_url"] = answer["upload_url"].replace("size=", "size=9")
    _problem(_put(client, answer, files.pdf()), 403, "upload-signature-invalid")


def test_text_that_is_not_text_is_refused(client: FlaskClient) -> None:
    ref = _uploaded(client, "text/plain", b"\x00\x01binary\xff")
    _problem(_submit(client, ref), 422, "upload-mismatch")


def test_a_zip_with_an_unreadable_compression_method_is_a_4xx(client: FlaskClient) -> None:
    archive = bytearray(files.zip_of({"main.py": b"print(1)\n"}))
    # Deflate64 (method 9), which zipfile cannot read, in the local and central headers.
    for signature in (b"PK\x03\x04", b"PK\x01\x02"):
        at = archive.index(signature)
        offset = at + (8 if signature == b"PK\x03\x04" else 10)
        archive[offset : offset + 2] = (9).to_bytes(2, "little")
    ref = _uploaded(client, "application/zip", bytes(archive))
    _problem(_submit(client, ref), 422, "upload-archive-refused")


@pytest.mark.parametrize(
    "data",
    [b"PK\x03\x04" + b"\x00" * 40, b"PK\x05\x06" + b"\x00" * 18, b"not a zip at all"],
)
def test_broken_zips_are_4xx_not_5xx(client: FlaskClient, data: bytes) -> None:
    ref = _uploaded(client, "application/zip", data)
    response = _submit(client, ref)
    assert response.status_code == 422, response.get_data(as_text=True)


def test_upload_urls_are_rate_limited_per_client(client: FlaskClient) -> None:
    for _ in range(30):
        assert _upload(client, "image/png", 100).status_code == 201
    refused = _upload(client, "image/png", 100)
    _problem(refused, 429, "rate-limited")
    assert int(refused.headers["Retry-After"]) >= 1
    # Another client's bucket is its own.
    assert _upload(client, "image/png", 100, key=OTHER_KEY).status_code == 201


def test_a_refused_resubmission_keeps_a_file_an_accepted_job_names(
    client: FlaskClient, settings: Settings
) -> None:
    ref = _uploaded(client, "image/png", files.png())
    assert _submit(client, ref, key="first").status_code == 202
    # The same upload named again, declared otherwise: refused, but the first job needs it.
    _problem(_submit(client, {**ref, "size": ref["size"] + 1}, key="again"), 422, "upload-mismatch")
    assert _stored(settings, ref["upload_id"]).exists()


def test_a_refused_file_no_job_names_is_deleted(client: FlaskClient, settings: Settings) -> None:
    ref = _uploaded(client, "image/png", files.png())
    _problem(_submit(client, {**ref, "size": ref["size"] + 1}), 422, "upload-mismatch")
    assert not _stored(settings, ref["upload_id"]).exists()


def test_upload_bytes_per_client_and_day_are_bounded(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    quota = settings.model_copy(update={"upload_max_bytes_per_day": 3000})
    client = create_app(quota, adapters, clock).test_client()
    assert _upload(client, "image/png", 2000).status_code == 201
    refused = _upload(client, "image/png", 1001)
    _problem(refused, 429, "upload-quota-exceeded")
    assert refused.get_json()["limit"] == 3000
    midnight = (clock.now() + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    assert int(refused.headers["Retry-After"]) == int((midnight - clock.now()).total_seconds())
    assert _upload(client, "image/png", 1000).status_code == 201  # the refusal was not counted
    assert _upload(client, "image/png", 1000, key=OTHER_KEY).status_code == 201  # per client
    clock.advance(timedelta(days=1))
    assert _upload(client, "image/png", 2000).status_code == 201  # a new day
