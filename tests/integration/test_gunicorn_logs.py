"""Gunicorn's own warnings come out as JSON lines, like the services' (the real server).

An oversized header or request line makes gunicorn log a warning before any app code
runs; any outsider can cause one. Each must be one JSON line with a severity, never a
"Logging error" traceback.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

from tests.support.intake_server import RunningIntake, running_intake


def send(intake: RunningIntake, raw: bytes) -> bytes:
    with socket.create_connection((intake.host, intake.port), timeout=30) as sock:
        sock.sendall(raw)
        answer = b""
        while part := sock.recv(65536):
            answer += part
    return answer


def json_lines(path: Path, expected: int) -> list[dict[str, Any]]:
    """The output's lines once `expected` gunicorn lines are in; every line must be JSON."""
    deadline = time.monotonic() + 20
    while True:
        lines = [line for line in path.read_text().splitlines() if line.strip()]
        parsed = []
        for line in lines:
            assert line.startswith("{"), f"not a JSON line: {line[:200]}"
            parsed.append(json.loads(line))
        gunicorn = [p for p in parsed if str(p.get("logger", "")).startswith("gunicorn")]
        if len(gunicorn) >= expected or time.monotonic() > deadline:
            return parsed
        time.sleep(0.1)


def test_gunicorns_warnings_are_json_lines(tmp_path: Path) -> None:
    output = tmp_path / "intake.log"
    with running_intake(tmp_path, output=output) as intake:
        oversized = f"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Filler: {'f' * 9000}\r\n\r\n"
        assert b" 431 " in send(intake, oversized.encode())
        long_line = f"GET /{'j' * 9000} HTTP/1.1\r\nHost: x\r\n\r\n"
        assert b" 414 " in send(intake, long_line.encode())
        records = json_lines(output, expected=2)
    text = output.read_text()
    assert "Logging error" not in text and "Traceback" not in text, text[:2000]
    warnings = [r for r in records if r["logger"] == "gunicorn.error"]
    assert len(warnings) == 2, records
    for record in warnings:
        assert record["severity"] == "WARNING"
        assert record["message"].startswith("Invalid request from ip=127.0.0.1")
        assert record["service"] == "intake"
        assert len(record["message"]) <= 1000  # the request line is not logged whole


def test_plain_gunicorn_keeps_its_text_lines_without_logging_errors(tmp_path: Path) -> None:
    """Started without the project's gunicorn config, gunicorn's own format still works."""
    output = tmp_path / "intake.log"
    with running_intake(tmp_path, output=output, config=False) as intake:
        oversized = f"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Filler: {'f' * 9000}\r\n\r\n"
        assert b" 431 " in send(intake, oversized.encode())
        deadline = time.monotonic() + 20
        while "Invalid request from ip=127.0.0.1" not in output.read_text():
            assert time.monotonic() < deadline, output.read_text()[:2000]
            time.sleep(0.1)
    text = output.read_text()
    assert "Logging error" not in text and "TypeError" not in text, text[:2000]
    [warning] = [line for line in text.splitlines() if "Invalid request" in line]
    assert "[WARNING]" in warning and "[None]" not in warning


def test_the_services_open_no_gunicorn_control_socket(tmp_path: Path) -> None:
    """gunicornc's socket has one default path per user: a stack's services would share it."""
    runtime = tmp_path / "run"
    runtime.mkdir()
    env = {"XDG_RUNTIME_DIR": str(runtime), "HOME": str(tmp_path)}
    with running_intake(tmp_path / "data", env=env) as intake:
        assert b" 200 " in send(
            intake, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        assert list(runtime.iterdir()) == []
