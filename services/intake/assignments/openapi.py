"""The assignments part of the intake's OpenAPI document, from the models the code uses."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from services.intake.assignments.schemas import (
    AnswerIn,
    AssignmentIn,
    AssignmentJobIn,
    BatchIn,
    PageQuery,
    PostIn,
    RegradeIn,
    ReportQuery,
    RubricRevisionIn,
)
from services.intake.assignments.views import (
    AssignmentPageView,
    AssignmentView,
    BatchView,
    GradePageView,
    PostReportView,
    RegradeReportView,
)
from services.intake.limits.rate_limit import RateLimited
from shared.domain.errors import (
    AssignmentBusy,
    AssignmentNotFound,
    BacklogFull,
    BudgetExhausted,
    GradeqError,
    IdempotencyConflict,
    NoValidAnswer,
    TooManyActiveJobs,
    ValidationFailed,
)
from shared.http.callback_guard import TooManyCallbackHosts
from shared.http.errors import (
    IdempotencyKeyInvalid,
    JsonTooComplex,
    NestingTooDeep,
    PayloadTooLarge,
    UnsupportedMediaType,
)

#: The models whose schemas the document's components hold, and in which mode.
MODELS: tuple[tuple[type[BaseModel], Literal["validation", "serialization"]], ...] = (
    (AssignmentIn, "validation"),
    (RubricRevisionIn, "validation"),
    (BatchIn, "validation"),
    (AnswerIn, "validation"),
    (AssignmentJobIn, "validation"),
    (AssignmentView, "serialization"),
    (AssignmentPageView, "serialization"),
    (BatchView, "serialization"),
    (GradePageView, "serialization"),
    (RegradeIn, "validation"),
    (RegradeReportView, "serialization"),
    (PostIn, "validation"),
    (PostReportView, "serialization"),
)

_BODY_ERRORS: tuple[type[GradeqError], ...] = (
    ValidationFailed,
    NestingTooDeep,
    JsonTooComplex,
    PayloadTooLarge,
    UnsupportedMediaType,
)


def assignment_paths(
    ref: Any, problems: Any, query: Any, common: tuple[type[GradeqError], ...]
) -> dict[str, Any]:
    """The operations under /v1/assignments; the helpers are the main document's."""
    secured: list[dict[str, list[str]]] = [{"bearer": []}]
    path_id = {
        "name": "assignment_id",
        "in": "path",
        "required": True,
        "schema": {"type": "string"},
    }

    def ok(description: str, model: type[BaseModel], status: int = 200) -> dict[str, Any]:
        return {
            str(status): {
                "description": description,
                "content": {"application/json": {"schema": ref(model)}},
            }
        }

    def body(model: type[BaseModel]) -> dict[str, Any]:
        return {"required": True, "content": {"application/json": {"schema": ref(model)}}}

    found = (*common, AssignmentNotFound)
    return {
        "/v1/assignments": {
            "get": {
                "operationId": "listAssignments",
                "summary": "List your assignments, newest first, a page at a time",
                "security": secured,
                "parameters": query(PageQuery),
                "responses": {
                    **ok("One page; follow next_cursor", AssignmentPageView),
                    **problems((*common, ValidationFailed)),
                },
            },
            "post": {
                "operationId": "createAssignment",
                "summary": "Create an assignment (idempotent per Idempotency-Key)",
                "security": secured,
                "parameters": [
                    {
                        "name": "Idempotency-Key",
                        "in": "header",
                        "required": True,
                        "schema": {"type": "string", "pattern": r"^[\x21-\x7e]{1,255}$"},
                    }
                ],
                "requestBody": body(AssignmentIn),
                "responses": {
                    **ok("Created", AssignmentView, 201),
                    **ok("Replayed (Idempotent-Replayed: true)", AssignmentView),
                    **problems(
                        (
                            *common,
                            *_BODY_ERRORS,
                            IdempotencyKeyInvalid,
                            IdempotencyConflict,
                            RateLimited,
                        )
                    ),
                },
            },
        },
        "/v1/assignments/{assignment_id}": {
            "get": {
                "operationId": "getAssignment",
                "summary": "Read an assignment with its progress (counts by status, mean score)",
                "security": secured,
                "parameters": [path_id],
                "responses": {**ok("The assignment", AssignmentView), **problems(found)},
            },
            "patch": {
                "operationId": "reviseAssignmentRubric",
                "summary": "Make a new rubric version (old versions stay readable)",
                "security": secured,
                "parameters": [path_id],
                "requestBody": body(RubricRevisionIn),
                "responses": {
                    **ok("The revised assignment", AssignmentView),
                    **problems((*found, *_BODY_ERRORS)),
                },
            },
        },
        "/v1/assignments/{assignment_id}/submissions:batch": {
            "post": {
                "operationId": "submitAssignmentBatch",
                "summary": "Submit up to 1,000 answers; each submission_id is its key",
                "security": secured,
                "parameters": [path_id],
                "requestBody": body(BatchIn),
                "responses": {
                    **ok("Item by item: accepted, existing or refused (with why)", BatchView),
                    **problems(
                        (
                            *found,
                            *_BODY_ERRORS,
                            TooManyCallbackHosts,
                            NoValidAnswer,
                            RateLimited,
                            TooManyActiveJobs,
                            BacklogFull,
                            BudgetExhausted,
                        )
                    ),
                },
            },
        },
        "/v1/assignments/{assignment_id}/regrade": {
            "post": {
                "operationId": "regradeAssignment",
                "summary": "Grade every final submission again in a new round (or finish one)",
                "security": secured,
                "parameters": [path_id],
                "requestBody": body(RegradeIn),
                "responses": {
                    **ok("The new round started; poll the assignment", AssignmentView, 202),
                    **problems(
                        (*found, *_BODY_ERRORS, AssignmentBusy, TooManyActiveJobs, BacklogFull)
                    ),
                },
            },
            "get": {
                "operationId": "getRegradeReport",
                "summary": "Final and model grades before and after, per student; shifts, kappa",
                "security": secured,
                "parameters": [path_id, *query(ReportQuery)],
                "responses": {
                    **ok("The report of the current round", RegradeReportView),
                    **problems((*found, ValidationFailed)),
                },
            },
        },
        "/v1/assignments/{assignment_id}/grades:post": {
            "post": {
                "operationId": "postAssignmentGrades",
                "summary": "Post the final grades (all, or chosen submissions') to students",
                "security": secured,
                "parameters": [path_id],
                "requestBody": body(PostIn),
                "responses": {
                    **ok("What the post did, by submission id", PostReportView),
                    **problems((*found, *_BODY_ERRORS)),
                },
            },
        },
        "/v1/assignments/{assignment_id}/grades": {
            "get": {
                "operationId": "getAssignmentGrades",
                "summary": "The grades, as JSON pages or (Accept: text/csv) one streamed sheet",
                "security": secured,
                "parameters": [path_id, *query(PageQuery)],
                "responses": {
                    "200": {
                        "description": "One page of jobs, or the whole sheet as CSV",
                        "content": {
                            "application/json": {"schema": ref(GradePageView)},
                            "text/csv": {"schema": {"type": "string"}},
                        },
                    },
                    **problems((*found, ValidationFailed)),
                },
            },
        },
    }
