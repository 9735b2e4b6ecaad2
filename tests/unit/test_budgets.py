"""Budgets per client and per assignment per month: new submissions refused past the hard
limit (429 budget-exhausted naming the budget), queued work held uncounted and resumed
when the budget is raised or the month ends, each grading's cost counted once, and the
soft-limit alert."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from services.intake.app import create_app as create_intake
from services.worker.app import create_app as create_worker
from shared.adapters.embedded.budget_store import SqliteBudgetStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.budgets import Budget, BudgetScope, next_month_start
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest
from shared.domain.status import JobStatus
from shared.service_layer.budgets import HOLD_RECHECK, SOFT_LIMIT_MESSAGE
from tests.fakes import FakeTaskQueue
from tests.unit.test_intake_api import BODY, assert_problem, post
from tests.unit.test_worker_api import deliver, seed

NOW = datetime(2026, 12, 20, 12, tzinfo=UTC)


class CostlyGrader:
    """Grades every answer at a fixed cost, as a model grader with a price table does."""

    name = "costly"

    def __init__(self, cost: int) -> None:
        self.cost = cost
        self.calls = 0

    def grade(self, request: GradingRequest, *, attempt: int, timeout_s: float) -> GradeResult:
        self.calls += 1
        usage = {"input_tokens": 2000, "cached_input_tokens": 1500, "cost_micro_usd": self.cost}
        return GradeResult(5, request.max_score, "ok", model="m", usage=usage)


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(NOW)


@pytest.fixture
def budgets(settings: Settings) -> SqliteBudgetStore:
    return SqliteBudgetStore(SqliteDatabase(settings.database_path))


@pytest.fixture
def with_budgets(adapters: Adapters, budgets: SqliteBudgetStore) -> Adapters:
    return dataclasses.replace(adapters, budgets=budgets)


def _tasks(adapters: Adapters) -> FakeTaskQueue:
    assert isinstance(adapters.queue, FakeTaskQueue)
    return adapters.queue


def test_past_the_hard_limit_a_new_submission_is_refused_with_the_budget(
    settings: Settings, with_budgets: Adapters, budgets: SqliteBudgetStore, clock: FrozenClock
) -> None:
    client = create_intake(settings, with_budgets, clock).test_client()
    assert post(client, key="before").status_code == 202  # a budget not yet spent
    budgets.set_budget(Budget(BudgetScope.CLIENT, "client-a", 1000, 800))
    worker = create_worker(settings, with_budgets, CostlyGrader(1000), clock).test_client()
    [task] = _tasks(with_budgets).tasks
    assert deliver(worker, task.job_id).status_code == 200  # spends the whole budget
    clock.advance(timedelta(minutes=2))  # past the gate's refresh

    refused = post(client, key="after")
    body = assert_problem(refused, 429, "budget-exhausted")
    assert body["budget"] == {
        "scope": "client",
        "key": "client-a",
        "hard_micro_usd": 1000,
        "soft_micro_usd": 800,
        "month": "2026-12",
        "spent_micro_usd": 1000,
        "exhausted": True,
        "past_soft": True,
    }
    until_january = next_month_start(clock.now()) - clock.now()
    assert int(refused.headers["Retry-After"]) == int(until_january.total_seconds())
    # The job accepted before is still answered to its retried request; another client's
    # submissions are not refused.
    assert post(client, key="before").status_code in (200, 202)
    assert post(client, key="other", api_key=_other_key()).status_code == 202


def _other_key() -> str:
    from tests.unit.conftest import OTHER_KEY

    return OTHER_KEY


def test_an_assignment_budget_refuses_only_that_assignment(
    settings: Settings, with_budgets: Adapters, budgets: SqliteBudgetStore, clock: FrozenClock
) -> None:
    budgets.set_budget(Budget(BudgetScope.ASSIGNMENT, "hw-1", 0))
    client = create_intake(settings, with_budgets, clock).test_client()
    body = assert_problem(post(client, key="a"), 429, "budget-exhausted")
    assert body["budget"]["scope"] == "assignment" and body["budget"]["key"] == "hw-1"
    assert post(client, {**BODY, "assignment_id": "hw-2"}, key="b").status_code == 202


def test_queued_work_past_the_hard_limit_is_held_uncounted_then_resumed(
    settings: Settings, with_budgets: Adapters, budgets: SqliteBudgetStore, clock: FrozenClock
) -> None:
    budgets.set_budget(Budget(BudgetScope.CLIENT, "client-a", 500))
    grader = CostlyGrader(500)
    worker = create_worker(settings, with_budgets, grader, clock).test_client()
    first, second = seed(with_budgets, clock, "one"), seed(with_budgets, clock, "two")
    assert deliver(worker, first).status_code == 200
    assert deliver(worker, second).status_code == 200
    held = with_budgets.store.get(second)
    # Nothing sent, no attempt spent, not failed: a new task carries the job later.
    assert grader.calls == 1
    assert held is not None and held.status is JobStatus.RETRYING
    assert held.attempts == 0 and held.deferrals == 1 and held.error is None
    task = _tasks(with_budgets).tasks[-1]
    assert task.job_id == second and task.schedule_time == clock.now() + HOLD_RECHECK

    # Still spent at the recheck: held again.
    clock.advance(HOLD_RECHECK)
    assert deliver(worker, second, 0, **{"X-CloudTasks-TaskName": task.name}).status_code == 200
    held = with_budgets.store.get(second)
    assert held is not None and held.deferrals == 2 and grader.calls == 1

    # The budget is raised: the next delivery grades the job.
    budgets.set_budget(Budget(BudgetScope.CLIENT, "client-a", 5000))
    clock.advance(HOLD_RECHECK)
    task = _tasks(with_budgets).tasks[-1]
    assert deliver(worker, second, 0, **{"X-CloudTasks-TaskName": task.name}).status_code == 200
    done = with_budgets.store.get(second)
    assert done is not None and done.status is JobStatus.SUCCEEDED and done.attempts == 1
    assert budgets.spent(BudgetScope.CLIENT, "client-a", "2026-12") == 1000


def test_a_hold_near_the_month_end_resumes_with_the_new_month(
    settings: Settings, with_budgets: Adapters, budgets: SqliteBudgetStore
) -> None:
    clock = FrozenClock(datetime(2026, 12, 31, 23, 55, tzinfo=UTC))
    budgets.set_budget(Budget(BudgetScope.CLIENT, "client-a", 10))
    worker = create_worker(settings, with_budgets, CostlyGrader(10), clock).test_client()
    spends, waits = seed(with_budgets, clock, "spends"), seed(with_budgets, clock, "waits")
    assert deliver(worker, spends).status_code == 200
    assert deliver(worker, waits).status_code == 200
    task = _tasks(with_budgets).tasks[-1]
    # Due at the new month (sooner than the usual recheck).
    assert task.job_id == waits and task.schedule_time == datetime(2027, 1, 1, tzinfo=UTC)
    clock.advance(timedelta(minutes=5))
    assert deliver(worker, waits, 0, **{"X-CloudTasks-TaskName": task.name}).status_code == 200
    job = with_budgets.store.get(waits)
    assert job is not None and job.status is JobStatus.SUCCEEDED
    assert budgets.spent(BudgetScope.CLIENT, "client-a", "2027-01") == 10


def test_a_grading_is_counted_once_and_the_soft_limit_alerts_once(
    settings: Settings,
    with_budgets: Adapters,
    budgets: SqliteBudgetStore,
    clock: FrozenClock,
    capsys: pytest.CaptureFixture[str],
) -> None:
    budgets.set_budget(Budget(BudgetScope.CLIENT, "client-a", 10_000, 1000))
    worker = create_worker(settings, with_budgets, CostlyGrader(400), clock).test_client()
    for key in ("a", "b", "c", "d"):
        job_id = seed(with_budgets, clock, key)
        assert deliver(worker, job_id).status_code == 200
        assert deliver(worker, job_id).status_code == 200  # delivered again: already final
    assert budgets.spent(BudgetScope.CLIENT, "client-a", "2026-12") == 1600
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line]
    alerts: list[Any] = [line for line in lines if line["message"] == SOFT_LIMIT_MESSAGE]
    assert len(alerts) == 1  # 800 -> 1200 crossed 1000; 1200 -> 1600 did not cross it again
    [alert] = alerts
    assert alert["severity"] == "WARNING" and alert["event"] == "budget_soft_limit"
    assert alert["key"] == "client-a" and alert["spent_micro_usd"] == 1200
    assert alert["soft_micro_usd"] == 1000 and alert["job_id"]


def test_a_batch_of_answers_to_an_assignment_past_its_budget_is_refused_whole(
    settings: Settings, with_budgets: Adapters, budgets: SqliteBudgetStore, clock: FrozenClock
) -> None:
    from tests.unit.test_assignments_api import answers, create, submit

    client = create_intake(settings, with_budgets, clock).test_client()
    created = create(client)
    assert created.status_code == 201
    assignment_id = created.get_json()["id"]
    assert submit(client, assignment_id, answers(2)).status_code == 200
    budgets.set_budget(Budget(BudgetScope.ASSIGNMENT, assignment_id, 0))
    clock.advance(timedelta(minutes=2))
    body = assert_problem(submit(client, assignment_id, answers(3)), 429, "budget-exhausted")
    assert body["budget"]["key"] == assignment_id and body["budget"]["hard_micro_usd"] == 0
    assert len(_tasks(with_budgets).tasks) == 2  # nothing of the refused batch was queued


def test_terraform_alerts_on_the_soft_limit_event_the_worker_logs() -> None:
    from tests.infra import tfconfig

    alert = tfconfig.load().modules["budget_soft_limit_alert"]
    assert alert["source"] == "./modules/log_alert"
    assert 'jsonPayload.event = \\"budget_soft_limit\\"' in alert["log_filter"] or (
        'jsonPayload.event = "budget_soft_limit"' in alert["log_filter"]
    )
    assert "${local.worker_revisions}" in alert["log_filter"]


def test_the_hold_recheck_and_the_refresh_are_settings(
    settings: Settings, with_budgets: Adapters, budgets: SqliteBudgetStore, clock: FrozenClock
) -> None:
    tuned = settings.model_copy(update={"budget_hold_recheck_s": 2.5, "budget_refresh_s": 1.0})
    budgets.set_budget(Budget(BudgetScope.CLIENT, "client-a", 0))
    grader = CostlyGrader(10)
    worker = create_worker(tuned, with_budgets, grader, clock).test_client()
    job_id = seed(with_budgets, clock, "held")
    assert deliver(worker, job_id).status_code == 200
    task = _tasks(with_budgets).tasks[-1]
    assert task.job_id == job_id and task.schedule_time == clock.now() + timedelta(seconds=2.5)

    # Raised: seen after one refresh (a second here), so the look after it grades the job.
    budgets.set_budget(Budget(BudgetScope.CLIENT, "client-a", 5000))
    clock.advance(timedelta(seconds=2.5))
    assert deliver(worker, job_id, 0, **{"X-CloudTasks-TaskName": task.name}).status_code == 200
    done = with_budgets.store.get(job_id)
    assert done is not None and done.status is JobStatus.SUCCEEDED and grader.calls == 1


def test_the_budget_durations_default_and_are_validated(tmp_path: Path) -> None:
    defaults = Settings(data_dir=tmp_path)
    assert defaults.budget_hold_recheck_s == HOLD_RECHECK.total_seconds() == 900
    assert defaults.budget_refresh_s == 60
    for bad in ({"budget_hold_recheck_s": 0}, {"budget_hold_recheck_s": -1},
                {"budget_hold_recheck_s": 31 * 24 * 3600}, {"budget_refresh_s": 0}):  # fmt: skip
        with pytest.raises(ValidationError):
            Settings(data_dir=tmp_path, **bad)  # type: ignore[arg-type]


def test_the_hold_recheck_is_read_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GRADEQ_BUDGET_HOLD_RECHECK_S", "4")
    monkeypatch.setenv("GRADEQ_BUDGET_REFRESH_S", "0.5")
    settings = Settings(data_dir=tmp_path)
    assert (settings.budget_hold_recheck_s, settings.budget_refresh_s) == (4, 0.5)


def test_a_held_job_shows_the_hold_until_it_is_graded(
    settings: Settings, with_budgets: Adapters, budgets: SqliteBudgetStore, clock: FrozenClock
) -> None:
    from tests.unit.conftest import API_KEY

    auth = {"Authorization": f"Bearer {API_KEY}"}
    budgets.set_budget(Budget(BudgetScope.CLIENT, "client-a", 0))
    intake = create_intake(settings, with_budgets, clock).test_client()
    worker = create_worker(settings, with_budgets, CostlyGrader(10), clock).test_client()
    job_id = seed(with_budgets, clock, "held")
    assert "waiting" not in intake.get(f"/v1/grading-jobs/{job_id}", headers=auth).get_json()
    first = clock.now()
    assert deliver(worker, job_id).status_code == 200
    clock.advance(HOLD_RECHECK)
    task = _tasks(with_budgets).tasks[-1]
    assert deliver(worker, job_id, 0, **{"X-CloudTasks-TaskName": task.name}).status_code == 200

    view = intake.get(f"/v1/grading-jobs/{job_id}", headers=auth).get_json()
    since = first.isoformat().replace("+00:00", "Z")
    assert view["status"] == "RETRYING" and view["attempts"] == 0 and "error" not in view
    assert view["waiting"] == {"kind": "budget-hold", "since": since}  # the first hold's
    stored = with_budgets.store.get(job_id)
    assert stored is not None and stored.held_since == first and stored.deferrals == 2

    budgets.set_budget(Budget(BudgetScope.CLIENT, "client-a", 5000))
    clock.advance(HOLD_RECHECK)
    task = _tasks(with_budgets).tasks[-1]
    assert deliver(worker, job_id, 0, **{"X-CloudTasks-TaskName": task.name}).status_code == 200
    view = intake.get(f"/v1/grading-jobs/{job_id}", headers=auth).get_json()
    assert view["status"] == "SUCCEEDED" and "waiting" not in view
