"""Carry the request's trace context (Cloud Trace or W3C) into every log line."""

from __future__ import annotations

import re
from collections.abc import Mapping

from flask import Flask, g, request
from werkzeug.datastructures import Headers

from shared.logs import TraceContext, trace_var

# X-Cloud-Trace-Context: TRACE_ID/SPAN_ID;o=OPTIONS (span id decimal, o=1: sampled).
_CLOUD_TRACE = re.compile(r"^([0-9a-f]{32})(?:/([0-9]{1,20}))?(?:;o=([0-9]+))?$", re.I)
# traceparent: VERSION-TRACE_ID-PARENT_ID-FLAGS (hex; flag bit 0: sampled).
_TRACEPARENT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")
_SPAN_ID_MAX = 2**64 - 1


def parse_trace_headers(
    headers: Headers | Mapping[str, str], project_id: str
) -> TraceContext | None:
    """The trace context of `headers`: a valid `traceparent` first, else X-Cloud-Trace-Context."""
    if not project_id:
        return None
    w3c = _TRACEPARENT.match(headers.get("traceparent", "").strip())
    if w3c and w3c[1] != "ff" and int(w3c[2], 16) and int(w3c[3], 16):
        return TraceContext(_trace(project_id, w3c[2]), w3c[3], bool(int(w3c[4], 16) & 1))
    cloud = _CLOUD_TRACE.match(headers.get("X-Cloud-Trace-Context", "").strip())
    if cloud is None or not int(cloud[1], 16):
        return None
    span = int(cloud[2]) if cloud[2] else 0
    span_id = f"{span:016x}" if 0 < span <= _SPAN_ID_MAX else None
    sampled = None if cloud[3] is None else bool(int(cloud[3]) & 1)
    return TraceContext(_trace(project_id, cloud[1].lower()), span_id, sampled)


def _trace(project_id: str, trace_id: str) -> str:
    return f"projects/{project_id}/traces/{trace_id}"


def register_trace_context(app: Flask, project_id: str) -> None:
    """Set the log trace fields from the request's trace headers for its duration."""

    @app.before_request
    def _set_trace() -> None:
        g.trace_token = trace_var.set(parse_trace_headers(request.headers, project_id))

    @app.teardown_request
    def _clear_trace(_error: BaseException | None) -> None:
        # The thread serves other requests next: none may inherit this one's trace.
        token = g.pop("trace_token", None)
        if token is not None:
            trace_var.reset(token)
