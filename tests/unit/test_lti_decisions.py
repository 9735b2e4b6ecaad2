"""The LTI domain's decisions: a signing key's record read back field by field, what an
operator's listing shows of it, when it is published and signs, and an expiry that never
moves later; what a registration needs, where it and a link are stored and their records;
and a launch's roles read as the policy's."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from shared.domain.authorization import Role
from shared.domain.lti import (
    AssignmentLink,
    LtiRegistration,
    ToolKey,
    link_id,
    registration_id,
    role_of,
    student_id_of,
)

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def tool_key(expires_at: datetime | None = None) -> ToolKey:
    return ToolKey(
        kid="kid-1",
        sealing_key_id="kek-2",
        sealed="sealed-3",
        public_jwk={"kty": "RSA", "kid": "kid-1"},
        created_at=T0,
        signs_from=T0 + timedelta(hours=1),
        expires_at=expires_at,
    )


def test_a_key_record_holds_every_field_by_name() -> None:
    key = tool_key(expires_at=T0 + timedelta(hours=3))
    assert key.to_record() == {
        "kid": "kid-1",
        "sealing_key_id": "kek-2",
        "sealed": "sealed-3",
        "public_jwk": {"kty": "RSA", "kid": "kid-1"},
        "created_at": T0,
        "signs_from": T0 + timedelta(hours=1),
        "expires_at": T0 + timedelta(hours=3),
    }


def test_a_key_read_from_its_record_is_the_key_stored() -> None:
    key = tool_key(expires_at=T0 + timedelta(hours=3))
    record: dict[str, Any] = {
        "kid": "kid-1",
        "sealing_key_id": "kek-2",
        "sealed": "sealed-3",
        "public_jwk": {"kty": "RSA", "kid": "kid-1"},
        "created_at": T0,
        "signs_from": T0 + timedelta(hours=1),
        "expires_at": T0 + timedelta(hours=3),
    }
    read = ToolKey.from_record(record)
    assert read == key
    assert read.kid == "kid-1"
    assert read.sealing_key_id == "kek-2"
    assert read.sealed == "sealed-3"
    assert read.public_jwk == {"kty": "RSA", "kid": "kid-1"}
    assert read.created_at == T0
    assert read.signs_from == T0 + timedelta(hours=1)
    assert read.expires_at == T0 + timedelta(hours=3)


def test_a_record_without_an_expiry_reads_as_a_key_that_never_expires() -> None:
    record = tool_key().to_record()
    del record["expires_at"]
    assert ToolKey.from_record(record) == tool_key()


def test_the_listing_shows_the_times_but_never_the_sealed_key() -> None:
    assert tool_key(expires_at=T0 + timedelta(hours=3)).public_view() == {
        "kid": "kid-1",
        "created_at": "2026-03-01T12:00:00+00:00",
        "signs_from": "2026-03-01T13:00:00+00:00",
        "expires_at": "2026-03-01T15:00:00+00:00",
    }
    assert tool_key().public_view()["expires_at"] is None


def test_an_expiry_at_the_same_time_leaves_the_key_as_it_is() -> None:
    key = tool_key(expires_at=T0 + timedelta(hours=3))
    assert key.expire(T0 + timedelta(hours=3)) is key
    assert key.expire(T0 + timedelta(hours=4)) is key
    assert key.expire(T0 + timedelta(hours=2)).expires_at == T0 + timedelta(hours=2)
    assert tool_key().expire(T0).expires_at == T0


def test_a_new_kid_is_sixteen_random_hex_digits() -> None:
    kid = ToolKey.new_kid()
    assert len(kid) == 16 and int(kid, 16) >= 0
    assert ToolKey.new_kid() != kid


def test_a_key_is_published_until_it_expires_and_signs_from_its_start() -> None:
    key = tool_key(expires_at=T0 + timedelta(hours=3))
    assert key.published_at(T0 + timedelta(hours=3) - timedelta(microseconds=1))
    assert not key.published_at(T0 + timedelta(hours=3))
    assert tool_key().published_at(T0 + timedelta(days=999))
    assert not key.signs_at(T0 + timedelta(hours=1) - timedelta(microseconds=1))
    assert key.signs_at(T0 + timedelta(hours=1))
    assert not key.signs_at(T0 + timedelta(hours=3))
    assert tool_key().signs_at(T0 + timedelta(days=999))


def registration(**changes: Any) -> LtiRegistration:
    fields: dict[str, Any] = {
        "school": "school-a",
        "issuer": "https://lms.test",
        "client_id": "client-1",
        "deployment_ids": ("dep-1", "dep-2"),
        "auth_login_url": "https://lms.test/auth",
        "auth_token_url": "https://lms.test/token",
        "key_set_url": "https://lms.test/jwks",
    }
    return LtiRegistration(**{**fields, **changes})


@pytest.mark.parametrize(
    "name", ["school", "issuer", "client_id", "auth_login_url", "auth_token_url", "key_set_url"]
)
def test_a_registration_needs_each_of_its_names_and_urls(name: str) -> None:
    for blank in ("", "  "):
        with pytest.raises(ValueError) as refused:
            registration(**{name: blank})
        assert str(refused.value) == f"an LTI registration needs {name}"


def test_a_registration_needs_a_deployment_id() -> None:
    with pytest.raises(ValueError) as refused:
        registration(deployment_ids=())
    assert str(refused.value) == "an LTI registration needs at least one deployment id"
    assert registration(deployment_ids=("dep-1",)).deployment_ids == ("dep-1",)


def test_a_registration_is_stored_by_its_issuer_and_client_id() -> None:
    expected = hashlib.sha256(b"https://lms.test\nclient-1").hexdigest()[:32]
    assert registration().registration_id == expected
    assert registration_id("https://lms.test", "client-1") == expected
    assert len(expected) == 32


def test_client_assertions_go_to_the_token_audience_else_the_token_url() -> None:
    assert registration().assertion_audience == "https://lms.test/token"
    assert registration(token_audience="aud-1").assertion_audience == "aud-1"


def test_a_registration_record_round_trips_with_a_list_of_deployments() -> None:
    record = registration(token_audience="aud-1").to_record()
    assert record == {
        "school": "school-a",
        "issuer": "https://lms.test",
        "client_id": "client-1",
        "deployment_ids": ["dep-1", "dep-2"],
        "auth_login_url": "https://lms.test/auth",
        "auth_token_url": "https://lms.test/token",
        "key_set_url": "https://lms.test/jwks",
        "token_audience": "aud-1",
    }
    assert LtiRegistration.from_record(record) == registration(token_audience="aud-1")
    del record["token_audience"]
    assert LtiRegistration.from_record(record) == registration()


def assignment_link(**changes: Any) -> AssignmentLink:
    fields: dict[str, Any] = {
        "school": "school-a",
        "assignment_id": "a-1",
        "issuer": "https://lms.test",
        "client_id": "client-1",
        "context_id": "course-1",
        "lineitems_url": "https://lms.test/lineitems",
        "memberships_url": "https://lms.test/memberships",
        "lineitem_url": "https://lms.test/lineitems/7",
    }
    return AssignmentLink(**{**fields, **changes})


def test_an_assignment_link_record_round_trips() -> None:
    record = assignment_link().to_record()
    assert record == {
        "school": "school-a",
        "assignment_id": "a-1",
        "issuer": "https://lms.test",
        "client_id": "client-1",
        "context_id": "course-1",
        "lineitems_url": "https://lms.test/lineitems",
        "memberships_url": "https://lms.test/memberships",
        "lineitem_url": "https://lms.test/lineitems/7",
    }
    assert AssignmentLink.from_record(record) == assignment_link()
    del record["memberships_url"], record["lineitem_url"]
    read = AssignmentLink.from_record(record)
    assert read == assignment_link(memberships_url=None, lineitem_url=None)


def test_a_link_learns_its_line_item() -> None:
    link = assignment_link(lineitem_url=None)
    assert link.with_line_item("https://lms.test/lineitems/9") == assignment_link(
        lineitem_url="https://lms.test/lineitems/9"
    )


def test_a_link_is_stored_by_its_school_and_assignment() -> None:
    assert link_id("school-a", "a-1") == hashlib.sha256(b"school-a\na-1").hexdigest()[:32]


MEMBERSHIP = "http://purl.imsglobal.org/vocab/lis/v2/membership#"
SUB_ROLE = "http://purl.imsglobal.org/vocab/lis/v2/membership/"
INSTITUTION = "http://purl.imsglobal.org/vocab/lis/v2/institution/person#"
SYSTEM = "http://purl.imsglobal.org/vocab/lis/v2/system/person#"


@pytest.mark.parametrize(
    ("roles", "role"),
    [
        ([MEMBERSHIP + "ContentDeveloper"], Role.TEACHER),
        (["ContentDeveloper"], Role.TEACHER),
        ([SYSTEM + "Administrator"], Role.TEACHER),
        ([INSTITUTION + "Administrator", MEMBERSHIP + "Learner"], Role.TEACHER),
        ([SUB_ROLE + "Instructor#TeachingAssistant"], Role.REVIEWER),
        (["Instructor#TeachingAssistant"], Role.REVIEWER),
        ([SUB_ROLE + "Instructor#TeachingAssistant", SYSTEM + "Administrator"], Role.TEACHER),
        ([SUB_ROLE + "Instructor#TeachingAssistant", "Administrator"], Role.TEACHER),
        ([SUB_ROLE + "Instructor#TeachingAssistant", MEMBERSHIP + "Learner"], Role.REVIEWER),
        ([SUB_ROLE + "Learner#NonCreditLearner", MEMBERSHIP + "Learner"], Role.STUDENT),
        ([SYSTEM + "User"], None),
        (["urn:lti:role:ims/lis/Instructor"], None),
        (["Mentor"], None),
    ],
)
def test_launch_roles_map_to_the_policy(roles: list[str], role: Role | None) -> None:
    assert role_of(roles) is role


def test_the_roster_id_is_trimmed() -> None:
    assert student_id_of("lms-7", " s-123 ") == "s-123"
    assert student_id_of("lms-7", None) == "lms-7"
