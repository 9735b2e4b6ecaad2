"""Carry Cloud Trace context from the request into every log line."""

from __future__ import annotations

from flask import Flask, request

from shared.logs import trace_var


def register_trace_context(app: Flask, project_id: str) -> None:
    """Set the log trace field from X-Cloud-Trace-Context for the request's duration."""

    @app.before_request
    def _set_trace() -> None:
        header = request.headers.get("X-Cloud-Trace-Context", "")
        trace_id = header.split("/", 1)[0]
        value = f"projects/{project_id}/traces/{trace_id}" if trace_id and project_id else None
        trace_var.set(value)
