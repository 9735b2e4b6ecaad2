"""`gradeq reviews request` with a student's ID token, `gradeq reviews answer` with a
reviewer key: a regrade request asked and answered from the command line."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from pydantic import SecretStr
from typer.testing import CliRunner
from werkzeug.serving import make_server

from gradeq.cli.app import app
from services.intake.app import create_app
from services.intake.auth.firebase import CachingRequest, FirebaseAuthenticator
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.assignment import Assignment
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest, Job
from tests.unit.test_cli import as_json
from tests.unit.test_intake_firebase_auth import (
    PROJECT,
    SESSION_LIFETIME_S,
    FakeCertEndpoint,
    token,
)

REVIEWER_KEY = "cli-reviewer-key"
STUDENT_TOKEN = token(SESSION_LIFETIME_S, gradeq_client="client-a", sub="ada")


@pytest.fixture
def url(settings: Settings, adapters: Adapters, clock: FrozenClock) -> Iterator[str]:
    reviewers = settings.model_copy(
        update={"reviewer_keys": SecretStr(f"client-a/ms={REVIEWER_KEY}")}
    )
    firebase = FirebaseAuthenticator(
        PROJECT, "gradeq_client", {}, CachingRequest(FakeCertEndpoint())
    )
    intake = create_app(reviewers, adapters, clock, firebase=firebase)
    server = make_server("127.0.0.1", 0, intake, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    thread.join()


def _as(url: str, credential: str, *args: str) -> Any:
    env = {"GRADEQ_URL": url, "GRADEQ_API_KEY": credential, "GRADEQ_CONFIG": "/nonexistent"}
    result = CliRunner().invoke(app, list(args), env=env)
    assert result.exit_code == 0, result.output
    return as_json(result)


def test_a_student_asks_and_a_reviewer_changes_the_grade(
    url: str, adapters: Adapters, clock: FrozenClock
) -> None:
    now = clock.now()
    assert adapters.assignments is not None
    until = (now + timedelta(days=1)).isoformat()
    adapters.assignments.create(
        Assignment.new(
            "a-1",
            "client-a",
            "t",
            "light",
            10.0,
            "grading-v1",
            now,
            {"regrade_requests_until": until},
        )
    )
    request = GradingRequest("s1", "an answer", "light", 10, assignment_id="a-1")
    job = Job.new("job-1", "client-a", request, "fp", now, author="ada")
    job = job.claim("w", now, timedelta(seconds=30)).succeed("w", GradeResult(4, 10, "ok"), now)
    adapters.store.create(job)

    asked = _as(url, STUDENT_TOKEN, "reviews", "request", "job-1", "--reason", "see p.2", "--json")
    assert asked["regrade_request"]["reason"] == "see p.2"
    listed = _as(url, REVIEWER_KEY, "reviews", "list", "--json")
    assert [(r["job_id"], r["reasons"]) for r in listed] == [("job-1", ["regrade-request"])]
    env = {"GRADEQ_URL": url, "GRADEQ_API_KEY": REVIEWER_KEY, "GRADEQ_CONFIG": "/nonexistent"}
    shown = CliRunner().invoke(app, ["reviews", "show", "job-1"], env=env)
    assert shown.exit_code == 0 and "regrade request (open): see p.2" in shown.output
    answered = _as(
        url,
        REVIEWER_KEY,
        "reviews",
        "answer",
        "job-1",
        "--score",
        "6",
        "--reason",
        "yes",
        "--json",
    )
    assert answered["result"]["score"] == 6
    assert answered["regrade_request"]["answer"] == "change"
