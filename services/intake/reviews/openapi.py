"""The review part of the intake's OpenAPI document, from the models the handlers use."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from services.intake.jobs.views import JobView
from services.intake.reviews.requests import RegradeRequestIn, RequestAnswerIn
from services.intake.reviews.routes import (
    AgreementQuery,
    AgreementView,
    ReviewDetailView,
    ReviewFileNotFound,
    ReviewIn,
    ReviewQueueQuery,
    ReviewQueueView,
)
from services.intake.students.erasure import ErasureView
from shared.domain.authorization import Forbidden
from shared.domain.errors import GradeqError, JobNotFound, ValidationFailed
from shared.http.errors import JsonTooComplex, NestingTooDeep, PayloadTooLarge
from shared.service_layer.erasure import ErasureConflict
from shared.service_layer.regrade_requests import (
    GradeNotReleased,
    NoOpenRegradeRequest,
    RegradeAlreadyRequested,
    RegradeRequestsClosed,
)
from shared.service_layer.review import GradeNotHeld, RegradeRequestOpen

MODELS: tuple[tuple[type[BaseModel], Literal["validation", "serialization"]], ...] = (
    (ReviewIn, "validation"),
    (ReviewQueueView, "serialization"),
    (ReviewDetailView, "serialization"),
    (AgreementView, "serialization"),
    (RegradeRequestIn, "validation"),
    (RequestAnswerIn, "validation"),
)


def review_paths(
    ref: Any, problems: Any, query: Any, common: tuple[type[GradeqError], ...]
) -> dict[str, Any]:
    """The operations under /v1/reviews; the helpers are the main document's."""
    secured: list[dict[str, list[str]]] = [{"bearer": []}]
    job_id = {"name": "job_id", "in": "path", "required": True, "schema": {"type": "string"}}
    reviewer = (*common, Forbidden)
    malformed = (ValidationFailed, NestingTooDeep, JsonTooComplex, PayloadTooLarge)

    def body(model: type[BaseModel]) -> dict[str, Any]:
        return {"required": True, "content": {"application/json": {"schema": ref(model)}}}

    def ok(description: str, model: type[BaseModel]) -> dict[str, Any]:
        return {
            "200": {
                "description": description,
                "content": {"application/json": {"schema": ref(model)}},
            }
        }

    return {
        "/v1/reviews": {
            "get": {
                "operationId": "listHeldGrades",
                "summary": "Grades held for review, oldest first (the school's staff or reviewers)",
                "security": secured,
                "parameters": query(ReviewQueueQuery),
                "responses": {
                    **ok("One page; follow next_cursor", ReviewQueueView),
                    **problems((*reviewer, ValidationFailed)),
                },
            }
        },
        "/v1/reviews:agreement": {
            "get": {
                "operationId": "getReviewAgreement",
                "summary": "Model against teacher on the reviewed grades (of one assignment)",
                "security": secured,
                "parameters": query(AgreementQuery),
                "responses": {
                    **ok("Exact match rate, mean absolute difference, kappa", AgreementView),
                    **problems((*reviewer, ValidationFailed)),
                },
            }
        },
        "/v1/reviews/{job_id}": {
            "get": {
                "operationId": "getHeldGrade",
                "summary": "One held grade: answer, rubric, the model's grade and the reviews",
                "security": secured,
                "parameters": [job_id],
                "responses": {
                    **ok("The held or reviewed grade", ReviewDetailView),
                    **problems((*reviewer, JobNotFound)),
                },
            },
            "post": {
                "operationId": "reviewGrade",
                "summary": "Accept the model's grade, or override it with a reason",
                "security": secured,
                "parameters": [job_id],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": ref(ReviewIn)}},
                },
                "responses": {
                    **ok("The grade after the review", ReviewDetailView),
                    **problems(
                        (
                            *reviewer,
                            JobNotFound,
                            GradeNotHeld,
                            RegradeRequestOpen,
                            ValidationFailed,
                            NestingTooDeep,
                            JsonTooComplex,
                            PayloadTooLarge,
                        )
                    ),
                },
            },
        },
        "/v1/reviews/{job_id}/files/{index}": {
            "get": {
                "operationId": "getHeldGradeFile",
                "summary": "One file of a held or reviewed answer, its bytes (never a public URL)",
                "security": secured,
                "parameters": [
                    job_id,
                    {
                        "name": "index",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "integer", "minimum": 0},
                    },
                ],
                "responses": {
                    "200": {
                        "description": "The file as checked at submit, with its content type",
                        "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}},
                    },
                    **problems((*reviewer, JobNotFound, ReviewFileNotFound)),
                },
            }
        },
        "/v1/reviews/{job_id}/request": {
            "post": {
                "operationId": "answerRegradeRequest",
                "summary": "Answer a student's regrade request: keep, or change, with a reason",
                "security": secured,
                "parameters": [job_id],
                "requestBody": body(RequestAnswerIn),
                "responses": {
                    **ok("The grade after the answer", ReviewDetailView),
                    **problems((*reviewer, JobNotFound, NoOpenRegradeRequest, *malformed)),
                },
            }
        },
        "/v1/grading-jobs/{job_id}/regrade-request": {
            "post": {
                "operationId": "requestRegrade",
                "summary": "A student asks, once per grade, for a second look, with a reason",
                "security": secured,
                "parameters": [job_id],
                "requestBody": body(RegradeRequestIn),
                "responses": {
                    "201": {
                        "description": "The job with its open request",
                        "content": {"application/json": {"schema": ref(JobView)}},
                    },
                    **problems(
                        (
                            *reviewer,
                            JobNotFound,
                            RegradeAlreadyRequested,
                            RegradeRequestsClosed,
                            GradeNotReleased,
                            *malformed,
                        )
                    ),
                },
            }
        },
    }


ERASURE_MODELS: tuple[tuple[type[BaseModel], Literal["validation", "serialization"]], ...] = (
    (ErasureView, "serialization"),
)


def erasure_operations(
    ref: Any, problems: Any, common: tuple[type[GradeqError], ...], job_parameters: list[Any]
) -> dict[str, dict[str, Any]]:
    """The DELETE operations of erasure, by path (merged into the paths they share)."""
    secured: list[dict[str, list[str]]] = [{"bearer": []}]
    answer = {
        "200": {
            "description": "What was removed, and what remains where and until when",
            "content": {"application/json": {"schema": ref(ErasureView)}},
        }
    }
    student = {"name": "student_id", "in": "path", "required": True, "schema": {"type": "string"}}
    return {
        "/v1/grading-jobs/{job_id}": {
            "delete": {
                "operationId": "eraseGradingJob",
                "summary": "Erase a submission: job, result, reviews, uploads, dedup records",
                "security": secured,
                "parameters": job_parameters,
                "responses": {**answer, **problems((*common, JobNotFound, ErasureConflict))},
            }
        },
        "/v1/students/{student_id}": {
            "delete": {
                "operationId": "eraseStudent",
                "summary": "Erase everything of one student (by the student_id you set)",
                "security": secured,
                "parameters": [student],
                "responses": {**answer, **problems((*common, ValidationFailed, ErasureConflict))},
            }
        },
    }
