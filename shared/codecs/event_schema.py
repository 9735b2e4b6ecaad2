"""The JSON Schema of the GradingCompleted data, loaded once from package data."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator

SCHEMA_RESOURCE = "grading_completed.v1.json"


@cache
def schema() -> dict[str, Any]:
    """Return the GradingCompleted v1 schema document."""
    text = resources.files("shared").joinpath("schemas", SCHEMA_RESOURCE).read_text("utf-8")
    document: dict[str, Any] = json.loads(text)
    Draft202012Validator.check_schema(document)
    return document


def schema_id() -> str:
    """Return the schema's `$id`, the events' `dataschema`."""
    return str(schema()["$id"])


@cache
def _validator() -> Draft202012Validator:
    return Draft202012Validator(schema())


def schema_errors(data: object) -> list[str]:
    """Describe every way `data` breaks the schema; empty when it is valid."""
    return [
        f"{error.json_path}: {error.message}"
        for error in sorted(_validator().iter_errors(data), key=lambda e: e.json_path)
    ]


ASSIGNMENT_GRADED_RESOURCE = "assignment_graded.v1.json"


@cache
def assignment_graded_schema() -> dict[str, Any]:
    """Return the AssignmentGraded v1 schema document."""
    resource = resources.files("shared").joinpath("schemas", ASSIGNMENT_GRADED_RESOURCE)
    document: dict[str, Any] = json.loads(resource.read_text("utf-8"))
    Draft202012Validator.check_schema(document)
    return document


def assignment_graded_errors(data: object) -> list[str]:
    """Describe every way `data` breaks the AssignmentGraded schema; empty when valid."""
    validator = Draft202012Validator(assignment_graded_schema())
    return [f"{e.json_path}: {e.message}" for e in validator.iter_errors(data)]


GRADE_REVIEWED_RESOURCE = "grade_reviewed.v1.json"


@cache
def grade_reviewed_schema() -> dict[str, Any]:
    """Return the GradeReviewed v1 schema document."""
    resource = resources.files("shared").joinpath("schemas", GRADE_REVIEWED_RESOURCE)
    document: dict[str, Any] = json.loads(resource.read_text("utf-8"))
    Draft202012Validator.check_schema(document)
    return document


def grade_reviewed_errors(data: object) -> list[str]:
    """Describe every way `data` breaks the GradeReviewed schema; empty when valid."""
    validator = Draft202012Validator(grade_reviewed_schema())
    return [f"{e.json_path}: {e.message}" for e in validator.iter_errors(data)]
