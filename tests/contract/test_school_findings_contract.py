"""Each way a student stood beside the school, checked again on both stores.

The tests are those of `tests/unit/test_school_policy.py`; here the intake and the worker
run on the embedded family or on the Google family against the Firestore emulator (the
client keys stay in SQLite, as the authorization matrix's do).
"""

from __future__ import annotations

import functools
from typing import Any

import pytest

from services.intake.app import create_app as create_intake_app
from shared.adapters.embedded.api_key_store import SqliteApiKeyStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.bootstrap import Adapters
from shared.bootstrap.embedded import EmbeddedFamily
from shared.config.settings import Settings
from tests.fakes import FakePublisher, FakeTaskQueue
from tests.unit import test_school_policy as findings
from tests.unit.conftest import clock, settings
from tests.unit.test_school_policy import (
    intake,
    test_a_practice_jobs_event_says_so_and_names_its_author,
    test_a_student_cannot_grade_themselves_on_the_schools_assignment,
    test_a_student_cannot_pick_a_lane_the_school_may_not_use,
    test_a_student_outside_the_assignments_is_refused_unless_the_school_allows_practice,
    test_batch_jobs_go_to_the_schools_lane_not_the_default_queue,
    test_the_grade_sheet_holds_the_students_submissions,
    test_the_school_erases_a_students_own_submission,
    test_the_school_erases_every_submission_of_a_signed_in_student,
    test_the_school_sees_every_students_submission,
    test_the_schools_review_rules_hold_a_students_submission,
)

__all__ = [
    "clock",
    "intake",
    "settings",
    "test_a_practice_jobs_event_says_so_and_names_its_author",
    "test_a_student_cannot_grade_themselves_on_the_schools_assignment",
    "test_a_student_cannot_pick_a_lane_the_school_may_not_use",
    "test_a_student_outside_the_assignments_is_refused_unless_the_school_allows_practice",
    "test_batch_jobs_go_to_the_schools_lane_not_the_default_queue",
    "test_the_grade_sheet_holds_the_students_submissions",
    "test_the_school_erases_a_students_own_submission",
    "test_the_school_erases_every_submission_of_a_signed_in_student",
    "test_the_school_sees_every_students_submission",
    "test_the_schools_review_rules_hold_a_students_submission",
]


@pytest.fixture(params=["embedded", "google"])
def adapters(
    request: pytest.FixtureRequest, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> Adapters:
    """The school's stores on one family; the intake the tests build uses that family."""
    local = EmbeddedFamily(settings)
    family: Any = local
    if request.param == "google":
        from tests.contract.emulator_family import EmulatorFamily

        family = EmulatorFamily(settings, request.getfixturevalue("firestore_clean"), local)
    keys = SqliteApiKeyStore(SqliteDatabase(settings.database_path))
    monkeypatch.setattr(
        findings,
        "create_intake",
        functools.partial(create_intake_app, api_keys=keys, family=family),
    )
    return Adapters(
        store=family.job_store(),
        queue=FakeTaskQueue(),
        publisher=FakePublisher(),
        uow=family.unit_of_work(),
        assignments=family.assignment_store(),
        batch=family.job_batch(),
    )
