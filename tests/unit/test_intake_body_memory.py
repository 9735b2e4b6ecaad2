"""What one request body may cost in memory: every hostile shape at the size cap stays
within 3x the body's own size (peak traced allocations, through the test client).

The bodies are built before tracing starts; a warm-up request first loads what every
request shares (imports, the key cache), so the peak is the request's own.
"""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest
from flask.testing import FlaskClient

from services.intake.app import create_app
from services.intake.assignments.routes import MAX_BATCH_BODY_BYTES
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from tests.unit.test_assignments_api import auth, create

#: The bound the body of any shape must stay within: peak bytes per byte of body.
MAX_PEAK_PER_BODY_BYTE = 3.0


def repeated(prefix: bytes, item: bytes, suffix: bytes, size: int) -> bytes:
    """`prefix item,item,...,item suffix` of about `size` bytes (never over)."""
    n = (size - len(prefix) - len(suffix)) // (len(item) + 1)
    return prefix + b",".join([item] * n) + suffix


def many_keys(prefix: bytes, suffix: bytes, size: int) -> bytes:
    """`prefix "k0":0,"k1":0,... suffix`: distinct keys, about `size` bytes (never over)."""
    pairs: list[bytes] = []
    room = size - len(prefix) - len(suffix)
    while room > 16:
        pair = b'"k%d":0' % len(pairs)
        pairs.append(pair)
        room -= len(pair) + 1
    return prefix + b",".join(pairs) + suffix


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def batch_shapes(size: int) -> dict[str, bytes]:
    """Hostile batch bodies of `size` bytes, each a different way to cost memory."""
    key = b'{"answers":[{"' + b"k" * (size - 40) + b'":1}]}'
    answer = b'{"submission_id":"s","answer":"a","metadata":{"k":1}}'
    return {
        "empty objects": repeated(b'{"answers":[', b"{}", b"]}", size),
        "empty arrays": repeated(b'{"answers":[', b"[]", b"]}", size),
        "small strings": repeated(b'{"answers":[', b'"ab"', b"]}", size),
        "small integers": repeated(b'{"answers":[', b"7", b"]}", size),
        "floats": repeated(b'{"answers":[', b"0.5", b"]}", size),
        "nulls": repeated(b'{"answers":[', b"null", b"]}", size),
        "deep but allowed nesting": repeated(b'{"answers":[', nested(30), b"]}", size),
        "many keys in one object": many_keys(b'{"answers":[{', b"}]}", size),
        "one long key": key,
        "one long string": b'{"answers":["' + b"a" * (size - 20) + b'"]}',
        "escapes": b'{"answers":["' + b"\\u00e9" * ((size - 20) // 6) + b'"]}',
        "many small valid answers": repeated(b'{"answers":[', answer, b"]}", size),
        "too many answers": repeated(b'{"answers":[', b'{"submission_id":"s"}', b"]}", size),
    }


@pytest.fixture
def client(settings: Settings, adapters: Adapters, clock: FrozenClock) -> FlaskClient:
    return create_app(settings, adapters, clock).test_client()


def peak_of(send: Callable[[], Any]) -> tuple[int, Any]:
    """The peak of memory traced while `send` runs, above what was traced before it."""
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        response = send()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak - before, response


@pytest.fixture
def assignment_id(client: FlaskClient) -> str:
    created = create(client)
    assert created.status_code == 201, created.get_json()
    warm = client.post(
        f"/v1/assignments/{created.get_json()['id']}/submissions:batch",
        json={"answers": [{"submission_id": "warm", "answer": "light"}]},
        headers=auth(),
    )
    assert warm.status_code == 200, warm.get_json()
    return str(created.get_json()["id"])


@pytest.mark.parametrize("shape", sorted(batch_shapes(1024)))
def test_a_hostile_batch_body_at_the_cap_costs_at_most_three_times_its_size(
    client: FlaskClient, assignment_id: str, shape: str
) -> None:
    body = batch_shapes(MAX_BATCH_BODY_BYTES)[shape]
    assert MAX_BATCH_BODY_BYTES - 64 <= len(body) <= MAX_BATCH_BODY_BYTES
    headers = {**auth(), "Content-Type": "application/json"}

    peak, response = peak_of(
        lambda: client.post(
            f"/v1/assignments/{assignment_id}/submissions:batch", data=body, headers=headers
        )
    )

    assert response.status_code in (400, 422), response.status_code  # refused, never a 5xx
    assert peak <= MAX_PEAK_PER_BODY_BYTE * len(body), f"{shape}: {peak / len(body):.2f}x"


SINGLE_CAP = 160 * 1024


def single_shapes(size: int) -> dict[str, bytes]:
    """Hostile single-job bodies of `size` bytes."""
    head = b'{"submission_id":"s","answer":"a","rubric":"r","metadata":'
    return {
        "empty objects in metadata": repeated(head + b"[", b"{}", b"]}", size),
        "empty arrays in metadata": repeated(head + b"[", b"[]", b"]}", size),
        "small strings in the rubric": repeated(
            b'{"submission_id":"s","answer":"a","rubric":[', b'"ab"', b"]}", size
        ),
        "numbers in metadata": repeated(head + b"[", b"0.5", b"]}", size),
        "deep but allowed nesting": repeated(head + b"[", nested(29), b"]}", size),
        "many keys": many_keys(head + b"{", b"}}", size),
        "one long key": head + b'{"' + b"k" * (size - len(head) - 10) + b'":1}}',
        "one long answer": b'{"submission_id":"s","rubric":"r","answer":"'
        + b"a" * (size - 60)
        + b'"}',
        "many files": repeated(
            b'{"submission_id":"s","answer":"a","rubric":"r","files":[',
            b'{"upload_id":"u","content_type":"text/plain","size":1}',
            b"]}",
            size,
        ),
    }


@pytest.mark.parametrize("shape", sorted(single_shapes(1024)))
@pytest.mark.parametrize("to_assignment", [False, True], ids=["job", "assignment answer"])
def test_a_hostile_single_body_at_the_cap_costs_at_most_three_times_its_size(
    client: FlaskClient, assignment_id: str, shape: str, to_assignment: bool
) -> None:
    body = single_shapes(SINGLE_CAP)[shape]
    if to_assignment:  # the same shape, as an answer to one of the client's assignments
        body = b'{"assignment_id":"' + assignment_id.encode() + b'",' + body[1:]
        body = body[:SINGLE_CAP] if len(body) > SINGLE_CAP else body
    assert len(body) <= SINGLE_CAP
    headers = {**auth(), "Content-Type": "application/json", "Idempotency-Key": f"k-{shape}"}

    peak, response = peak_of(lambda: client.post("/v1/grading-jobs", data=body, headers=headers))

    assert response.status_code < 500, response.get_json()
    assert peak <= MAX_PEAK_PER_BODY_BYTE * len(body), f"{shape}: {peak / len(body):.2f}x"


def test_a_full_legitimate_batch_stays_within_the_same_bound(
    client: FlaskClient, assignment_id: str
) -> None:
    answer = "light and chlorophyll " * 700  # about 15 KB
    # 999 and the warm-up's answer: the client's ceiling of 1,000 jobs not yet final.
    body = json.dumps(
        {"answers": [{"submission_id": f"s{i}", "answer": f"{answer}{i}"} for i in range(999)]}
    ).encode()
    headers = {**auth(), "Content-Type": "application/json"}

    peak, response = peak_of(
        lambda: client.post(
            f"/v1/assignments/{assignment_id}/submissions:batch", data=body, headers=headers
        )
    )

    assert response.status_code == 200, response.get_json()
    assert response.get_json()["accepted"] == 999
    assert peak <= MAX_PEAK_PER_BODY_BYTE * len(body), f"{peak / len(body):.2f}x"
