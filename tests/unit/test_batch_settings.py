"""Batch mode's settings: refused at start-up where no provider batch can take the jobs."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from shared.config.settings import GeminiApi, GraderKind, Settings


def test_batch_mode_needs_a_provider_with_batches(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="GRADEQ_BATCH_MODE needs"):
        Settings(data_dir=tmp_path, batch_mode=True)  # the offline grader
    with pytest.raises(ValidationError, match="GRADEQ_BATCH_MODE needs"):
        Settings(
            data_dir=tmp_path, batch_mode=True, grader=GraderKind.GEMINI, project_id="p"
        )  # Vertex AI: its batch input is Cloud Storage or BigQuery only
    developer = Settings(
        data_dir=tmp_path,
        batch_mode=True,
        grader=GraderKind.GEMINI,
        grader_gemini_api=GeminiApi.DEVELOPER,
        grader_api_key=SecretStr("key"),
    )
    assert developer.batch_lane_set() == frozenset({"bulk"})


def test_batch_lanes_must_be_declared(tmp_path: Path) -> None:
    common = {
        "data_dir": tmp_path,
        "batch_mode": True,
        "grader": GraderKind.OPENAI,
        "grader_base_url": "http://127.0.0.1:9/v1",
        "grader_model": "m",
    }
    with pytest.raises(ValidationError, match="undeclared lanes"):
        Settings(**common, batch_lanes="bulk|overnight")  # type: ignore[arg-type]
    both = Settings(**common, batch_lanes="bulk|grading")  # type: ignore[arg-type]
    assert both.batch_lane_set() == frozenset({"bulk", "grading"})
