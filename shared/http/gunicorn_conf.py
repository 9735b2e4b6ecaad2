"""Gunicorn settings every Gradeq service runs with: request limits, problem+json refusals.

    gunicorn --config python:shared.http.gunicorn_conf ... 'services.intake.app:create_app()'

Gunicorn refuses a request line, header or chunk it cannot parse before the app sees it,
and answers with an HTML page of its own. Loading this module makes those answers RFC 9457
problem documents with a stable type, like every refusal from the apps themselves, and
makes gunicorn's own log lines JSON lines like the apps' (shared/http/gunicorn_logging.py).
"""

from __future__ import annotations

import json
import socket

from gunicorn import util

from shared.domain.errors import PROBLEM_BASE

#: Gunicorn's own lines (warnings, worker time-outs, access) as the services' JSON lines.
logger_class = "shared.http.gunicorn_logging.JsonLogger"

#: Longest request line (method, target, version); longer gets 414.
limit_request_line = 8190
#: Most header fields, and the longest one; more or longer gets 431.
limit_request_fields = 100
limit_request_field_size = 8190

#: Problem type per status gunicorn answers with.
SLUGS = {
    400: "malformed-request",
    403: "forbidden",
    414: "uri-too-long",
    417: "expectation-failed",
    431: "header-fields-too-large",
    500: "internal-error",
    501: "not-implemented",
}


def problem_bytes(status: int, reason: str, detail: str) -> bytes:
    """A complete HTTP/1.1 response carrying a problem document; the connection closes."""
    body = json.dumps(
        {
            "type": PROBLEM_BASE + SLUGS.get(status, "malformed-request"),
            "title": reason,
            "status": status,
            "detail": detail,
        }
    ).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\n"
        "Connection: close\r\n"
        "Content-Type: application/problem+json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode("latin-1") + body


def write_problem(sock: socket.socket, status_int: int, reason: str, mesg: str) -> None:
    """Gunicorn's `write_error`, answering problem+json instead of HTML."""
    util.write_nonblock(sock, problem_bytes(status_int, reason, mesg))


util.write_error = write_problem
