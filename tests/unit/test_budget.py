"""One time budget: the shipped numbers fit together, and contradictions refuse to start."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from shared.config.budget import CLOUD_RUN_SIGTERM_GRACE_S, RELEASE_MARGIN_S, BudgetError
from shared.config.queues import DEFAULT_QUEUES_FILE, load_queues
from shared.config.settings import Settings
from tests.infra import tfconfig

REPO = Path(__file__).resolve().parents[2]


def test_the_shipped_queue_terraform_and_settings_are_one_consistent_budget() -> None:
    tf = tfconfig.load()
    queue_name = tf.variables["queue"]["default"]
    deadline = load_queues()[queue_name].dispatch_deadline.total_seconds()
    # terraform makes the worker's Cloud Run request timeout the queue's dispatch deadline.
    worker = tfconfig.service(tf, "worker")
    assert worker["request_timeout"] == "${local.dispatch_deadline_s}s"
    assert "local.task_queue.dispatch_deadline" in tf.locals["dispatch_deadline_s"]
    # The durations the worker gets from terraform's variables (GRADEQ_* in main.tf).
    durations = {
        name: float(tf.variables[name]["default"])
        for name in ("grader_timeout_s", "lease_s", "heartbeat_s", "result_write_retry_s")
    }
    assert "local.common_env" in worker["env"]
    for name in durations:
        assert tf.locals["common_env"][f"GRADEQ_{name.upper()}"] == f"${{tostring(var.{name})}}"

    budget = Settings(queue=queue_name, **durations).budget()  # type: ignore[arg-type]
    budget.check(cloud_run_timeout_s=deadline)
    # The shipped numbers of docs/reliability.md's budget table: 45 + 540 + 10 = 595 <= 600.
    assert (budget.lease_s, budget.grader_timeout_s, budget.result_write_retry_s) == (45, 540, 10)
    assert budget.longest_delivery_s == 595 <= deadline == 600

    # A crash is rescued by the next delivery about a minute later, not by the sweep.
    assert budget.rescue_bound_s(0) <= 60
    # Every grader call follows a counted claim; the queue's own attempts are the budget.
    assert budget.worst_case_grader_calls == load_queues()[queue_name].retry_config.max_attempts
    # The container gives gunicorn more than the drain grace to finish and release.
    entrypoint = (REPO / "scripts" / "container-entrypoint.sh").read_text()
    graceful = re.search(r"GRACEFUL_TIMEOUT:-(\d+)", entrypoint)
    assert graceful is not None
    assert budget.drain_grace_s + RELEASE_MARGIN_S <= float(graceful.group(1))
    assert float(graceful.group(1)) <= CLOUD_RUN_SIGTERM_GRACE_S
    # The sweep looks at a job only after a dead attempt's lease is long gone.
    assert budget.sweep_stale.total_seconds() > budget.lease_s


def _queues(tmp_path: Path, **retry: object) -> Path:
    raw = json.loads(DEFAULT_QUEUES_FILE.read_text())
    raw["grading"]["retry_config"].update(retry)
    path = tmp_path / "queues.json"
    path.write_text(json.dumps(raw))
    return path


@pytest.mark.parametrize(
    ("changes", "numbers"),
    [
        ({"heartbeat_s": 30, "lease_s": 45}, ("30s", "45s")),
        ({"grader_timeout_s": 560}, ("560s", "600s")),
        ({"lease_s": 120, "heartbeat_s": 40}, ("120s", "600s")),
        ({"job_max_attempts": 2}, ("(2)", "2 takeovers")),
        ({"job_max_attempts": 7}, ("(7)", "(6)")),
        ({"drain_grace_s": 9}, ("9s", "10s")),
    ],
)
def test_an_inconsistent_configuration_is_refused_naming_both_numbers(
    changes: dict[str, float], numbers: tuple[str, str]
) -> None:
    with pytest.raises(ValueError, match="must") as refused:
        Settings(**changes)  # type: ignore[arg-type]
    assert all(n in str(refused.value) for n in numbers), str(refused.value)


def test_a_queue_without_room_for_two_takeovers_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"max_attempts \(2\) must leave room for 2 takeovers"):
        Settings(queues_file=_queues(tmp_path, max_attempts=2), job_max_attempts=3)


def test_a_cloud_run_timeout_below_the_dispatch_deadline_is_refused() -> None:
    with pytest.raises(BudgetError, match=r"\(300s\).*\(600s\)"):
        Settings().budget().check(cloud_run_timeout_s=300)


def test_renewal_costs_one_write_per_heartbeat() -> None:
    budget = Settings().budget()
    assert budget.renewals_per_minute == 60 / budget.heartbeat_s == 4
