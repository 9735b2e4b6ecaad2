"""What `AssignmentCompletion.on_final` decides, pinned: the round's event names the
job's school, and a round that is done (or still grading) resumes no regrade."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from shared.adapters.embedded.assignment_store import (
    SqliteAssignmentStore,
    SqliteJobBatch,
    SqliteTally,
)
from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.clock import FrozenClock
from shared.domain.events import AssignmentGraded
from shared.domain.grade import GradeResult
from shared.domain.job import Job
from shared.service_layer.assignment_completion import AssignmentCompletion
from shared.service_layer.assignments import Answer, AssignmentService
from tests.fakes import FakePublisher, FakeTaskQueue

T0 = datetime(2026, 12, 1, 12, tzinfo=UTC)


class Round:
    """An assignment of the school "client-a" with its submissions queued for grading."""

    def __init__(self, tmp_path: Path, students: list[str]) -> None:
        db = SqliteDatabase(tmp_path / "g.sqlite3")
        self.jobs = SqliteJobStore(db, on_write=SqliteTally(db).record)
        self.store = SqliteAssignmentStore(db)
        self.queue, self.publisher = FakeTaskQueue(), FakePublisher()
        self.clock = FrozenClock(T0)
        service = AssignmentService(
            self.store, self.jobs, SqliteJobBatch(db, self.jobs), self.queue, self.clock
        )
        self.assignment, _ = service.create("client-a", "k", "t", "x", 10.0, "v1")
        service.submit_batch(
            "client-a", self.assignment.id, [Answer(s, f"answer of {s}") for s in students]
        )
        self.resumed: list[str] = []
        self.completion = AssignmentCompletion(
            self.store, self.publisher, self.clock, resume=self.resumed.append
        )

    def grade(self, job_id: str, score: float) -> Job:
        now = self.clock.now()
        self.jobs.update(job_id, lambda j: j.claim("w", now, timedelta(seconds=30)))
        return self.jobs.update(job_id, lambda j: j.succeed("w", GradeResult(score, 10, ""), now))

    def graded_events(self) -> list[AssignmentGraded]:
        return [e for e in self.publisher.events if isinstance(e, AssignmentGraded)]


def test_the_last_final_job_announces_its_round_under_the_jobs_school(tmp_path: Path) -> None:
    r = Round(tmp_path, ["s1"])
    [task] = r.queue.tasks

    r.completion.on_final(r.grade(task.job_id, 4))

    [graded] = r.graded_events()
    assert (graded.assignment_id, graded.client_id, graded.round) == (
        r.assignment.id,
        "client-a",
        0,
    )
    assert (graded.submissions, graded.succeeded) == (1, 1)


def test_a_round_that_is_done_resumes_no_regrade(tmp_path: Path) -> None:
    r = Round(tmp_path, ["s1"])
    [task] = r.queue.tasks

    r.completion.on_final(r.grade(task.job_id, 4))

    assert len(r.graded_events()) == 1
    assert r.resumed == []


def test_a_round_still_grading_resumes_no_regrade(tmp_path: Path) -> None:
    r = Round(tmp_path, ["s1", "s2"])
    first, _ = r.queue.tasks

    r.completion.on_final(r.grade(first.job_id, 4))

    assert r.graded_events() == []
    assert r.resumed == []
