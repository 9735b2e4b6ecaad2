"""The JSON Schemas of the events' data (GradingCompleted and the grade events), loaded once.

Every event a subscriber receives is checked against it, so the check runs on
jsonschema-rs's compiled validator (well under a microsecond, against about 100 us for
the pure-Python validator: a fifth of a subscriber's CPU per event). Only data it
refuses goes through `jsonschema`, whose messages describe every error. Formats are
annotations in both, as the 2020-12 draft makes them by default.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

import jsonschema_rs
from jsonschema import Draft202012Validator

SCHEMA_RESOURCE = "grading_completed.v1.json"


def schema() -> dict[str, Any]:
    """Return the GradingCompleted v1 schema document."""
    return _document(SCHEMA_RESOURCE)


def schema_id() -> str:
    """Return the schema's `$id`, the events' `dataschema`."""
    return str(schema()["$id"])


@cache
def _validator() -> Draft202012Validator:
    return Draft202012Validator(schema())


@cache
def _compiled() -> jsonschema_rs.Draft202012Validator:
    return jsonschema_rs.Draft202012Validator(schema(), validate_formats=False)


def schema_errors(data: object) -> list[str]:
    """Describe every way `data` breaks the schema; empty when it is valid."""
    if _compiled().is_valid(data):
        return []
    return [
        f"{error.json_path}: {error.message}"
        for error in sorted(_validator().iter_errors(data), key=lambda e: e.json_path)
    ]


ASSIGNMENT_GRADED_RESOURCE = "assignment_graded.v1.json"
GRADE_REVIEWED_RESOURCE = "grade_reviewed.v1.json"
GRADE_POSTED_RESOURCE = "grade_posted.v1.json"


@cache
def _document(resource: str) -> dict[str, Any]:
    """A schema document of the package's `schemas/`, checked once."""
    text = resources.files("shared").joinpath("schemas", resource).read_text("utf-8")
    document: dict[str, Any] = json.loads(text)
    Draft202012Validator.check_schema(document)
    return document


@cache
def _checker(resource: str) -> Draft202012Validator:
    return Draft202012Validator(_document(resource))


def _errors(resource: str, data: object) -> list[str]:
    return [f"{e.json_path}: {e.message}" for e in _checker(resource).iter_errors(data)]


def assignment_graded_schema() -> dict[str, Any]:
    """Return the AssignmentGraded v1 schema document."""
    return _document(ASSIGNMENT_GRADED_RESOURCE)


def assignment_graded_errors(data: object) -> list[str]:
    """Describe every way `data` breaks the AssignmentGraded schema; empty when valid."""
    return _errors(ASSIGNMENT_GRADED_RESOURCE, data)


def grade_reviewed_schema() -> dict[str, Any]:
    """Return the GradeReviewed v1 schema document."""
    return _document(GRADE_REVIEWED_RESOURCE)


def grade_reviewed_errors(data: object) -> list[str]:
    """Describe every way `data` breaks the GradeReviewed schema; empty when valid."""
    return _errors(GRADE_REVIEWED_RESOURCE, data)


def grade_posted_schema() -> dict[str, Any]:
    """Return the GradePosted v1 schema document."""
    return _document(GRADE_POSTED_RESOURCE)


def grade_posted_errors(data: object) -> list[str]:
    """Describe every way `data` breaks the GradePosted schema; empty when valid."""
    return _errors(GRADE_POSTED_RESOURCE, data)
