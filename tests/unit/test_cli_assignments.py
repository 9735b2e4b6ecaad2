"""`gradeq assignments` against a real intake over HTTP (embedded store, recording queue)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.domain.grade import GradeResult
from tests.fakes import FakeTaskQueue
from tests.unit.test_cli import as_json, gradeq, url  # noqa: F401

LEASE = timedelta(seconds=30)


def grade_all(adapters: Adapters, clock: FrozenClock, score: float = 7.0) -> None:
    queue = adapters.queue
    assert isinstance(queue, FakeTaskQueue)
    result = GradeResult(score, 10.0, "fine", ({"criterion": "light", "met": True},), "g")
    for task in queue.tasks:
        adapters.store.update(task.job_id, lambda j: j.claim("w", clock.now(), LEASE))
        adapters.store.update(task.job_id, lambda j: j.succeed("w", result, clock.now()))


def test_a_class_is_created_submitted_watched_and_exported(
    url: str,  # noqa: F811
    tmp_path: Path,
    adapters: Adapters,
    clock: FrozenClock,
) -> None:
    spec = tmp_path / "assignment.json"
    spec.write_text(json.dumps({"title": "Essay", "rubric": ["light"], "max_score": 10}))
    created = gradeq(url, "assignments", "create", str(spec), "--json")
    assert created.exit_code == 0, created.output
    assignment_id = as_json(created)["id"]
    answers = tmp_path / "answers.jsonl"
    answers.write_text(
        "\n".join(json.dumps({"submission_id": f"s{i}", "answer": f"a {i}"}) for i in range(3))
    )
    submitted = gradeq(url, "assignments", "submit-batch", assignment_id, str(answers), "--json")
    assert submitted.exit_code == 0, submitted.output
    assert as_json(submitted)["accepted"] == 3
    again = gradeq(url, "assignments", "submit-batch", assignment_id, str(answers), "--json")
    assert (as_json(again)["accepted"], as_json(again)["existing"]) == (0, 3)

    grade_all(adapters, clock)
    watched = gradeq(url, "assignments", "watch", assignment_id, "--timeout", "5", "--json")
    assert watched.exit_code == 0, watched.output
    assert as_json(watched)["progress"]["done"] is True
    assert as_json(watched)["progress"]["mean_score"] == 7.0

    sheet = gradeq(url, "assignments", "grades", assignment_id, "--csv")
    assert sheet.exit_code == 0, sheet.output
    lines = sheet.stdout.splitlines()
    assert lines[0].startswith("student_id,submission_id,job_id,status,final_score")
    assert sorted(line.split(",")[1] for line in lines[1:]) == ["s0", "s1", "s2"]
    listed = gradeq(url, "assignments", "list", "--json")
    assert [a["id"] for a in as_json(listed)] == [assignment_id]


def test_an_unknown_assignment_exits_5_with_its_problem_type(url: str) -> None:  # noqa: F811
    result = gradeq(url, "assignments", "get", "a-nope", "--json")
    assert result.exit_code == 5
    assert as_json(result)["error"]["type"] == "assignment-not-found"
