"""Subscription filters: the evaluator, the file's filter, and the embedded bus honouring it."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from localcloud.pubsub.deliveries import SqliteDeliveryStore
from localcloud.pubsub.push_bus import Endpoint
from shared.adapters.embedded.event_publisher import SqliteEventPublisher
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.codecs.cloudevent import (
    ASSIGNMENT_GRADED_TYPE,
    GRADE_POSTED_TYPE,
    GRADE_REVIEWED_TYPE,
    from_pubsub,
    grade_posted_from_pubsub,
    to_pubsub,
)
from shared.config.subscription_filter import SubscriptionFilter, UnsupportedFilter
from shared.config.subscriptions import (
    DEFAULT_SUBSCRIPTIONS_FILE,
    TopicConfig,
    load_subscriptions,
)
from shared.domain.events import AssignmentGraded, GradePosted, GradeReviewed
from shared.http.subscriber import IGNORED_TYPES
from tests.contract.harness import eventually
from tests.contract.harness_events import sample_event, sample_job
from tests.support.http_target import RecordingTarget
from tests.unit.test_bus_pump import running_bus, subscription

NOTIFICATION_FILTER = SubscriptionFilter.parse('attributes.has_callback = "true"')


@pytest.mark.parametrize(
    ("expression", "attributes", "admitted"),
    [
        ('attributes.has_callback = "true"', {"has_callback": "true"}, True),
        ('attributes.has_callback = "true"', {"has_callback": "false"}, False),
        ('attributes.has_callback = "true"', {}, False),
        ('attributes.has_callback="true"', {"has_callback": "true"}, True),
        ('NOT attributes.has_callback = "false"', {}, True),
        ('NOT attributes.has_callback = "false"', {"has_callback": "false"}, False),
        ("attributes:client_id", {"client_id": ""}, True),
        ("attributes:client_id", {"outcome": "failed"}, False),
        ("NOT attributes:client_id", {"outcome": "failed"}, True),
        ('attributes.outcome = "failed" AND attributes:client_id', {"outcome": "failed"}, False),
        (
            'attributes.outcome = "failed" AND attributes:client_id',
            {"outcome": "failed", "client_id": "a"},
            True,
        ),
        (
            'attributes.outcome = "failed" OR attributes.outcome = "cancelled"',
            {"outcome": "x"},
            False,
        ),
        (
            'attributes.outcome = "failed" OR attributes.outcome = "cancelled"',
            {"outcome": "cancelled"},
            True,
        ),
        # Values compare exactly, case included, as Pub/Sub's do.
        ('attributes.has_callback = "true"', {"has_callback": "True"}, False),
    ],
)
def test_the_filter_admits_what_pubsub_would(
    expression: str, attributes: dict[str, str], admitted: bool
) -> None:
    assert SubscriptionFilter.parse(expression).admits(attributes) is admitted


@pytest.mark.parametrize(
    "expression",
    [
        'hasPrefix(attributes.outcome, "fail")',
        'attributes.outcome != "failed"',
        '(attributes.outcome = "failed")',
        'attributes.outcome = "a" AND attributes.outcome = "b" OR attributes:client_id',
        "attributes:client_id AND",
        "NOT NOT attributes:client_id",
        "attributes:client_id attributes:outcome",
        "attributes.outcome = failed",
        "not attributes:client_id",
    ],
)
def test_a_filter_outside_the_subset_is_refused(expression: str) -> None:
    with pytest.raises(UnsupportedFilter, match="filter"):
        SubscriptionFilter.parse(expression)


def test_a_file_with_an_unsupported_filter_is_refused_when_read(tmp_path: Path) -> None:
    raw = json.loads(DEFAULT_SUBSCRIPTIONS_FILE.read_text())
    raw["subscriptions"]["notification"]["filter"] = 'hasPrefix(attributes.outcome, "f")'
    path = tmp_path / "subscriptions.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(UnsupportedFilter, match="hasPrefix"):
        load_subscriptions(path)


def test_notification_is_filtered_on_the_callback_and_analytics_not_at_all() -> None:
    topic = load_subscriptions()
    assert topic.subscriptions["notification"].filter == NOTIFICATION_FILTER
    assert topic.subscriptions["analytics"].filter is None


def test_the_gradebook_is_pushed_posted_grades_only() -> None:
    from services.gradebook.event import GRADE_POSTED_TYPE
    from tests.support.grade_posted import grade_data, push_body

    gradebook = load_subscriptions().subscriptions["gradebook"]
    posted = push_body(grade_data(1))["message"]["attributes"]
    assert posted["ce-type"] == GRADE_POSTED_TYPE
    assert gradebook.admits(posted)
    when = datetime(2026, 3, 1, tzinfo=UTC)
    graded = AssignmentGraded("e-a", "a-1", "client-a", 1, 30, 28, 2, 0, 7.25, when)
    for event in (sample_event(), sample_event(key="key-2", callback_url=None), graded):
        _, attributes = to_pubsub(event)
        assert not gradebook.admits(attributes), attributes["ce-type"]


def test_the_event_says_whether_its_job_has_a_callback_never_the_url() -> None:
    with_url, without = sample_event(), sample_event(key="key-2", callback_url=None)
    _, attributes = to_pubsub(with_url)
    assert attributes["has_callback"] == "true"
    assert to_pubsub(without)[1]["has_callback"] == "false"
    assert not any("example" in value for value in attributes.values())
    data, attributes = to_pubsub(with_url)
    assert from_pubsub(data, attributes) == with_url


@pytest.mark.parametrize("callback_url", ["https://client.example/hook", None])
def test_notification_admits_exactly_the_events_it_acts_on(callback_url: str | None) -> None:
    topic = load_subscriptions()
    _, attributes = to_pubsub(sample_event(callback_url=callback_url))
    assert topic.subscriptions["notification"].admits(attributes) is (callback_url is not None)
    assert topic.subscriptions["analytics"].admits(attributes)


def test_notification_is_not_pushed_the_event_types_it_ignores() -> None:
    # All but GradePosted are acknowledged unread by the job subscribers
    # (shared.http.subscriber): leaving them out of notification's pushes drops nothing it
    # acts on. A GradePosted that does not say whether its job has a callback is not pushed.
    when = datetime(2026, 3, 1, tzinfo=UTC)
    graded = AssignmentGraded("e-a", "a-1", "client-a", 1, 30, 28, 2, 0, 7.25, when)
    reviewed = GradeReviewed(
        "e-r", "j-1", "client-a", "s-1", None, 1, "accept", "t", 7.0, 7.0, 9.0, None, None, when
    )
    posted = GradePosted(
        "e-p", "client-a", "a-1", "st-1", "s-1", "j-1", 1, 7.0, 9.0, "teacher", "", "FullyGraded",
        when, "checked",
    )  # fmt: skip
    assert {ASSIGNMENT_GRADED_TYPE, GRADE_REVIEWED_TYPE, GRADE_POSTED_TYPE} == IGNORED_TYPES
    notification = load_subscriptions().subscriptions["notification"]
    for event in (graded, reviewed, posted):
        _, attributes = to_pubsub(event)
        assert not notification.admits(attributes), attributes["ce-type"]


@pytest.mark.parametrize("callback_url", ["https://client.example/hook", None])
def test_notification_is_pushed_the_posted_grades_of_jobs_with_a_callback(
    callback_url: str | None,
) -> None:
    job = sample_job(callback_url=callback_url)
    request = dataclasses.replace(job.request, student_id="st-1", rubric_version=1)
    posted = dataclasses.replace(job, request=request).post(
        datetime(2026, 3, 1, tzinfo=UTC), "auto"
    )
    event = GradePosted.from_job(posted)
    data, attributes = to_pubsub(event)
    assert attributes["ce-type"] == GRADE_POSTED_TYPE
    assert attributes["has_callback"] == ("true" if callback_url else "false")
    assert not any("example" in value for value in attributes.values())
    topic = load_subscriptions()
    assert topic.subscriptions["notification"].admits(attributes) is (callback_url is not None)
    assert topic.subscriptions["gradebook"].admits(attributes)
    assert grade_posted_from_pubsub(data, attributes) == event


def test_a_posted_grade_of_a_practice_job_is_not_pushed_to_notification() -> None:
    job = sample_job()
    request = dataclasses.replace(job.request, student_id="st-1", rubric_version=1)
    posted = dataclasses.replace(job, request=request).post(
        datetime(2026, 3, 1, tzinfo=UTC), "auto"
    )
    practice = dataclasses.replace(posted, request=dataclasses.replace(request, practice=True))
    _, attributes = to_pubsub(GradePosted.from_job(practice))
    assert not load_subscriptions().subscriptions["notification"].admits(attributes)


def test_an_event_of_unknown_callback_is_not_filtered_by_its_attributes() -> None:
    # Decoded without the attribute (a message of an earlier worker): the publisher
    # cannot say, so it sends none and the event keeps None.
    event = dataclasses.replace(sample_event(), has_callback=None)
    data, attributes = to_pubsub(event)
    assert "has_callback" not in attributes
    assert from_pubsub(data, attributes).has_callback is None


@pytest.fixture
def db(tmp_path: Path) -> SqliteDatabase:
    return SqliteDatabase(tmp_path / "bus.sqlite3")


def test_the_bus_never_pushes_what_the_filter_does_not_admit(db: SqliteDatabase) -> None:
    notification = dataclasses.replace(subscription("notification"), filter=NOTIFICATION_FILTER)
    analytics = subscription("analytics")
    topic = TopicConfig("grading-completed", {"notification": notification, "analytics": analytics})
    publisher = SqliteEventPublisher(db, topic)
    silent = sample_event(key="no-callback", callback_url=None)
    hooked = sample_event(key="with-callback")
    publisher.publish(silent)
    publisher.publish(hooked)
    with (
        RecordingTarget() as notified,
        RecordingTarget() as recorded,
        running_bus(
            db, Endpoint(notification, notified.url), Endpoint(analytics, recorded.url)
        ) as bus,
    ):
        recorded.wait_for(2, timeout=5)
        notified.wait_for(1, timeout=5)
        eventually(lambda: bus.store.pending() == 0)
    # Acknowledged for notification (nothing pending, nothing dead) and never pushed.
    assert [r.json["message"]["attributes"]["ce-id"] for r in notified.requests] == [
        hooked.event_id
    ]
    assert {r.json["message"]["attributes"]["ce-id"] for r in recorded.requests} == {
        silent.event_id,
        hooked.event_id,
    }
    assert bus.store.dead_letters() == []


def test_a_delivery_stored_before_the_filter_is_acknowledged_unpushed(
    db: SqliteDatabase,
) -> None:
    unfiltered = subscription("notification")
    SqliteEventPublisher(db, TopicConfig("t", {"notification": unfiltered})).publish(
        sample_event(callback_url=None)
    )
    assert SqliteDeliveryStore(db).pending("notification") == 1
    filtered = dataclasses.replace(unfiltered, filter=NOTIFICATION_FILTER)
    with RecordingTarget() as target, running_bus(db, Endpoint(filtered, target.url)) as bus:
        eventually(lambda: bus.store.pending() == 0)
    assert target.requests == []
    assert bus.store.dead_letters() == []


def test_a_message_no_subscription_admits_is_not_stored(db: SqliteDatabase) -> None:
    filtered = dataclasses.replace(subscription("notification"), filter=NOTIFICATION_FILTER)
    SqliteEventPublisher(db, TopicConfig("t", {"notification": filtered})).publish(
        sample_event(callback_url=None)
    )
    assert db.connection().execute("SELECT COUNT(*) FROM bus_messages").fetchone()[0] == 0


def test_a_refused_filter_names_where_it_left_the_subset_and_what_is_evaluated() -> None:
    expression = 'attributes:client_id AND hasPrefix(attributes.outcome, "f")'
    with pytest.raises(UnsupportedFilter) as refused:
        SubscriptionFilter.parse(expression)
    assert str(refused.value) == (
        "unsupported syntax at 'hasPrefix(attributes.outcome, \"f\")' in the filter"
        f' {expression!r}: the embedded bus evaluates only attributes.KEY = "value",'
        " attributes:KEY, NOT, and AND or OR"
    )
