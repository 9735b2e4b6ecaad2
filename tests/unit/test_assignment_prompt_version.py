"""An assignment's prompt version: the model grader grades with it, and the intake refuses
one that is not shipped."""

from __future__ import annotations

import dataclasses

import httpx2
import pytest
from flask.testing import FlaskClient

from shared.adapters.graders.limiter import QuotaShare
from shared.adapters.graders.llm import ModelGrader
from shared.domain.errors import PermanentGradingError
from tests.unit.test_assignments_api import (
    ASSIGNMENT,
    assert_problem,
    auth,
    client,  # noqa: F401
    create,
)
from tests.unit.test_openai_grader import GOOD, REQUEST, answers, ok
from tests.unit.test_worker_model_grader import model_grader


def grader() -> ModelGrader:
    return model_grader(httpx2.MockTransport(answers(ok(GOOD))), QuotaShare(1, 0))


def test_the_model_grader_grades_with_the_jobs_prompt_version() -> None:
    shipped = dataclasses.replace(REQUEST, prompt_version="grading-v1", rubric_version=1)
    result = grader().grade(shipped, attempt=1, timeout_s=5)
    assert result.prompt_version == "grading-v1"
    unknown = dataclasses.replace(REQUEST, prompt_version="grading-v9", rubric_version=1)
    with pytest.raises(PermanentGradingError, match="grading-v9"):
        grader().grade(unknown, attempt=1, timeout_s=5)


def test_an_assignment_names_only_a_shipped_prompt_version(
    client: FlaskClient,  # noqa: F811
) -> None:
    refused = create(client, body={**ASSIGNMENT, "prompt_version": "grading-v9"})
    body = assert_problem(refused, 400, "validation-error")
    assert body["errors"][0]["field"] == "prompt_version"
    assignment_id = create(client).get_json()["id"]
    regrade = client.post(
        f"/v1/assignments/{assignment_id}/regrade",
        json={"prompt_version": "grading-v9"},
        headers=auth(),
    )
    assert_problem(regrade, 400, "validation-error")
