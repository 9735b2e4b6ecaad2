"""The assignment service's decisions: who may change an assignment, the cursor a page of
assignments ends with, and what a batch accepts, finds again or refuses."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

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
from shared.domain.authorization import Action, Forbidden, Principal, Role, authorize
from shared.domain.errors import (
    AssignmentNotFound,
    DependencyUnavailable,
    IdempotencyConflict,
    TooManyActiveJobs,
    ValidationFailed,
)
from shared.domain.ids import task_name_for
from shared.domain.job import Job
from shared.domain.status import JobStatus
from shared.domain.uploads import FileRef
from shared.ports import JobCursor, JobFilter, TaskSpec
from shared.service_layer.assignments import (
    MAX_BATCH,
    Answer,
    AssignmentService,
    ItemResult,
    ItemStatus,
)
from shared.service_layer.intake import decode_cursor
from shared.service_layer.regrade_requests import REQUESTS_UNTIL
from tests.fakes import FakeTaskQueue

#: A moment with microseconds: a page cursor then needs base64 padding, which it drops.
T0 = datetime(2026, 3, 1, 8, 30, 15, 123456, tzinfo=UTC)
REVIEWER = Principal("c", "r1", Role.REVIEWER)
TEACHER = Principal("c", "t1", Role.TEACHER)


class World:
    def __init__(
        self,
        tmp_path: Path,
        limits: AdmissionLimits | None = None,
        queue: Any = None,
        **options: Any,
    ) -> None:
        db = SqliteDatabase(tmp_path / "g.sqlite3")
        self.jobs = SqliteJobStore(db, on_write=SqliteTally(db).record)
        self.store = SqliteAssignmentStore(db)
        self.queue = queue or FakeTaskQueue()
        self.clock = FrozenClock(T0)
        self.service = AssignmentService(
            self.store,
            self.jobs,
            SqliteJobBatch(db, self.jobs),
            self.queue,
            self.clock,
            limits,
            **options,
        )


def answered(results: list[ItemResult]) -> list[tuple[str, ItemStatus]]:
    """Each item of a batch's answer: its submission id and status."""
    return [(r.submission_id, r.status) for r in results]


def test_a_reviewer_may_read_an_assignment_but_not_change_it(tmp_path: Path) -> None:
    world = World(tmp_path)
    assignment, _ = world.service.create("c", "k", "t", "x", 10.0, "v1")
    assert world.service.get(REVIEWER, assignment.id) == assignment
    with pytest.raises(Forbidden):
        world.service.revise(REVIEWER, assignment.id, "y")
    with pytest.raises(Forbidden):
        world.service.set_requests_until(REVIEWER, assignment.id, T0)
    assert world.store.get(assignment.id) == assignment
    revised = world.service.revise(TEACHER, assignment.id, "y")
    assert (revised.rubric.version, revised.rubric.rubric) == (2, "y")
    until = T0 + timedelta(days=7)
    set_ = world.service.set_requests_until(TEACHER, assignment.id, until)
    assert set_.settings == {REQUESTS_UNTIL: until.isoformat()}
    assert world.store.get(assignment.id) == set_


def test_another_schools_assignment_is_as_unknown_as_a_missing_one(tmp_path: Path) -> None:
    world = World(tmp_path)
    assignment, _ = world.service.create("c", "k", "t", "x", 10.0, "v1")
    for caller, assignment_id in (("other", assignment.id), ("c", "a-missing")):
        with pytest.raises(AssignmentNotFound):
            world.service.get(caller, assignment_id)
        with pytest.raises(AssignmentNotFound):
            world.service.revise(caller, assignment_id, "y")
        assert world.service.find(caller, assignment_id) is None
    assert world.service.find("c", assignment.id) == assignment


def test_a_page_of_assignments_ends_with_an_unpadded_cursor_of_its_last(
    tmp_path: Path,
) -> None:
    world = World(tmp_path)
    older, _ = world.service.create("c", "k1", "t", "x", 10.0, "v1")
    world.clock.advance(timedelta(seconds=1))
    newer, _ = world.service.create("c", "k2", "t", "x", 10.0, "v1")
    first = world.service.page("c", 1)
    assert [a.id for a in first.assignments] == [newer.id]
    cursor = first.next_cursor
    assert cursor is not None
    raw = f'["{newer.created_at.isoformat()}","{newer.id}"]'
    assert len(raw) % 3 != 0  # base64 would pad it
    assert "=" not in cursor
    assert base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode() == raw
    assert decode_cursor(cursor) == (newer.created_at, newer.id)
    last = world.service.page("c", 1, cursor)
    assert ([a.id for a in last.assignments], last.next_cursor) == ([older.id], None)


def test_a_retried_create_returns_the_same_and_another_body_conflicts(tmp_path: Path) -> None:
    world = World(tmp_path)
    created, new = world.service.create("c", "k", "t", "x", 10.0, "v1", {"s": 1})
    assert new is True
    world.service.revise("c", created.id, "y")  # a later rubric version is no conflict
    again, new = world.service.create("c", "k", "t", "x", 10.0, "v1", {"s": 1})
    assert new is False and again.id == created.id
    for changed in (
        ("other title", "x", 10.0, {"s": 1}),
        ("t", "z", 10.0, {"s": 1}),
        ("t", "x", 9.0, {"s": 1}),
        ("t", "x", 10.0, {"s": 2}),
    ):
        title, rubric, max_score, settings = changed
        with pytest.raises(IdempotencyConflict) as raised:
            world.service.create("c", "k", title, rubric, max_score, "v1", settings)
        assert str(raised.value) == (
            "this Idempotency-Key was already used with a different assignment"
        )
    with pytest.raises(Forbidden):
        world.service.create(REVIEWER, "k", "t", "x", 10.0, "v1")


def test_an_answers_fingerprint_is_the_hash_of_what_the_client_sent() -> None:
    answer = Answer("s1", "light", {"m": 1}, "https://cb.example/x")
    sent = {
        "answer": "light",
        "callback_url": "https://cb.example/x",
        "metadata": {"m": 1},
        "submission_id": "s1",
    }
    canonical = json.dumps(sent, separators=(",", ":"))
    assert answer.fingerprint() == hashlib.sha256(canonical.encode()).hexdigest()
    with_student = Answer("s1", "light", {"m": 1}, "https://cb.example/x", "st")
    canonical = json.dumps({**sent, "student_id": "st"}, sort_keys=True, separators=(",", ":"))
    assert with_student.fingerprint() == hashlib.sha256(canonical.encode()).hexdigest()
    files = (FileRef("u1", "image/png", 12, "a.png", "obj"),)
    with_files = Answer("s1", "light", {"m": 1}, "https://cb.example/x", files=files)
    sent_files = {**sent, "files": [["u1", "image/png", 12, "a.png"]]}
    canonical = json.dumps(sent_files, sort_keys=True, separators=(",", ":"))
    assert with_files.fingerprint() == hashlib.sha256(canonical.encode()).hexdigest()


def test_a_batch_accepts_new_answers_and_finds_retried_ones(tmp_path: Path) -> None:
    world = World(tmp_path)
    assignment, _ = world.service.create("c", "k", "t", "x", 10.0, "v1")
    first = world.service.submit_batch("c", assignment.id, [Answer("s1", "a1")])
    assert answered(first) == [("s1", ItemStatus.ACCEPTED)]
    results = world.service.submit_batch(
        "c", assignment.id, [Answer("s1", "a1"), Answer("s2", "a2"), Answer("s2", "again")]
    )
    assert answered(results) == [
        ("s1", ItemStatus.EXISTING),
        ("s2", ItemStatus.ACCEPTED),
        ("s2", ItemStatus.REFUSED),
    ]
    assert results[0].job == first[0].job
    assert isinstance(results[2].problem, ValidationFailed) and results[2].job is None
    assert str(results[2].problem) == "the submission id is repeated within the batch"
    [conflict] = world.service.submit_batch("c", assignment.id, [Answer("s1", "other")])
    assert conflict.status is ItemStatus.REFUSED
    assert isinstance(conflict.problem, IdempotencyConflict)
    assert str(conflict.problem) == "this submission id was already used with a different answer"
    assert conflict.job == first[0].job
    assert len(world.queue.tasks) == 2
    job = results[1].job
    assert job is not None and job.status is JobStatus.PENDING
    assert (job.request.assignment_id, job.request.rubric, job.request.max_score) == (
        assignment.id,
        "x",
        10.0,
    )


def test_a_batch_too_large_is_refused_whole(tmp_path: Path) -> None:
    world = World(tmp_path)
    assignment, _ = world.service.create("c", "k", "t", "x", 10.0, "v1")
    answers = [Answer(f"s{i}", "a") for i in range(MAX_BATCH + 1)]
    with pytest.raises(ValidationFailed) as raised:
        world.service.submit_batch("c", assignment.id, answers)
    assert str(raised.value) == "a batch holds at most 1000 answers"
    assert raised.value.extensions["errors"] == [
        {"field": "answers", "message": "at most 1000 items"}
    ]
    assert world.queue.tasks == []


def test_a_batch_past_the_ceiling_keeps_what_fits_and_refuses_the_rest(tmp_path: Path) -> None:
    world = World(tmp_path, AdmissionLimits(per_client=1, backlog=100, retry_after_s=7))
    assignment, _ = world.service.create("c", "k", "t", "x", 10.0, "v1")
    results = world.service.submit_batch("c", assignment.id, [Answer("s1", "a"), Answer("s2", "b")])
    assert [r.status for r in results] == [ItemStatus.ACCEPTED, ItemStatus.REFUSED]
    assert isinstance(results[1].problem, TooManyActiveJobs) and results[1].job is None
    with pytest.raises(TooManyActiveJobs):  # nothing of it fits nor exists
        world.service.submit_batch("c", assignment.id, [Answer("s3", "c")])
    again = world.service.submit_batch("c", assignment.id, [Answer("s1", "a"), Answer("s4", "d")])
    assert [r.status for r in again] == [ItemStatus.EXISTING, ItemStatus.REFUSED]


def test_a_batch_whose_tasks_cannot_be_made_refuses_those_answers(tmp_path: Path) -> None:
    world = World(tmp_path)
    assignment, _ = world.service.create("c", "k", "t", "x", 10.0, "v1")
    world.queue.available = False
    results = world.service.submit_batch("c", assignment.id, [Answer("s1", "a")])
    assert [r.status for r in results] == [ItemStatus.REFUSED]
    assert isinstance(results[0].problem, DependencyUnavailable)
    assert results[0].job is not None  # stored: the retry or the sweep makes its task
    world.queue.available = True
    [retried] = world.service.submit_batch("c", assignment.id, [Answer("s1", "a")])
    assert retried.status is ItemStatus.EXISTING
    assert [t.job_id for t in world.queue.tasks] == [results[0].job.id]


def test_pages_of_grades_walk_every_job_of_the_assignment(tmp_path: Path) -> None:
    world = World(tmp_path)
    assignment, _ = world.service.create("c", "k", "t", "x", 10.0, "v1")
    for i in range(3):
        world.service.submit_batch("c", assignment.id, [Answer(f"s{i}", "a")])
        world.clock.advance(timedelta(seconds=1))
    first = world.service.grades("c", assignment.id, 2)
    assert len(first.jobs) == 2 and first.next_cursor is not None
    rest = world.service.grades("c", assignment.id, 2, first.next_cursor)
    assert len(rest.jobs) == 1 and rest.next_cursor is None
    every = [j.id for j in world.service.all_grades(assignment, page=1)]
    assert every == [j.id for j in (*first.jobs, *rest.jobs)]
    assert len(set(every)) == 3
    progress = world.service.progress("c", assignment.id)
    assert progress.assignment == assignment
    assert (progress.tally.total, progress.tally.counts) == (3, {JobStatus.PENDING: 3})


def test_an_answer_is_graded_under_the_assignments_current_rubric_and_round(
    tmp_path: Path,
) -> None:
    world = World(tmp_path)
    assignment, _ = world.service.create("c", "k", "t", "x", 10.0, "v1", {"posting": "manual"})
    revised = world.service.revise("c", assignment.id, "y")
    files = (FileRef("u1", "image/png", 12, "a.png"),)
    answer = Answer("s1", "light", {"m": 1}, "https://cb.example/x", "st", files)
    request = world.service.request_for(revised, answer)
    assert (request.submission_id, request.answer, request.rubric) == ("s1", "light", "y")
    assert (request.max_score, request.assignment_id) == (10.0, assignment.id)
    assert (request.callback_url, request.metadata) == ("https://cb.example/x", {"m": 1})
    assert (request.student_id, request.files) == ("st", files)
    assert (request.rubric_version, request.prompt_version) == (2, "v1")
    assert (request.assignment_round, request.post_manually) == (0, True)
    automatic, _ = world.service.create("c", "k2", "t", "x", 10.0, "v1")
    assert world.service.request_for(automatic, answer).post_manually is False


@pytest.mark.parametrize("parallelism", [1, 4])
def test_each_accepted_answers_task_is_made_now_under_its_jobs_name(
    tmp_path: Path, parallelism: int
) -> None:
    world = World(tmp_path)
    db = SqliteDatabase(tmp_path / "g.sqlite3")
    service = AssignmentService(
        world.store,
        world.jobs,
        SqliteJobBatch(db, world.jobs),
        world.queue,
        world.clock,
        enqueue_parallelism=parallelism,
    )
    assignment, _ = service.create("c", "k", "t", "x", 10.0, "v1")
    results = service.submit_batch("c", assignment.id, [Answer(f"s{i}", "a") for i in range(3)])
    jobs = [r.job for r in results if r.job is not None]
    assert [r.status for r in results] == [ItemStatus.ACCEPTED] * 3
    assert sorted(world.queue.tasks, key=lambda t: t.job_id) == sorted(
        (TaskSpec(task_name_for(j.id, j.generation), j.id, T0, j.lane) for j in jobs),
        key=lambda t: t.job_id,
    )
    world.queue.available = False
    refused = service.submit_batch("c", assignment.id, [Answer(f"t{i}", "a") for i in range(2)])
    assert [r.status for r in refused] == [ItemStatus.REFUSED] * 2
    assert all(isinstance(r.problem, DependencyUnavailable) for r in refused)


def test_the_grades_are_authorized_as_the_grades_not_as_a_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Today every role that may read an assignment may list its grades; the listing still
    # asks the policy for its own action, so a role that may only read is refused.
    world = World(tmp_path)
    assignment, _ = world.service.create("c", "k", "t", "x", 10.0, "v1")
    asked: list[tuple[Action, Action]] = []

    def recording(principal: Principal, action: Action, *args: Any) -> None:
        asked.append((action, args[2]))
        authorize(principal, action, *args)

    monkeypatch.setattr("shared.service_layer.assignments.authorize", recording)
    assert world.service.grades(REVIEWER, assignment.id, 2).jobs == []
    assert asked == [(Action.ASSIGNMENT_GRADES, Action.ASSIGNMENT_READ)]


def test_a_page_of_grades_holding_the_last_job_has_no_cursor(tmp_path: Path) -> None:
    world = World(tmp_path)
    assignment, _ = world.service.create("c", "k", "t", "x", 10.0, "v1")
    world.service.submit_batch("c", assignment.id, [Answer("s0", "a"), Answer("s1", "b")])
    page = world.service.grades("c", assignment.id, 2)
    assert (len(page.jobs), page.next_cursor) == (2, None)
    assert [j.id for j in world.service.all_grades(assignment, page=2)] == [j.id for j in page.jobs]


def test_the_grades_hold_only_the_assignment_owners_jobs(tmp_path: Path) -> None:
    # A job of another client naming the same assignment id is none of its grades.
    world = World(tmp_path)
    assignment, _ = world.service.create("c", "k", "t", "x", 10.0, "v1")
    [mine] = world.service.submit_batch("c", assignment.id, [Answer("s0", "a")])
    assert mine.job is not None
    world.clock.advance(timedelta(seconds=1))
    foreign = dataclasses.replace(
        mine.job, id="j-foreign", client_id="other", created_at=world.clock.now()
    )
    world.jobs.create(foreign)
    assert world.jobs.get("j-foreign") is not None
    page = world.service.grades("c", assignment.id, 5)
    assert ([j.id for j in page.jobs], page.next_cursor) == ([mine.job.id], None)
    assert [j.id for j in world.service.all_grades(assignment)] == [mine.job.id]


def test_a_page_of_grades_reads_one_job_past_it_and_all_grades_pages_by_200(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The one extra job tells whether another page follows; no more is read.
    world = World(tmp_path)
    assignment, _ = world.service.create("c", "k", "t", "x", 10.0, "v1")
    world.service.submit_batch("c", assignment.id, [Answer("s0", "a")])
    limits: list[int] = []
    find_jobs = world.jobs.find_jobs

    def recording(where: JobFilter, limit: int, after: JobCursor | None = None) -> list[Job]:
        limits.append(limit)
        return find_jobs(where, limit, after)

    monkeypatch.setattr(world.jobs, "find_jobs", recording)
    assert len(world.service.grades("c", assignment.id, 3).jobs) == 1
    assert len(list(world.service.all_grades(assignment))) == 1
    assert limits == [4, 201]


def test_an_assignment_is_its_authors_and_each_school_keys_its_own(tmp_path: Path) -> None:
    world = World(tmp_path)
    mine, _ = world.service.create(TEACHER, "k", "t", "x", 10.0, "v1")
    theirs, created = world.service.create("other", "k", "t", "x", 10.0, "v1")
    assert mine.author == TEACHER.author
    assert created and theirs.id != mine.id  # the same key in another school is new
    assert world.service.get(TEACHER, mine.id) == mine


def test_a_missing_assignment_is_refused_naming_the_id_asked_for(tmp_path: Path) -> None:
    world = World(tmp_path)
    with pytest.raises(AssignmentNotFound) as refused:
        world.service.get("c", "a-missing")
    assert refused.value.detail == "no assignment a-missing"


def test_an_answer_is_graded_out_of_the_assignments_score_in_its_round(tmp_path: Path) -> None:
    world = World(tmp_path)
    assignment, _ = world.service.create("c", "k", "t", "x", 20.0, "v1")
    later = dataclasses.replace(assignment, round=2)
    request = world.service.request_for(later, Answer("s1", "light"))
    assert (request.max_score, request.assignment_round) == (20.0, 2)


def test_an_answer_after_a_repeated_one_is_still_accepted(tmp_path: Path) -> None:
    world = World(tmp_path)
    assignment, _ = world.service.create("c", "k", "t", "x", 10.0, "v1")
    answers = [Answer("s1", "a"), Answer("s1", "b"), Answer("s2", "c")]
    results = world.service.submit_batch("c", assignment.id, answers)
    assert answered(results) == [
        ("s1", ItemStatus.ACCEPTED),
        ("s1", ItemStatus.REFUSED),
        ("s2", ItemStatus.ACCEPTED),
    ]


def test_an_answer_refused_past_the_ceiling_names_its_submission(tmp_path: Path) -> None:
    world = World(tmp_path, AdmissionLimits(per_client=1, backlog=100, retry_after_s=7))
    assignment, _ = world.service.create("c", "k", "t", "x", 10.0, "v1")
    results = world.service.submit_batch("c", assignment.id, [Answer("s1", "a"), Answer("s2", "b")])
    assert answered(results) == [
        ("s1", ItemStatus.ACCEPTED),
        ("s2", ItemStatus.REFUSED),
    ]


def test_an_answer_whose_task_was_not_made_names_its_submission(tmp_path: Path) -> None:
    world = World(tmp_path)
    assignment, _ = world.service.create("c", "k", "t", "x", 10.0, "v1")
    world.queue.available = False
    results = world.service.submit_batch("c", assignment.id, [Answer("s1", "a"), Answer("s2", "b")])
    assert answered(results) == [
        ("s1", ItemStatus.REFUSED),
        ("s2", ItemStatus.REFUSED),
    ]


def test_two_students_submitting_the_same_id_get_a_job_each(tmp_path: Path) -> None:
    world = World(tmp_path)
    assignment, _ = world.service.create("c", "k", "t", "x", 10.0, "v1")
    jobs = []
    for student in ("ada", "bo"):
        [result] = world.service.submit_batch(
            Principal("c", student, Role.STUDENT),
            assignment.id,
            [Answer("s1", f"{student}'s answer")],
            Action.JOB_SUBMIT,
        )
        assert result.status is ItemStatus.ACCEPTED and result.job is not None
        jobs.append(result.job)
    assert jobs[0].id != jobs[1].id
    assert [j.author for j in jobs] == ["ada", "bo"]


class _Budgets:
    """A budget gate that admits everything and writes down whom it was asked about."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str | None]] = []

    def admit(self, client_id: str, assignment_id: str | None) -> None:
        self.asked.append((client_id, assignment_id))


def test_a_batch_is_admitted_against_the_schools_and_the_assignments_budget(
    tmp_path: Path,
) -> None:
    budgets = _Budgets()
    world = World(tmp_path, budgets=budgets)
    assignment, _ = world.service.create(TEACHER, "k", "t", "x", 10.0, "v1")
    world.service.submit_batch(TEACHER, assignment.id, [Answer("s1", "a")])
    assert budgets.asked == [("c", assignment.id)]


class _Commit:
    """A unit of work that writes down whether a block is open."""

    commits_together = True

    def __init__(self) -> None:
        self.open = False

    @contextmanager
    def atomic(self) -> Iterator[None]:
        self.open = True
        try:
            yield
        finally:
            self.open = False


class _WatchedQueue:
    """A task queue that writes down, for each task, whether the commit was open and the
    thread that made it."""

    def __init__(self, commit: _Commit) -> None:
        self._commit = commit
        self.made_in: list[tuple[bool, str]] = []

    def enqueue(self, spec: TaskSpec) -> bool:
        self.made_in.append((self._commit.open, threading.current_thread().name))
        return True


def test_a_batch_makes_its_tasks_inside_the_commit_that_stores_its_jobs(tmp_path: Path) -> None:
    commit = _Commit()
    queue = _WatchedQueue(commit)
    world = World(tmp_path, queue=queue, uow=commit)
    assignment, _ = world.service.create("c", "k", "t", "x", 10.0, "v1")
    world.service.submit_batch("c", assignment.id, [Answer("s1", "a"), Answer("s2", "b")])
    assert [inside for inside, _ in queue.made_in] == [True, True]


@pytest.mark.parametrize(
    ("parallelism", "answers", "pooled"),
    [
        (None, 3, False),  # not asked: one at a time
        (1, 3, False),
        (2, 1, False),
        (4, 1, False),
        (2, 2, True),
        (4, 2, True),
        (4, 3, True),
    ],
)
def test_tasks_are_made_on_a_pool_only_for_two_or_more_with_room_for_two(
    tmp_path: Path, parallelism: int | None, answers: int, pooled: bool
) -> None:
    queue = _WatchedQueue(_Commit())
    asked: dict[str, Any] = {} if parallelism is None else {"enqueue_parallelism": parallelism}
    world = World(tmp_path, queue=queue, **asked)
    assignment, _ = world.service.create("c", "k", "t", "x", 10.0, "v1")
    world.service.submit_batch("c", assignment.id, [Answer(f"s{i}", "a") for i in range(answers)])
    caller = threading.current_thread().name
    assert len(queue.made_in) == answers
    assert all((thread != caller) is pooled for _, thread in queue.made_in)


def test_a_batchs_log_line_counts_the_answers_it_accepted_and_no_other(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    world = World(tmp_path)
    assignment, _ = world.service.create("c", "k", "t", "x", 10.0, "v1")
    world.service.submit_batch("c", assignment.id, [Answer("s1", "a")])
    caplog.set_level(logging.INFO, logger="shared.service_layer.assignments")
    caplog.clear()  # only the next batch's line
    answers = [Answer("s1", "a"), *(Answer(f"s{i}", "b") for i in (2, 3, 4)), Answer("s2", "d")]
    world.service.submit_batch("c", assignment.id, answers)  # found, 3 new, a repeat
    [line] = [r for r in caplog.records if r.getMessage() == "batch accepted"]
    assert (line.answers, line.accepted) == (5, 3)  # type: ignore[attr-defined]
