"""Refusals from gunicorn and the intake alike are problem documents (the real server).

Every exchange also bounds the CPU time the server spends on it (tests/support/cpu_budget.py).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime

import pytest

from shared.adapters.embedded.api_key_store import SqliteApiKeyStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.domain.api_keys import ApiKey
from shared.domain.errors import PROBLEM_BASE
from tests.support.cpu_budget import ServerCpu
from tests.support.intake_server import RunningIntake, running_intake

API_KEY = "gq_refusals_" + "r" * 43


@pytest.fixture(scope="module")
def intake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningIntake]:
    data = tmp_path_factory.mktemp("intake")
    _, record = ApiKey.issue("refusals", datetime.now(UTC), key_id="refusals", secret="r" * 43)
    SqliteApiKeyStore(SqliteDatabase(data / "gradeq.sqlite3")).add(record)
    with running_intake(data) as running:
        yield running


def exchange(
    intake: RunningIntake, head: bytes, body_chunks: Iterable[bytes] = ()
) -> tuple[int, dict[str, str], bytes]:
    """Send raw bytes, return (status, headers, body); the server may close early.

    Fails if the server spends more than the hostile-request CPU bound on the exchange.
    """
    cpu = ServerCpu(intake.pid)
    cpu.start()
    with socket.create_connection((intake.host, intake.port), timeout=30) as sock:
        sock.sendall(head)
        try:
            for chunk in body_chunks:
                sock.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused before the body was sent in full
        data = b""
        while True:
            try:
                part = sock.recv(65536)
            except ConnectionResetError:
                break
            if not part:
                break
            data += part
            if b"\r\n\r\n" in data:
                head_part, _, rest = data.partition(b"\r\n\r\n")
                length = [
                    int(line.split(b":")[1])
                    for line in head_part.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ]
                if length and len(rest) >= length[0]:
                    break
    cpu.check(head.split(b"\r\n", 1)[0][:80].decode("latin-1"))
    head_part, _, body = data.partition(b"\r\n\r\n")
    lines = head_part.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
    return status, headers, body


def assert_problem(answer: tuple[int, dict[str, str], bytes], status: int, slug: str) -> None:
    got, headers, body = answer
    assert got == status, body[:300]
    assert headers["content-type"] == "application/problem+json"
    document = json.loads(body)
    assert document["type"] == PROBLEM_BASE + slug
    assert document["status"] == status


def request_head(target: str = "/v1/grading-jobs", extra: str = "") -> bytes:
    return (
        f"POST {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {API_KEY}\r\nIdempotency-Key: k1\r\n"
        f"Content-Type: application/json\r\n{extra}"
    ).encode()


def test_a_ten_megabyte_chunked_body_is_413(intake: RunningIntake) -> None:
    def chunks() -> Iterator[bytes]:
        piece = b"1," * 32 * 1024
        for _ in range(10 * 1024 * 1024 // len(piece)):
            yield f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
        yield b"0\r\n\r\n"

    answer = exchange(intake, request_head(extra="Transfer-Encoding: chunked\r\n\r\n"), chunks())
    assert_problem(answer, 413, "payload-too-large")


def test_an_idempotency_key_over_gunicorns_field_limit_is_431(intake: RunningIntake) -> None:
    head = request_head(extra=f"X-Filler: {'f' * 9000}\r\nContent-Length: 2\r\n\r\n{{}}")
    assert_problem(exchange(intake, head), 431, "header-fields-too-large")


def test_a_header_over_the_apps_limit_is_431(intake: RunningIntake) -> None:
    head = request_head(extra=f"X-Filler: {'f' * 5000}\r\nContent-Length: 2\r\n\r\n{{}}")
    assert_problem(exchange(intake, head), 431, "header-fields-too-large")


def test_a_request_line_over_gunicorns_limit_is_414(intake: RunningIntake) -> None:
    head = request_head("/v1/grading-jobs/" + "j" * 9000, "Content-Length: 0\r\n\r\n")
    assert_problem(exchange(intake, head), 414, "uri-too-long")


def test_a_target_over_the_apps_limit_is_414(intake: RunningIntake) -> None:
    head = f"GET /v1/grading-jobs/{'j' * 3000} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    assert_problem(exchange(intake, head), 414, "uri-too-long")


def test_a_malformed_request_line_is_400(intake: RunningIntake) -> None:
    assert_problem(exchange(intake, b"GARBAGE\r\n\r\n"), 400, "malformed-request")


def test_deep_nesting_through_the_server_is_400(intake: RunningIntake) -> None:
    body = b"[" * 50_000 + b"]" * 50_000
    head = request_head(extra=f"Content-Length: {len(body)}\r\n\r\n").replace(b"k1", b"k2")
    assert_problem(exchange(intake, head + body), 400, "nesting-too-deep")


@pytest.mark.parametrize(
    "body",
    [
        b'\\"' * (80 * 1024),  # escaped quotes: the most a body may hold, in the worst shape
        b'{"answer":"' + b'\\"' * (80 * 1024 - 8) + b'"}',
        b"[" * (160 * 1024),
    ],
    ids=["escaped-quotes", "escaped-quotes-in-a-string", "open-arrays"],
)
def test_a_hostile_body_of_the_largest_size_is_answered_within_the_cpu_bound(
    intake: RunningIntake, body: bytes
) -> None:
    head = request_head(extra=f"Content-Length: {len(body)}\r\n\r\n").replace(b"k1", b"k3")
    status, _, _ = exchange(intake, head + body)
    assert status == 400
