"""`gradeq lanes` and the lanes in `gradeq submit`, `gradeq stats`, against a real intake."""

from __future__ import annotations

from pathlib import Path

from shared.bootstrap import Adapters
from tests.fakes import FakeTaskQueue
from tests.unit.test_cli import as_json, gradeq, request_file, submitted, url  # noqa: F401


def fake(adapters: Adapters) -> FakeTaskQueue:
    assert isinstance(adapters.queue, FakeTaskQueue)
    return adapters.queue


def test_submit_in_a_lane(url: str, request_file: Path, adapters: Adapters) -> None:  # noqa: F811
    result = gradeq(url, "submit", str(request_file), "--lane", "exam", "--json")
    assert result.exit_code == 0, result.output
    assert as_json(result)["job"]["lane"] == "exam"
    assert [t.queue for t in fake(adapters).tasks] == ["exam"]
    human = gradeq(url, "submit", str(request_file), "--lane", "bulk")
    assert "in lane bulk" in human.stdout


def test_pause_resume_and_list(url: str, adapters: Adapters) -> None:  # noqa: F811
    paused = gradeq(url, "lanes", "pause", "bulk")
    assert paused.exit_code == 0 and "lane bulk is paused" in paused.stdout
    assert fake(adapters).paused == {"bulk"}
    listed = as_json(gradeq(url, "lanes", "list", "--json"))["lanes"]
    assert {r["lane"]: r["paused"] for r in listed} == {
        "exam": False,
        "grading": False,
        "bulk": True,
    }
    human = gradeq(url, "lanes", "list")
    assert human.exit_code == 0 and "paused" in human.stdout
    assert "running" in gradeq(url, "lanes", "resume", "bulk").stdout
    assert fake(adapters).paused == set()


def test_purge_asks_first_then_cancels(url: str, request_file: Path, adapters: Adapters) -> None:  # noqa: F811
    job_id = submitted(url, request_file)  # the default lane: grading
    refused = gradeq(url, "lanes", "purge", "grading", stdin="n\n")
    assert refused.exit_code == 2 and fake(adapters).purged == []
    result = gradeq(url, "lanes", "purge", "grading", "--reason", "drill", "--yes", "--json")
    assert result.exit_code == 0, result.output
    assert as_json(result)["cancelled"] == [job_id]
    assert fake(adapters).purged == ["grading"]


def test_an_unknown_lane_exits_with_its_problem(url: str) -> None:  # noqa: F811
    result = gradeq(url, "lanes", "pause", "nope", "--json")
    assert result.exit_code == 5
    assert "lane-not-found" in result.stdout


def test_stats_shows_the_lanes(url: str, request_file: Path) -> None:  # noqa: F811
    submitted(url, request_file)
    body = as_json(gradeq(url, "stats", "--json"))
    assert {r["lane"]: r["backlog"] for r in body["lanes"]}["grading"] == 1
    human = gradeq(url, "stats")
    assert human.exit_code == 0 and "lanes" in human.stdout and "bulk" in human.stdout
