"""The API called cross-origin from headless Chromium, from the frontend's origin (an
allowed CORS origin of the local stack): a submission is erased (DELETE) and an
assignment's rubric revised (PATCH). Both carry Authorization, so Chromium preflights
them and makes the call only if the preflight allows the method from that origin."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from localcloud.stack import FRONTEND, LocalStack
from tests.e2e.operator_stack import operator_stack

pytestmark = pytest.mark.e2e

#: Runs in the page: one fetch to the intake, answering its status and JSON body, or the
#: error a blocked cross-origin call raises.
CALL = """async ([url, method, key, body]) => {
  const init = {method, headers: {Authorization: `Bearer ${key}`}};
  if (body !== null) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  try {
    const response = await fetch(url, init);
    return {status: response.status, body: await response.json()};
  } catch (error) {
    return {error: String(error)};
  }
}"""


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with operator_stack(tmp_path_factory.mktemp("cors")) as local:
        yield local


def call_from_frontend(
    stack: LocalStack, browser: Any, method: str, path: str, body: Any = None
) -> dict[str, Any]:
    """Make the call from a page of the frontend's origin."""
    page = browser.new_page()
    try:
        page.goto(stack.config.url(FRONTEND) + "/")
        url = stack.config.url("intake") + path
        answer: dict[str, Any] = page.evaluate(CALL, [url, method, stack.api_key, body])
    finally:
        page.close()
    return answer


def api(stack: LocalStack, method: str, path: str, **kw: Any) -> requests.Response:
    headers = {"Authorization": f"Bearer {stack.api_key}", **kw.pop("headers", {})}
    return requests.request(
        method, stack.config.url("intake") + path, headers=headers, timeout=10, **kw
    )


def test_a_submission_is_erased_from_the_frontends_origin(stack: LocalStack, browser: Any) -> None:
    created = api(
        stack,
        "POST",
        "/v1/grading-jobs",
        json={"submission_id": "cors-1", "answer": "chlorophyll absorbs light", "rubric": "light"},
        headers={"Idempotency-Key": str(uuid.uuid4())},
    )
    assert created.status_code == 202, created.text
    job_id = created.json()["id"]

    answer = call_from_frontend(stack, browser, "DELETE", f"/v1/grading-jobs/{job_id}")

    assert "error" not in answer, answer
    assert answer["status"] == 200 and answer["body"]["removed"]["jobs"] == [job_id]
    assert api(stack, "GET", f"/v1/grading-jobs/{job_id}").status_code == 404


def test_a_rubric_is_revised_from_the_frontends_origin(stack: LocalStack, browser: Any) -> None:
    created = api(
        stack,
        "POST",
        "/v1/assignments",
        json={"title": "Photosynthesis", "rubric": "light; chlorophyll", "max_score": 10},
        headers={"Idempotency-Key": str(uuid.uuid4())},
    )
    assert created.status_code == 201, created.text
    assignment_id = created.json()["id"]

    answer = call_from_frontend(
        stack,
        browser,
        "PATCH",
        f"/v1/assignments/{assignment_id}",
        {"rubric": ["light", "chlorophyll", "oxygen"]},
    )

    assert "error" not in answer, answer
    assert answer["status"] == 200, answer
    stored = api(stack, "GET", f"/v1/assignments/{assignment_id}").json()
    assert len(stored["rubric_versions"]) == 2
