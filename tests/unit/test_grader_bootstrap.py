"""Choosing the grader from the settings, and what the settings refuse."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from pydantic import ValidationError

from shared.adapters.graders.lifecycle import RetirementWatch
from shared.adapters.graders.limiter import QuotaShare
from shared.adapters.graders.llm import ModelGrader
from shared.adapters.graders.rubric import RubricGrader
from shared.bootstrap.graders import grader_for, quota_share
from shared.config.settings import Backend, PushAuth, Settings
from shared.domain.job import GradingRequest
from tests.support.fake_openai import FakeOpenAIServer

SECRET_ANSWER = "The mitochondria produce ATP. secret-answer-text-4711"
API_KEY = "sk-never-in-the-logs-0815"


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


def test_the_offline_rubric_grader_is_the_default() -> None:
    grader = grader_for(Settings())
    assert isinstance(grader, RubricGrader)


def test_simulation_is_on_for_embedded_and_off_by_default_on_google() -> None:
    request = GradingRequest(
        "s",
        "mitochondria",
        ("mentions mitochondria",),
        1,
        metadata={"simulate": {"failure": "permanent"}},
    )
    assert Settings().simulation_enabled
    google = Settings(backend=Backend.GOOGLE, project_id="p", push_auth=PushAuth.OIDC)
    assert not google.simulation_enabled
    result = grader_for(google).grade(request, attempt=1, timeout_s=5)
    assert result.score == 1  # graded; the failure was not acted out
    enabled = Settings(
        backend=Backend.GOOGLE, project_id="p", push_auth=PushAuth.OIDC, grader_simulate=True
    )
    assert enabled.simulation_enabled


def test_settings_refuse_an_incomplete_model_grader() -> None:
    with pytest.raises(ValidationError, match="GRADEQ_GRADER_BASE_URL"):
        Settings(grader="openai")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="GRADEQ_PROJECT_ID"):
        Settings(grader="gemini")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="GRADEQ_GRADER_API_KEY"):
        Settings(grader="gemini", grader_gemini_api="developer")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        Settings(grader="claude")  # type: ignore[arg-type]


def test_gemini_on_vertex_and_on_the_gemini_api_are_built_without_network() -> None:
    vertex = grader_for(Settings(grader="gemini", project_id="p"))  # type: ignore[arg-type]
    # On Vertex AI the model grader minds its model's retirement date.
    assert isinstance(vertex, RetirementWatch) and vertex.name == "gemini"
    keyed = grader_for(
        Settings(grader="gemini", grader_gemini_api="developer", grader_api_key="k")  # type: ignore[arg-type]
    )
    assert isinstance(keyed, ModelGrader)
    assert Settings(grader="gemini", project_id="p").grader_model_name == "gemini-3.5-flash"  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"location": "europe-west1"}, "europe-west1"),
        ({"location": "europe-west4"}, "europe-west4"),
        ({"location": "europe-west4", "grader_location": "global"}, "global"),
        ({"location": "europe-west4", "grader_location": "europe-west1"}, "europe-west1"),
    ],
)
def test_gemini_on_vertex_processes_in_the_region_unless_a_location_is_chosen(
    monkeypatch: pytest.MonkeyPatch, settings: dict[str, str], expected: str
) -> None:
    from google import genai

    made: list[dict[str, object]] = []
    real_client = genai.Client

    def client(**kwargs: object) -> object:
        made.append(kwargs)
        return real_client(**kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(genai, "Client", client)
    grader_for(Settings(grader="gemini", project_id="p", **settings))  # type: ignore[arg-type]
    assert [kwargs["location"] for kwargs in made] == [expected]
    assert made[0]["vertexai"] is True


def test_the_instance_share_comes_from_the_project_quota_and_max_instances() -> None:
    settings = Settings(
        grader_quota_rpm=600,
        grader_quota_tpm=2_000_000,
        grader_quota_headroom=0.8,
        worker_max_instances=8,
    )
    assert quota_share(settings) == QuotaShare(60, 200_000)


def test_openai_compatible_grading_logs_neither_the_answer_nor_the_key(
    server: FakeOpenAIServer,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
    openai_clients: list[openai.OpenAI],
) -> None:
    settings = Settings(
        data_dir=tmp_path,  # the quota pool's ledger
        grader="openai",  # type: ignore[arg-type]
        grader_base_url=server.url,
        grader_model="fake-grader",
        grader_api_key=API_KEY,  # type: ignore[arg-type]
        log_level="DEBUG",
    )
    grader = grader_for(settings)
    assert len(openai_clients) == 1  # the grader's, closed after the test
    caplog.set_level(logging.DEBUG)
    request = GradingRequest("s", SECRET_ANSWER + " #malformedx1", ("mentions mitochondria",), 2)
    result = grader.grade(request, attempt=1, timeout_s=10)
    assert result.score == 2 and result.usage["requests"] == 2
    assert "model answer unusable" in caplog.text  # logging was on
    assert "secret-answer-text" not in caplog.text
    assert API_KEY not in caplog.text
    assert [s.status for s in server.served] == [200, 200]
