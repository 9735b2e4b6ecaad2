"""What every LtiStore must guarantee: registrations by (issuer, client id) replaced in
place and listed per school; signing keys stored sealed, listed oldest first, expiry that
keeps the earliest time, unknown kids refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from services.notification.sealing import Sealer, new_sealing_key
from shared.adapters.embedded.lti_store import SqliteLtiStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.clock import FrozenClock
from shared.domain.lti import AssignmentLink, LtiRegistration, ToolKey, ToolKeyNotFound
from shared.ports import LtiStore
from shared.service_layer.lti_keys import LtiToolKeys

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(params=["embedded", "google"])
def lti_store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """LtiStore: SQLite, or Firestore on the official emulator."""
    if request.param == "google":
        from shared.adapters.google.lti_store import FirestoreLtiStore

        return FirestoreLtiStore(request.getfixturevalue("firestore_clean"))
    return SqliteLtiStore(SqliteDatabase(tmp_path / "lti.sqlite3"))


def registration(school: str, issuer: str, client_id: str = "c-1", **kw: Any) -> LtiRegistration:
    fields: dict[str, Any] = {
        "deployment_ids": ("d-1",),
        "auth_login_url": issuer + "/auth",
        "auth_token_url": issuer + "/token",
        "key_set_url": issuer + "/jwks",
    }
    fields.update(kw)
    return LtiRegistration(school=school, issuer=issuer, client_id=client_id, **fields)


def tool_key(at: datetime, kid: str | None = None) -> ToolKey:
    return ToolKey(
        kid or ToolKey.new_kid(), "k1", "c2VhbGVk", {"kty": "RSA", "n": "x", "e": "AQAB"}, at, at
    )


def test_a_registration_round_trips(lti_store: LtiStore) -> None:
    stored = registration(
        "school-a", "https://lms.a.test", deployment_ids=("d-1", "d-2"), token_audience="aud"
    )
    lti_store.put_registration(stored)
    assert lti_store.registration("https://lms.a.test", "c-1") == stored
    assert lti_store.registration("https://lms.a.test", "c-2") is None
    assert lti_store.registration("https://lms.b.test", "c-1") is None


def test_a_registration_is_replaced_in_place(lti_store: LtiStore) -> None:
    lti_store.put_registration(registration("school-a", "https://lms.a.test"))
    moved = registration("school-a", "https://lms.a.test", deployment_ids=("d-9",))
    lti_store.put_registration(moved)
    assert lti_store.registrations() == [moved]


def test_registrations_are_listed_per_school(lti_store: LtiStore) -> None:
    a2 = registration("school-a", "https://lms.a.test", "c-2")
    b1 = registration("school-b", "https://lms.b.test")
    a1 = registration("school-a", "https://lms.a.test", "c-1")
    for stored in (a2, b1, a1):
        lti_store.put_registration(stored)
    assert lti_store.registrations("school-a") == [a1, a2]
    assert lti_store.registrations() == [a1, a2, b1]
    assert lti_store.registrations("school-c") == []


def test_keys_are_listed_oldest_first_and_stored_once(lti_store: LtiStore) -> None:
    second, first = tool_key(T0 + timedelta(seconds=1)), tool_key(T0)
    lti_store.add_key(second)
    lti_store.add_key(first)
    assert lti_store.tool_keys() == [first, second]
    with pytest.raises(ValueError, match="already exists"):
        lti_store.add_key(tool_key(T0, second.kid))


def test_key_expiry_keeps_the_earliest_time(lti_store: LtiStore) -> None:
    key = tool_key(T0)
    lti_store.add_key(key)
    assert lti_store.expire_key(key.kid, T0 + timedelta(hours=2)).expires_at == T0 + timedelta(
        hours=2
    )
    lti_store.expire_key(key.kid, T0 + timedelta(hours=5))
    lti_store.expire_key(key.kid, T0 + timedelta(hours=1))
    [stored] = lti_store.tool_keys()
    assert stored.expires_at == T0 + timedelta(hours=1)


def test_expiring_an_unknown_key_raises(lti_store: LtiStore) -> None:
    with pytest.raises(ToolKeyNotFound):
        lti_store.expire_key("nope", T0)


def test_the_store_never_holds_a_private_key_in_plain_text(lti_store: LtiStore) -> None:
    keys = LtiToolKeys(lti_store, Sealer.from_setting(new_sealing_key()), FrozenClock(T0))
    signing = keys.signing_key()
    [stored] = lti_store.tool_keys()
    assert stored.kid == signing.kid
    text = repr(stored.to_record())
    assert "PRIVATE KEY" not in text
    assert str(signing.private_key.private_numbers().d) not in text
    reopened = LtiToolKeys(lti_store, Sealer.from_setting(new_sealing_key()), FrozenClock(T0))
    with pytest.raises(Exception, match="not configured"):
        reopened.signing_key()


def link(assignment: str = "a-1", context: str = "course-1", **kw: Any) -> AssignmentLink:
    return AssignmentLink(
        "school-a",
        assignment,
        "https://lms.a.test",
        "c-1",
        context,
        f"https://lms.a.test/{context}/lineitems",
        f"https://lms.a.test/{context}/members",
        **kw,
    )


def test_an_assignment_link_round_trips_per_school_and_assignment(lti_store: LtiStore) -> None:
    lti_store.put_link(link())
    assert lti_store.link("school-a", "a-1") == link()
    assert lti_store.link("school-a", "a-2") is None
    assert lti_store.link("school-b", "a-1") is None


def test_a_known_line_item_stays_when_a_launch_names_none(lti_store: LtiStore) -> None:
    created = link().with_line_item("https://lms.a.test/course-1/lineitems/9")
    lti_store.put_link(created)
    lti_store.put_link(link())
    assert lti_store.link("school-a", "a-1") == created


def test_a_link_moved_to_another_course_forgets_the_line_item(lti_store: LtiStore) -> None:
    lti_store.put_link(link().with_line_item("https://lms.a.test/course-1/lineitems/9"))
    lti_store.put_link(link(context="course-2"))
    assert lti_store.link("school-a", "a-1") == link(context="course-2")
