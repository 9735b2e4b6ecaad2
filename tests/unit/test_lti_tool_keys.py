"""Gradeq's LTI keys: one made on first use, a rotation published before it signs, the old
key published through the overlap, then gone; and a launch's roles read as policy roles."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import jwt
import pytest

from services.notification.sealing import Sealer, new_sealing_key
from shared.adapters.embedded.lti_store import SqliteLtiStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.clock import FrozenClock
from shared.domain.authorization import Role
from shared.domain.lti import role_of, student_id_of
from shared.service_layer.lti_keys import LtiToolKeys

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
MEMBERSHIP = "http://purl.imsglobal.org/vocab/lis/v2/membership#"


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(T0)


@pytest.fixture
def keys(tmp_path: Path, clock: FrozenClock) -> LtiToolKeys:
    store = SqliteLtiStore(SqliteDatabase(tmp_path / "lti.sqlite3"))
    return LtiToolKeys(store, Sealer.from_setting(new_sealing_key()), clock)


def kids(keys: LtiToolKeys) -> set[str]:
    return {k["kid"] for k in keys.jwks()["keys"]}


def test_the_first_key_is_made_once_and_signs_at_once(keys: LtiToolKeys) -> None:
    first = keys.signing_key()
    assert keys.signing_key().kid == first.kid
    assert kids(keys) == {first.kid}


def test_what_the_key_signs_verifies_with_the_published_jwks(keys: LtiToolKeys) -> None:
    signing = keys.signing_key()
    token = jwt.encode({"a": 1}, signing.private_key, "RS256", headers={"kid": signing.kid})
    [jwk] = keys.jwks()["keys"]
    assert set(jwk) >= {"kty", "n", "e", "kid", "alg", "use"} and "d" not in jwk
    public = jwt.PyJWK(jwk).key
    assert jwt.decode(token, public, algorithms=["RS256"]) == {"a": 1}


def test_a_rotation_publishes_first_signs_later_and_retires_the_old_key(
    keys: LtiToolKeys, clock: FrozenClock
) -> None:
    old = keys.signing_key()
    new = keys.rotate(lead=timedelta(hours=1), overlap=timedelta(hours=2))
    assert kids(keys) == {old.kid, new.kid}
    assert keys.signing_key().kid == old.kid  # the platforms' caches have not seen it yet
    clock.advance(timedelta(hours=1))
    assert keys.signing_key().kid == new.kid
    assert kids(keys) == {old.kid, new.kid}  # what the old key signed still verifies
    clock.advance(timedelta(hours=2))
    assert kids(keys) == {new.kid}
    assert keys.public_key(old.kid) is None
    assert keys.public_key(new.kid) is not None


@pytest.mark.parametrize(
    ("roles", "role"),
    [
        ([MEMBERSHIP + "Instructor"], Role.TEACHER),
        (["Instructor"], Role.TEACHER),
        ([MEMBERSHIP + "Learner"], Role.STUDENT),
        (["Learner"], Role.STUDENT),
        (
            [
                MEMBERSHIP + "Instructor",
                "http://purl.imsglobal.org/vocab/lis/v2/membership/Instructor#TeachingAssistant",
            ],
            Role.REVIEWER,
        ),
        ([MEMBERSHIP + "Instructor", MEMBERSHIP + "Learner"], Role.TEACHER),
        (["http://purl.imsglobal.org/vocab/lis/v2/institution/person#Administrator"], Role.TEACHER),
        ([MEMBERSHIP + "Mentor"], None),
        (["http://purl.imsglobal.org/vocab/lis/v2/institution/person#Student"], None),
        ([], None),
    ],
)
def test_launch_roles_map_to_the_policy(roles: list[str], role: Role | None) -> None:
    assert role_of(roles) is role


def test_the_student_id_is_the_roster_id_where_the_lms_sends_one() -> None:
    assert student_id_of("lms-7", "s-123") == "s-123"
    assert student_id_of("lms-7", None) == "lms-7"
    assert student_id_of("lms-7", "") == "lms-7"
