"""The CLI's human output: whole ids at 80 columns, the regrade's round and its diff."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest, Job
from shared.domain.review import HoldReason, Release, ReviewState, ReviewStatus
from tests.fakes import FakeTaskQueue
from tests.unit.test_cli import as_json, gradeq, url  # noqa: F401
from tests.unit.test_cli_assignments import grade_all
from tests.unit.test_cli_reviews import as_reviewer, settings  # noqa: F401

REASONS = (HoldReason.SAMPLED, HoldReason.LOW_CONFIDENCE)


def _assignment(url: str, tmp_path: Path, n: int, prefix: str = "student-") -> str:  # noqa: F811
    spec = tmp_path / "assignment.json"
    spec.write_text(json.dumps({"title": "Essay", "rubric": ["light"], "max_score": 10}))
    assignment_id: str = as_json(gradeq(url, "assignments", "create", str(spec), "--json"))["id"]
    answers = tmp_path / "answers.json"
    answers.write_text(
        json.dumps([{"submission_id": f"{prefix}{i:02}", "answer": f"a {i}"} for i in range(n)])
    )
    gradeq(url, "assignments", "submit-batch", assignment_id, str(answers), "--json")
    return assignment_id


def test_the_review_queue_shows_whole_job_ids_at_80_columns(
    url: str,  # noqa: F811
    adapters: Adapters,
    clock: FrozenClock,
) -> None:
    now = clock.now()
    ids = [f"{n}mrt6dtmlefkmisxmv2xg4wgjseui75i" for n in range(3)]
    for n, job_id in enumerate(ids):
        request = GradingRequest(f"submission-with-a-long-id-{n}", "an answer", "light", 2)
        job = Job.new(job_id, "client-a", request, "fp", now).claim("w", now, timedelta(30))
        state = ReviewState(ReviewStatus.HELD, REASONS, Release.IMMEDIATELY, now, 0)
        adapters.store.create(job.succeed("w", GradeResult(1, 2, "ok"), now).hold(state))
    listed = as_reviewer(url, "reviews", "list")
    assert max(len(line) for line in listed.stdout.splitlines()) <= 80
    for job_id in ids:
        assert job_id in listed.stdout


def test_the_grades_table_shows_whole_job_ids_at_80_columns(
    url: str,  # noqa: F811
    tmp_path: Path,
    adapters: Adapters,
    clock: FrozenClock,
) -> None:
    assignment_id = _assignment(url, tmp_path, 2, prefix="essay-of-a-student-with-a-long-id-")
    grade_all(adapters, clock)
    lines = gradeq(url, "assignments", "grades", assignment_id, "--json").stdout.splitlines()
    job_ids = [json.loads(line)["id"] for line in lines]
    table = gradeq(url, "assignments", "grades", assignment_id)
    assert table.exit_code == 0, table.output
    assert len(job_ids) == 2 and max(len(line) for line in table.stdout.splitlines()) <= 80
    for job_id in job_ids:
        assert job_id in table.stdout


def _grade(adapters: Adapters, clock: FrozenClock, first_task: int, score: float) -> None:
    """Grade and announce the jobs of the queue's tasks from `first_task` on."""
    queue = adapters.queue
    assert isinstance(queue, FakeTaskQueue)
    result = GradeResult(score, 10.0, "graded", ())
    now = clock.now()
    for task in queue.tasks[first_task:]:
        adapters.store.update(
            task.job_id,
            lambda j: (
                j.claim("w", now, timedelta(30)).succeed("w", result, now).mark_event_published(now)
            ),
        )


def test_regrade_prints_its_round_and_the_report_lists_each_student(
    url: str,  # noqa: F811
    tmp_path: Path,
    adapters: Adapters,
    clock: FrozenClock,
) -> None:
    assignment_id = _assignment(url, tmp_path, 2)
    _grade(adapters, clock, 0, score=7.0)
    before = as_json(gradeq(url, "assignments", "get", assignment_id, "--json"))
    started = gradeq(url, "assignments", "regrade", assignment_id)
    assert started.exit_code == 0, started.output
    assert f"round {before['progress']['round'] + 1}" in started.stdout
    assert "?" not in started.stdout

    _grade(adapters, clock, 2, score=4.0)  # the regrade's tasks
    report = gradeq(url, "assignments", "regrade", assignment_id, "--report")
    assert report.exit_code == 0, report.output
    rows = sorted(line for line in report.stdout.splitlines() if "student-" in line)
    assert len(rows) == 2
    for n, row in enumerate(rows):
        cells = [c.strip() for c in row.strip("│ ").split("│")]
        assert cells == [f"student-{n:02}", "7", "4", "-3", "model", "7->4", "SUCCEEDED"]


def test_post_posts_chosen_grades_then_the_rest_and_the_table_shows_final_grades(
    url: str,  # noqa: F811
    tmp_path: Path,
    adapters: Adapters,
    clock: FrozenClock,
) -> None:
    spec = tmp_path / "assignment.json"
    body = {"title": "Essay", "rubric": ["light"], "max_score": 10, "posting": "manual"}
    spec.write_text(json.dumps(body))
    assignment_id = as_json(gradeq(url, "assignments", "create", str(spec), "--json"))["id"]
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps([{"submission_id": f"s{i}", "answer": "a"} for i in range(2)]))
    gradeq(url, "assignments", "submit-batch", assignment_id, str(answers), "--json")
    _grade(adapters, clock, 0, score=6.0)
    chosen = gradeq(url, "assignments", "post", assignment_id, "--submission", "s1")
    assert chosen.exit_code == 0, chosen.output
    assert "posted 1, already posted 0, not ready 0" in chosen.stdout
    rest = as_json(gradeq(url, "assignments", "post", assignment_id, "--json"))
    assert (rest["posted"], rest["unchanged"]) == (["s0"], ["s1"])
    table = gradeq(url, "assignments", "grades", assignment_id)
    rows = [line for line in table.stdout.splitlines() if "model" in line]
    assert len(rows) == 2 and all(r.split("│")[2].strip() == "6" for r in rows)
