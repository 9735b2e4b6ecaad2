"""The intake's OpenAPI 3.1 document, generated from the models the code validates with.

Request and response schemas come from the pydantic models (`GradingJobIn`, `JobView`,
`JobPage`, `Problem`); every answer an operation can give is listed with the problem types
behind it, taken from the error classes the handlers raise. Served at /openapi.json; a
test compares the document with the app's routes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from functools import cache
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from services.intake.auth.clients import SCOPE_HEADER
from services.intake.auth.firebase import NoClientForUser, SignInNotAccepted
from services.intake.jobs.schemas import GradingJobIn, JobListQuery
from services.intake.jobs.views import JobPage, JobView, Problem
from services.intake.limits.body import MAX_HEADER_BYTES, MAX_JSON_DEPTH, MAX_TARGET_BYTES
from services.intake.limits.rate_limit import RateLimited
from services.intake.uploads.routes import UploadIn, UploadOut
from shared.domain.authorization import AssignmentRequired, Forbidden, SetByTheSchool
from shared.domain.errors import (
    PROBLEM_BASE,
    AssignmentNotFound,
    BacklogFull,
    BudgetExhausted,
    DependencyUnavailable,
    GradeqError,
    IdempotencyConflict,
    JobAlreadyFinal,
    JobNotFound,
    LaneNotAllowed,
    TooManyActiveJobs,
    ValidationFailed,
)
from shared.domain.uploads import (
    UnsafeArchive,
    UploadAlreadySent,
    UploadMismatch,
    UploadNotFound,
    UploadQuotaExceeded,
    UploadSignatureInvalid,
    UploadTooLarge,
    UploadTypeNotAllowed,
)
from shared.http.callback_guard import CallbackRefused
from shared.http.errors import (
    HeaderFieldsTooLarge,
    IdempotencyKeyInvalid,
    JsonTooComplex,
    NestingTooDeep,
    PayloadTooLarge,
    Unauthenticated,
    UnsupportedMediaType,
    UriTooLong,
)
from shared.http.failed_auth import TooManyFailedAuthentications

OPENAPI_PATH = "/openapi.json"
IDEMPOTENCY_KEY_PATTERN = r"^[\x21-\x7e]{1,255}$"


class InternalError(GradeqError):
    """What an unexpected failure answers with (see `shared.http.problems`)."""


class NoSuchRoute(GradeqError):
    """What a path no route matches answers with (an object name with line breaks)."""

    slug = "not-found"
    title = "Not Found"
    status = 404


#: Every operation that needs a credential can also answer with these.
COMMON_ERRORS: tuple[type[GradeqError], ...] = (
    Unauthenticated,
    NoClientForUser,
    SignInNotAccepted,
    TooManyFailedAuthentications,
    Forbidden,
    UriTooLong,
    HeaderFieldsTooLarge,
    InternalError,
    DependencyUnavailable,
)

_RETRY_AFTER = {
    "description": "Seconds to wait before polling or retrying",
    "schema": {"type": "integer", "minimum": 1},
}


def _header(description: str, kind: str = "integer") -> dict[str, Any]:
    return {"description": description, "schema": {"type": kind}}


_RATE_LIMIT_HEADERS = {
    "RateLimit-Limit": _header("Submissions allowed in a burst"),
    "RateLimit-Remaining": _header("Submissions left now"),
    "RateLimit-Reset": _header("Seconds until the burst is whole again"),
    "RateLimit-Policy": _header("The burst and its window", "string"),
}
_LOCATION = {"description": "Where to poll the job", "schema": {"type": "string"}}


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{model.__name__}"}


#: The body of a job answering one of the client's assignments (its schema is among the
#: assignments' models).
_ASSIGNMENT_JOB_REF = {"$ref": "#/components/schemas/AssignmentJobIn"}


def _problems(errors: Iterable[type[GradeqError]]) -> dict[str, Any]:
    """One response per status, its body a Problem whose `type` is one of the errors'."""
    by_status: dict[int, list[type[GradeqError]]] = defaultdict(list)
    for error in errors:
        by_status[error.status].append(error)
    responses: dict[str, Any] = {}
    for status, group in sorted(by_status.items()):
        types = sorted({PROBLEM_BASE + e.slug for e in group})
        headers = (
            {"Retry-After": _RETRY_AFTER}
            if any(
                e
                in (
                    TooManyActiveJobs,
                    RateLimited,
                    BacklogFull,
                    TooManyFailedAuthentications,
                    BudgetExhausted,
                )
                for e in group
            )
            else {}
        )
        if RateLimited in group:
            headers.update(_RATE_LIMIT_HEADERS)
        responses[str(status)] = {
            "description": "; ".join(sorted({e.title for e in group})),
            "headers": headers,
            "content": {
                "application/problem+json": {
                    "schema": {
                        "allOf": [
                            _ref(Problem),
                            {"properties": {"type": {"enum": types}, "status": {"const": status}}},
                        ]
                    }
                }
            },
        }
    return responses


def _job_response(description: str, status: int, extra: dict[str, Any]) -> dict[str, Any]:
    return {
        str(status): {
            "description": description,
            "headers": {"Location": _LOCATION, "Retry-After": _RETRY_AFTER, **extra},
            "content": {"application/json": {"schema": _ref(JobView)}},
        }
    }


def _query_parameters(model: type[BaseModel]) -> list[dict[str, Any]]:
    """One query parameter per field of `model`, its schema taken from the model's."""
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    required = set(schema.get("required", ()))
    parameters = []
    for name, prop in schema["properties"].items():
        # An absent parameter is the model's None: a query string has no null.
        options = [o for o in prop.get("anyOf", [prop]) if o.get("type") != "null"]
        value = options[0] if len(options) == 1 else {"anyOf": options}
        parameters.append(
            {"name": name, "in": "query", "required": name in required, "schema": value}
        )
    return parameters


def _scope_parameter() -> dict[str, Any]:
    return {
        "name": SCOPE_HEADER,
        "in": "header",
        "required": False,
        "description": (
            "With an ID token of a client-wide role, 'user' narrows the scope to the "
            "signed-in user's own jobs; the server decides every other scope"
        ),
        "schema": {"type": "string", "enum": ["client", "user"]},
    }


def _job_id_parameter() -> dict[str, Any]:
    return {"name": "job_id", "in": "path", "required": True, "schema": {"type": "string"}}


def _paths() -> dict[str, Any]:
    secured: list[dict[str, list[str]]] = [{"bearer": []}]
    create_errors = (
        *COMMON_ERRORS,
        SetByTheSchool,
        AssignmentRequired,
        AssignmentNotFound,
        ValidationFailed,
        NestingTooDeep,
        JsonTooComplex,
        IdempotencyKeyInvalid,
        CallbackRefused,
        PayloadTooLarge,
        UnsupportedMediaType,
        IdempotencyConflict,
        LaneNotAllowed,
        TooManyActiveJobs,
        RateLimited,
        BacklogFull,
        BudgetExhausted,
        UploadTooLarge,
        UploadTypeNotAllowed,
        UploadNotFound,
        UploadMismatch,
        UnsafeArchive,
    )
    return {
        "/v1/uploads": {
            "post": {
                "operationId": "createUpload",
                "summary": (
                    "Get a short-lived signed URL for one PUT of a file of the declared type "
                    "and size; name its upload_id in a job's files"
                ),
                "security": secured,
                "parameters": [_scope_parameter()],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref(UploadIn)}},
                },
                "responses": {
                    "201": {
                        "description": "PUT the file to upload_url with these headers",
                        "content": {"application/json": {"schema": _ref(UploadOut)}},
                    },
                    **_problems(
                        (
                            *COMMON_ERRORS,
                            ValidationFailed,
                            NestingTooDeep,
                            JsonTooComplex,
                            PayloadTooLarge,
                            UnsupportedMediaType,
                            UploadTooLarge,
                            UploadTypeNotAllowed,
                            UploadMismatch,
                            RateLimited,
                            UploadQuotaExceeded,
                        )
                    ),
                },
            },
        },
        "/v1/blobs/{name}": {
            "put": {
                "operationId": "putUploadedFile",
                "summary": (
                    "The embedded backend's signed upload URL (on Google Cloud the URL is "
                    "Cloud Storage's): the query's signature is the credential"
                ),
                "parameters": [
                    {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}},
                    *(
                        {"name": q, "in": "query", "required": True, "schema": {"type": "string"}}
                        for q in ("content_type", "size", "expires", "signature")
                    ),
                ],
                "requestBody": {
                    "required": True,
                    "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}},
                },
                "responses": {
                    "200": {"description": "Stored"},
                    **_problems(
                        (
                            UploadSignatureInvalid,
                            NoSuchRoute,
                            UploadAlreadySent,
                            UploadMismatch,
                            UploadTooLarge,
                            InternalError,
                            UriTooLong,
                            HeaderFieldsTooLarge,
                        )
                    ),
                },
            }
        },
        "/v1/grading-jobs": {
            "get": {
                "operationId": "listGradingJobs",
                "summary": "List your jobs, newest first, a page at a time",
                "security": secured,
                "parameters": [*_query_parameters(JobListQuery), _scope_parameter()],
                "responses": {
                    "200": {
                        "description": "One page; follow next_cursor for the next",
                        "content": {"application/json": {"schema": _ref(JobPage)}},
                    },
                    **_problems((*COMMON_ERRORS, ValidationFailed)),
                },
            },
            "post": {
                "operationId": "createGradingJob",
                "summary": "Submit a grading job (idempotent per Idempotency-Key)",
                "security": secured,
                "parameters": [
                    _scope_parameter(),
                    {
                        "name": "Idempotency-Key",
                        "in": "header",
                        "required": True,
                        "schema": {"type": "string", "pattern": IDEMPOTENCY_KEY_PATTERN},
                    },
                ],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            # An answer to one of your assignments takes its rubric.
                            "schema": {"anyOf": [_ref(GradingJobIn), _ASSIGNMENT_JOB_REF]}
                        }
                    },
                },
                "responses": {
                    **_job_response(
                        "Accepted (or replayed: Idempotent-Replayed: true)",
                        202,
                        {
                            **_RATE_LIMIT_HEADERS,
                            "Idempotent-Replayed": {"schema": {"type": "string", "const": "true"}},
                        },
                    ),
                    **_problems(create_errors),
                },
            },
        },
        "/v1/grading-jobs/{job_id}": {
            "get": {
                "operationId": "getGradingJob",
                "summary": "Read one of your jobs (another client's job is not found)",
                "security": secured,
                "parameters": [_job_id_parameter(), _scope_parameter()],
                "responses": {
                    **_job_response("The job", 200, {}),
                    **_problems((*COMMON_ERRORS, JobNotFound)),
                },
            },
        },
        "/v1/grading-jobs/{job_id}/cancel": {
            "post": {
                "operationId": "cancelGradingJob",
                "summary": "Cancel a job that is not final",
                "security": secured,
                "parameters": [_job_id_parameter(), _scope_parameter()],
                "responses": {
                    **_job_response("The cancelled job", 200, {}),
                    **_problems((*COMMON_ERRORS, JobNotFound, JobAlreadyFinal)),
                },
            },
        },
        OPENAPI_PATH: {
            "get": {
                "operationId": "getOpenApiDocument",
                "summary": "This document",
                "responses": {
                    "200": {
                        "description": "The OpenAPI document",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    },
                    **_problems((UriTooLong, HeaderFieldsTooLarge)),
                },
            }
        },
        "/healthz": _probe("The process answers"),
        "/readyz": _probe("Every dependency answers (503 names the one that does not)", 503),
        # The same probes on paths Cloud Run's front end does not reserve.
        "/health/live": _probe("The process answers"),
        "/health/ready": _probe("Every dependency answers (503 names the one that does not)", 503),
    }


def _probe(summary: str, *also: int) -> dict[str, Any]:
    body = {"application/json": {"schema": {"type": "object"}}}
    responses: dict[str, Any] = {"200": {"description": summary, "content": body}}
    for status in also:
        responses[str(status)] = {"description": "Not ready", "content": body}
    responses.update(_problems((UriTooLong, HeaderFieldsTooLarge)))
    return {"get": {"summary": summary, "responses": responses}}


@cache
def openapi_document() -> dict[str, Any]:
    """The whole document (built once per process)."""
    # Imported here: the assignments part builds on this module's helpers.
    from services.intake.assignments.openapi import MODELS, assignment_paths
    from services.intake.reviews.openapi import ERASURE_MODELS, erasure_operations, review_paths
    from services.intake.reviews.openapi import MODELS as REVIEW_MODELS

    _, schemas = models_json_schema(
        [
            (GradingJobIn, "validation"),
            (UploadIn, "validation"),
            (UploadOut, "serialization"),
            (JobView, "serialization"),
            (JobPage, "serialization"),
            (Problem, "serialization"),
            *MODELS,
            *REVIEW_MODELS,
            *ERASURE_MODELS,
        ],
        ref_template="#/components/schemas/{model}",
    )
    paths: dict[str, Any] = {
        **_paths(),
        **assignment_paths(_ref, _problems, _query_parameters, COMMON_ERRORS),
        **review_paths(_ref, _problems, _query_parameters, COMMON_ERRORS),
    }
    job_parameters = [_job_id_parameter(), _scope_parameter()]
    for path, operations in erasure_operations(
        _ref, _problems, COMMON_ERRORS, job_parameters
    ).items():
        paths[path] = {**paths.get(path, {}), **operations}
    return {
        "openapi": "3.1.0",
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "info": {
            "title": "Gradeq intake",
            "version": "1",
            "description": (
                "Submit long AI grading jobs and poll them. Errors are RFC 9457 problem "
                f"documents. Limits: JSON nesting depth {MAX_JSON_DEPTH}, request target "
                f"{MAX_TARGET_BYTES} bytes, any header {MAX_HEADER_BYTES} bytes."
            ),
        },
        "paths": paths,
        "components": {
            "schemas": schemas.get("$defs", {}),
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "An API key (gq_...) or a Firebase ID token",
                }
            },
        },
    }
