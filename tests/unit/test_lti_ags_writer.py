"""LtiAgsWriter against the local LTI platform: the line item made or linked, the score's
fields, the roster's student ids, the token kept until expiry, and the platform's errors
read as busy (retry) or rejected (never)."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from localcloud.lti_platform import (
    INSTRUCTOR,
    LEARNER,
    LineItem,
    Member,
    PlatformState,
    ToolRegistration,
    running_platform,
)
from services.gradebook.lti import LtiAgsWriter, score_of
from services.gradebook.ports import GradebookBusy, GradebookRejected, PostedGrade
from services.notification.sealing import Sealer, new_sealing_key
from shared.adapters.embedded.lti_store import SqliteLtiStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.adapters.lti.ags import AgsClient, scores_url
from shared.adapters.lti.nrps import NrpsClient
from shared.adapters.lti.tokens import LtiTokens
from shared.clock import FrozenClock
from shared.domain.lti import AssignmentLink, LtiRegistration
from shared.service_layer.lti_keys import LtiToolKeys
from tests.support.lti_tool_keys import served_jwks

CLIENT = "gradeq-client"
POSTED = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@dataclass
class Rig:
    platform: PlatformState
    store: SqliteLtiStore
    writer: LtiAgsWriter
    clock: FrozenClock
    link: AssignmentLink
    sealer: Sealer

    def line_item(self) -> str:
        stored = self.store.link("school-a", "a-1")
        assert stored is not None and stored.lineitem_url is not None
        return stored.lineitem_url


def grade(student: str = "s-1", **overrides: Any) -> PostedGrade:
    fields: dict[str, Any] = {
        "school": "school-a",
        "assignment_id": "a-1",
        "student_id": student,
        "submission_id": f"sub-{student}",
        "job_id": f"job-{student}",
        "version": 1,
        "score": 7.5,
        "max_score": 10.0,
        "source": "model",
        "feedback": "Clear argument; cite sources.",
        "grading_progress": "FullyGraded",
        "posted_at": POSTED,
        "reason": None,
        "lms_user_id": None,
    }
    fields.update(overrides)
    return PostedGrade(**fields)


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    clock = FrozenClock(datetime.now(UTC))
    store = SqliteLtiStore(SqliteDatabase(tmp_path / "lti.sqlite3"))
    sealer = Sealer.from_setting(new_sealing_key())
    keys = LtiToolKeys(store, sealer, clock)
    with (
        served_jwks(keys.jwks) as jwks_url,
        running_platform(PlatformState(now=lambda: clock.now().timestamp())) as platform,
    ):
        platform.register_tool(ToolRegistration(CLIENT, "dep-1", "", (), jwks_url))
        platform.enrol("course-1", Member("t-1", (INSTRUCTOR,)))
        platform.enrol("course-1", Member("u-1", (LEARNER,), lis_person_sourcedid="s-1"))
        platform.enrol("course-1", Member("u-2", (LEARNER,), lis_person_sourcedid="s-2"))
        platform.enrol("course-1", Member("u-3", (LEARNER,)))
        store.put_registration(
            LtiRegistration(
                "school-a",
                platform.issuer,
                CLIENT,
                ("dep-1",),
                platform.auth_url,
                platform.token_url,
                platform.jwks_url,
            )
        )
        link = AssignmentLink(
            "school-a",
            "a-1",
            platform.issuer,
            CLIENT,
            "course-1",
            platform.lineitems_url("course-1"),
            platform.memberships_url("course-1"),
        )
        store.put_link(link)
        writer = LtiAgsWriter.on(store, keys, clock)
        yield Rig(platform, store, writer, clock, link, sealer)


def test_a_posted_grade_lands_on_a_line_item_made_for_the_assignment(rig: Rig) -> None:
    rig.writer.write(grade())
    [item] = rig.platform.line_items.values()
    assert (item.resource_id, item.score_maximum, item.tag) == ("a-1", 10.0, "gradeq")
    assert rig.line_item() == item.id
    assert rig.platform.results(item.id) == {
        "u-1": {
            "userId": "u-1",
            "scoreGiven": 7.5,
            "scoreMaximum": 10.0,
            "comment": "Clear argument; cite sources.",
            "activityProgress": "Completed",
            "gradingProgress": "FullyGraded",
            "timestamp": "2026-03-01T12:00:00.000+00:00",
        }
    }


def test_a_held_grade_shows_pending_without_its_number(rig: Rig) -> None:
    rig.writer.write(grade(grading_progress="PendingManual", score=4.0))
    result = rig.platform.results(rig.line_item())["u-1"]
    assert result["gradingProgress"] == "PendingManual"
    assert result["activityProgress"] == "Submitted"
    assert "scoreGiven" not in result and "comment" not in result


def test_the_roster_maps_student_ids_and_an_unknown_student_is_rejected(rig: Rig) -> None:
    rig.writer.write(grade("s-2"))
    rig.writer.write(grade("u-3"))  # no roster id: the LMS user id is the student id
    assert set(rig.platform.results(rig.line_item())) == {"u-2", "u-3"}
    with pytest.raises(GradebookRejected, match="roster"):
        rig.writer.write(grade("s-404"))


def test_a_known_lms_user_id_skips_the_roster(rig: Rig) -> None:
    rig.writer.write(grade("anything", lms_user_id="u-2"))
    assert set(rig.platform.results(rig.line_item())) == {"u-2"}


def test_the_lms_linked_line_item_is_used_and_none_is_created(rig: Rig) -> None:
    item_url = rig.platform.lineitems_url("course-1") + "/linked"  # made with the LMS link
    rig.platform.line_items[item_url] = LineItem(item_url, "course-1", "Essay", 10.0)
    rig.store.put_link(rig.link.with_line_item(item_url))
    rig.writer.write(grade())
    assert list(rig.platform.line_items) == [item_url]
    assert rig.platform.results(item_url)["u-1"]["scoreGiven"] == 7.5


def test_an_existing_line_item_of_the_assignment_is_reused(rig: Rig) -> None:
    rig.writer.write(grade())
    first = rig.line_item()
    rig.store.put_link(dataclasses.replace(rig.link, context_id="course-1b"))  # forgets it
    rig.store.put_link(rig.link)
    rig.writer.write(grade("s-2"))
    assert list(rig.platform.line_items) == [first]


def test_first_grades_arriving_together_make_one_line_item(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two deliveries that both looked for the line item before either made it would each
    # make one, and scatter the class over two gradebook columns. The lookup below waits
    # for a second lookup (up to 2 s): two lookups at once meet at once.
    lookups = threading.Barrier(2, timeout=2)
    find = AgsClient.find

    def meeting(self: AgsClient, *args: Any, **kwargs: Any) -> Any:
        with contextlib.suppress(threading.BrokenBarrierError):
            lookups.wait()
        return find(self, *args, **kwargs)

    monkeypatch.setattr(AgsClient, "find", meeting)
    LtiToolKeys(rig.store, rig.sealer, rig.clock).ensure()  # made by the launch before
    failures: list[BaseException] = []

    def write(student: str) -> None:
        try:
            rig.writer.write(grade(student))
        except BaseException as exc:  # reported by the test thread
            failures.append(exc)

    writers = [threading.Thread(target=write, args=(s,)) for s in ("s-1", "s-2")]
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join(timeout=10)
    assert failures == []
    [item] = rig.platform.line_items
    assert item == rig.line_item()
    assert set(rig.platform.results(item)) == {"u-1", "u-2"}


def test_a_redelivered_or_older_version_changes_nothing(rig: Rig) -> None:
    newer = grade(version=2, score=9.0, posted_at=POSTED + timedelta(minutes=5))
    rig.writer.write(newer)
    rig.writer.write(newer)
    rig.writer.write(grade(version=1, score=3.0))
    assert rig.platform.results(rig.line_item())["u-1"]["scoreGiven"] == 9.0


def test_the_access_token_is_kept_until_it_expires(rig: Rig) -> None:
    rig.writer.write(grade())
    rig.writer.write(grade("s-2"))
    assert rig.platform.token_requests == 2  # one for AGS, one for the roster
    rig.clock.advance(timedelta(seconds=3600 - 61))
    rig.writer.write(grade(version=2, posted_at=POSTED + timedelta(minutes=1)))
    assert rig.platform.token_requests == 2
    rig.clock.advance(timedelta(seconds=2))
    rig.writer.write(grade(version=3, posted_at=POSTED + timedelta(minutes=2)))
    assert rig.platform.token_requests == 3


def test_a_token_the_platform_dropped_is_replaced_once(rig: Rig) -> None:
    rig.writer.write(grade())
    rig.platform.tokens.clear()
    rig.writer.write(grade("s-2"))
    assert set(rig.platform.results(rig.line_item())) == {"u-1", "u-2"}


def test_the_roster_is_read_in_pages_with_a_token_renewed_once(rig: Rig) -> None:
    tokens = LtiTokens(LtiToolKeys(rig.store, rig.sealer, rig.clock), rig.clock)
    roster = NrpsClient(tokens)
    registration = rig.store.registration(rig.platform.issuer, CLIENT)
    assert registration is not None
    url = rig.platform.memberships_url("course-1") + "?limit=2"
    assert roster.students(registration, url) == {"s-1": "u-1", "s-2": "u-2", "u-3": "u-3"}
    rig.platform.tokens.clear()
    assert [m.user_id for m in roster.roster(registration, url)] == ["t-1", "u-1", "u-2", "u-3"]
    assert rig.platform.token_requests == 2


@pytest.mark.parametrize(
    ("status", "headers", "retry_after"),
    [(429, {"Retry-After": "7"}, 7.0), (503, {}, None), (500, {}, None)],
)
def test_a_busy_platform_keeps_the_grade(
    rig: Rig, status: int, headers: dict[str, str], retry_after: float | None
) -> None:
    rig.writer.write(grade("s-2"))
    rig.platform.forced.append((status, headers))
    with pytest.raises(GradebookBusy) as busy:
        rig.writer.write(grade())
    assert busy.value.retry_after_s == retry_after
    assert "u-1" not in rig.platform.results(rig.line_item())
    rig.writer.write(grade())  # the retry lands
    assert rig.platform.results(rig.line_item())["u-1"]["scoreGiven"] == 7.5


def test_an_unreachable_platform_is_busy(rig: Rig) -> None:
    registration = rig.store.registration(rig.platform.issuer, CLIENT)
    assert registration is not None
    rig.store.put_registration(
        dataclasses.replace(registration, auth_token_url="http://127.0.0.1:9/token")
    )
    with pytest.raises(GradebookBusy):
        rig.writer.write(grade())


def test_a_refused_score_is_rejected(rig: Rig) -> None:
    with pytest.raises(GradebookRejected, match="400"):
        rig.writer.write(grade(score=-1.0))
    assert rig.platform.score_posts == []


def test_an_assignment_never_launched_is_rejected(rig: Rig) -> None:
    with pytest.raises(GradebookRejected, match="launch"):
        rig.writer.write(grade(assignment_id="a-unlinked"))


def test_the_score_url_keeps_the_line_items_query() -> None:
    assert scores_url("https://lms.test/ctx/7/lineitems/9?type_id=1") == (
        "https://lms.test/ctx/7/lineitems/9/scores?type_id=1"
    )


def test_the_score_of_a_posted_grade_without_feedback_has_no_comment() -> None:
    assert "comment" not in score_of(grade(feedback=None), "u-1")
    assert score_of(grade(score=None), "u-1")["gradingProgress"] == "PendingManual"


def test_a_refused_token_grant_keeps_the_grade_for_later_instead_of_dropping_it(
    rig: Rig,
) -> None:
    # The school's registration names a client the platform does not know (a wrong
    # client id, or a key set the platform cannot read): the grade waits, it is not lost.
    registration = rig.store.registration(rig.platform.issuer, CLIENT)
    assert registration is not None
    rig.store.put_registration(dataclasses.replace(registration, client_id="retyped-client"))
    rig.store.put_link(dataclasses.replace(rig.link, client_id="retyped-client"))
    with pytest.raises(GradebookBusy, match="refused Gradeq's token request"):
        rig.writer.write(grade())
    assert rig.platform.line_items == {}
    # The admin registers the client on the platform: the same grade now lands.
    rig.platform.register_tool(
        dataclasses.replace(rig.platform.tools[CLIENT], client_id="retyped-client")
    )
    rig.writer.write(grade())
    assert rig.platform.results(rig.line_item())["u-1"]["scoreGiven"] == 7.5
