"""No body shape costs much more CPU than a normal body of the same size.

Each hostile body fills the intake's size limit with one shape that stresses a reader
(escaped quotes, deep nesting, long strings and numbers, many keys, escapes). It must be
answered - refused or accepted - within a small multiple of the CPU time that a normal,
accepted submission of the same size takes, measured in the same test: the bound follows
the machine's speed, and CPU time is not inflated by other processes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest
from flask.testing import FlaskClient

from services.intake.app import MAX_BODY_BYTES, create_app
from services.intake.jobs.schemas import MAX_ANSWER_BYTES
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from tests.support.cpu_budget import budgeted_client
from tests.unit.conftest import API_KEY

#: A hostile body may take this many times the CPU of a normal body of the same size...
BASELINE_MULTIPLE = 10
#: ...or this long, whichever is more (timer and allocator noise on tiny figures).
FLOOR_S = 0.25

_ANSWER = b'{"submission_id":"s","rubric":"r","answer":"'
_METADATA = b'{"submission_id":"s","answer":"a","rubric":"r","metadata":{'


def fill(prefix: bytes, unit: bytes, suffix: bytes = b"") -> bytes:
    """`prefix`, then `unit` repeated, then `suffix`: as long as the limit allows."""
    count = (MAX_BODY_BYTES - len(prefix) - len(suffix)) // len(unit)
    return prefix + unit * count + suffix


def many_keys() -> bytes:
    parts = [_METADATA]
    size = len(_METADATA) + 2
    for i in range(MAX_BODY_BYTES):
        item = b'"k%d":%d,' % (i, i)
        if size + len(item) > MAX_BODY_BYTES:
            break
        parts.append(item)
        size += len(item)
    return b"".join(parts).rstrip(b",") + b"}}"


def balanced(opening: bytes, closing: bytes) -> bytes:
    count = MAX_BODY_BYTES // (len(opening) + len(closing))
    return opening * count + closing * count


HOSTILE: dict[str, Callable[[], bytes]] = {
    "escaped quotes": lambda: fill(b"", b'\\"'),
    "escaped quotes after an open string": lambda: fill(b'"', b'\\"'),
    "escaped quotes in the answer": lambda: fill(_ANSWER, b'\\"', b'"}'),
    "escaped quotes and backslashes": lambda: fill(_ANSWER, b'\\"\\\\'),
    "bare quotes": lambda: fill(b"", b'"'),
    "quotes and brackets": lambda: fill(b"", b'"['),
    "escaped quotes and brackets": lambda: fill(b'"', b'\\"[{'),
    "open arrays": lambda: fill(b"", b"["),
    "open objects": lambda: fill(b"", b'{"a":'),
    "balanced arrays": lambda: balanced(b"[", b"]"),
    "balanced objects": lambda: balanced(b'{"a":', b"}"),
    "alternating brackets": lambda: fill(b"", b"[{"),
    "closing brackets": lambda: fill(b"", b"]}"),
    "backslashes": lambda: fill(_ANSWER, b"\\\\", b'"}'),
    "unicode escapes": lambda: fill(_ANSWER, b"\\u00e9", b'"}'),
    "lone surrogate escapes": lambda: fill(_ANSWER, b"\\ud800", b'"}'),
    "invalid utf-8": lambda: fill(_ANSWER, b"\xff", b'"}'),
    "control characters": lambda: fill(_ANSWER, b"\x01", b'"}'),
    "long answer": lambda: fill(_ANSWER, b"a", b'"}'),
    "many keys": many_keys,
    "many list items": lambda: fill(
        b'{"submission_id":"s","answer":"a","rubric":[', b'"x",', b'"x"]}'
    ),
    "rubric separators": lambda: fill(b'{"submission_id":"s","answer":"a","rubric":"', b";", b'"}'),
    "rubric newlines": lambda: fill(b'{"submission_id":"s","answer":"a","rubric":"', b"\\n", b'"}'),
    "long integer": lambda: fill(
        b'{"submission_id":"s","answer":"a","rubric":"r","max_score":', b"9", b"}"
    ),
    "long fraction": lambda: fill(
        b'{"submission_id":"s","answer":"a","rubric":"r","max_score":0.', b"9", b"}"
    ),
    "long exponent": lambda: fill(
        b'{"submission_id":"s","answer":"a","rubric":"r","max_score":1e', b"9", b"}"
    ),
    "whitespace": lambda: fill(b"{", b" ", b"}"),
    "many zeros": lambda: fill(b"[", b"0,", b"0]"),
}


def normal_body() -> bytes:
    """An accepted submission as large as the limit allows: a long answer and rubric."""
    answer = ("Plants use light to make sugar. " * MAX_ANSWER_BYTES)[: MAX_ANSWER_BYTES - 1]
    rubric = ["a criterion"]
    body = {"submission_id": "s", "answer": answer, "rubric": rubric, "metadata": {}}
    criterion = "explains a step of photosynthesis in the student's own words " * 30
    while len(json.dumps(body)) + len(criterion) + 4 < MAX_BODY_BYTES:
        rubric.append(criterion)
    raw = json.dumps(body).encode()
    assert MAX_BODY_BYTES * 0.9 < len(raw) <= MAX_BODY_BYTES
    return raw


def cpu_of(client: FlaskClient, raw: bytes, key: str) -> tuple[float, int]:
    """The thread CPU seconds one submission of `raw` takes, and its status."""
    start = time.thread_time()
    response = client.post(
        "/v1/grading-jobs",
        data=raw,
        headers={
            "Authorization": f"Bearer {API_KEY}",
            "Idempotency-Key": key,
            "Content-Type": "application/json",
        },
    )
    return time.thread_time() - start, response.status_code


@pytest.fixture
def client(settings: Settings, adapters: Adapters, clock: FrozenClock) -> FlaskClient:
    return budgeted_client(create_app(settings, adapters, clock))


@pytest.mark.parametrize("shape", sorted(HOSTILE))
def test_a_hostile_body_costs_a_small_multiple_of_a_normal_one(
    client: FlaskClient, shape: str
) -> None:
    raw = HOSTILE[shape]()
    assert MAX_BODY_BYTES * 0.95 < len(raw) <= MAX_BODY_BYTES
    normal = normal_body()
    # The fastest of a few runs: a stray pause inflates one run, never all.
    baseline = min(cpu_of(client, normal, f"normal-{i}")[0] for i in range(3))
    assert cpu_of(client, normal, "normal-check")[1] == 202
    spent, status = min(cpu_of(client, raw, f"hostile-{i}") for i in range(2))
    assert status < 500
    bound = max(BASELINE_MULTIPLE * baseline, FLOOR_S)
    assert spent <= bound, f"{shape}: {spent:.3f} s of CPU against a normal {baseline:.3f} s"
