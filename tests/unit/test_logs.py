"""JSON log lines as Cloud Logging and Error Reporting read them."""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from shared.http.tracing import parse_trace_headers
from shared.logs import TraceContext, configure_logging, job_context, trace_var
from tests.support.push import restored_root_logger

log = logging.getLogger("tests.logs")
TRACE_ID = "105445aa7843bc8bf206b12000100000"


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    with restored_root_logger():
        yield


def lines(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_an_exception_goes_to_stack_trace_for_error_reporting(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging("worker")  # in the test: its handler writes to the captured stdout
    try:
        raise ValueError("grader exploded")
    except ValueError:
        with job_context("job-1"):
            log.exception("grading failed")
    [line] = lines(capsys)
    assert line["severity"] == "ERROR"
    assert line["message"] == "grading failed"
    assert line["job_id"] == "job-1"
    assert "exc_info" not in line
    trace = line["stack_trace"]
    assert trace.startswith("Traceback (most recent call last):\n")
    assert trace.rstrip().endswith("ValueError: grader exploded")


def test_a_line_without_an_exception_has_no_stack_trace(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging("worker")  # in the test: its handler writes to the captured stdout
    log.info("plain")
    [line] = lines(capsys)
    assert line["severity"] == "INFO" and line["service"] == "worker"
    assert "stack_trace" not in line and "logging.googleapis.com/trace" not in line


def test_the_trace_context_fills_the_cloud_logging_fields(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging("worker")  # in the test: its handler writes to the captured stdout
    token = trace_var.set(TraceContext("projects/p/traces/" + TRACE_ID, "000000000000002a", True))
    try:
        log.warning("traced")
    finally:
        trace_var.reset(token)
    [line] = lines(capsys)
    assert line["logging.googleapis.com/trace"] == "projects/p/traces/" + TRACE_ID
    assert line["logging.googleapis.com/spanId"] == "000000000000002a"
    assert line["logging.googleapis.com/trace_sampled"] is True


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        (
            {"X-Cloud-Trace-Context": f"{TRACE_ID}/42;o=1"},
            TraceContext(f"projects/p/traces/{TRACE_ID}", "000000000000002a", True),
        ),
        (
            {"X-Cloud-Trace-Context": f"{TRACE_ID}/18446744073709551615;o=0"},
            TraceContext(f"projects/p/traces/{TRACE_ID}", "ffffffffffffffff", False),
        ),
        ({"X-Cloud-Trace-Context": TRACE_ID}, TraceContext(f"projects/p/traces/{TRACE_ID}")),
        ({"X-Cloud-Trace-Context": f"{TRACE_ID}/0"}, TraceContext(f"projects/p/traces/{TRACE_ID}")),
        (
            {
                "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "X-Cloud-Trace-Context": f"{TRACE_ID}/42;o=0",
            },
            TraceContext(
                "projects/p/traces/4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", True
            ),
        ),
        (
            # An invalid traceparent (zero span) falls back to the Cloud Trace header.
            {
                "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
                "X-Cloud-Trace-Context": f"{TRACE_ID}/42;o=0",
            },
            TraceContext(f"projects/p/traces/{TRACE_ID}", "000000000000002a", False),
        ),
        ({"X-Cloud-Trace-Context": "not-a-trace/1;o=1"}, None),
        ({"X-Cloud-Trace-Context": "0" * 32 + "/1;o=1"}, None),
        ({"traceparent": "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}, None),
        ({}, None),
    ],
)
def test_trace_headers_are_parsed(headers: dict[str, str], expected: TraceContext | None) -> None:
    assert parse_trace_headers(headers, "p") == expected


def test_no_trace_without_a_project() -> None:
    assert parse_trace_headers({"X-Cloud-Trace-Context": f"{TRACE_ID}/1;o=1"}, "") is None


def test_gunicorns_lines_are_json_and_cut_after_configure_logging(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from gunicorn.config import Config

    from shared.http.gunicorn_logging import MAX_MESSAGE_CHARS, JsonLogger, service_name

    cfg = Config()
    cfg.set("default_proc_name", "services.worker.app:create_app()")
    gunicorn_log = JsonLogger(cfg)  # its handler writes to the captured stderr
    configure_logging("worker")
    try:
        gunicorn_log.warning("Invalid request from ip=%s: %s", "127.0.0.1", "x" * 5000)
        gunicorn_log.critical("WORKER TIMEOUT (pid:%s)", 42)
        err = capsys.readouterr().err
    finally:
        for handler in list(gunicorn_log.error_log.handlers):
            gunicorn_log.error_log.removeHandler(handler)
    assert "Logging error" not in err
    warning, timeout = (json.loads(line) for line in err.splitlines())
    assert warning["severity"] == "WARNING" and warning["service"] == "worker"
    assert warning["logger"] == "gunicorn.error"
    assert len(warning["message"]) <= MAX_MESSAGE_CHARS + len(" [cut]")
    assert warning["message"].endswith(" [cut]")
    assert timeout == {
        "message": "WORKER TIMEOUT (pid:42)",
        "service": "worker",
        "job_id": None,
        "logger": "gunicorn.error",
        "severity": "CRITICAL",
    }
    assert service_name("localcloud.frontend.app:create_app()") == (
        "localcloud.frontend.app:create_app()"
    )


def test_gunicorns_own_text_lines_format_without_the_projects_config(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A service started with plain gunicorn keeps gunicorn's text handlers: they format."""
    from gunicorn.config import Config
    from gunicorn.glogging import Logger

    gunicorn_log = Logger(Config())  # no logger_class: its own format, on stderr
    configure_logging("intake")
    try:
        gunicorn_log.warning("Invalid request from ip=%s", "127.0.0.1")
        err = capsys.readouterr().err
    finally:
        for handler in list(gunicorn_log.error_log.handlers):
            gunicorn_log.error_log.removeHandler(handler)
    assert "Logging error" not in err and "TypeError" not in err, err
    [line] = err.splitlines()
    assert f"[{os.getpid()}] [WARNING] Invalid request from ip=127.0.0.1" in line


def test_an_error_raised_inside_a_job_context_is_logged_with_its_job_id(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The reply's error line is written after the job's block has ended: it still names it."""
    from flask import Flask

    from shared.domain.errors import DependencyUnavailable
    from shared.http.problems import register_error_handlers

    configure_logging("worker")
    app = Flask("t")
    register_error_handlers(app)

    @app.post("/busy")
    def busy() -> str:
        with job_context("job-7"):
            raise DependencyUnavailable("Firestore contention on job-7")

    @app.post("/boom")
    def boom() -> str:
        with job_context("job-8"):
            raise RuntimeError("unexpected")

    client = app.test_client()
    assert client.post("/busy").status_code == 503
    assert client.post("/boom").status_code == 500
    failed, unhandled = [line for line in lines(capsys) if line["severity"] == "ERROR"]
    assert failed["message"] == "request failed: Firestore contention on job-7"
    assert failed["job_id"] == "job-7"
    assert unhandled["message"] == "unhandled error" and unhandled["job_id"] == "job-8"


def test_a_line_is_formatted_before_the_handler_lock_is_taken(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging("intake")
    [handler] = logging.getLogger().handlers
    assert handler.lock is not None
    formatted = threading.Event()
    encode = handler.format

    def format_and_tell(record: logging.LogRecord) -> str:
        line = encode(record)
        formatted.set()
        return line

    handler.format = format_and_tell  # type: ignore[method-assign]
    with handler.lock:  # as while another thread writes its line
        writer = threading.Thread(target=log.info, args=("logged meanwhile",))
        writer.start()
        # The other thread encodes its line without waiting for the lock.
        assert formatted.wait(timeout=10)
    writer.join(timeout=10)
    [line] = lines(capsys)
    assert line["message"] == "logged meanwhile" and line["service"] == "intake"


def test_lines_logged_by_many_threads_at_once_stay_whole(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging("intake")

    def burst(n: int) -> None:
        with job_context(f"job-{n}"):
            for i in range(200):
                log.info("line %d", i)

    threads = [threading.Thread(target=burst, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    logged = lines(capsys)  # every line parses as one JSON object
    assert len(logged) == 8 * 200
    for n in range(8):
        mine = [line["message"] for line in logged if line["job_id"] == f"job-{n}"]
        assert mine == [f"line {i}" for i in range(200)]
