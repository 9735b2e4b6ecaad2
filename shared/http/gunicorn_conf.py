"""Gunicorn settings every Gradeq service runs with: request limits, problem+json refusals.

    gunicorn --config python:shared.http.gunicorn_conf ... 'services.intake.app:create_app()'

Gunicorn refuses a request line, header or chunk it cannot parse before the app sees it,
and answers with an HTML page of its own. Loading this module makes those answers RFC 9457
problem documents with a stable type, like every refusal from the apps themselves, and
makes gunicorn's own log lines JSON lines like the apps' (shared/http/gunicorn_logging.py).
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping

from gunicorn import util

from shared.domain.errors import PROBLEM_BASE

#: Gunicorn's own lines (warnings, worker time-outs, access) as the services' JSON lines.
logger_class = "shared.http.gunicorn_logging.JsonLogger"

#: Threads kept free of Cloud Run's requests, so health probes are answered at once.
PROBE_THREADS = 2


def threads_for(environ: Mapping[str, str]) -> int:
    """Request threads: the service's Cloud Run concurrency plus `PROBE_THREADS`.

    Cloud Run sends an instance at most `CONCURRENCY` requests at a time, but its
    startup and liveness probes are not counted against it. With exactly that many
    threads, an instance busy with long requests leaves a probe waiting in gunicorn's
    queue until it times out, and Cloud Run restarts the container mid-request.
    """
    value = environ.get("CONCURRENCY", "").strip() or "8"
    concurrency = int(value)
    if concurrency < 1:
        raise ValueError(f"CONCURRENCY must be at least 1 (got {value!r})")
    return concurrency + PROBE_THREADS


threads = threads_for(os.environ)
worker_class = "gthread"

#: No control socket (gunicornc): nothing drives the services through it, and its one
#: default path ($XDG_RUNTIME_DIR or ~/.gunicorn) is shared by every gunicorn of a user,
#: so the services of a local stack would take it from each other.
control_socket_disable = True

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
