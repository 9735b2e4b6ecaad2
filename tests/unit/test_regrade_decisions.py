"""The regrade's decisions: what resuming a regrade does (nothing, clear the wait, or move
what now fits and check the round), what waits under the ceilings, what the sweep resumes,
and what a regrade refuses."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from functools import partial
from pathlib import Path

import pytest

from shared.adapters.embedded.assignment_store import (
    SqliteAssignmentStore,
    SqliteJobBatch,
    SqliteTally,
)
from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.clock import FrozenClock
from shared.domain.admission import AdmissionLimits
from shared.domain.agreement import quadratic_weighted_kappa
from shared.domain.assignment import Assignment
from shared.domain.errors import (
    AssignmentBusy,
    DependencyUnavailable,
    TooManyActiveJobs,
    ValidationFailed,
)
from shared.domain.grade import GradeResult
from shared.domain.ids import task_name_for
from shared.domain.job import Job, JobError
from shared.domain.review import (
    HoldReason,
    Release,
    Review,
    ReviewDecision,
    ReviewState,
    ReviewStatus,
)
from shared.domain.status import JobStatus
from shared.ports import TaskSpec
from shared.service_layer import regrade as regrade_module
from shared.service_layer.assignments import Answer, AssignmentService
from shared.service_layer.regrade import Regrader, ScoreChange
from tests.fakes import FakeTaskQueue

LEASE = timedelta(seconds=30)
#: Two jobs of a client may be open at once: a class of three regrades in two passes.
TWO_AT_ONCE = AdmissionLimits(per_client=2, backlog=100, retry_after_s=7)


class World:
    """An assignment service and a regrader over one SQLite file; the rounds it checked."""

    def __init__(
        self,
        tmp_path: Path,
        limits: AdmissionLimits | None = None,
        checks: bool = True,
        parallelism: int = 1,
    ) -> None:
        db = SqliteDatabase(tmp_path / "g.sqlite3")
        self.jobs = SqliteJobStore(db, on_write=SqliteTally(db).record)
        self.store = SqliteAssignmentStore(db)
        self.queue = FakeTaskQueue()
        self.clock = FrozenClock()
        self.service = AssignmentService(
            self.store, self.jobs, SqliteJobBatch(db, self.jobs), self.queue, self.clock
        )
        self.checked: list[tuple[str, str, int]] = []
        self.regrader = Regrader(
            self.service,
            self.store,
            self.jobs,
            self.queue,
            self.clock,
            self.check if checks else None,
            parallelism=parallelism,
            limits=limits,
        )

    def check(self, assignment_id: str, client_id: str, round_: int) -> bool:
        self.checked.append((assignment_id, client_id, round_))
        return False

    def graded_class(self, size: int, key: str = "k") -> tuple[Assignment, list[str]]:
        """An assignment of client "c" with `size` answers, each graded and announced."""
        assignment, _ = self.service.create("c", key, "t", "x", 10.0, "v1")
        answers = [Answer(f"s{i}", f"a {i}") for i in range(size)]
        results = self.service.submit_batch("c", assignment.id, answers)
        ids = [r.job.id for r in results if r.job is not None]
        for job_id in ids:
            self.grade(job_id, 5.0)
        return assignment, ids

    def grade(self, job_id: str, score: float) -> None:
        """Grade the job and announce it."""
        self.finish(job_id, score)
        self.jobs.update(job_id, lambda j: j.mark_event_published(self.clock.now()))

    def finish(self, job_id: str, score: float) -> None:
        """Grade the job; its event is not out yet."""
        now = self.clock.now()
        self.jobs.update(job_id, lambda j: j.claim("w", now, LEASE))
        self.jobs.update(job_id, lambda j: j.succeed("w", GradeResult(score, 10.0, "ok"), now))

    def override(self, job_id: str, score: float) -> None:
        """A teacher overrides the job's grade."""
        now = self.clock.now()
        state = ReviewState(ReviewStatus.HELD, (HoldReason.SAMPLED,), Release.IMMEDIATELY, now, 0)
        grade = GradeResult(score, 10.0, "seen")
        review = Review(1, "t", now, ReviewDecision.OVERRIDE, "why", grade)
        self.jobs.update(job_id, lambda j: j.hold(state).record_review(review, now))

    def stored(self, assignment_id: str) -> Assignment:
        assignment = self.store.get(assignment_id)
        assert assignment is not None
        return assignment

    def in_round(self, assignment: Assignment, round_: int) -> list[str]:
        jobs = self.service.all_grades(assignment)
        return sorted(j.id for j in jobs if j.request.assignment_round == round_)


@pytest.fixture(autouse=True)
def _no_announce_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(regrade_module, "ANNOUNCE_WAITS_S", ())


def test_resuming_an_unknown_or_never_regraded_assignment_does_nothing(tmp_path: Path) -> None:
    world = World(tmp_path, TWO_AT_ONCE)
    assert world.regrader.resume("no-such-assignment") == 0
    assignment, _ = world.graded_class(3)
    tasks = len(world.queue.tasks)
    assert world.regrader.resume(assignment.id) == 0  # round 0: no regrade to resume
    assert len(world.queue.tasks) == tasks
    assert world.checked == []
    assert world.stored(assignment.id).regrade_waiting is False


def test_a_regrade_past_the_ceiling_moves_what_fits_and_waits_until_resumed(
    tmp_path: Path,
) -> None:
    world = World(tmp_path, TWO_AT_ONCE)
    assignment, ids = world.graded_class(3)
    started = world.regrader.regrade("c", assignment.id, rubric="y")
    assert (started.round, started.expected, started.regrade_waiting) == (1, 3, True)
    assert world.stored(assignment.id).regrade_waiting is True
    assert [a.id for a in world.store.waiting_regrades(10)] == [assignment.id]
    assert world.checked == [(assignment.id, "c", 1)]
    moved = [t.job_id for t in world.queue.tasks[3:]]
    assert len(moved) == 2
    # The two moved jobs still hold the client's ceiling: nothing more fits.
    assert world.regrader.resume(assignment.id) == 2
    assert world.checked == [(assignment.id, "c", 1)] * 2
    assert world.stored(assignment.id).regrade_waiting is True
    assert len(world.queue.tasks) == 5
    for job_id in moved:
        world.grade(job_id, 9.0)
    assert world.regrader.resume(assignment.id) == 3
    assert world.checked == [(assignment.id, "c", 1)] * 3
    assert world.stored(assignment.id).regrade_waiting is False
    assert world.store.waiting_regrades(10) == []
    [last] = [t.job_id for t in world.queue.tasks[5:]]
    assert sorted([*moved, last]) == sorted(ids)
    # Every submission is in the round: resuming again moves and checks nothing.
    assert world.regrader.resume(assignment.id) == 0
    assert len(world.queue.tasks) == 6
    assert world.checked == [(assignment.id, "c", 1)] * 3


def test_resuming_a_round_already_full_clears_its_wait(tmp_path: Path) -> None:
    world = World(tmp_path)
    assignment, _ = world.graded_class(2)
    started = world.regrader.regrade("c", assignment.id, rubric="y")
    assert (started.expected, started.regrade_waiting) == (2, False)
    # As after a crash between the last move and the mark: marked waiting, nothing to move.
    world.store.update(assignment.id, lambda a: a.with_regrade_waiting(True))
    tasks = len(world.queue.tasks)
    assert world.regrader.resume(assignment.id) == 0
    assert world.stored(assignment.id).regrade_waiting is False
    assert len(world.queue.tasks) == tasks
    assert world.checked == [(assignment.id, "c", 1)]  # the regrade's only


def test_a_regrade_without_a_round_check_resumes_all_the_same(tmp_path: Path) -> None:
    world = World(tmp_path, TWO_AT_ONCE, checks=False)
    assignment, _ = world.graded_class(3)
    world.regrader.regrade("c", assignment.id, rubric="y")
    for task in world.queue.tasks[3:]:
        world.grade(task.job_id, 9.0)
    assert world.regrader.resume(assignment.id) == 3
    assert world.stored(assignment.id).regrade_waiting is False


def test_a_regrade_nothing_of_which_fits_is_refused_and_waits(tmp_path: Path) -> None:
    world = World(tmp_path, AdmissionLimits(per_client=1, backlog=100, retry_after_s=7))
    assignment, _ = world.graded_class(2)
    other, _ = world.service.create("c", "other", "t", "x", 10.0, "v1")
    world.service.submit_batch("c", other.id, [Answer("o", "open")])  # holds the ceiling
    with pytest.raises(TooManyActiveJobs):
        world.regrader.regrade("c", assignment.id, rubric="y")
    stored = world.stored(assignment.id)
    assert (stored.round, stored.expected, stored.regrade_waiting) == (1, 2, True)
    assert world.checked == []
    assert world.in_round(assignment, 1) == []


def test_the_sweep_resumes_every_waiting_regrade_and_skips_one_that_fails(
    tmp_path: Path,
) -> None:
    world = World(tmp_path, TWO_AT_ONCE)
    first, _ = world.graded_class(3, "first")
    world.regrader.regrade("c", first.id, rubric="y")
    for task in world.queue.tasks[3:]:
        world.grade(task.job_id, 9.0)
    assert world.regrader.resume_waiting() == [first.id]
    assert world.stored(first.id).regrade_waiting is False
    assert len(world.in_round(first, 1)) == 3

    def refuse(assignment_id: str, client_id: str, round_: int) -> bool:
        raise DependencyUnavailable("the round check is down")

    world.regrader._check_round = refuse
    second, _ = world.graded_class(3, "second")
    with pytest.raises(DependencyUnavailable):
        world.regrader.regrade("c", second.id, rubric="y")
    assert world.regrader.resume_waiting() == []  # its resume failed: not reported


def test_the_sweep_resumes_at_most_its_limit(tmp_path: Path) -> None:
    world = World(tmp_path, AdmissionLimits(per_client=1, backlog=100, retry_after_s=7))
    first, _ = world.graded_class(2, "a")
    world.regrader.regrade("c", first.id, rubric="y")
    second, _ = world.graded_class(2, "b")
    with pytest.raises(TooManyActiveJobs):  # the first's moved job holds the ceiling
        world.regrader.regrade("c", second.id, rubric="y")
    assert len(world.store.waiting_regrades(10)) == 2
    assert len(world.regrader.resume_waiting(1)) == 1
    assert len(world.regrader.resume_waiting()) == 2


def test_a_regrade_refuses_an_assignment_with_nothing_graded_or_still_grading(
    tmp_path: Path,
) -> None:
    world = World(tmp_path)
    assignment, _ = world.service.create("c", "k", "t", "x", 10.0, "v1")
    with pytest.raises(ValidationFailed) as nothing:
        world.regrader.regrade("c", assignment.id)
    assert str(nothing.value) == "the assignment has no graded submission to regrade"
    assert nothing.value.extensions["errors"] == [{"field": "", "message": "nothing to regrade"}]
    world.service.submit_batch("c", assignment.id, [Answer(f"s{i}", "a") for i in range(3)])
    world.grade(world.queue.tasks[0].job_id, 5.0)
    with pytest.raises(AssignmentBusy) as busy:
        world.regrader.regrade("c", assignment.id)
    assert str(busy.value) == ("round 0 has 2 submissions not yet final; regrade once it is graded")
    assert world.stored(assignment.id).round == 0


def test_a_regrade_moves_only_the_graded_jobs_of_the_round_before(tmp_path: Path) -> None:
    world = World(tmp_path, parallelism=2)
    assignment, _ = world.service.create("c", "k", "t", "x", 10.0, "v1")
    world.service.submit_batch("c", assignment.id, [Answer(f"s{i}", "a") for i in range(3)])
    graded, failed, cancelled = (t.job_id for t in world.queue.tasks)
    world.grade(graded, 5.0)
    now = world.clock.now()
    world.jobs.update(cancelled, lambda j: j.cancel(now))
    world.jobs.update(failed, lambda j: j.claim("w", now, LEASE))
    world.jobs.update(failed, lambda j: j.fail("w", JobError("grader", "bad"), now))
    world.jobs.update(failed, lambda j: j.mark_event_published(now))
    started = world.regrader.regrade(
        "c", assignment.id, rubric="y", prompt_version="v2", reopen_reviewed=True
    )
    assert (started.round, started.expected, started.prompt_version) == (1, 2, "v2")
    assert started.reopen_reviewed is True
    assert started.rubric.rubric == "y" and started.rubric.version == 2
    assert world.in_round(assignment, 1) == sorted([graded, failed])
    for job_id in (graded, failed):
        job = world.jobs.get(job_id)
        assert job is not None and job.status is JobStatus.PENDING
        assert (job.request.rubric, job.request.rubric_version) == ("y", 2)
        assert job.request.prompt_version == "v2"
    assert sorted(t.job_id for t in world.queue.tasks[3:]) == sorted([graded, failed])


def test_a_regrade_whose_tasks_cannot_be_made_still_moves_its_jobs(tmp_path: Path) -> None:
    world = World(tmp_path)
    assignment, ids = world.graded_class(2)
    world.queue.available = False
    started = world.regrader.regrade("c", assignment.id)
    assert (started.round, started.expected, started.regrade_waiting) == (1, 2, False)
    assert started.rubrics == assignment.rubrics  # no rubric given: the same one
    assert world.in_round(assignment, 1) == sorted(ids)
    assert len(world.queue.tasks) == 2  # the sweep makes them


def test_a_cancelled_submission_never_counts_as_moved(tmp_path: Path) -> None:
    world = World(tmp_path, AdmissionLimits(per_client=1, backlog=100, retry_after_s=7))
    assignment, _ = world.service.create("c", "k", "t", "x", 10.0, "v1")
    world.service.submit_batch("c", assignment.id, [Answer(f"s{i}", "a") for i in range(3)])
    cancelled, *graded = (t.job_id for t in world.queue.tasks)
    world.jobs.update(cancelled, lambda j: j.cancel(world.clock.now()))
    for job_id in graded:
        world.grade(job_id, 5.0)
    started = world.regrader.regrade("c", assignment.id, rubric="y")
    assert (started.expected, started.regrade_waiting) == (2, True)
    # The one moved still holds the ceiling: one of two is in the round, it still waits.
    assert world.regrader.resume(assignment.id) == 1
    assert world.stored(assignment.id).regrade_waiting is True
    assert world.in_round(assignment, 1) == [world.queue.tasks[3].job_id]


def test_a_stale_mark_leaves_a_newer_rounds_wait_alone(tmp_path: Path) -> None:
    world = World(tmp_path, TWO_AT_ONCE)
    assignment, _ = world.graded_class(3)
    first = world.regrader.regrade("c", assignment.id, rubric="y")
    assert first.regrade_waiting is True
    # A newer round opened meanwhile: the first round's mark must not clear its wait.
    world.store.update(assignment.id, lambda a: a.start_round(world.clock.now(), 5))
    kept = world.regrader._mark_waiting(first, 3)
    assert (kept.round, kept.regrade_waiting) == (2, True)
    assert world.stored(assignment.id).regrade_waiting is True


def test_a_job_still_announcing_is_not_moved_and_the_regrade_waits_for_it(
    tmp_path: Path,
) -> None:
    world = World(tmp_path)
    assignment, _ = world.service.create("c", "k", "t", "x", 10.0, "v1")
    world.service.submit_batch("c", assignment.id, [Answer(f"s{i}", "a") for i in range(2)])
    announced, announcing = (t.job_id for t in world.queue.tasks)
    world.grade(announced, 5.0)
    now = world.clock.now()
    world.jobs.update(announcing, lambda j: j.claim("w", now, LEASE))
    world.jobs.update(announcing, lambda j: j.succeed("w", GradeResult(6.0, 10.0, "ok"), now))
    world.clock.advance(timedelta(minutes=5))
    started = world.regrader.regrade("c", assignment.id, rubric="y")
    assert (started.expected, started.regrade_waiting) == (2, True)
    assert world.in_round(assignment, 1) == [announced]
    [task] = world.queue.tasks[2:]
    assert task == TaskSpec(task_name_for(announced, 1), announced, world.clock.now(), None)


def test_each_reviewed_job_carries_the_teachers_choice_to_reopen_it(tmp_path: Path) -> None:
    world = World(tmp_path)
    for key, reopen in (("closed", False), ("reopened", True)):
        assignment, ids = world.graded_class(1, key)
        world.override(ids[0], 2.0)
        world.regrader.regrade("c", assignment.id, rubric="y", reopen_reviewed=reopen)
        job = world.jobs.get(ids[0])
        assert job is not None and job.review is not None
        assert job.review.reopen is reopen


def held_again(job: Job) -> Job:
    """The job's reviewed grade held for the teacher again (flagged)."""
    assert job.review is not None
    return dataclasses.replace(
        job, review=dataclasses.replace(job.review, status=ReviewStatus.HELD)
    )


def test_the_report_compares_final_and_model_grades_of_the_round(tmp_path: Path) -> None:
    world = World(tmp_path)
    assignment, _ = world.service.create("c", "k", "t", "x", 10.0, "v1")
    answers = [Answer(f"s{i}", "a", student_id=f"st{i}") for i in range(4)]
    world.service.submit_batch("c", assignment.id, answers)
    ids = [t.job_id for t in world.queue.tasks]
    for job_id, score in zip(ids[:3], (4.0, 6.0, 8.0), strict=True):
        world.grade(job_id, score)
    world.jobs.update(ids[3], lambda j: j.cancel(world.clock.now()))
    before = world.regrader.report("c", assignment.id)
    assert (before.round, before.compared, before.mean_shift, before.kappa) == (0, 0, None, None)
    assert (before.model_mean_shift, before.changed, before.flagged) == (None, 0, 0)
    assert {c.job_id: (c.old, c.new) for c in before.changes} == {
        ids[0]: (None, 4.0),
        ids[1]: (None, 6.0),
        ids[2]: (None, 8.0),
        ids[3]: (None, None),
    }
    world.override(ids[0], 2.0)  # the teacher's grade, before the regrade
    world.regrader.regrade("c", assignment.id, rubric="y")
    for job_id, score in zip(ids[:3], (5.0, 6.0, 9.0), strict=True):
        world.grade(job_id, score)
    world.jobs.update(ids[0], held_again)  # back in the teacher's queue
    report = world.regrader.report("c", assignment.id)
    changes = {c.job_id: c for c in report.changes}
    assert set(changes) == set(ids[:3])  # the cancelled one stayed in round 0
    assert changes[ids[0]] == ScoreChange(
        "s0", ids[0], 2.0, 2.0, JobStatus.SUCCEEDED, "st0", 4.0, 5.0, "teacher", True
    )
    assert changes[ids[1]] == ScoreChange(
        "s1", ids[1], 6.0, 6.0, JobStatus.SUCCEEDED, "st1", 6.0, 6.0, "model", False
    )
    assert changes[ids[2]] == ScoreChange(
        "s2", ids[2], 8.0, 9.0, JobStatus.SUCCEEDED, "st2", 8.0, 9.0, "model", False
    )
    assert (report.round, report.compared, report.threshold) == (1, 3, 1.0)
    assert report.mean_shift == pytest.approx(1 / 3)
    assert report.model_mean_shift == pytest.approx(2 / 3)
    assert report.kappa == quadratic_weighted_kappa([4, 6, 8], [5, 6, 9], 0, 10)
    assert (report.changed, report.flagged, report.reopen_reviewed) == (0, 1, False)
    assert world.regrader.report("c", assignment.id, threshold=0.5).changed == 1
    assert world.regrader.report("c", assignment.id, threshold=0.99).changed == 1


def test_the_report_of_a_failed_regrade_has_no_new_grade(tmp_path: Path) -> None:
    world = World(tmp_path)
    assignment, ids = world.graded_class(2)
    world.override(ids[1], 3.0)
    world.regrader.regrade("c", assignment.id, rubric="y", reopen_reviewed=True)
    now = world.clock.now()
    world.grade(ids[0], 7.0)
    world.jobs.update(ids[1], lambda j: j.claim("w", now, LEASE))
    world.jobs.update(ids[1], lambda j: j.fail("w", JobError("grader", "bad"), now))
    report = world.regrader.report("c", assignment.id)
    changes = {c.job_id: c for c in report.changes}
    # The teacher's grade is no final grade of a regrade that failed.
    assert (changes[ids[1]].old, changes[ids[1]].new) == (3.0, None)
    assert (changes[ids[1]].old_model, changes[ids[1]].new_model) == (5.0, None)
    assert changes[ids[1]].status is JobStatus.FAILED
    assert (report.compared, report.mean_shift, report.model_mean_shift) == (1, 2.0, 2.0)
    assert (report.changed, report.reopen_reviewed) == (1, True)


class ThreadsOfMoves:
    """The job store as the regrader sees it, noting the threads that move jobs."""

    def __init__(self, jobs: SqliteJobStore) -> None:
        self._jobs = jobs
        self.threads: set[threading.Thread] = set()

    def update(self, job_id: str, change: Callable[[Job], Job]) -> Job:
        self.threads.add(threading.current_thread())
        return self._jobs.update(job_id, change)


@pytest.mark.parametrize("parallelism", [None, 0, 1, 2, 3])
def test_a_regrade_moves_its_jobs_in_parallel_only_when_asked(
    tmp_path: Path, parallelism: int | None
) -> None:
    world = World(tmp_path)
    assignment, ids = world.graded_class(3)
    moves = ThreadsOfMoves(world.jobs)
    make = partial(
        Regrader,
        world.service,
        world.store,
        moves,  # type: ignore[arg-type]
        world.queue,
        world.clock,
    )
    regrader = make() if parallelism is None else make(parallelism=parallelism)
    started = regrader.regrade("c", assignment.id, rubric="y")
    assert (started.expected, started.regrade_waiting) == (3, False)
    assert world.in_round(assignment, 1) == sorted(ids)
    on_the_caller = moves.threads == {threading.current_thread()}
    assert on_the_caller is (parallelism is None or parallelism <= 1)  # None: not asked
    assert moves.threads


class OverlappingMoves:
    """The job store as the regrader sees it: each move waits a little for more moves to
    run beside it, and the most that ever ran at once is noted."""

    def __init__(self, jobs: SqliteJobStore, wait_for: int) -> None:
        self._jobs = jobs
        self._wait_for = wait_for
        self._changed = threading.Condition()
        self._running = 0
        self.most = 0

    def update(self, job_id: str, change: Callable[[Job], Job]) -> Job:
        with self._changed:
            self._running += 1
            self.most = max(self.most, self._running)
            self._changed.notify_all()
            self._changed.wait_for(lambda: self._running >= self._wait_for, timeout=0.2)
        try:
            return self._jobs.update(job_id, change)
        finally:
            with self._changed:
                self._running -= 1


def test_a_parallel_regrade_moves_at_most_its_parallelism_of_jobs_at_once(
    tmp_path: Path,
) -> None:
    world = World(tmp_path)
    assignment, ids = world.graded_class(5)
    moves = OverlappingMoves(world.jobs, wait_for=3)
    regrader = Regrader(
        world.service,
        world.store,
        moves,  # type: ignore[arg-type]
        world.queue,
        world.clock,
        parallelism=2,
    )
    regrader.regrade("c", assignment.id, rubric="y")
    assert world.in_round(assignment, 1) == sorted(ids)
    assert moves.most == 2


@pytest.mark.parametrize("limits", [None, TWO_AT_ONCE])
def test_a_job_still_announcing_is_waited_for_a_little_then_left_for_the_next_ask(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limits: AdmissionLimits | None
) -> None:
    monkeypatch.setattr(regrade_module, "ANNOUNCE_WAITS_S", (0.05, 0.2, 0.5))
    world = World(tmp_path, limits)
    waits: list[float] = []
    announce_on: list[tuple[int, str]] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        for at, job_id in announce_on:
            if len(waits) == at:
                world.jobs.update(job_id, lambda j: j.mark_event_published(world.clock.now()))

    monkeypatch.setattr(time, "sleep", sleep)
    for key, announced_at in (("late", 2), ("never", 0)):
        assignment, _ = world.service.create("c", key, "t", "x", 10.0, "v1")
        [result] = world.service.submit_batch("c", assignment.id, [Answer("s", "a")])
        assert result.job is not None
        job_id = result.job.id
        world.finish(job_id, 5.0)
        waits.clear()
        announce_on[:] = [(announced_at, job_id)]
        if announced_at:
            started = world.regrader.regrade("c", assignment.id, rubric="y")
            # Its event went out during the second wait: moved then.
            assert waits == [0.05, 0.2]
            assert (started.regrade_waiting, world.in_round(assignment, 1)) == (False, [job_id])
        else:
            started = world.regrader.regrade("c", assignment.id, rubric="y")
            # Every wait passed: left as it is for the next ask.
            assert waits == [0.05, 0.2, 0.5]
            assert (started.regrade_waiting, world.in_round(assignment, 1)) == (True, [])


def test_a_regrade_after_a_finished_one_opens_the_next_round(tmp_path: Path) -> None:
    world = World(tmp_path)
    assignment, ids = world.graded_class(2)
    world.regrader.regrade("c", assignment.id, rubric="y")
    with pytest.raises(AssignmentBusy):  # every one moved, none graded again yet
        world.regrader.regrade("c", assignment.id, rubric="z")
    for job_id in ids:
        world.grade(job_id, 7.0)
    again = world.regrader.regrade("c", assignment.id, rubric="z")
    assert (again.round, again.expected, again.rubric.rubric) == (2, 2, "z")
    assert world.in_round(assignment, 2) == sorted(ids)
    assert len(world.queue.tasks) == 6


def test_a_teachers_grade_counts_as_before_the_regrade_only_if_made_before_it(
    tmp_path: Path,
) -> None:
    world = World(tmp_path)
    assignment, [job_id] = world.graded_class(1)
    world.override(job_id, 3.0)
    [first] = world.regrader.report("c", assignment.id).changes
    assert (first.old, first.new, first.source) == (None, 3.0, "teacher")  # no regrade yet
    world.clock.advance(timedelta(minutes=1))
    other, [other_id] = world.graded_class(1, "other")
    world.regrader.regrade("c", other.id, rubric="y")
    world.grade(other_id, 6.0)
    world.clock.advance(timedelta(minutes=1))
    world.override(other_id, 9.0)  # after the regrade: the grade after, not before
    [change] = world.regrader.report("c", other.id).changes
    assert (change.old, change.new, change.old_model, change.new_model) == (5.0, 9.0, 5.0, 6.0)
    assert change.source == "teacher"


class RacedBy:
    """The assignment store, where another regrade opens a round just before the next write."""

    def __init__(self, store: SqliteAssignmentStore, clock: FrozenClock) -> None:
        self._store = store
        self._clock = clock

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)

    def update(self, assignment_id: str, change: Callable[[Assignment], Assignment]) -> Assignment:
        self._store.update(assignment_id, lambda a: a.start_round(self._clock.now(), 1))
        return self._store.update(assignment_id, change)


def test_a_regrade_that_another_one_started_first_is_refused(tmp_path: Path) -> None:
    world = World(tmp_path)
    assignment, _ = world.graded_class(2)
    raced = Regrader(
        world.service,
        RacedBy(world.store, world.clock),  # type: ignore[arg-type]
        world.jobs,
        world.queue,
        world.clock,
    )
    with pytest.raises(AssignmentBusy) as busy:
        raced.regrade("c", assignment.id, rubric="y")
    assert str(busy.value) == "another regrade of this assignment started first"
    stored = world.stored(assignment.id)
    assert (stored.round, stored.expected, stored.rubric.version) == (1, 1, 1)
    assert world.in_round(assignment, 1) == []


class Sweep:
    """The assignment store, noting the limit the sweep asks for."""

    def __init__(self, store: SqliteAssignmentStore) -> None:
        self._store = store
        self.limits: list[int] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)

    def waiting_regrades(self, limit: int) -> list[Assignment]:
        self.limits.append(limit)
        return self._store.waiting_regrades(limit)


def test_the_sweep_goes_on_past_a_regrade_it_could_not_resume(tmp_path: Path) -> None:
    world = World(tmp_path, AdmissionLimits(per_client=1, backlog=100, retry_after_s=7))
    first, _ = world.graded_class(2, "a")
    world.regrader.regrade("c", first.id, rubric="y")
    second, _ = world.graded_class(2, "b")
    with pytest.raises(TooManyActiveJobs):
        world.regrader.regrade("c", second.id, rubric="y")
    calls: list[str] = []

    def fail_first(assignment_id: str, client_id: str, round_: int) -> bool:
        calls.append(assignment_id)
        if len(calls) == 1:
            raise DependencyUnavailable("the round check is down")
        return False

    sweep = Sweep(world.store)
    regrader = Regrader(
        world.service,
        sweep,  # type: ignore[arg-type]
        world.jobs,
        world.queue,
        world.clock,
        fail_first,
        limits=AdmissionLimits(per_client=1, backlog=100, retry_after_s=7),
    )
    assert regrader.resume_waiting() == calls[1:]
    assert sorted(calls) == sorted([first.id, second.id])
    assert sweep.limits == [100]
