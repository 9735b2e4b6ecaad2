"""The review service's decisions: whose policy holds a job, the queue's pages and their
cursors (the exact text, and what is refused), who may read and decide a held grade, what
a decision records and posts, which events its announcement publishes and marks, when the
sweep publishes, and the agreement report's rows."""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from shared.adapters.embedded.assignment_store import SqliteAssignmentStore
from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.review_store import SqliteReviewQueue
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.clock import FrozenClock
from shared.domain.agreement import quadratic_weighted_kappa
from shared.domain.assignment import Assignment
from shared.domain.authorization import SERVER, Forbidden, Principal, Role
from shared.domain.errors import JobNotFound, ValidationFailed
from shared.domain.events import GradePosted, GradeReviewed, GradingCompleted
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest, Job
from shared.domain.review import (
    HoldReason,
    RegradeRequest,
    Release,
    RequestAnswer,
    Review,
    ReviewDecision,
    ReviewPolicy,
    ReviewState,
    ReviewStatus,
)
from shared.domain.status import JobStatus
from shared.service_layer.review import (
    MAX_AGREEMENT_GRADES,
    GradeNotHeld,
    Override,
    RegradeRequestOpen,
    ReviewPolicies,
    ReviewService,
    agreement_report,
    reviewer_name,
)
from tests.fakes import FakePublisher

SCHOOL = "school-a"
LEASE = timedelta(seconds=30)
STAFF = Principal(SCHOOL, SERVER, Role.SERVER)
REVIEWER = Principal(SCHOOL, "key:ms", Role.REVIEWER)
TEACHER = Principal(SCHOOL, "t1", Role.TEACHER)
STUDENT = Principal(SCHOOL, "ada", Role.STUDENT)
OTHER_SCHOOL = Principal("school-b", SERVER, Role.SERVER)


class RacingStore(SqliteJobStore):
    """The SQLite job store, where another writer may change a job just before an update."""

    meanwhile: Callable[[Job], Job] | None = None

    def update(self, job_id: str, mutate: Callable[[Job], Job]) -> Job:
        if self.meanwhile is not None:
            change, self.meanwhile = self.meanwhile, None
            super().update(job_id, change)
        return super().update(job_id, mutate)


class RecordingQueue(SqliteReviewQueue):
    """The SQLite review queue, remembering what the reviewed grades were asked with."""

    def __init__(self, db: SqliteDatabase) -> None:
        super().__init__(db)
        self.reviewed_asks: list[tuple[str, str | None, int]] = []

    def reviewed(self, client_id: str, assignment_id: str | None, limit: int) -> list[Job]:
        self.reviewed_asks.append((client_id, assignment_id, limit))
        return super().reviewed(client_id, assignment_id, limit)


@dataclass
class Desk:
    """A review service on a SQLite file, with its store, queue, bus and clock."""

    store: RacingStore
    queue: RecordingQueue
    publisher: FakePublisher
    clock: FrozenClock
    assignments: SqliteAssignmentStore
    service: ReviewService

    def held_job(
        self,
        job_id: str,
        *,
        release: Release = Release.IMMEDIATELY,
        reviews: tuple[Review, ...] = (),
        status: ReviewStatus = ReviewStatus.HELD,
        held_at_offset: timedelta = timedelta(0),
        model: str = "m1",
        score: float = 5.0,
        max_score: float = 10.0,
        author: str = SERVER,
        assignment_id: str | None = None,
        post_manually: bool = False,
        announced: bool = True,
        **changes: Any,
    ) -> Job:
        """A graded job held for review (stored), as the worker leaves it."""
        now = self.clock.now()
        request = GradingRequest(
            f"sub-{job_id}",
            "an answer",
            "light",
            max_score,
            assignment_id=assignment_id,
            rubric_version=1 if assignment_id else None,
            post_manually=post_manually,
        )
        model_grade = GradeResult(
            score,
            max_score,
            "the model's feedback",
            criteria=({"name": "light", "score": score},),
            grader="g",
            model=model,
            prompt_version="p1",
            usage={"total_tokens": 12},
            confidence=0.3,
            format_retries=1,
        )
        state = ReviewState(
            status, (HoldReason.SAMPLED,), release, now + held_at_offset, 0, reviews, announced
        )
        job = Job.new(job_id, SCHOOL, request, "fp", now, author=author)
        job = job.claim("w", now, LEASE).succeed("w", model_grade, now).hold(state)
        job = dataclasses.replace(job, **changes)
        self.store.create(job)
        return job

    def stored(self, job_id: str) -> Job:
        job = self.store.get(job_id)
        assert job is not None
        return job

    def events(self, kind: type[Any]) -> list[Any]:
        return [e for e in self.publisher.events if isinstance(e, kind)]


@pytest.fixture
def desk(tmp_path: Path) -> Desk:
    db = SqliteDatabase(tmp_path / "reviews.sqlite3")
    store = RacingStore(db)
    queue = RecordingQueue(db)
    publisher, clock = FakePublisher(), FrozenClock()
    service = ReviewService(store, queue, publisher, clock)
    return Desk(store, queue, publisher, clock, SqliteAssignmentStore(db), service)


def review_of(job: Job) -> ReviewState:
    assert job.review is not None
    return job.review


def a_review(desk: Desk, number: int = 1, score: float = 7.0) -> Review:
    teacher = GradeResult(score, 10.0, "the teacher's feedback", grader="reviewer:key:ms")
    return Review(
        number, "key:ms", desk.clock.now(), ReviewDecision.OVERRIDE, "checked", teacher, 0
    )


def cursor_of(held_at: str, job_id: str) -> str:
    """The cursor as the API returns it: unpadded URL-safe base64 of compact JSON."""
    raw = json.dumps([held_at, job_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


# --- whose policy holds a job ------------------------------------------------------------


def test_the_assignments_policy_holds_its_schools_jobs(desk: Desk) -> None:
    now = desk.clock.now()
    with_rules = {"review": {"pass_mark": 5, "release": "after_review"}}
    desk.assignments.create(Assignment.new("a-rules", SCHOOL, "E", "x", 10, "v", now, with_rules))
    desk.assignments.create(Assignment.new("a-none", SCHOOL, "E", "x", 10, "v", now, {}))
    desk.assignments.create(
        Assignment.new("a-theirs", "school-b", "E", "x", 10, "v", now, with_rules)
    )
    policies = ReviewPolicies(desk.assignments, {SCHOOL: {"sample_rate": 0.5}})
    school = ReviewPolicy(sample_rate=0.5)

    def policy(assignment_id: str | None, author: str = SERVER) -> ReviewPolicy | None:
        request = GradingRequest("s", "a", "x", assignment_id=assignment_id)
        return policies(Job.new("j", SCHOOL, request, "fp", now, author=author))

    assert policy("a-rules") == ReviewPolicy(pass_mark=5, release=Release.AFTER_REVIEW)
    assert policy("a-rules", author="ada") == policy("a-rules")  # a student's submission too
    assert policy("a-none") == school  # no rules of its own: the school's
    assert policy("a-theirs") == school  # another school's assignment sets nothing here
    assert policy("a-missing") == school
    assert policy(None) == school
    without_store = ReviewPolicies(None, {SCHOOL: {"sample_rate": 0.5}})
    assert (
        without_store(
            Job.new("j", SCHOOL, GradingRequest("s", "a", "x", assignment_id="a-rules"), "fp", now)
        )
        == school
    )


def test_a_school_without_a_policy_holds_nothing(desk: Desk) -> None:
    now = desk.clock.now()
    job = Job.new("j", "school-c", GradingRequest("s", "a", "x"), "fp", now)
    assert ReviewPolicies(desk.assignments, {SCHOOL: {"pass_mark": 5}})(job) is None
    assert ReviewPolicies(desk.assignments)(job) is None
    assert ReviewPolicies(None, None)(job) is None


# --- the queue's pages and cursors -------------------------------------------------------


def test_the_queue_pages_oldest_first_with_the_exact_cursor_of_each_page(desk: Desk) -> None:
    for n in range(5):
        desk.held_job(f"job-{n}", held_at_offset=timedelta(seconds=n))
    first = desk.service.held(REVIEWER, None, 2)
    assert [j.id for j in first.jobs] == ["job-0", "job-1"]
    held_at = review_of(desk.stored("job-1")).to_dict()["held_at"]
    assert first.next_cursor == cursor_of(held_at, "job-1")
    assert len(first.next_cursor) % 4 != 0  # its padding was stripped
    second = desk.service.held(REVIEWER, None, 2, first.next_cursor)
    assert [j.id for j in second.jobs] == ["job-2", "job-3"]
    last = desk.service.held(REVIEWER, None, 2, second.next_cursor)
    assert [j.id for j in last.jobs] == ["job-4"] and last.next_cursor is None


def test_a_page_that_holds_the_rest_exactly_has_no_next_cursor(desk: Desk) -> None:
    for n in range(3):
        desk.held_job(f"job-{n}", held_at_offset=timedelta(seconds=n))
    page = desk.service.held(STAFF, None, 3)
    assert [j.id for j in page.jobs] == ["job-0", "job-1", "job-2"]
    assert page.next_cursor is None
    one = desk.service.held(SCHOOL, None, 1)  # a bare client id: the school's server
    assert [j.id for j in one.jobs] == ["job-0"] and one.next_cursor is not None
    assert desk.service.held(STAFF, None, 3, "").jobs == page.jobs  # no cursor: from the start


def test_the_queue_is_of_the_callers_school_and_the_assignment_asked_for(desk: Desk) -> None:
    desk.held_job("job-a", assignment_id="a-1")
    desk.held_job("job-b", assignment_id="a-2", held_at_offset=timedelta(seconds=1))
    assert [j.id for j in desk.service.held(REVIEWER, "a-2", 10).jobs] == ["job-b"]
    assert [j.id for j in desk.service.held(REVIEWER, None, 10).jobs] == ["job-a", "job-b"]
    assert desk.service.held(OTHER_SCHOOL, None, 10).jobs == []


def test_a_student_may_not_list_the_queue(desk: Desk) -> None:
    with pytest.raises(Forbidden) as raised:
        desk.service.held(STUDENT, None, 10)
    assert raised.value.detail == "a student may not review.list"


def test_a_cursor_may_keep_its_padding(desk: Desk) -> None:
    for n in range(3):
        desk.held_job(f"job-{n}", held_at_offset=timedelta(seconds=n))
    cursor = desk.service.held(REVIEWER, None, 1).next_cursor
    assert cursor is not None
    padded = cursor + "=" * (-len(cursor) % 4)
    assert [j.id for j in desk.service.held(REVIEWER, None, 1, padded).jobs] == ["job-1"]


def test_a_cursor_pasted_with_line_breaks_after_it_still_pages(desk: Desk) -> None:
    for n in range(3):
        desk.held_job(f"job-00{n}", held_at_offset=timedelta(seconds=n))
    cursor = desk.service.held(REVIEWER, None, 1).next_cursor
    assert cursor is not None and len(cursor) % 4 == 2  # two base64 padding characters short
    pasted = cursor + "\n\n\n"
    assert [j.id for j in desk.service.held(REVIEWER, None, 1, pasted).jobs] == ["job-001"]


@pytest.mark.parametrize("length", [0, 1, 2, 3])
def test_a_cursor_of_any_length_decodes(desk: Desk, length: int) -> None:
    # Job ids of four lengths give cursors of each length modulo 4.
    job_id = "j" + "x" * length
    held_at = "2026-01-01T00:00:00.000000+00:00"
    cursor = cursor_of(held_at, job_id)
    desk.held_job(job_id)
    desk.held_job(job_id + "y")
    page = desk.service.held(REVIEWER, None, 10, cursor)
    assert [j.id for j in page.jobs] == [job_id + "y"]


def refused_cursor(desk: Desk, cursor: str) -> ValidationFailed:
    with pytest.raises(ValidationFailed) as raised:
        desk.service.held(REVIEWER, None, 10, cursor)
    problem = raised.value
    assert problem.detail == "the cursor is not one this API returned"
    assert problem.extensions == {"errors": [{"field": "cursor", "message": "invalid cursor"}]}
    return problem


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.mark.parametrize(
    "cursor",
    [
        "a",  # not base64
        b64(b"\xff\xfe"),  # not text
        b64(b"not json"),
        b64(b'["2026-01-01T00:00:00+00:00"]'),  # not a pair
        b64(b'{"held_at": 1, "job_id": 2}'),
        b64(b'["yesterday", "job-1"]'),  # not a time
        b64(b'[20260101, "job-1"]'),
    ],
    ids=["base64", "text", "json", "pair", "object", "time", "number"],
)
def test_a_cursor_this_api_never_returned_is_refused(desk: Desk, cursor: str) -> None:
    refused_cursor(desk, cursor)


def test_a_cursor_naming_no_job_id_is_refused_as_not_a_cursor(desk: Desk) -> None:
    problem = refused_cursor(desk, b64(b'["2026-01-01T00:00:00+00:00", 7]'))
    assert isinstance(problem.__cause__, ValueError)
    assert str(problem.__cause__) == "not a cursor"


# --- reading one held grade --------------------------------------------------------------


def test_a_held_grade_is_read_by_its_schools_staff_and_reviewers(desk: Desk) -> None:
    job = desk.held_job("job-1")
    for caller in (STAFF, REVIEWER, TEACHER, SCHOOL):
        assert desk.service.get(caller, "job-1") == job


def test_a_grade_the_caller_may_not_see_is_missing(desk: Desk) -> None:
    desk.held_job("job-1")
    desk.store.create(
        Job.new("job-plain", SCHOOL, GradingRequest("s", "a", "x"), "fp", desk.clock.now())
    )
    narrowed = Principal(SCHOOL, "t1", Role.TEACHER, only_own=True)
    for caller, job_id in (
        (REVIEWER, "job-none"),
        (REVIEWER, "job-plain"),  # never held
        (OTHER_SCHOOL, "job-1"),
        (STUDENT, "job-1"),  # not theirs
        (narrowed, "job-1"),
    ):
        with pytest.raises(JobNotFound) as raised:
            desk.service.get(caller, job_id)
        assert raised.value.detail == f"no grading job {job_id} held for review", caller


def test_a_student_reads_their_own_grade_but_may_not_review_it(desk: Desk) -> None:
    desk.held_job("job-1", author="ada")
    with pytest.raises(Forbidden) as raised:
        desk.service.get(STUDENT, "job-1")
    assert raised.value.detail == "a student may not review.read this object"
    with pytest.raises(Forbidden) as raised:
        desk.service.decide(STUDENT, "job-1", "mine")
    assert raised.value.detail == "a student may not review.decide this object"


# --- a decision --------------------------------------------------------------------------


def test_an_accept_records_the_models_grade_as_the_reviewers(desk: Desk) -> None:
    job = desk.held_job("job-1", generation=3)
    desk.clock.advance(timedelta(minutes=5))
    decided = desk.service.decide(REVIEWER, "job-1", "looks right")
    assert decided == desk.stored("job-1")
    state, model = review_of(decided), job.result
    assert state.status is ReviewStatus.REVIEWED and model is not None
    now = desk.clock.now()
    assert state.reviews == (
        Review(1, "key:ms", now, ReviewDecision.ACCEPT, "looks right", model, 3),
    )
    assert decided.result == model and decided.updated_at == now
    assert state.announced
    [event] = desk.events(GradeReviewed)
    assert (event.review, event.decision, event.reviewer) == (1, "accept", "key:ms")


def test_an_override_is_the_reviewers_grade_beside_the_models(desk: Desk) -> None:
    job = desk.held_job("job-1")
    override = Override(8.0, ({"name": "light", "score": 8.0},), "Well argued.")
    decided = desk.service.decide(TEACHER, "job-1", "partial credit", override)
    assert decided.review is not None
    [review] = decided.review.reviews
    assert (review.number, review.by, review.decision, review.reason) == (
        1,
        "user:t1",
        ReviewDecision.OVERRIDE,
        "partial credit",
    )
    assert review.result == GradeResult(
        score=8.0,
        max_score=10.0,
        feedback="Well argued.",
        criteria=({"name": "light", "score": 8.0},),
        grader="reviewer:user:t1",
        model="m1",
        prompt_version="p1",
    )
    assert decided.result == job.result  # the model's grade stays


def test_an_override_of_the_score_alone_keeps_the_models_feedback_and_criteria(
    desk: Desk,
) -> None:
    job = desk.held_job("job-1")
    decided = desk.service.decide(STAFF, "job-1", "one point more", Override(6.0))
    assert decided.review is not None and job.result is not None
    [review] = decided.review.reviews
    assert review.by == "server"
    assert (review.result.score, review.result.feedback, review.result.criteria) == (
        6.0,
        "the model's feedback",
        job.result.criteria,
    )
    assert review.result.grader == "reviewer:server"
    assert (review.result.confidence, review.result.format_retries, review.result.usage) == (
        None,
        0,
        {},
    )


def test_an_override_may_give_the_max_score_but_not_more(desk: Desk) -> None:
    desk.held_job("job-1", max_score=12.5)
    with pytest.raises(ValidationFailed) as raised:
        desk.service.decide(REVIEWER, "job-1", "too generous", Override(12.51))
    assert raised.value.detail == "the score is above the job's max score 12.5"
    assert raised.value.extensions == {
        "errors": [{"field": "score", "message": "above the max score"}]
    }
    assert review_of(desk.stored("job-1")).reviews == ()
    decided = desk.service.decide(REVIEWER, "job-1", "full marks", Override(12.5))
    assert review_of(decided).reviews[0].result.score == 12.5


def test_each_review_of_a_grade_is_numbered_after_the_last(desk: Desk) -> None:
    desk.held_job("job-1", reviews=(a_review(desk, 1), a_review(desk, 2)))
    decided = desk.service.decide(REVIEWER, "job-1", "third look")
    assert [r.number for r in review_of(decided).reviews] == [1, 2, 3]
    assert desk.events(GradeReviewed)[-1].review == 3


def test_a_grade_being_graded_again_is_not_held(desk: Desk) -> None:
    job = desk.held_job("job-1", reviews=(a_review(desk),), status=ReviewStatus.REVIEWED)
    regraded = job.mark_event_published(desk.clock.now()).regrade(desk.clock.now(), job.request)
    desk.store.update("job-1", lambda _: regraded)
    assert regraded.review is not None and regraded.status is JobStatus.PENDING
    with pytest.raises(GradeNotHeld) as raised:
        desk.service.decide(REVIEWER, "job-1", "too early")
    assert raised.value.detail == "grading job job-1 has no grade held for review"


def test_a_grade_graded_again_without_a_hold_since_it_was_read_is_not_held(
    desk: Desk,
) -> None:
    desk.held_job("job-1")
    now = desk.clock.now()

    def regraded_meanwhile(job: Job) -> Job:
        again = job.mark_event_published(now).regrade(now, job.request)
        return again.claim("w", now, LEASE).succeed("w", GradeResult(9.0, 10.0, "new"), now)

    desk.store.meanwhile = regraded_meanwhile
    with pytest.raises(GradeNotHeld) as raised:
        desk.service.decide(REVIEWER, "job-1", "too late")
    assert raised.value.detail == "grading job job-1 has no grade held for review"
    assert desk.stored("job-1").review is None


def test_an_open_regrade_request_is_answered_not_reviewed(desk: Desk) -> None:
    now = desk.clock.now()
    desk.held_job("job-1", regrade_request=RegradeRequest("ada", now, "look again", 0))
    with pytest.raises(RegradeRequestOpen) as raised:
        desk.service.decide(REVIEWER, "job-1", "a review")
    assert raised.value.detail == "answer the regrade request: POST /v1/reviews/job-1/request"
    answered = RegradeRequest("ada", now, "look again", 0).answered(
        RequestAnswer.KEEP, "user:t1", now, "it stands"
    )
    desk.held_job("job-2", regrade_request=answered)
    assert review_of(desk.service.decide(REVIEWER, "job-2", "a review")).reviews


def test_a_decision_on_a_posted_grade_posts_the_next_version_by_the_reviewer(
    desk: Desk,
) -> None:
    desk.held_job("job-1", assignment_id="a-1")
    posted = desk.store.update("job-1", lambda j: j.post(desk.clock.now(), "auto"))
    desk.store.update("job-1", lambda j: j.mark_post_announced(1))
    assert posted.posted is not None and posted.posted.version == 1
    desk.clock.advance(timedelta(minutes=1))
    decided = desk.service.decide(REVIEWER, "job-1", "raised", Override(9.0))
    assert decided.posted is not None
    assert (decided.posted.version, decided.posted.score, decided.posted.by) == (2, 9.0, "key:ms")
    assert decided.posted.at == desk.clock.now() and decided.post_announced
    [event] = desk.events(GradePosted)
    assert (event.version, event.score, event.source) == (2, 9.0, "teacher")


def test_a_decision_on_an_unposted_grade_posts_it_only_where_posting_is_automatic(
    desk: Desk,
) -> None:
    desk.held_job("job-auto", assignment_id="a-1", release=Release.AFTER_REVIEW)
    desk.held_job("job-manual", assignment_id="a-1", post_manually=True)
    auto = desk.service.decide(REVIEWER, "job-auto", "ok", Override(7.0))
    assert auto.posted is not None and (auto.posted.version, auto.posted.by) == (1, "auto")
    manual = desk.service.decide(REVIEWER, "job-manual", "ok", Override(7.0))
    assert manual.posted is None
    assert [e.job_id for e in desk.events(GradePosted)] == ["job-auto"]


def test_reviewers_are_named_by_their_key_the_server_or_their_user_id() -> None:
    assert reviewer_name(STAFF) == "server"
    assert reviewer_name(REVIEWER) == "key:ms"
    assert reviewer_name(TEACHER) == "user:t1"
    assert reviewer_name(Principal(SCHOOL, "keyless", Role.REVIEWER)) == "user:keyless"


# --- a decision's announcement -----------------------------------------------------------


def unannounce(job: Job) -> Job:
    """The job as a crash between its review's write and its events leaves it."""
    assert job.review is not None
    return dataclasses.replace(job, review=dataclasses.replace(job.review, announced=False))


def test_a_grade_withheld_for_its_first_review_completes_when_reviewed(desk: Desk) -> None:
    desk.held_job("job-1", release=Release.AFTER_REVIEW)
    decided = desk.service.decide(REVIEWER, "job-1", "ok", Override(6.0))
    [reviewed] = desk.events(GradeReviewed)
    [completed] = desk.events(GradingCompleted)
    unannounced = unannounce(decided)
    assert reviewed == GradeReviewed.from_job(unannounced)
    assert completed == GradingCompleted.from_job(unannounced)
    assert completed.score == 6.0


def test_a_grade_released_at_once_or_reviewed_before_completes_no_second_time(
    desk: Desk,
) -> None:
    desk.held_job("job-now", release=Release.IMMEDIATELY)
    desk.held_job("job-again", release=Release.AFTER_REVIEW, reviews=(a_review(desk),))
    desk.service.decide(REVIEWER, "job-now", "ok")
    desk.service.decide(REVIEWER, "job-again", "ok")
    assert [e.job_id for e in desk.events(GradeReviewed)] == ["job-now", "job-again"]
    assert desk.events(GradingCompleted) == []


def test_a_grade_still_waiting_for_the_teachers_post_completes_at_the_post(
    desk: Desk,
) -> None:
    desk.held_job("job-1", assignment_id="a-1", release=Release.AFTER_REVIEW, post_manually=True)
    decided = desk.service.decide(REVIEWER, "job-1", "ok")
    assert decided.withheld  # the post is still to come
    assert [e.job_id for e in desk.events(GradeReviewed)] == ["job-1"]
    assert desk.events(GradingCompleted) == []


def test_announcing_a_job_with_nothing_pending_publishes_and_writes_nothing(desk: Desk) -> None:
    now = desk.clock.now()
    plain = Job.new("job-plain", SCHOOL, GradingRequest("s", "a", "x"), "fp", now)
    announced = desk.held_job("job-done", reviews=(a_review(desk),))
    undecided = desk.held_job("job-open", announced=False)
    for job in (plain, announced, undecided):
        assert desk.service.announce_pending(job) is job
    assert desk.publisher.events == []
    assert review_of(desk.stored("job-open")).announced is False


def test_an_unannounced_review_is_published_once_and_marked(desk: Desk) -> None:
    reviewed = ReviewState(
        ReviewStatus.REVIEWED,
        (HoldReason.SAMPLED,),
        Release.IMMEDIATELY,
        desk.clock.now(),
        0,
        (a_review(desk),),
        announced=False,
    )
    job = desk.held_job("job-1", status=ReviewStatus.REVIEWED)
    job = desk.store.update("job-1", lambda j: dataclasses.replace(j, review=reviewed))
    marked = desk.service.get(REVIEWER, "job-1")
    assert marked.review is not None and marked.review.announced
    assert marked == desk.stored("job-1")
    assert desk.publisher.events == [GradeReviewed.from_job(job)]
    desk.service.get(REVIEWER, "job-1")
    assert len(desk.publisher.events) == 1


def test_the_posted_version_read_is_the_one_marked_announced(desk: Desk) -> None:
    desk.held_job("job-1", assignment_id="a-1", reviews=(a_review(desk),), announced=False)
    read = desk.stored("job-1")
    assert read.posted is None
    # Posted meanwhile (by the teacher): its own announcement is still to come.
    desk.store.update("job-1", lambda j: j.post(desk.clock.now(), "user:t1"))
    marked = desk.service.announce_pending(read)
    assert review_of(marked).announced
    assert marked.posted is not None and marked.post_announced is False
    assert desk.events(GradePosted) == []


def test_a_posted_grade_unannounced_is_published_with_the_review(desk: Desk) -> None:
    desk.held_job("job-1", assignment_id="a-1", reviews=(a_review(desk),), announced=False)
    posted = desk.store.update("job-1", lambda j: j.post(desk.clock.now(), "user:t1"))
    marked = desk.service.announce_pending(posted)
    assert marked.post_announced and review_of(marked).announced
    assert desk.events(GradePosted) == [GradePosted.from_job(posted)]
    settled = desk.store.update("job-1", unannounce)
    desk.service.announce_pending(settled)  # the post was announced: only the review again
    assert len(desk.events(GradePosted)) == 1
    assert len(desk.events(GradeReviewed)) == 2


# --- the sweep ---------------------------------------------------------------------------


def unannounced_review(desk: Desk, job_id: str) -> None:
    desk.held_job(job_id, status=ReviewStatus.REVIEWED, reviews=(a_review(desk),), announced=False)


def test_the_sweep_publishes_a_review_left_unannounced_a_minute_after_it(desk: Desk) -> None:
    unannounced_review(desk, "job-1")
    desk.held_job("job-held", announced=False)  # no review yet: nothing to announce
    assert desk.service.sweep() == []
    desk.clock.advance(timedelta(minutes=1) - timedelta(microseconds=1))
    assert desk.service.sweep() == []
    desk.clock.advance(timedelta(microseconds=1))
    assert desk.service.sweep() == ["job-1"]
    assert [e.job_id for e in desk.events(GradeReviewed)] == ["job-1"]
    assert desk.service.sweep() == []


def test_the_sweep_takes_at_most_its_limit(desk: Desk) -> None:
    for n in range(3):
        unannounced_review(desk, f"job-{n}")
    desk.clock.advance(timedelta(minutes=2))
    first = desk.service.sweep(limit=2)
    assert len(first) == 2
    rest = desk.service.sweep()
    assert sorted(first + rest) == ["job-0", "job-1", "job-2"]


# --- the agreement report ----------------------------------------------------------------


def reviewed_job(
    desk: Desk, job_id: str, model: str, score: float, teacher: float, offset: int, **kw: Any
) -> Job:
    return desk.held_job(
        job_id,
        model=model,
        score=score,
        status=ReviewStatus.REVIEWED,
        reviews=(a_review(desk, score=teacher),),
        held_at_offset=timedelta(seconds=offset),
        **kw,
    )


def test_the_report_compares_each_reviewed_grade_overall_and_by_model(desk: Desk) -> None:
    reviewed_job(desk, "job-1", "m2", 4.0, 4.0, 1, assignment_id="a-1")
    reviewed_job(desk, "job-2", "m1", 2.0, 3.0, 2, assignment_id="a-1")
    reviewed_job(desk, "job-3", "m1", 6.0, 6.0, 3, assignment_id="a-1")
    reviewed_job(desk, "job-4", "m1", 6.0, 0.0, 4, assignment_id="a-2")
    report = agreement_report(desk.queue, REVIEWER, "a-1")
    assert report.assignment_id == "a-1"
    assert report.pairs == [(4.0, 4.0), (2.0, 3.0), (6.0, 6.0)]
    assert report.overall.reviewed == 3
    assert report.overall.exact_match_rate == pytest.approx(2 / 3)
    assert report.overall.mean_absolute_difference == pytest.approx(1 / 3)
    assert [(m.model, m.prompt_version, m.agreement.reviewed) for m in report.by_model] == [
        ("m1", "p1", 2),
        ("m2", "p1", 1),
    ]
    m1 = report.by_model[0].agreement
    assert (m1.exact_match_rate, m1.mean_absolute_difference) == (0.5, 0.5)
    assert desk.queue.reviewed_asks == [(SCHOOL, "a-1", MAX_AGREEMENT_GRADES)]


def test_the_report_kappa_is_over_the_max_score_of_the_grades(desk: Desk) -> None:
    reviewed_job(desk, "job-1", "m1", 0.0, 0.0, 1)
    reviewed_job(desk, "job-2", "m1", 1.0, 2.0, 2)
    reviewed_job(desk, "job-3", "m1", 2.0, 2.0, 3)
    report = agreement_report(desk.queue, STAFF, None)
    model, teacher = [0.0, 1.0, 2.0], [0.0, 2.0, 2.0]
    assert report.overall.kappa == quadratic_weighted_kappa(model, teacher, 0, 10)
    assert report.by_model[0].agreement.kappa == report.overall.kappa


def test_a_reviewed_grade_being_graded_again_is_left_out(desk: Desk) -> None:
    job = reviewed_job(desk, "job-0", "m1", 5.0, 9.0, 0)
    regraded = job.mark_event_published(desk.clock.now()).regrade(desk.clock.now(), job.request)
    desk.store.update("job-0", lambda _: regraded)
    assert regraded.result is None and review_of(regraded).status is ReviewStatus.REVIEWED
    reviewed_job(desk, "job-1", "m1", 3.0, 3.0, 1)
    report = agreement_report(desk.queue, SCHOOL, None)  # an operator names the school
    assert report.pairs == [(3.0, 3.0)] and report.assignment_id is None
    assert desk.queue.reviewed_asks == [(SCHOOL, None, MAX_AGREEMENT_GRADES)]


def test_a_school_with_nothing_reviewed_has_an_empty_report(desk: Desk) -> None:
    report = agreement_report(desk.queue, OTHER_SCHOOL, "a-1")
    assert (report.overall.reviewed, report.by_model, report.pairs) == (0, [], [])
    assert report.overall.kappa is None and report.assignment_id == "a-1"
    assert desk.queue.reviewed_asks == [("school-b", "a-1", MAX_AGREEMENT_GRADES)]


def test_a_student_may_not_read_the_report(desk: Desk) -> None:
    with pytest.raises(Forbidden) as raised:
        agreement_report(desk.queue, STUDENT, None)
    assert raised.value.detail == "a student may not review.list"
    assert desk.queue.reviewed_asks == []


def test_the_sweep_takes_a_hundred_at_a_time_by_default(desk: Desk) -> None:
    for n in range(101):
        unannounced_review(desk, f"job-{n:03}")
    desk.clock.advance(timedelta(minutes=2))
    assert len(desk.service.sweep()) == 100
    assert len(desk.service.sweep()) == 1
