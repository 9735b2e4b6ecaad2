"""The Gemini model the worker would call is checked against its retirement date at start."""

from __future__ import annotations

import logging
from datetime import date

import pytest
from pydantic import ValidationError

from shared.adapters.graders.lifecycle import RETIREMENTS, ModelRetired, check_model
from shared.bootstrap.graders import grader_for
from shared.config.settings import DEFAULT_MODELS, GraderKind, Settings

#: The day these dates were read from Google's model lifecycle page.
READ_ON = date(2026, 12, 1)


def vertex(**changes: object) -> Settings:
    return Settings(grader="gemini", project_id="p", **changes)  # type: ignore[arg-type]


def test_the_default_model_is_served_today_and_not_about_to_retire() -> None:
    default = DEFAULT_MODELS[GraderKind.GEMINI]
    lifecycle = check_model(default, default=True, today=READ_ON)
    assert lifecycle.retires_on is not None  # a default has a known date to check
    assert not lifecycle.retired and not lifecycle.retiring_soon


def test_the_gemini_2_5_models_are_retired_on_vertex_ai() -> None:
    for model in ("gemini-2.5-pro", "gemini-2.5-flash", "gemini-2.5-flash-lite"):
        assert RETIREMENTS[model] == date(2026, 10, 16)
    with pytest.raises(ModelRetired, match="GRADEQ_GRADER_MODEL"):
        check_model("gemini-2.5-flash", default=True, today=READ_ON)


def test_the_worker_refuses_to_start_once_its_default_model_is_retired() -> None:
    retired_on = RETIREMENTS[DEFAULT_MODELS[GraderKind.GEMINI]]
    assert grader_for(vertex(), today=retired_on) is not None  # its last day still serves
    with pytest.raises(ModelRetired) as caught:
        grader_for(vertex(), today=date(retired_on.year + 1, 1, 1))
    assert DEFAULT_MODELS[GraderKind.GEMINI] in str(caught.value)
    assert "https://docs.cloud.google.com/" in str(caught.value)


def test_a_model_within_a_month_of_retiring_starts_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    grader_for(vertex(grader_model="gemini-3.5-flash"), today=date(2027, 5, 1))
    [record] = [r for r in caplog.records if r.name.endswith("lifecycle")]
    assert record.levelno == logging.WARNING
    assert record.__dict__["retires_on"] == "2027-05-19"


def test_a_configured_retired_model_is_logged_as_an_error_but_not_refused(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    grader_for(vertex(grader_model="gemini-2.5-flash"), today=READ_ON)
    [record] = [r for r in caplog.records if r.name.endswith("lifecycle")]
    assert record.levelno == logging.ERROR and record.__dict__["model"] == "gemini-2.5-flash"


def test_an_unknown_model_is_not_judged() -> None:
    lifecycle = check_model("gemini-9-experimental", default=False, today=READ_ON)
    assert lifecycle.retires_on is None and not lifecycle.retired


def test_a_thinking_budget_must_leave_room_for_the_answer() -> None:
    with pytest.raises(ValidationError, match="THINKING_BUDGET"):
        vertex(grader_thinking_budget=4096, grader_max_output_tokens=4096)
    assert vertex(grader_thinking_budget=1024, grader_max_output_tokens=4096)
