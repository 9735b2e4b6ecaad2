"""The decisions of shared/service_layer/posting.py: which permission a post needs, who a
version records as its poster, which submissions a post reaches, how a post a crash cut
short or a concurrent post is told apart, and when a generation's completion goes out."""

from __future__ import annotations

import dataclasses

import pytest

from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.authorization import POLICY, Action, Forbidden, Principal, Role
from shared.domain.events import GradePosted, GradingCompleted
from shared.domain.job import Job
from shared.service_layer.posting import PostingService
from tests.fakes import FakePublisher
from tests.unit.test_assignment_flow import deliver_all
from tests.unit.test_posting import ANSWERS, of, post, stack
from tests.unit.test_review_rules import submit


def posted_manually(
    settings: Settings, adapters: Adapters, clock: FrozenClock, answers: list[str]
) -> tuple[PostingService, str, list[str], FakePublisher]:
    """A manually posting assignment with every answer graded and nothing posted yet
    (its teacher is `teacher(adapters, assignment_id)`)."""
    intake, worker, assignment_id, queue, publisher = stack(
        settings, adapters, clock, posting="manual"
    )
    job_ids = submit(intake, assignment_id, answers)
    deliver_all(worker, queue)
    service = intake.application.extensions["gradeq.posting"]
    assert isinstance(service, PostingService)
    return service, assignment_id, job_ids, publisher


def teacher(adapters: Adapters, assignment_id: str) -> Principal:
    assert adapters.assignments is not None
    assignment = adapters.assignments.get(assignment_id)
    assert assignment is not None
    return Principal(assignment.owner.school, "ms-smith", Role.TEACHER)


def stored(adapters: Adapters, job_id: str) -> Job:
    job = adapters.store.get(job_id)
    assert job is not None
    return job


def test_posting_needs_the_post_permission_not_only_reading(
    settings: Settings,
    adapters: Adapters,
    clock: FrozenClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    service, assignment_id, [job_id], publisher = posted_manually(
        settings, adapters, clock, ANSWERS[:1]
    )
    school = teacher(adapters, assignment_id).school
    may = {a: r for a, r in POLICY[Role.REVIEWER].items() if a is not Action.ASSIGNMENT_POST}
    monkeypatch.setitem(POLICY, Role.REVIEWER, may)
    with pytest.raises(Forbidden):
        service.post(Principal(school, "ms-jones", Role.REVIEWER), assignment_id)
    assert stored(adapters, job_id).posted is None and of(publisher, GradePosted) == []


def test_a_posted_version_records_the_teacher_who_posted_it(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    service, assignment_id, [job_id], _ = posted_manually(settings, adapters, clock, ANSWERS[:1])
    assert service.post(teacher(adapters, assignment_id), assignment_id).posted == ["s0"]
    posted = stored(adapters, job_id).posted
    assert posted is not None and posted.by == "user:ms-smith"


def test_posting_chosen_submissions_skips_the_others_and_goes_on(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    service, assignment_id, _, _ = posted_manually(settings, adapters, clock, ANSWERS)
    report = service.post(teacher(adapters, assignment_id), assignment_id, ["s2"])
    assert (report.posted, report.unchanged, report.not_ready) == (["s2"], [], [])


def test_a_submission_not_graded_yet_is_reported_and_the_rest_are_posted(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    intake, worker, assignment_id, queue, _ = stack(settings, adapters, clock, posting="manual")
    submit(intake, assignment_id, ANSWERS)
    deliver_all(worker, queue, 1)  # s0 is still waiting for its grade
    report = post(intake, assignment_id)
    assert report["not_ready"] == ["s0"]
    assert sorted(report["posted"]) == ["s1", "s2"]


def test_a_post_a_crash_cut_short_is_announced_again_with_its_completion(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    service, assignment_id, [job_id], publisher = posted_manually(
        settings, adapters, clock, ANSWERS[:1]
    )
    # The version was written, but the process died before publishing its events.
    adapters.store.update(job_id, lambda j: j.post(clock.now(), "key:t"))
    assert of(publisher, GradePosted) == [] and of(publisher, GradingCompleted) == []

    report = service.post(teacher(adapters, assignment_id), assignment_id)
    assert (report.posted, report.unchanged) == (["s0"], [])
    [completed] = of(publisher, GradingCompleted)
    [posted] = of(publisher, GradePosted)
    assert completed.job_id == posted.job_id == job_id and posted.version == 1
    assert stored(adapters, job_id).post_announced


def test_a_grade_another_post_announced_meanwhile_is_unchanged(
    settings: Settings,
    adapters: Adapters,
    clock: FrozenClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    service, assignment_id, job_ids, publisher = posted_manually(
        settings, adapters, clock, ANSWERS[:2]
    )
    assert service.post(teacher(adapters, assignment_id), assignment_id, ["s0"]).posted == ["s0"]
    # The listing was read before a concurrent post of s0 announced it.
    stale = [dataclasses.replace(stored(adapters, job_ids[0]), post_announced=False)]
    listed = [*stale, stored(adapters, job_ids[1])]
    monkeypatch.setattr(service._service, "all_grades", lambda _: iter(listed))
    report = service.post(teacher(adapters, assignment_id), assignment_id)
    assert (report.posted, report.unchanged) == (["s1"], ["s0"])
    assert [e.job_id for e in of(publisher, GradePosted)] == job_ids


def announced_first_post(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> tuple[PostingService, Job, FakePublisher]:
    service, assignment_id, [job_id], publisher = posted_manually(
        settings, adapters, clock, ANSWERS[:1]
    )
    service.post(teacher(adapters, assignment_id), assignment_id)
    job = stored(adapters, job_id)
    assert job.post_announced and job.posted is not None and len(of(publisher, GradingCompleted))
    return service, job, publisher


def second_version(job: Job, generation: int) -> Job:
    assert job.posted is not None
    posted = dataclasses.replace(job.posted, version=2, score=9.0, generation=generation)
    return dataclasses.replace(job, posted=posted, post_announced=False, generation=generation)


def test_a_new_version_of_an_announced_generation_does_not_complete_it_again(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    service, job, publisher = announced_first_post(settings, adapters, clock)
    service.announce(job, second_version(job, job.generation))
    assert len(of(publisher, GradingCompleted)) == 1
    assert [e.version for e in of(publisher, GradePosted)] == [1, 2]


def test_the_first_post_of_a_new_generation_publishes_its_completion(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    service, job, publisher = announced_first_post(settings, adapters, clock)
    regraded = second_version(job, job.generation + 1)
    service.announce(job, regraded)
    completions = of(publisher, GradingCompleted)
    assert len(completions) == 2 and completions[-1].job_id == job.id
    assert [e.version for e in of(publisher, GradePosted)] == [1, 2]
