"""Property-based tests of the running intake against its own OpenAPI document.

Schemathesis generates requests from /openapi.json (a bounded, deterministic number per
operation) and checks that no answer is a 5xx and that every status, header and body
conforms to the document. Generated callback URLs are dropped before sending: resolving a
random host name would leave this machine, and the guard has tests of its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, cast

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode, checks
from schemathesis.core.result import Ok

from shared.adapters.embedded.api_key_store import SqliteApiKeyStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.domain.api_keys import ApiKey
from tests.support.cpu_budget import ServerCpu
from tests.support.intake_server import RunningIntake, running_intake

API_KEY, _RECORD = ApiKey.issue(
    "schemathesis", datetime(2025, 1, 1, tzinfo=UTC), key_id="props", secret="p" * 43
)
CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_headers_conformance,
    checks.response_schema_conformance,
]


@pytest.fixture(scope="module")
def intake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningIntake]:
    data = tmp_path_factory.mktemp("props")
    SqliteApiKeyStore(SqliteDatabase(data / "gradeq.sqlite3")).add(_RECORD)
    # A large burst: the rate limit has its own tests, and would hide the rest here.
    env = {"GRADEQ_SUBMIT_BURST": "100000", "GRADEQ_CALLBACK_ALLOW_LOOPBACK": "false"}
    with running_intake(data, env) as running:
        yield running


def operations(url: str) -> list[Any]:
    loaded = schemathesis.openapi.from_url(url + "/openapi.json")
    # The intake's own document is valid: every operation loads (an Err has no `ok`).
    return [cast(Ok[Any], result).ok() for result in loaded.get_all_operations()]


# Schemathesis's own generators sometimes draw from the global `random` module
# (schemathesis/generation/dictionaries.py), which Hypothesis reports as a deprecation;
# under `filterwarnings = error` that made a rare, unrelated flaky failure.
@pytest.mark.filterwarnings(
    "ignore:Do not use the `random` module inside strategies"
    ":hypothesis.errors.HypothesisDeprecationWarning"
)
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_the_intake_honours_its_document(intake: RunningIntake, mode: GenerationMode) -> None:
    tested = []
    statuses: list[int] = []
    for operation in operations(intake.url):

        @given(case=operation.as_strategy(mode))
        @settings(
            max_examples=30,
            derandomize=True,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def honours(case: Any) -> None:
            if isinstance(case.body, dict):
                case.body.pop("callback_url", None)
            cpu = ServerCpu(intake.pid)  # no generated request may cost much CPU either
            cpu.start()
            response = case.call_and_validate(
                base_url=intake.url,
                headers={"Authorization": f"Bearer {API_KEY}"},
                checks=CHECKS,
                timeout=30,
            )
            cpu.check(f"{case.method} {case.formatted_path}")
            statuses.append(response.status_code)

        try:
            honours()
        except Unsatisfiable:
            # Nothing to make invalid (no parameters, no body): only in negative mode.
            assert mode is GenerationMode.NEGATIVE
            continue
        tested.append(operation.label)
    assert {
        "POST /v1/grading-jobs",
        "GET /v1/grading-jobs/{job_id}",
        "POST /v1/grading-jobs/{job_id}/cancel",
    } <= set(tested)
    # Valid requests were accepted somewhere, invalid ones refused somewhere.
    low = 200 if mode is GenerationMode.POSITIVE else 400
    assert any(low <= s < low + 100 for s in statuses)
