"""The Gemini model's retirement: a warning ahead of it, then grading suspended, on a clock."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from flask.testing import FlaskClient
from pydantic import ValidationError

from services.worker.app import create_app
from shared.adapters.graders.lanes import LaneGraders
from shared.adapters.graders.lifecycle import (
    RETIREMENTS,
    RETIRING_EVENT,
    WARN_BEFORE,
    ModelLifecycle,
    ModelRetired,
    RetirementWatch,
)
from shared.bootstrap import Adapters
from shared.bootstrap.graders import grader_for
from shared.clock import FrozenClock
from shared.config.queues import DEFAULT_QUEUES_FILE
from shared.config.settings import DEFAULT_MODELS, GraderKind, Settings
from shared.domain.errors import GraderMisconfigured
from shared.domain.ids import job_id_for
from shared.domain.job import GradingRequest, Job
from shared.domain.status import JobStatus
from shared.service_layer.grader_gate import SUSPENDED
from tests.fakes import ScriptedGrader
from tests.infra import tfconfig
from tests.unit.test_worker_api import deliver

#: The day these dates were read from Google's model lifecycle page.
READ_ON = date(2026, 12, 1)
DEFAULT = DEFAULT_MODELS[GraderKind.GEMINI]
#: The default model's last day on Vertex AI.
LAST_DAY = RETIREMENTS[DEFAULT]
REQUEST = GradingRequest("s", "The mitochondria produce ATP.", ("mentions mitochondria",), 1)


def vertex(**changes: object) -> Settings:
    return Settings(grader="gemini", project_id="p", **changes)  # type: ignore[arg-type]


def on(day: date) -> FrozenClock:
    """A clock at noon UTC of `day`."""
    return FrozenClock(datetime(day.year, day.month, day.day, 12, tzinfo=UTC))


def lifecycle_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.endswith("lifecycle")]


def test_the_default_model_is_served_today_and_not_about_to_retire() -> None:
    lifecycle = ModelLifecycle.of(DEFAULT, READ_ON)
    assert lifecycle.retires_on is not None  # a default has a known date to check
    assert not lifecycle.retired and not lifecycle.retiring_soon


def test_the_gemini_2_5_models_are_retired_on_vertex_ai() -> None:
    for model in ("gemini-2.5-pro", "gemini-2.5-flash", "gemini-2.5-flash-lite"):
        assert RETIREMENTS[model] == date(2026, 10, 16)
        assert ModelLifecycle.of(model, READ_ON).retired


def test_a_worker_on_a_retired_default_model_starts_and_its_grader_refuses_as_misconfigured(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    clock = on(LAST_DAY)
    grader = grader_for(vertex(), clock)  # starts, never a crash loop
    clock.advance(timedelta(days=1))
    with pytest.raises(ModelRetired) as caught:
        grader.grade(REQUEST, attempt=1, timeout_s=5)  # refused before any provider call
    assert isinstance(caught.value, GraderMisconfigured)
    assert caught.value.slug == "model-retired"
    assert DEFAULT in caught.value.detail and "GRADEQ_GRADER_MODEL" in caught.value.detail
    assert "https://docs.cloud.google.com/" in caught.value.detail
    assert isinstance(grader, RetirementWatch)
    with pytest.raises(ModelRetired):
        grader.probe()  # the gate's probe stays refused too
    # Started past the date, it says so at start.
    caplog.clear()
    grader_for(vertex(), clock)
    [line] = lifecycle_records(caplog) + [
        r for r in caplog.records if r.name == "shared.bootstrap.graders"
    ]
    assert line.levelno == logging.ERROR and "suspended" in line.getMessage()


def test_within_a_month_of_retiring_each_day_starts_with_a_warning_an_alert_counts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    clock = on(LAST_DAY - WARN_BEFORE - timedelta(days=1))
    inner = ScriptedGrader()
    watch = RetirementWatch(inner, DEFAULT, default=True, today=lambda: clock.now().date())
    watch.grade(REQUEST, attempt=1, timeout_s=5)
    assert lifecycle_records(caplog) == []  # more than a month ahead: nothing to say
    clock.advance(timedelta(days=1))
    for _ in range(3):
        watch.grade(REQUEST, attempt=1, timeout_s=5)
    clock.advance(timedelta(days=1))
    watch.grade(REQUEST, attempt=1, timeout_s=5)
    first, second = lifecycle_records(caplog)  # one line a day, not one per call
    for record, days_left in ((first, 30), (second, 29)):
        assert record.levelno == logging.WARNING
        assert record.__dict__["event"] == RETIRING_EVENT
        assert record.__dict__["retires_on"] == str(LAST_DAY)
        assert record.__dict__["days_left"] == days_left
        assert "GRADEQ_GRADER_MODEL" in record.getMessage()
    assert inner.calls == 5  # warned, still grading


def test_a_lanes_own_model_is_watched_too_but_never_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    queues = json.loads(DEFAULT_QUEUES_FILE.read_text())
    queues["exam"]["lane"]["grader_model"] = "gemini-3.1-flash-lite"
    path = tmp_path / "queues.json"
    path.write_text(json.dumps(queues))
    lane_last_day = RETIREMENTS["gemini-3.1-flash-lite"]
    clock = on(lane_last_day - timedelta(days=3))
    grader = grader_for(vertex(queues_file=path), clock)
    assert isinstance(grader, LaneGraders)
    # At start: the lane's model too (the default one is within its month as well).
    by_model = {r.__dict__["model"]: r for r in lifecycle_records(caplog)}
    warning = by_model["gemini-3.1-flash-lite"]
    assert warning.__dict__["event"] == RETIRING_EVENT and warning.__dict__["days_left"] == 3
    exam = grader.for_lane("exam")
    assert isinstance(exam, RetirementWatch)
    # Past its date a model the operator chose is still called: the provider decides.
    clock.advance(timedelta(days=4))
    assert exam.check().retired


def test_a_configured_retired_model_is_logged_as_an_error_and_still_called(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    inner = ScriptedGrader()
    watch = RetirementWatch(inner, "gemini-2.5-flash", default=False, today=lambda: READ_ON)
    watch.grade(REQUEST, attempt=1, timeout_s=5)
    [record] = lifecycle_records(caplog)
    assert record.levelno == logging.ERROR and record.__dict__["model"] == "gemini-2.5-flash"
    assert inner.calls == 1


def test_an_unknown_model_is_not_judged() -> None:
    lifecycle = ModelLifecycle.of("gemini-9-experimental", READ_ON)
    assert lifecycle.retires_on is None and not lifecycle.retired


@dataclass
class RetiringWorker:
    client: FlaskClient
    clock: FrozenClock
    grader: ScriptedGrader


@pytest.fixture
def retiring_worker(settings: Settings, adapters: Adapters) -> RetiringWorker:
    """The worker app on the default model's last day (built before the test's log capture)."""
    clock = on(LAST_DAY)
    inner = ScriptedGrader()
    watch = RetirementWatch(inner, DEFAULT, default=True, today=lambda: clock.now().date())
    return RetiringWorker(create_app(settings, adapters, watch, clock).test_client(), clock, inner)


def test_at_retirement_the_worker_suspends_grading_and_leaves_the_job_untouched(
    retiring_worker: RetiringWorker,
    adapters: Adapters,
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock, inner, client = retiring_worker.clock, retiring_worker.grader, retiring_worker.client
    job_id = job_id_for("client-a", "k")
    adapters.store.create(Job.new(job_id, "client-a", REQUEST, "fp", clock.now()))
    clock.advance(timedelta(days=1))
    caplog.set_level(logging.WARNING)
    reply = deliver(client, job_id)
    assert reply.status_code == 503 and int(reply.headers["Retry-After"]) >= 1
    assert inner.calls == 0
    job = adapters.store.get(job_id)
    # Given back uncounted, as on a provider's refusal of the configuration.
    assert job is not None and job.status is JobStatus.RETRYING and job.attempts == 0
    assert job.lease_owner is None and job.error is None
    [suspended] = [r for r in caplog.records if r.getMessage() == SUSPENDED]
    assert suspended.levelno == logging.CRITICAL
    assert suspended.__dict__["event"] == "grader_suspended"
    assert suspended.__dict__["error_type"] == "model-retired"


def test_terraform_alerts_on_the_retirement_warning() -> None:
    alert = tfconfig.load().modules[f"{RETIRING_EVENT}_alert"]
    assert alert["source"] == "./modules/log_alert"
    assert f'jsonPayload.event = \\"{RETIRING_EVENT}\\"' in alert["log_filter"] or (
        f'jsonPayload.event = "{RETIRING_EVENT}"' in alert["log_filter"]
    )
    assert "${local.worker_revisions}" in alert["log_filter"]


def test_a_thinking_budget_must_leave_room_for_the_answer() -> None:
    with pytest.raises(ValidationError, match="THINKING_BUDGET"):
        vertex(grader_thinking_budget=4096, grader_max_output_tokens=4096)
    assert vertex(grader_thinking_budget=1024, grader_max_output_tokens=4096)
