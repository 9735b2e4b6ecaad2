"""A teacher's grade survives a regrade: it stays the final grade, the student keeps seeing
it, a model grade far from it goes back to the teacher's queue flagged, reopening is the
teacher's recorded choice, and the regrade report compares final and model grades."""

from __future__ import annotations

import csv
import io
from typing import Any

from flask.testing import FlaskClient

from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.job import Job
from shared.domain.review import HoldReason, ReviewStatus
from tests.fakes import FakeTaskQueue
from tests.unit.test_assignment_flow import deliver_all
from tests.unit.test_review_api import AUTH, REVIEWER, graded_assignment, reviewing  # noqa: F401

#: The rubric grader scores "light only" 5 of 10 under "light; chlorophyll".
ANSWER = "light only"


def override(intake: FlaskClient, job_id: str, score: float, reason: str = "partial") -> None:
    body = {"decision": "override", "score": score, "reason": reason, "feedback": "Well argued."}
    response = intake.post(f"/v1/reviews/{job_id}", json=body, headers=REVIEWER)
    assert response.status_code == 200, response.get_json()


def regrade(
    intake: FlaskClient, assignment_id: str, body: dict[str, Any] | None = None
) -> dict[str, Any]:
    response = intake.post(
        f"/v1/assignments/{assignment_id}/regrade", json=body or {}, headers=AUTH
    )
    assert response.status_code == 202, response.get_json()
    return dict(response.get_json())


def graded_and_overridden(
    settings: Settings, adapters: Adapters, clock: FrozenClock, release: str, score: float
) -> tuple[FlaskClient, FlaskClient, str, str]:
    intake, [job_id], _ = graded_assignment(settings, adapters, clock, release, [ANSWER])
    override(intake, job_id, score)
    job = adapters.store.get(job_id)
    assert job is not None and job.request.assignment_id is not None
    from services.worker.app import create_app as create_worker
    from shared.adapters.graders.rubric import RubricGrader

    worker = create_worker(settings, adapters, RubricGrader(simulate=False), clock).test_client()
    return intake, worker, job_id, job.request.assignment_id


def regraded(
    intake: FlaskClient,
    worker: FlaskClient,
    adapters: Adapters,
    assignment_id: str,
    body: dict[str, Any] | None = None,
) -> None:
    """Regrade the assignment and deliver every task the regrade queued."""
    queue = adapters.queue
    assert isinstance(queue, FakeTaskQueue)
    regrade(intake, assignment_id, body)
    deliver_all(worker, queue)


def stored(adapters: Adapters, job_id: str) -> Job:
    job = adapters.store.get(job_id)
    assert job is not None
    return job


def test_a_regrade_keeps_the_teachers_override_and_flags_a_model_grade_far_from_it(
    reviewing: Settings,  # noqa: F811
    adapters: Adapters,
    clock: FrozenClock,
) -> None:
    intake, worker, job_id, assignment_id = graded_and_overridden(
        reviewing, adapters, clock, "immediately", 8.0
    )
    regraded(intake, worker, adapters, assignment_id, {"rubric": "light; chlorophyll; water"})

    job = stored(adapters, job_id)
    assert job.generation == 1 and job.request.assignment_round == 1
    student = intake.get(f"/v1/grading-jobs/{job_id}", headers=AUTH).get_json()
    assert student["result"]["score"] == 8.0  # not the model's new grade
    assert student["result"]["feedback"] == "Well argued."
    assert job.review is not None and job.result is not None
    # Both model grades and the teacher's grade with its reason are on the job.
    assert [g.score for _, _, g in job.model_grades()] == [5.0, job.result.score]
    [review] = job.review.reviews
    assert (review.result.score, review.reason, review.generation) == (8.0, "partial", 0)
    # 8 against the new model grade is more than a tenth of 10 apart: back in the queue.
    assert job.review.status is ReviewStatus.HELD
    assert job.review.reasons == (HoldReason.REGRADE_MOVED,)
    queued = intake.get("/v1/reviews", headers=REVIEWER).get_json()["reviews"]
    assert [(r["job_id"], r["teacher_score"]) for r in queued] == [(job_id, 8.0)]
    detail = intake.get(f"/v1/reviews/{job_id}", headers=REVIEWER).get_json()
    assert [(g["generation"], g["rubric_version"]) for g in detail["model_grades"]] == [
        (0, 1),
        (1, 2),
    ]
    assert detail["result"]["score"] == 8.0 and detail["reviews"][0]["generation"] == 0


def test_a_regrade_close_to_the_teachers_grade_keeps_it_reviewed(
    reviewing: Settings,  # noqa: F811
    adapters: Adapters,
    clock: FrozenClock,
) -> None:
    intake, worker, job_id, assignment_id = graded_and_overridden(
        reviewing, adapters, clock, "immediately", 5.5
    )
    regraded(intake, worker, adapters, assignment_id)
    job = stored(adapters, job_id)
    assert job.review is not None and job.review.status is ReviewStatus.REVIEWED
    final = job.effective_result
    assert final is not None and final.score == 5.5 and job.final_source == "teacher"
    assert intake.get("/v1/reviews", headers=REVIEWER).get_json()["reviews"] == []


def test_after_review_a_regrade_with_the_same_rubric_never_hides_a_reviewed_grade(
    reviewing: Settings,  # noqa: F811
    adapters: Adapters,
    clock: FrozenClock,
) -> None:
    intake, worker, job_id, assignment_id = graded_and_overridden(
        reviewing, adapters, clock, "after_review", 5.0
    )
    regraded(intake, worker, adapters, assignment_id)
    student = intake.get(f"/v1/grading-jobs/{job_id}", headers=AUTH).get_json()
    assert student["status"] == "SUCCEEDED"
    assert student["result"] is not None and student["result"]["score"] == 5.0


def test_reopening_reviewed_grades_is_the_teachers_recorded_choice(
    reviewing: Settings,  # noqa: F811
    adapters: Adapters,
    clock: FrozenClock,
) -> None:
    intake, worker, job_id, assignment_id = graded_and_overridden(
        reviewing, adapters, clock, "immediately", 5.0
    )
    regraded(intake, worker, adapters, assignment_id, {"reopen_reviewed": True})
    job = stored(adapters, job_id)
    assert job.review is not None and job.review.reasons == (HoldReason.REOPENED,)
    assert job.effective_result is not None and job.effective_result.score == 5.0
    report = intake.get(f"/v1/assignments/{assignment_id}/regrade", headers=AUTH).get_json()
    assert report["reopen_reviewed"] is True and report["flagged"] == 1


def test_the_regrade_report_and_the_sheet_show_the_teachers_final_grade(
    reviewing: Settings,  # noqa: F811
    adapters: Adapters,
    clock: FrozenClock,
) -> None:
    intake, worker, job_id, assignment_id = graded_and_overridden(
        reviewing, adapters, clock, "immediately", 8.0
    )

    def progress() -> dict[str, Any]:
        body = intake.get(f"/v1/assignments/{assignment_id}", headers=AUTH).get_json()
        return dict(body["progress"])

    # The class mean counts the teacher's grade, not the model's 5.
    assert (progress()["mean_score"], progress()["histogram"][8]) == (8.0, 1)
    assert progress()["histogram"][5] == 0
    regraded(intake, worker, adapters, assignment_id, {"rubric": "light; chlorophyll; water"})
    assert (progress()["round"], progress()["mean_score"]) == (1, 8.0)
    new_model = stored(adapters, job_id).result
    assert new_model is not None and new_model.score != 8.0

    report = intake.get(f"/v1/assignments/{assignment_id}/regrade", headers=AUTH).get_json()
    [change] = report["changes"]
    assert (change["old"], change["new"], change["source"]) == (8.0, 8.0, "teacher")
    assert (change["old_model"], change["new_model"]) == (5.0, new_model.score)
    assert change["flagged"] is True

    sheet = intake.get(
        f"/v1/assignments/{assignment_id}/grades", headers={**AUTH, "Accept": "text/csv"}
    )
    [row] = list(csv.DictReader(io.StringIO(sheet.get_data(as_text=True))))
    assert (row["final_score"], row["final_source"]) == ("8.0", "teacher")
    assert (row["model_score"], row["teacher_score"]) == (str(new_model.score), "8.0")
    assert (row["reviewer"], row["reason"]) == ("key:ms-smith", "partial")
    assert row["feedback"] == "Well argued."


def test_grades_stored_before_the_history_read_as_they_were() -> None:
    from datetime import UTC, datetime

    from shared.domain.assignment import Assignment
    from shared.domain.review import ReviewState

    at = datetime(2026, 1, 1, tzinfo=UTC)
    old_review = {
        "status": "reviewed",
        "reasons": ["sampled"],
        "release": "after_review",
        "held_at": at.isoformat(),
        "generation": 0,
        "reviews": [
            {
                "number": 1,
                "by": "key:ms",
                "at": at.isoformat(),
                "decision": "override",
                "reason": "r",
                "result": {"score": 6.0, "max_score": 8.0, "feedback": "f"},
            }
        ],
    }
    state = ReviewState.from_dict(old_review)
    assert state.reopen is False and state.reviews[0].generation is None
    assert not state.withheld and not state.flagged
    assert ReviewState.from_dict(state.to_dict()) == state
    record = Assignment.new("a", "c", "t", "r", 8.0, "v1", at).to_record()
    del record["reopen_reviewed"]
    assert Assignment.from_record(record).reopen_reviewed is False


def test_after_regrade_flags_past_the_threshold_only_and_keeps_every_review() -> None:
    from datetime import UTC, datetime

    from shared.domain.grade import GradeResult
    from shared.domain.review import (
        Release,
        Review,
        ReviewDecision,
        ReviewPolicy,
        ReviewState,
        after_regrade,
        regrade_threshold,
    )

    at = datetime(2026, 1, 1, tzinfo=UTC)
    teacher = Review(1, "key:ms", at, ReviewDecision.OVERRIDE, "r", GradeResult(6, 8, "t"), 0)
    state = ReviewState(
        ReviewStatus.REVIEWED, (HoldReason.SAMPLED,), Release.AFTER_REVIEW, at, 0, (teacher,)
    ).carried(reopen=False)
    assert regrade_threshold(None, 8) == 0.8
    assert regrade_threshold(ReviewPolicy(regrade_threshold=2.5), 8) == 2.5
    within = after_regrade(state, GradeResult(6.8, 8, "m"), 0.8, 1, at)
    assert within.status is ReviewStatus.REVIEWED and within.reviews == (teacher,)
    moved = after_regrade(state, GradeResult(4, 8, "m"), 0.8, 1, at)
    assert moved.status is ReviewStatus.HELD and moved.reasons == (HoldReason.REGRADE_MOVED,)
    assert moved.reviews == (teacher,) and moved.flagged and not moved.withheld
    both = after_regrade(state.carried(reopen=True), GradeResult(4, 8, "m"), 0.8, 1, at)
    assert both.reasons == (HoldReason.REOPENED, HoldReason.REGRADE_MOVED)
    assert not both.reopen  # the choice was spent on this regrade


def test_every_way_a_grade_is_stored_keeps_the_teachers_grade_and_posts_it() -> None:
    """`settled` is the one step after a grade is stored, one by one or from a provider
    batch: a teacher's grade stays final through a regrade, and the grade is posted."""
    from datetime import UTC, datetime, timedelta

    from shared.domain.grade import GradeResult
    from shared.domain.job import GradingRequest
    from shared.domain.review import Release, Review, ReviewDecision, ReviewState
    from shared.service_layer.worker import settled

    at = datetime(2026, 1, 1, tzinfo=UTC)
    request = GradingRequest("s", "a", "light", 8, assignment_id="a-1", rubric_version=1)
    first = Job.new("j", "c", request, "fp", at).claim("w", at, timedelta(30))
    graded = settled(first, first.succeed("w", GradeResult(4, 8, "m"), at), None, at)
    assert graded.posted is not None and graded.posted.score == 4  # posted automatically
    teacher = Review(1, "key:t", at, ReviewDecision.OVERRIDE, "r", GradeResult(6, 8, "t"), 0)
    state = ReviewState(ReviewStatus.REVIEWED, (), Release.IMMEDIATELY, at, 0, (teacher,))
    reviewed = graded.hold(state).post(at, "key:t").mark_event_published(at)
    again = reviewed.regrade(at, request).claim("w", at, timedelta(30))
    done = settled(again, again.succeed("w", GradeResult(4, 8, "m2"), at), None, at)
    assert done.effective_result is not None and done.effective_result.score == 6
    assert done.review is not None and done.review.reasons == (HoldReason.REGRADE_MOVED,)
    assert done.posted is not None and done.posted.version == 2  # unchanged: no third
