"""The OpenAPI document and the app agree: same routes, and answers that conform."""

from __future__ import annotations

import re
from typing import Any

import jsonschema
import pytest
from flask import Flask

from services.intake.app import create_app
from services.intake.openapi import openapi_document
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.errors import PROBLEM_BASE, GradeqError
from tests.unit.test_intake_api import BODY, post

IGNORED_METHODS = {"HEAD", "OPTIONS"}


@pytest.fixture
def app(settings: Settings, adapters: Adapters, clock: FrozenClock) -> Flask:
    return create_app(settings, adapters, clock)


#: The operator's admin API and dashboard, the reviewers' page (HTML and its static
#: files, calling the documented /v1/reviews) and the script both pages share are not part
#: of the clients' contract.
OPERATOR_PREFIX = ("/admin", "/review/", "/page-kit/")


def served_operations(app: Flask) -> set[tuple[str, str]]:
    operations = set()
    for rule in app.url_map.iter_rules():
        if rule.endpoint == "static" or rule.rule.startswith(OPERATOR_PREFIX):
            continue
        path = re.sub(r"<(?:[^:>]+:)?([^>]+)>", r"{\1}", rule.rule)
        for method in (rule.methods or set()) - IGNORED_METHODS:
            operations.add((path, method.lower()))
    return operations


def documented_operations(document: dict[str, Any]) -> set[tuple[str, str]]:
    return {(path, method) for path, item in document["paths"].items() for method in item}


def test_every_route_is_documented_and_every_documented_route_exists(app: Flask) -> None:
    document = app.test_client().get("/openapi.json").get_json()
    assert document == openapi_document()
    assert served_operations(app) == documented_operations(document)


def test_the_document_is_valid_openapi_3_1() -> None:
    from jsonschema.validators import Draft202012Validator

    document = openapi_document()
    assert document["openapi"].startswith("3.1")
    for schema in document["components"]["schemas"].values():
        Draft202012Validator.check_schema(schema)  # raises naming the bad keyword


def all_error_classes() -> set[type[GradeqError]]:
    found: set[type[GradeqError]] = set()
    pending: list[type[GradeqError]] = [GradeqError]
    while pending:
        cls = pending.pop()
        found.add(cls)
        pending.extend(cls.__subclasses__())
    return found


def test_every_documented_problem_type_is_a_known_error() -> None:
    known = {PROBLEM_BASE + cls.slug for cls in all_error_classes()}
    for item in openapi_document()["paths"].values():
        for operation in item.values():
            for response in operation["responses"].values():
                content = response.get("content", {}).get("application/problem+json")
                if content:
                    types = set(content["schema"]["allOf"][1]["properties"]["type"]["enum"])
                    assert types <= known


def resolve(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with the document's components, for jsonschema to follow $refs."""
    return {**schema, "components": document["components"]}


def test_answers_conform_to_the_document(app: Flask) -> None:
    document = openapi_document()
    client = app.test_client()
    accepted = post(client)
    operation = document["paths"]["/v1/grading-jobs"]["post"]
    schema = operation["responses"]["202"]["content"]["application/json"]["schema"]
    jsonschema.validate(accepted.get_json(), resolve(document, schema))
    refused = post(client, body={**BODY, "rubric": " "}, key="k-2")
    problem_schema = operation["responses"]["400"]["content"]["application/problem+json"]
    jsonschema.validate(refused.get_json(), resolve(document, problem_schema["schema"]))
