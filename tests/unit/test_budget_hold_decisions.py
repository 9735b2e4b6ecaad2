"""A job held by a spent budget when the queue cannot take its new task: the claim is given
back uncounted, nothing is graded, and the answer is 429 with Retry-After, so the queue
retries this task later."""

from __future__ import annotations

import dataclasses

from services.worker.app import create_app as create_worker
from shared.adapters.embedded.budget_store import SqliteBudgetStore
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.budgets import Budget, BudgetScope
from shared.domain.status import JobStatus
from tests.fakes import FakeTaskQueue
from tests.unit.test_budgets import CostlyGrader, budgets, clock, with_budgets  # noqa: F401
from tests.unit.test_worker_api import deliver, seed


def test_a_held_job_the_queue_cannot_defer_is_answered_throttled(
    settings: Settings,
    with_budgets: Adapters,  # noqa: F811
    budgets: SqliteBudgetStore,  # noqa: F811
    clock: FrozenClock,  # noqa: F811
) -> None:
    budgets.set_budget(Budget(BudgetScope.CLIENT, "client-a", 0))
    down = dataclasses.replace(with_budgets, queue=FakeTaskQueue(available=False))
    grader = CostlyGrader(10)
    worker = create_worker(settings, down, grader, clock).test_client()
    job_id = seed(down, clock, "held")
    reply = deliver(worker, job_id)
    assert reply.status_code == 429 and int(reply.headers["Retry-After"]) >= 1
    job = down.store.get(job_id)
    assert job is not None and job.status is JobStatus.RETRYING
    assert (job.attempts, grader.calls) == (0, 0)
