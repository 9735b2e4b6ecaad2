"""What publishing a final job's completion decides: the events it publishes and what it
returns for the job's completion line (a withheld grade, a posted version, its event id)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from shared.domain.events import GradePosted, GradingCompleted
from shared.domain.grade import GradeResult
from shared.domain.ids import completion_event_id, grade_posted_event_id
from shared.domain.job import GradingRequest, Job
from shared.service_layer.completion import publish_completion
from tests.fakes import FakePublisher

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=60)


def _succeeded(post_manually: bool = False) -> Job:
    request = GradingRequest(
        submission_id="sub-1",
        assignment_id="asg-1",
        answer="a",
        rubric=("c1",),
        max_score=10,
        rubric_version=1,
        post_manually=post_manually,
    )
    job = Job.new("job-1", "client-a", request, "fp", T0)
    running = job.claim("owner", T0 + timedelta(seconds=1), LEASE)
    result = GradeResult(7.0, 10, "good", grader="rubric")
    return running.succeed("owner", result, T0 + timedelta(seconds=2))


def test_a_grade_waiting_for_its_teachers_post_publishes_nothing_and_says_it_is_withheld() -> None:
    job = _succeeded(post_manually=True)
    assert job.withheld and job.posted is None
    publisher = FakePublisher()
    finals: list[Job] = []
    announced = publish_completion(job, publisher, finals.append)
    assert announced == {"withheld_for_review": True}
    assert publisher.events == []
    assert finals == [job]


def test_a_posted_grade_not_yet_announced_publishes_its_version_and_returns_its_ids() -> None:
    job = _succeeded().post(T0 + timedelta(seconds=3), "auto")
    assert job.posted is not None and job.posted.version == 1 and not job.post_announced
    publisher = FakePublisher()
    announced = publish_completion(job, publisher)
    completed, posted = publisher.events
    assert isinstance(completed, GradingCompleted) and isinstance(posted, GradePosted)
    assert posted.event_id == grade_posted_event_id("job-1", 1)
    assert announced == {
        "event_id": completion_event_id("job-1"),
        "message_id": "m1",
        "posted_event_id": grade_posted_event_id("job-1", 1),
        "posted_version": 1,
    }


def test_a_second_posted_version_is_the_one_returned() -> None:
    first = _succeeded().post(T0 + timedelta(seconds=3), "auto").mark_post_announced(1)
    changed = GradeResult(9.0, 10, "better", grader="rubric")
    # A new version: the posted grade differs from the first one.
    job = dataclasses.replace(first, result=changed).post(T0 + timedelta(seconds=4), "auto")
    assert job.posted is not None and job.posted.version == 2
    announced = publish_completion(job, FakePublisher())
    assert announced["posted_event_id"] == grade_posted_event_id("job-1", 2)
    assert announced["posted_version"] == 2


def test_a_posted_grade_already_announced_publishes_only_the_completion() -> None:
    job = _succeeded().post(T0 + timedelta(seconds=3), "auto").mark_post_announced(1)
    assert job.posted is not None and job.post_announced
    publisher = FakePublisher()
    announced = publish_completion(job, publisher)
    [completed] = publisher.events
    assert isinstance(completed, GradingCompleted)
    assert announced == {"event_id": completion_event_id("job-1"), "message_id": "m1"}


def test_an_unposted_grade_publishes_only_the_completion() -> None:
    job = _succeeded()
    assert job.posted is None and job.post_announced
    publisher = FakePublisher()
    announced = publish_completion(job, publisher)
    [completed] = publisher.events
    assert isinstance(completed, GradingCompleted)
    assert announced == {"event_id": completion_event_id("job-1"), "message_id": "m1"}
