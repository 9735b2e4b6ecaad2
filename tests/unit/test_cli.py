"""The `gradeq` CLI against a real intake over HTTP (embedded store, recording queue)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import requests_mock
from pydantic import SecretStr
from typer.testing import CliRunner, Result
from werkzeug.serving import make_server

from gradeq.cli.app import app
from gradeq.cli.config import DEFAULT_URL, resolve
from services.intake.app import create_app
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.grade import GradeResult
from shared.domain.ids import task_name_for
from shared.domain.job import JobError
from shared.domain.status import JobStatus
from tests.fakes import FakeTaskQueue
from tests.unit.conftest import API_KEY

OPERATOR_KEY = "cli-operator-key"
LEASE = timedelta(seconds=30)
REQUEST = {
    "submission_id": "sub-1",
    "answer": "Plants use photosynthesis.",
    "rubric": ["mentions photosynthesis"],
    "max_score": 10,
}


@pytest.fixture
def url(settings: Settings, adapters: Adapters, clock: FrozenClock) -> Iterator[str]:
    operator = settings.model_copy(update={"operator_keys": SecretStr(f"ops={OPERATOR_KEY}")})
    server = make_server("127.0.0.1", 0, create_app(operator, adapters, clock), threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    thread.join()


@pytest.fixture
def request_file(tmp_path: Path) -> Path:
    path = tmp_path / "request.json"
    path.write_text(json.dumps(REQUEST))
    return path


def gradeq(url: str, *args: str, operator: bool = True, stdin: str | None = None) -> Result:
    env = {"GRADEQ_URL": url, "GRADEQ_API_KEY": API_KEY, "GRADEQ_CONFIG": "/nonexistent"}
    if operator:
        env["GRADEQ_OPERATOR_KEY"] = OPERATOR_KEY
    return CliRunner().invoke(app, list(args), env=env, input=stdin)


def as_json(result: Result) -> Any:
    return json.loads(result.stdout)


def submitted(url: str, request_file: Path, key: str = "k-1") -> str:
    result = gradeq(url, "submit", str(request_file), "--idempotency-key", key, "--json")
    assert result.exit_code == 0, result.output
    job_id: str = as_json(result)["job"]["id"]
    return job_id


def fail(adapters: Adapters, clock: FrozenClock, job_id: str) -> None:
    error = JobError("grading-permanent", "refused")
    adapters.store.update(job_id, lambda j: j.claim("w", clock.now(), LEASE))
    adapters.store.update(job_id, lambda j: j.fail("w", error, clock.now()))
    adapters.store.update(job_id, lambda j: j.mark_event_published(clock.now()))


# --- submit and status -----------------------------------------------------------------


def test_submit_generates_a_key_prints_it_and_a_resubmit_with_it_is_the_same_job(
    url: str, request_file: Path
) -> None:
    first = gradeq(url, "submit", str(request_file), "--json")
    assert first.exit_code == 0, first.output
    body = as_json(first)
    assert body["idempotency_key"].startswith("cli-")
    assert body["replayed"] is False
    assert body["job"]["status"] == "PENDING"
    again = gradeq(
        url, "submit", str(request_file), "--idempotency-key", body["idempotency_key"], "--json"
    )
    assert as_json(again)["job"]["id"] == body["job"]["id"]
    assert as_json(again)["replayed"] is True
    human = gradeq(url, "submit", str(request_file))
    assert human.exit_code == 0
    assert "Idempotency-Key: cli-" in human.stderr
    assert "submitted: job" in human.stdout


def test_submit_reads_stdin_and_refuses_what_is_not_json(url: str) -> None:
    result = gradeq(url, "submit", "-", "--json", stdin=json.dumps(REQUEST))
    assert result.exit_code == 0, result.output
    bad = gradeq(url, "submit", "-", "--json", stdin="not json")
    assert bad.exit_code == 2
    assert as_json(bad)["error"]["type"] == "invalid-input"


def test_a_retried_submit_reuses_its_idempotency_key() -> None:
    with requests_mock.Mocker() as mock:
        mock.post(
            "http://127.0.0.1:9/v1/grading-jobs",
            [
                {"status_code": 503, "headers": {"Retry-After": "0"}, "json": {}},
                {"status_code": 202, "json": {"id": "j1", "status": "PENDING"}},
            ],
        )
        result = gradeq("http://127.0.0.1:9", "submit", "-", "--json", stdin=json.dumps(REQUEST))
        keys = [r.headers["Idempotency-Key"] for r in mock.request_history]
    assert result.exit_code == 0, result.output
    assert len(keys) == 2 and keys[0] == keys[1] == as_json(result)["idempotency_key"]


def test_status_exit_codes_follow_the_job(
    url: str, request_file: Path, adapters: Adapters, clock: FrozenClock
) -> None:
    pending = submitted(url, request_file, "p")
    assert gradeq(url, "status", pending).exit_code == 0
    done = submitted(url, request_file, "d")
    adapters.store.update(done, lambda j: j.claim("w", clock.now(), LEASE))
    adapters.store.update(done, lambda j: j.succeed("w", GradeResult(9, 10, "ok"), clock.now()))
    result = gradeq(url, "status", done, "--watch", "--json")
    assert result.exit_code == 0
    assert as_json(result)["status"] == "SUCCEEDED"
    broken = submitted(url, request_file, "f")
    fail(adapters, clock, broken)
    failed = gradeq(url, "status", broken)
    assert failed.exit_code == 3
    assert "grading-permanent" in failed.stderr
    gone = gradeq(url, "status", "nope", "--json")
    assert gone.exit_code == 5
    assert as_json(gone)["error"]["type"] == "job-not-found"


def test_status_watch_follows_the_job_until_it_is_final(
    url: str, request_file: Path, adapters: Adapters, clock: FrozenClock
) -> None:
    job_id = submitted(url, request_file)

    def finish_soon() -> None:
        adapters.store.update(job_id, lambda j: j.claim("w", clock.now(), LEASE))
        adapters.store.update(job_id, lambda j: j.fail("w", JobError("x", "y"), clock.now()))

    timer = threading.Timer(0.5, finish_soon)
    timer.start()
    result = gradeq(url, "status", job_id, "--watch")
    timer.join()
    assert result.exit_code == 3, result.output
    assert "FAILED" in result.stdout


def test_watch_gives_up_after_its_timeout(url: str, request_file: Path) -> None:
    job_id = submitted(url, request_file)
    result = gradeq(url, "status", job_id, "--watch", "--timeout", "0", "--json")
    assert result.exit_code == 7
    assert as_json(result)["error"]["type"] == "watch-timeout"


# --- operator commands -----------------------------------------------------------------


def test_list_and_failed_show_jobs_across_clients(
    url: str, request_file: Path, adapters: Adapters, clock: FrozenClock
) -> None:
    ok = submitted(url, request_file, "a")
    broken = submitted(url, request_file, "b")
    fail(adapters, clock, broken)
    listed = as_json(gradeq(url, "list", "--json"))
    assert {j["id"] for j in listed["jobs"]} == {ok, broken}
    only_failed = as_json(gradeq(url, "list", "--status", "failed", "--json"))
    assert [j["id"] for j in only_failed["jobs"]] == [broken]
    dead = as_json(gradeq(url, "failed", "--json"))
    assert [j["id"] for j in dead["jobs"]] == [broken]
    assert dead["jobs"][0]["last_error"]["type"] == "grading-permanent"
    human = gradeq(url, "failed")
    assert human.exit_code == 0 and broken in human.stdout


def test_operator_commands_need_an_operator_key(url: str) -> None:
    missing = gradeq(url, "list", "--json", operator=False)
    assert missing.exit_code == 2
    assert as_json(missing)["error"]["type"] == "missing-credential"
    env = {"GRADEQ_URL": url, "GRADEQ_OPERATOR_KEY": API_KEY, "GRADEQ_CONFIG": "/nonexistent"}
    refused = CliRunner().invoke(app, ["stats", "--json"], env=env)
    assert refused.exit_code == 5
    assert as_json(refused)["error"]["type"] == "operator-credential-required"


def test_replay_twice_makes_one_new_generation(
    url: str, request_file: Path, adapters: Adapters, clock: FrozenClock
) -> None:
    job_id = submitted(url, request_file)
    fail(adapters, clock, job_id)
    first = gradeq(url, "replay", job_id)
    assert first.exit_code == 0, first.output
    assert "replayed: job" in first.stdout and "PENDING (generation 1)" in first.stdout
    second = gradeq(url, "replay", job_id, "--json")
    assert as_json(second)["replayed"] is False
    job = adapters.store.get(job_id)
    assert job is not None and job.generation == 1 and job.status is JobStatus.PENDING
    assert isinstance(adapters.queue, FakeTaskQueue)
    assert task_name_for(job_id, 1) in [t.name for t in adapters.queue.tasks]


def test_replay_all_failed_and_its_usage(
    url: str, request_file: Path, adapters: Adapters, clock: FrozenClock
) -> None:
    jobs = [submitted(url, request_file, f"k{n}") for n in range(2)]
    for job_id in jobs:
        fail(adapters, clock, job_id)
    result = gradeq(url, "replay", "--all-failed", "--json")
    assert sorted(as_json(result)["replayed"]) == sorted(jobs)
    assert gradeq(url, "replay").exit_code == 2
    assert gradeq(url, "replay", jobs[0], "--all-failed").exit_code == 2


def test_cancel_as_operator_and_as_client(url: str, request_file: Path) -> None:
    by_ops = submitted(url, request_file, "o")
    assert as_json(gradeq(url, "cancel", by_ops, "--json"))["status"] == "CANCELLED"
    by_client = submitted(url, request_file, "c")
    result = gradeq(url, "cancel", by_client, "--json", operator=False)
    assert as_json(result)["status"] == "CANCELLED"
    again = gradeq(url, "cancel", by_client, "--json")
    assert again.exit_code == 5 and as_json(again)["error"]["type"] == "job-already-final"


def test_stats_reports_queue_health(url: str, request_file: Path) -> None:
    submitted(url, request_file)
    body = as_json(gradeq(url, "stats", "--json", "--window", "30"))
    assert body["counts"]["PENDING"] == 1
    assert body["window_s"] == 1800
    human = gradeq(url, "stats")
    assert human.exit_code == 0 and "PENDING" in human.stdout and "throughput" in human.stdout


def test_an_unreachable_intake_exits_6() -> None:
    result = gradeq("http://127.0.0.1:9", "--retries", "1", "stats", "--json")
    assert result.exit_code == 6
    assert as_json(result)["error"]["type"] == "unreachable"


def test_config_file_fills_what_flags_and_environment_leave_open(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('url = "http://127.0.0.1:7000/"\napi_key = "from-file"\n')
    target = resolve(None, None, "ops-flag", path)
    assert (target.url, target.api_key, target.operator_key) == (
        "http://127.0.0.1:7000",
        "from-file",
        "ops-flag",
    )
    assert resolve("http://127.0.0.1:1", "flag", None, path).api_key == "flag"
    assert resolve(None, None, None, tmp_path / "absent.toml").url == DEFAULT_URL
