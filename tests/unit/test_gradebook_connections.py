"""Each school's gradebook connection: read from the file or the JSON setting, refused
at start when malformed, with the roster mapping students to LMS users."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from services.gradebook.connections import load_connections
from services.gradebook.ports import PostedGrade
from services.gradebook.settings import GradebookSettings


class Named:
    def __init__(self, school: str, entry: Mapping[str, Any]) -> None:
        self.school, self.entry = school, dict(entry)

    def write(self, grade: PostedGrade) -> None:
        raise AssertionError("not called")


def factory(school: str, entry: Mapping[str, Any], settings: GradebookSettings) -> Named:
    return Named(school, entry)


FACTORIES = {"classroom": factory}
ENTRIES = {
    "school-a": {"kind": "classroom", "course_id": "c1", "roster": {"s-1": "111"}},
    "school-b": {"kind": "classroom", "course_id": "c2", "roster": "student_id"},
}


def test_no_setting_means_no_school_has_a_gradebook() -> None:
    connections = load_connections(GradebookSettings(), FACTORIES)
    assert connections.writer("school-a") is None


def test_the_file_and_the_json_setting_name_each_schools_writer_and_roster(
    tmp_path: Path,
) -> None:
    path = tmp_path / "connections.json"
    path.write_text(json.dumps(ENTRIES))
    for settings in (
        GradebookSettings(connections_file=path),
        GradebookSettings(connections_json=json.dumps(ENTRIES)),
    ):
        connections = load_connections(settings, FACTORIES)
        writer = connections.writer("school-a")
        assert isinstance(writer, Named) and writer.entry["course_id"] == "c1"
        assert connections.lms_user_id("school-a", "s-1") == "111"
        assert connections.lms_user_id("school-a", "s-2") is None
        assert connections.lms_user_id("school-b", "ben@school.example") == "ben@school.example"
        assert connections.writer("school-c") is None


@pytest.mark.parametrize(
    "entries",
    [
        {"school-a": {"kind": "moodle"}},
        {"school-a": "classroom"},
        {"school-a": {"kind": "classroom", "roster": ["s-1"]}},
        ["school-a"],
    ],
)
def test_a_malformed_file_never_starts_the_service(entries: object) -> None:
    with pytest.raises(ValueError):
        load_connections(GradebookSettings(connections_json=json.dumps(entries)), FACTORIES)


def test_a_classroom_entry_needs_its_course_and_teacher() -> None:
    for entry in ({"kind": "classroom"}, {"kind": "classroom", "course_id": "c1"}):
        settings = GradebookSettings(connections_json=json.dumps({"school-a": entry}))
        with pytest.raises(ValueError, match=r"course_id|teacher"):
            load_connections(settings)


def test_a_school_registered_as_an_lti_platform_gets_the_lti_writer(tmp_path: Path) -> None:
    from services.gradebook.app import create_app
    from services.gradebook.connections import LmsConnections, StaticConnections
    from services.gradebook.lti import LtiAgsWriter
    from services.notification.sealing import new_sealing_key
    from shared.adapters.embedded.lti_store import SqliteLtiStore
    from shared.adapters.embedded.sqlite import SqliteDatabase
    from shared.config.settings import Settings
    from shared.domain.lti import LtiRegistration
    from tests.support.push import PUSH_TOKEN, restored_root_logger

    settings = Settings(
        data_dir=tmp_path,
        push_token=PUSH_TOKEN,  # type: ignore[arg-type]
        lti_secrets_key=new_sealing_key(),  # type: ignore[arg-type]
    )
    store = SqliteLtiStore(SqliteDatabase(settings.database_path))
    store.put_registration(
        LtiRegistration(
            school="school-lti",
            issuer="https://lms.school.example",
            client_id="c-1",
            deployment_ids=("d-1",),
            auth_login_url="https://lms.school.example/auth",
            auth_token_url="https://lms.school.example/token",
            key_set_url="https://lms.school.example/jwks",
        )
    )
    with restored_root_logger():
        app = create_app(settings, GradebookSettings(connections_json=json.dumps({})))
    subscriber = app.extensions["gradeq.gradebook"]
    connections = subscriber.connections
    assert isinstance(connections, LmsConnections)
    assert isinstance(connections.writer("school-lti"), LtiAgsWriter)
    assert connections.writer("school-a") is None
    # The file's connection of a school wins over its registration.
    named = Named("school-lti", {})
    both = LmsConnections(StaticConnections(writers={"school-lti": named}), store, named)
    assert both.writer("school-lti") is named
