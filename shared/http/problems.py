"""RFC 9457 problem documents: one error handler per app, one stable `type` per error."""

from __future__ import annotations

import logging
import math
from typing import Any

from flask import Flask, Response, jsonify
from werkzeug.exceptions import HTTPException

from shared.domain.errors import PROBLEM_BASE, BacklogFull, GradeqError
from shared.http.errors import PayloadTooLarge
from shared.logs import job_id_of

PROBLEM_JSON = "application/problem+json"
log = logging.getLogger(__name__)

#: Server errors whose detail the service writes for the client. Any other 5xx error's
#: detail is the adapter's or library's own text (addresses, resource paths, backend
#: messages): it goes to the logs, and the client gets `SERVER_ERROR_DETAIL`.
PUBLIC_SERVER_ERRORS = frozenset({BacklogFull.slug})
SERVER_ERROR_DETAIL = "the service could not complete the request; retry later"


def problem(
    status: int,
    slug: str,
    title: str,
    detail: str,
    headers: dict[str, str] | None = None,
    **extensions: Any,
) -> Response:
    """Build an application/problem+json response."""
    body = {"type": PROBLEM_BASE + slug, "title": title, "status": status, "detail": detail}
    body.update(extensions)
    response = jsonify(body)
    response.status_code = status
    response.mimetype = PROBLEM_JSON
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


def problem_for(
    error: GradeqError, status: int | None = None, *, detail: str | None = None
) -> Response:
    """Render a Gradeq error (with its own status and detail unless others are given).

    An error class whose detail is for the logs only (it names internal things) sets
    `public_detail`, the words clients read instead. A 429 or 503 error that carries
    `retry_after_s` answers with a Retry-After header too.
    """
    headers = {}
    retry_after = getattr(error, "retry_after_s", None)
    if (status or error.status) in (429, 503) and isinstance(retry_after, int | float):
        headers["Retry-After"] = str(max(1, math.ceil(retry_after)))
    return problem(
        status or error.status,
        error.slug,
        error.title,
        detail if detail is not None else getattr(error, "public_detail", error.detail),
        headers=headers,
        **error.extensions,
    )


def register_error_handlers(app: Flask) -> None:
    """Answer every error of this app as a problem document."""

    @app.errorhandler(GradeqError)
    def _gradeq_error(error: GradeqError) -> Response:
        response = problem_for(error)
        if error.status >= 500:
            log.error(
                "request failed: %s",
                error.detail,
                extra={"error_type": error.slug, "job_id": job_id_of(error)},
            )
            if error.slug not in PUBLIC_SERVER_ERRORS:
                response = problem_for(error, detail=SERVER_ERROR_DETAIL)
        if error.status == 503 and "Retry-After" not in response.headers:
            # A busy or unreachable dependency: tell the client (or the queue) when to retry.
            response.headers["Retry-After"] = str(app.config.get("RETRY_AFTER_S", 1))
        return response

    @app.errorhandler(HTTPException)
    def _http_error(error: HTTPException) -> Response:
        status = error.code or 500
        if status == PayloadTooLarge.status:
            limit = app.config.get("MAX_CONTENT_LENGTH")
            return problem(
                status, PayloadTooLarge.slug, PayloadTooLarge.title, f"the limit is {limit} bytes"
            )
        slug = (error.name or "error").lower().replace(" ", "-")
        return problem(status, slug, error.name or "Error", error.description or "")

    @app.errorhandler(Exception)
    def _unexpected(error: Exception) -> Response:
        log.exception("unhandled error", extra={"job_id": job_id_of(error)})
        return problem(500, "internal-error", "Internal error", "an unexpected error occurred")
