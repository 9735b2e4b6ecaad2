"""The assignment's decisions: the regrade wait it records, the rounds it opens, the rubric
versions it keeps, what it stores and reads back, and its tally's counts."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from shared.domain.assignment import (
    MAX_RUBRIC_VERSIONS,
    SCORE_SUM,
    SCORED,
    Assignment,
    RubricVersion,
    Tally,
    TallyChange,
    histogram_bucket,
    tally_change,
)
from shared.domain.authorization import Owner
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest, Job
from shared.domain.review import (
    HoldReason,
    Release,
    Review,
    ReviewDecision,
    ReviewState,
    ReviewStatus,
)
from shared.domain.status import JobStatus

T0 = datetime(2026, 3, 1, tzinfo=UTC)
T1 = T0 + timedelta(hours=1)
LEASE = timedelta(seconds=30)


def assignment() -> Assignment:
    return Assignment.new("a", "c", "t", ("x", "y"), 10.0, "v1", T0, {"k": 1}, author="u1")


def test_a_regrade_is_marked_waiting_and_back() -> None:
    first = assignment()
    assert first.regrade_waiting is False
    waiting = first.with_regrade_waiting(True)
    assert waiting.regrade_waiting is True
    assert waiting.with_regrade_waiting(False).regrade_waiting is False
    assert waiting.with_regrade_waiting(True).regrade_waiting is True
    assert waiting.round == first.round and waiting.updated_at == first.updated_at


def test_a_new_assignment_starts_at_its_first_rubric_and_round() -> None:
    settings = {"k": 1}
    new = Assignment.new("a", "c", "t", "x", 10.0, "v1", T0, settings, author="u1")
    settings["k"] = 2  # the assignment keeps its own copy
    assert new.settings == {"k": 1}
    assert (new.id, new.client_id, new.title, new.max_score) == ("a", "c", "t", 10.0)
    assert (new.prompt_version, new.author, new.owner) == ("v1", "u1", Owner("c", "u1"))
    assert new.rubrics == (RubricVersion(1, "x", T0),)
    assert (new.created_at, new.updated_at) == (T0, T0)
    assert (new.round, new.expected, new.reopen_reviewed) == (0, 0, False)
    assert Assignment.new("a", "c", "t", "x", 10.0, "v1", T0).settings == {}
    assert Assignment.new("a", "c", "t", "x", 10.0, "v1", T0).owner == Owner("c")


def test_a_revised_rubric_is_the_next_version_and_old_ones_stay_readable() -> None:
    first = assignment()
    second = first.revise("z", T1)
    assert second.rubric == RubricVersion(2, "z", T1)
    assert second.updated_at == T1 and second.created_at == T0
    assert second.rubric_version(1) == RubricVersion(1, ("x", "y"), T0)
    assert second.rubric_version(2) == RubricVersion(2, "z", T1)
    assert second.rubric_version(3) is None
    assert second.revise("z", T1 + timedelta(hours=1)) is second  # the same rubric again


def test_only_the_newest_rubric_versions_are_kept() -> None:
    revised = assignment()
    for n in range(MAX_RUBRIC_VERSIONS + 1):
        revised = revised.revise(f"r{n}", T1)
    versions = [v.version for v in revised.rubrics]
    assert len(versions) == MAX_RUBRIC_VERSIONS == 40
    assert versions[0] == 3 and versions[-1] == MAX_RUBRIC_VERSIONS + 2
    assert revised.rubric_version(1) is None


def test_a_round_opens_with_what_it_expects_and_the_teachers_choice() -> None:
    first = assignment().with_regrade_waiting(True)
    started = first.start_round(T1, 5)
    assert (started.round, started.expected, started.prompt_version) == (1, 5, "v1")
    assert (started.updated_at, started.reopen_reviewed) == (T1, False)
    again = started.start_round(T1, 3, "v2", reopen_reviewed=True)
    assert (again.round, again.expected, again.prompt_version) == (2, 3, "v2")
    assert again.reopen_reviewed is True
    assert again.start_round(T1, 1).reopen_reviewed is False


def test_an_assignment_is_stored_and_read_back_whole() -> None:
    stored = assignment().revise("z", T1).start_round(T1, 4, "v2", True)
    stored = stored.with_regrade_waiting(True)
    record = stored.to_record()
    assert record == {
        "id": "a",
        "client_id": "c",
        "title": "t",
        "max_score": 10.0,
        "prompt_version": "v2",
        "rubrics": [
            {"version": 1, "rubric": ["x", "y"], "created_at": T0},
            {"version": 2, "rubric": "z", "created_at": T1},
        ],
        "created_at": T0,
        "updated_at": T1,
        "round": 1,
        "settings": {"k": 1},
        "expected": 4,
        "regrade_waiting": True,
        "reopen_reviewed": True,
        "author": "u1",
    }
    assert Assignment.from_record(record) == stored


def test_an_old_record_reads_with_the_defaults() -> None:
    record = {
        "id": "a",
        "client_id": "c:user:u9",  # stored in the user's scope before authors
        "title": "t",
        "max_score": 7,
        "prompt_version": "v1",
        "rubrics": [{"version": "1", "rubric": "x", "created_at": T0}],
        "created_at": T0,
        "updated_at": T0,
        "settings": None,
    }
    read = Assignment.from_record(record)
    assert (read.client_id, read.author) == ("c", "u9")
    assert read.max_score == 7.0 and isinstance(read.max_score, float)
    assert read.rubrics == (RubricVersion(1, "x", T0),)
    assert (read.round, read.expected, read.settings) == (0, 0, {})
    assert (read.regrade_waiting, read.reopen_reviewed) == (False, False)
    school = Assignment.from_record({**record, "client_id": "c"})
    assert (school.client_id, school.author) == ("c", "server")
    counted = Assignment.from_record(
        {**record, "round": "2", "expected": "3", "regrade_waiting": 1, "reopen_reviewed": 1}
    )
    assert (counted.round, counted.expected) == (2, 3)
    assert counted.regrade_waiting is True and counted.reopen_reviewed is True


def test_a_tally_counts_what_is_final_and_done() -> None:
    empty = Tally()
    assert (empty.total, empty.final, empty.done, empty.mean_score) == (0, 0, False, None)
    assert empty.histogram == (0,) * 11
    busy = Tally({JobStatus.PENDING: 1, JobStatus.SUCCEEDED: 2, JobStatus.FAILED: 1}, 9.0, 3)
    assert (busy.total, busy.final, busy.done) == (4, 3, False)
    assert busy.mean_score == 3.0
    done = Tally({JobStatus.SUCCEEDED: 2, JobStatus.CANCELLED: 1})
    assert (done.total, done.final, done.done, done.mean_score) == (3, 3, True, None)


def test_a_tally_is_rebuilt_from_its_summed_fields() -> None:
    fields = {
        JobStatus.SUCCEEDED.value: 2.0,
        JobStatus.PENDING.value: 0.0,
        SCORE_SUM: 13.5,
        SCORED: 2.0,
        "h3": 1.0,
        "h10": 1.0,
    }
    tally = Tally.from_fields(fields)
    assert tally.counts == {JobStatus.SUCCEEDED: 2}
    assert (tally.score_sum, tally.scored) == (13.5, 2)
    assert tally.histogram == (0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1)
    assert Tally.from_fields({}) == Tally()


def test_a_score_falls_in_its_tenth_of_the_scale() -> None:
    assert histogram_bucket(5.0, 0.0) == 0
    assert histogram_bucket(5.0, -1.0) == 0
    assert histogram_bucket(0.5, 1.0) == 5  # a scale of one point has tenths too
    assert histogram_bucket(0.99, 10.0) == 0
    assert histogram_bucket(1.0, 10.0) == 1
    assert histogram_bucket(9.99, 10.0) == 9
    assert histogram_bucket(10.0, 10.0) == 10
    assert histogram_bucket(12.0, 10.0) == 10
    assert histogram_bucket(-3.0, 10.0) == 0


def graded_job(score: float = 8.0, max_score: float = 10.0, round_: int = 0) -> Job:
    request = GradingRequest(
        "s", "answer", "x", max_score, assignment_id="a", rubric_version=1, assignment_round=round_
    )
    running = Job.new("j", "c", request, "fp", T0).claim("w", T0, LEASE)
    done = running.succeed("w", GradeResult(score, max_score, "ok"), T0)
    state = ReviewState(ReviewStatus.HELD, (HoldReason.SAMPLED,), Release.IMMEDIATELY, T0, 0)
    return done.hold(state).mark_event_published(T0)


def reviewed(job: Job, score: float, number: int = 1) -> Job:
    grade = GradeResult(score, job.request.max_score, "seen", grader="reviewer:t")
    review = Review(number, "t", T1, ReviewDecision.OVERRIDE, "partial", grade)
    return job.record_review(review, T1)


def test_a_teachers_new_grade_moves_the_sum_and_the_histogram_only() -> None:
    held = graded_job(8.0)
    overridden = reviewed(held, 3.5)
    assert tally_change(held, overridden) == TallyChange(
        "a", 0, {SCORE_SUM: -4.5, "h8": -1, "h3": 1}
    )
    # Within the same tenth of the scale: the sum moves, the histogram stays.
    assert tally_change(held, reviewed(held, 8.5)) == TallyChange("a", 0, {SCORE_SUM: 0.5})
    # The same grade again, or a write that changes no grade: nothing to count.
    assert tally_change(held, reviewed(held, 8.0)) is None
    assert tally_change(held, held) is None
    assert tally_change(overridden, reviewed(overridden, 3.5, 2)) is None
    # The buckets are tenths of each job's own scale.
    small = graded_job(8.0, 20.0)
    assert tally_change(small, reviewed(small, 2.0)) == TallyChange(
        "a", 0, {SCORE_SUM: -6.0, "h4": -1, "h1": 1}
    )


def test_a_regraded_job_is_counted_afresh_in_its_round() -> None:
    held = graded_job(8.0)
    pending = held.regrade(
        T1, dataclasses.replace(held.request, assignment_round=1), lane=None, reopen=False
    )
    assert tally_change(held, pending) == TallyChange("a", 1, {JobStatus.PENDING.value: 1})
    running = pending.claim("w", T1, LEASE)
    assert tally_change(pending, running) == TallyChange(
        "a", 1, {JobStatus.PENDING.value: -1, JobStatus.RUNNING.value: 1}
    )
    done = running.succeed("w", GradeResult(6.0, 10.0, "ok"), T1)
    assert tally_change(running, done) == TallyChange(
        "a",
        1,
        {
            JobStatus.RUNNING.value: -1,
            JobStatus.SUCCEEDED.value: 1,
            SCORE_SUM: 6.0,
            SCORED: 1,
            "h6": 1,
        },
    )
    # Written straight into a round it was not counted in: counted with its score there.
    assert tally_change(
        held,
        dataclasses.replace(held, request=dataclasses.replace(held.request, assignment_round=2)),
    ) == TallyChange("a", 2, {JobStatus.SUCCEEDED.value: 1, SCORE_SUM: 8.0, SCORED: 1, "h8": 1})
    assert tally_change(None, held) == TallyChange(
        "a", 0, {JobStatus.SUCCEEDED.value: 1, SCORE_SUM: 8.0, SCORED: 1, "h8": 1}
    )


def test_a_job_outside_an_assignment_is_not_counted() -> None:
    held = graded_job()
    loose = dataclasses.replace(held, request=dataclasses.replace(held.request, assignment_id=None))
    assert tally_change(None, loose) is None


def test_a_job_labelled_with_an_assignment_but_not_its_rubric_is_not_counted() -> None:
    held = graded_job()
    own_rubric = dataclasses.replace(held.request, rubric_version=None)
    assert tally_change(None, dataclasses.replace(held, request=own_rubric)) is None
