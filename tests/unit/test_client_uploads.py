"""The typed client and the CLI submit answer files: upload through the signed URL, then
name the uploads in the job (against the intake app served on loopback)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner
from werkzeug.serving import make_server

from gradeq.cli.app import app
from gradeq.client import GradeqClient, GradeqError, content_type_of
from services.intake.app import create_app
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.uploads import object_name
from tests.support import files
from tests.unit.conftest import API_KEY

REQUEST = {"submission_id": "sub-1", "rubric": ["shows the working"], "max_score": 10}


@pytest.fixture
def url(settings: Settings, adapters: Adapters, clock: FrozenClock) -> Iterator[str]:
    server = make_server("127.0.0.1", 0, create_app(settings, adapters, clock), threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    thread.join()


@pytest.fixture
def photo(tmp_path: Path) -> Path:
    path = tmp_path / "page-1.png"
    path.write_bytes(files.png())
    return path


def _stored_uploads(settings: Settings) -> list[bytes]:
    root = settings.data_dir / "uploads"
    return [p.read_bytes() for p in root.rglob("up_*") if not p.name.endswith(".json")]


def test_the_client_submits_a_job_with_a_file(url: str, photo: Path, settings: Settings) -> None:
    client = GradeqClient(url, API_KEY, max_attempts=1)
    job = client.submit(REQUEST, files=[photo])
    assert job.status == "PENDING"
    assert _stored_uploads(settings) == [files.png()]


def test_the_client_reports_a_refused_file_as_its_problem(url: str, tmp_path: Path) -> None:
    fake = tmp_path / "page.png"
    fake.write_bytes(files.EXECUTABLE)
    client = GradeqClient(url, API_KEY, max_attempts=1)
    with pytest.raises(GradeqError) as raised:
        client.submit(REQUEST, files=[fake])
    assert (raised.value.status, raised.value.slug) == (422, "upload-mismatch")


def test_upload_returns_the_reference_a_job_names(url: str, settings: Settings) -> None:
    ref = GradeqClient(url, API_KEY).upload(b"def f():\n    return 1\n", "text/x-python", "f.py")
    assert ref["upload_id"].startswith("up_")
    assert (ref["content_type"], ref["size"], ref["name"]) == ("text/x-python", 22, "f.py")
    stored = settings.data_dir / "uploads" / object_name("client-a", ref["upload_id"])
    assert stored.read_bytes() == b"def f():\n    return 1\n"


def test_gradeq_submit_file(url: str, photo: Path, tmp_path: Path, settings: Settings) -> None:
    request = tmp_path / "request.json"
    request.write_text(json.dumps(REQUEST))
    env = {"GRADEQ_URL": url, "GRADEQ_API_KEY": API_KEY, "GRADEQ_CONFIG": "/nonexistent"}
    result = CliRunner().invoke(
        app, ["submit", str(request), "--file", str(photo), "--json"], env=env
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["job"]["status"] == "PENDING"
    assert _stored_uploads(settings) == [files.png()]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("scan.PDF", "application/pdf"),
        ("page.jpg", "image/jpeg"),
        ("page.webp", "image/webp"),
        ("lab.zip", "application/zip"),
        ("main.py", "text/x-python"),
        ("notes", "text/plain"),
    ],
)
def test_content_types_are_guessed_from_names(name: str, expected: str) -> None:
    assert content_type_of(Path(name)) == expected
