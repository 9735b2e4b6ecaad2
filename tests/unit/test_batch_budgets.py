"""Batch mode and budgets: a provider batch's answer costs its batch price and is charged
to the client's and the assignment's budgets once, as a grading one request at a time is;
a client past its hard budget is held, never gathered into a batch."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from datetime import timedelta

import openai

from shared.adapters.embedded.budget_store import SqliteBudgetStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.adapters.graders.limiter import QuotaShare, RollingLimiter
from shared.adapters.graders.llm import Completion, ModelGrader, Usage
from shared.adapters.graders.openai_compat import OpenAICompatChat
from shared.adapters.graders.prompt import GradingPrompt, RenderedPrompt
from shared.adapters.graders.provider_batch import BatchGrader, BatchStatus
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.prices import load_prices
from shared.config.settings import Settings
from shared.domain.budgets import COST_KEY, Budget, BudgetScope, month_of
from shared.domain.grade import GradeResult
from shared.domain.ids import job_id_for
from shared.domain.job import GradingRequest, Job
from shared.domain.status import JobStatus
from tests.unit.test_openai_grader import GOOD
from tests.unit.test_provider_batches import (
    ScriptedBatches,
    app,
    deliver,
    events,
    job,
    tick,
)

MODEL = "gpt-4.1-mini-2025-04-14"
COST = 400


class _NoBatches:
    """A batch client never called: the answer is read back, nothing is sent."""

    provider = "openai"

    def submit(self, prompts: dict[str, object], name: str) -> str:
        raise AssertionError("not sent")

    def status(self, batch_id: str) -> BatchStatus:
        raise AssertionError("not asked")

    def request(self, prompt: RenderedPrompt) -> object:
        return prompt


def test_a_batch_answer_costs_the_batch_price_of_the_price_table() -> None:
    prices = load_prices()
    client = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="sk-test")
    chat = OpenAICompatChat(client, MODEL, max_output_tokens=512)
    grader = ModelGrader(
        chat,
        RollingLimiter(QuotaShare(100, 0)),
        GradingPrompt.load(),
        max_output_tokens=512,
        prices=prices,
    )
    rubric = ("mentions mitochondria", "names ATP", "explains glycolysis")
    request = GradingRequest("s1", "The mitochondria make ATP.", rubric, 9)
    usage = Usage(
        input_tokens=3000, output_tokens=200, total_tokens=3200, requests=1, cached_input_tokens=0
    )
    result = BatchGrader(grader, _NoBatches()).result(request, Completion(json.dumps(GOOD), usage))
    batch = prices.cost_micros(MODEL, usage.as_dict(), batch=True)
    single = prices.cost_micros(MODEL, usage.as_dict())
    assert batch is not None and single is not None and batch < single
    assert result.usage[COST_KEY] == batch
    assert result.usage["batch_requests"] == 1


@dataclass
class CostlyBatches(ScriptedBatches):
    """Scripted batches whose answers carry a cost, as the batch grader's do."""

    def result(self, request: GradingRequest, answer: object) -> GradeResult:
        graded = super().result(request, answer)
        usage = {"input_tokens": 100, "output_tokens": 20, "batch_requests": 1, COST_KEY: COST}
        return dataclasses.replace(graded, usage=usage)


def _with_budgets(settings: Settings, adapters: Adapters) -> tuple[Adapters, SqliteBudgetStore]:
    store = SqliteBudgetStore(SqliteDatabase(settings.database_path))
    return dataclasses.replace(adapters, budgets=store), store


def _submit(adapters: Adapters, clock: FrozenClock, key: str) -> str:
    job_id = job_id_for("client-a", key)
    request = GradingRequest(f"s-{key}", "an answer", "r", 10, assignment_id="hw-1")
    adapters.store.create(Job.new(job_id, "client-a", request, "fp", clock.now(), lane="bulk"))
    return job_id


def test_batch_answers_are_charged_to_the_client_and_assignment_once(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    with_budgets, store = _with_budgets(settings, adapters)
    store.set_budget(Budget(BudgetScope.CLIENT, "client-a", 1_000_000))
    store.set_budget(Budget(BudgetScope.ASSIGNMENT, "hw-1", 1_000_000))
    batches = CostlyBatches()
    client = app(settings, with_budgets, clock, batches)
    ids = [_submit(with_budgets, clock, f"k{i}") for i in range(3)]
    for job_id in ids:
        assert deliver(client, job_id) == 200
    clock.advance(timedelta(minutes=11))
    tick(client)  # submitted
    batches.during_status = lambda: tick(client)  # a second tick reads the same batch
    tick(client)
    tick(client)

    assert {job(with_budgets, j).status for j in ids} == {JobStatus.SUCCEEDED}
    assert sorted(events(with_budgets)) == sorted(ids)
    month = month_of(clock.now())
    assert store.spent(BudgetScope.CLIENT, "client-a", month) == 3 * COST
    assert store.spent(BudgetScope.ASSIGNMENT, "hw-1", month) == 3 * COST
    for job_id in ids:
        assert job(with_budgets, job_id).result.usage[COST_KEY] == COST  # type: ignore[union-attr]


def test_a_client_past_its_hard_budget_is_held_not_gathered(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    with_budgets, store = _with_budgets(settings, adapters)
    store.set_budget(Budget(BudgetScope.CLIENT, "client-a", 0))
    batches = CostlyBatches()
    client = app(settings, with_budgets, clock, batches)
    job_id = _submit(with_budgets, clock, "held")
    assert deliver(client, job_id) == 200
    held = job(with_budgets, job_id)
    assert not held.waits_in_batch
    assert held.status in (JobStatus.PENDING, JobStatus.RETRYING)
    assert held.attempts == 0  # held uncounted
    clock.advance(timedelta(minutes=11))
    tick(client)
    assert batches.submitted == {}
    assert job(with_budgets, job_id).status is not JobStatus.FAILED
