"""Hostile bodies and headers: every one is refused with a problem document, never a 500.

Every request goes through a CPU-bounded client (tests/support/cpu_budget.py): a refusal
that takes long to reach fails too.
"""

from __future__ import annotations

import io
from typing import Any

import pytest
from flask.testing import FlaskClient

from services.intake.app import create_app
from services.intake.limits.body import MAX_JSON_DEPTH, nesting_depth
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from tests.support.cpu_budget import budgeted_client
from tests.unit.conftest import API_KEY
from tests.unit.test_intake_api import BODY, assert_problem, post, queue_of


@pytest.fixture
def client(settings: Settings, adapters: Adapters, clock: FrozenClock) -> FlaskClient:
    return budgeted_client(create_app(settings, adapters, clock))


def test_fifty_thousand_nested_brackets_are_400_not_500(
    client: FlaskClient, adapters: Adapters
) -> None:
    response = post(client, data="[" * 50_000 + "]" * 50_000, content_type="application/json")
    assert_problem(response, 400, "nesting-too-deep")
    assert queue_of(adapters).tasks == []


def test_metadata_nested_500_deep_under_the_size_limit_is_400(client: FlaskClient) -> None:
    metadata = '{"a":' * 500 + "1" + "}" * 500
    raw = '{"submission_id":"s","answer":"a","rubric":"r","metadata":' + metadata + "}"
    assert len(raw) < 4 * 1024
    response = post(client, data=raw, content_type="application/json")
    assert_problem(response, 400, "nesting-too-deep")


def test_nesting_up_to_the_limit_is_accepted(client: FlaskClient) -> None:
    # The body is level 1, so metadata may hold MAX_JSON_DEPTH - 1 levels of objects.
    nested: Any = 1
    for _ in range(MAX_JSON_DEPTH - 1):
        nested = {"a": nested}
    assert post(client, body={**BODY, "metadata": nested}).status_code == 202
    deeper = post(client, body={**BODY, "metadata": {"a": nested}}, key="k-2")
    assert_problem(deeper, 400, "nesting-too-deep")


def test_brackets_inside_strings_do_not_count() -> None:
    assert nesting_depth(b'{"a": "[[[[{{{{\\"[[["}') == 1
    assert nesting_depth(b"[[1], [[2]]]") == 3
    assert nesting_depth(b'"just a string"') == 0
    assert nesting_depth(b'[["a\\\\"], ["\\\\\\"["]]') == 2  # escaped backslashes, then quotes


def test_brackets_after_an_unterminated_string_do_not_count() -> None:
    # Not JSON (the parser refuses it); the count reads the rest as the string's.
    assert nesting_depth(b'[{"a": "\\"[[[[' + b'\\"' * 1000) == 2
    assert nesting_depth(b'["\\') == 1


@pytest.mark.parametrize("rubric", [" ", ";;", [" "], "\n - \n", ["-", " * "]])
def test_a_rubric_without_a_criterion_is_refused(
    client: FlaskClient, adapters: Adapters, rubric: Any
) -> None:
    problem = assert_problem(post(client, body={**BODY, "rubric": rubric}), 400, "validation-error")
    assert {e["field"] for e in problem["errors"]} == {"rubric"}
    assert queue_of(adapters).tasks == []


def test_a_chunked_body_over_the_limit_is_413_not_invalid_json(
    client: FlaskClient, adapters: Adapters
) -> None:
    response = client.post(
        "/v1/grading-jobs",
        input_stream=io.BytesIO(b"[" + b"1," * (5 * 1024 * 1024) + b"1]"),
        environ_overrides={"wsgi.input_terminated": True},
        headers={
            "Authorization": f"Bearer {API_KEY}",
            "Idempotency-Key": "chunked",
            "Content-Type": "application/json",
            "Transfer-Encoding": "chunked",
        },
    )
    assert_problem(response, 413, "payload-too-large")
    assert queue_of(adapters).tasks == []


def test_a_chunked_body_within_the_limit_is_read_whole(client: FlaskClient) -> None:
    import json

    response = client.post(
        "/v1/grading-jobs",
        input_stream=io.BytesIO(json.dumps(BODY).encode()),
        environ_overrides={"wsgi.input_terminated": True},
        headers={
            "Authorization": f"Bearer {API_KEY}",
            "Idempotency-Key": "chunked-ok",
            "Content-Type": "application/json",
            "Transfer-Encoding": "chunked",
        },
    )
    assert response.status_code == 202, response.get_json()


def test_a_long_target_is_414_problem(client: FlaskClient) -> None:
    response = client.get(
        "/v1/grading-jobs/" + "j" * 3000, headers={"Authorization": f"Bearer {API_KEY}"}
    )
    assert_problem(response, 414, "uri-too-long")


def test_an_oversized_header_is_431_problem(client: FlaskClient) -> None:
    response = post(client, headers={"Idempotency-Key": "k" * 5000})
    assert_problem(response, 431, "header-fields-too-large")
