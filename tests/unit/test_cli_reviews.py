"""`gradeq reviews` with a reviewer key, and `gradeq erase` with the client's key."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from pydantic import SecretStr
from typer.testing import CliRunner

from gradeq.cli.app import app
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest, Job
from shared.domain.review import HoldReason, Release, ReviewState, ReviewStatus
from tests.unit.test_cli import as_json, gradeq, url  # noqa: F401

REVIEWER_KEY = "cli-reviewer-key"


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"reviewer_keys": SecretStr(f"client-a/ms={REVIEWER_KEY}")})


def as_reviewer(url: str, *args: str) -> Any:  # noqa: F811
    env = {"GRADEQ_URL": url, "GRADEQ_API_KEY": REVIEWER_KEY, "GRADEQ_CONFIG": "/nonexistent"}
    result = CliRunner().invoke(app, list(args), env=env)
    assert result.exit_code == 0, result.output
    return result


def held(adapters: Adapters, clock: FrozenClock) -> str:
    """A graded job of student "ada", held for review."""
    now = clock.now()
    request = GradingRequest("s1", "an answer", "light", 2, student_id="ada")
    job = Job.new("job-1", "client-a", request, "fp", now).claim("w", now, timedelta(seconds=30))
    state = ReviewState(ReviewStatus.HELD, (HoldReason.SAMPLED,), Release.IMMEDIATELY, now, 0)
    adapters.store.create(job.succeed("w", GradeResult(1, 2, "ok"), now).hold(state))
    return job.id


def test_a_reviewer_lists_shows_and_overrides_then_the_client_erases(
    url: str,  # noqa: F811
    adapters: Adapters,
    clock: FrozenClock,
) -> None:
    job_id = held(adapters, clock)
    listed = as_json(as_reviewer(url, "reviews", "list", "--json"))
    assert [r["job_id"] for r in listed] == [job_id]
    shown = as_json(as_reviewer(url, "reviews", "show", job_id, "--json"))
    assert shown["answer"] == "an answer" and shown["model_result"]["score"] == 1
    done = as_reviewer(
        url, "reviews", "override", job_id, "--score", "2", "--reason", "full marks", "--json"
    )
    assert as_json(done)["result"]["score"] == 2
    assert as_json(as_reviewer(url, "reviews", "list", "--json")) == []

    erased = gradeq(url, "erase", "student", "ada", "--json")
    assert erased.exit_code == 0, erased.output
    assert as_json(erased)["removed"]["jobs"] == [job_id]
    assert as_json(erased)["removed"]["reviews"] == 1
    assert adapters.store.get(job_id) is None
    missing = gradeq(url, "erase", "job", job_id, "--json")
    assert missing.exit_code != 0 and as_json(missing)["error"]["type"] == "job-not-found"
