"""Explicit Gemini context caches against the loopback fake of the Gemini API, through
google-genai: made once across workers where the price table says it pays, used by every
answer of the assignment, renewed near its expiry, deleted when the assignment is done."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from google import genai
from google.genai import types

from bench.bill import RUBRIC
from shared.adapters.embedded.context_cache_records import SqliteContextCacheRecords
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.adapters.graders.gemini import GeminiChat
from shared.adapters.graders.gemini_cache import GeminiContextCaches
from shared.adapters.graders.limiter import QuotaShare, RollingLimiter
from shared.adapters.graders.llm import ModelGrader
from shared.adapters.graders.prompt import GradingPrompt
from shared.config.prices import load_prices
from shared.domain.job import GradingRequest
from tests.support.fake_gemini_caches import FakeGeminiServer

MODEL = "gemini-2.5-flash"
START = datetime(2026, 12, 1, 9, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def fake(clock: Clock) -> Any:
    with FakeGeminiServer(min_cache_tokens=2048, clock=clock) as server:
        yield server


@pytest.fixture
def records(tmp_path: Path) -> SqliteContextCacheRecords:
    return SqliteContextCacheRecords(SqliteDatabase(tmp_path / "jobs.sqlite3"))


def worker(
    fake: FakeGeminiServer, records: SqliteContextCacheRecords, clock: Clock, expected: int = 500
) -> tuple[ModelGrader, GeminiContextCaches]:
    """One worker instance: its own client, caches and grader; the records are shared."""
    client = genai.Client(api_key="AIza-test", http_options=types.HttpOptions(base_url=fake.url))
    caches = GeminiContextCaches(
        client, records, load_prices(), lambda _a, _r: expected, clock=clock
    )
    chat = GeminiChat(client, MODEL, max_output_tokens=4096, caches=caches)
    grader = ModelGrader(
        chat,
        RollingLimiter(QuotaShare(10_000, 0)),
        GradingPrompt.load(),
        4096,
        prices=load_prices(),
    )
    return grader, caches


def answer(n: int, rubric: tuple[str, ...] = RUBRIC) -> GradingRequest:
    text = f"Glycolysis splits glucose into two pyruvate in the cytoplasm (student {n})."
    return GradingRequest(f"s{n}", text, rubric, 20, assignment_id="bio-essay")


def test_one_cache_across_workers_used_by_every_answer(
    fake: FakeGeminiServer, records: SqliteContextCacheRecords, clock: Clock
) -> None:
    graders = [worker(fake, records, clock)[0] for _ in range(2)]
    results = [graders[n % 2].grade(answer(n), attempt=1, timeout_s=30) for n in range(4)]
    assert len(fake.calls.created) == 1
    [name] = fake.calls.created
    assert [cache for cache, _ in fake.calls.generated] == [name] * 4
    # Only the answer travels: the instructions and the rubric are in the cache.
    for _, sent in fake.calls.generated:
        assert RUBRIC[0] not in sent and sent.startswith(' "answer": ')
    cache_tokens = fake.caches[name].tokens
    for result in results:
        assert result.usage["cached_input_tokens"] == cache_tokens >= 2048
        assert result.usage["cost_micro_usd"] > 0
        assert [c["id"] for c in result.criteria] == [f"c{i}" for i in range(1, 21)]


def test_a_cache_near_its_expiry_is_renewed_and_deleted_when_the_assignment_is_done(
    fake: FakeGeminiServer, records: SqliteContextCacheRecords, clock: Clock
) -> None:
    grader, caches = worker(fake, records, clock)
    grader.grade(answer(1), attempt=1, timeout_s=30)
    [name] = fake.calls.created
    clock.now += timedelta(minutes=30)
    grader.grade(answer(2), attempt=1, timeout_s=30)
    assert fake.calls.renewed == []  # 30 minutes left: used as it is
    clock.now += timedelta(minutes=25)
    grader.grade(answer(3), attempt=1, timeout_s=30)
    assert fake.calls.renewed == [name]
    [record] = records.of_assignment("bio-essay")
    assert record.expire_at == clock.now + timedelta(hours=1)
    assert caches.delete_for("bio-essay") == 1
    assert fake.calls.deleted == [name] and records.of_assignment("bio-essay") == []


def test_no_cache_where_it_does_not_pay(
    fake: FakeGeminiServer, records: SqliteContextCacheRecords, clock: Clock
) -> None:
    short = ("mentions glycolysis", "names pyruvate")
    grader, _ = worker(fake, records, clock)
    grader.grade(answer(1, short), attempt=1, timeout_s=30)  # prefix under the minimum
    few, _ = worker(fake, records, clock, expected=2)
    few.grade(answer(2), attempt=1, timeout_s=30)  # too few answers left to pay
    lone = GradingRequest("s3", "Glycolysis.", RUBRIC, 20)  # no assignment
    grader.grade(lone, attempt=1, timeout_s=30)
    assert fake.calls.created == []
    assert [cache for cache, _ in fake.calls.generated] == ["", "", ""]


def test_a_cache_gone_behind_the_record_falls_back_then_is_made_again(
    fake: FakeGeminiServer, records: SqliteContextCacheRecords, clock: Clock
) -> None:
    grader, _ = worker(fake, records, clock)
    grader.grade(answer(1), attempt=1, timeout_s=30)
    fake.caches.clear()  # expired or deleted at the provider
    result = grader.grade(answer(2), attempt=1, timeout_s=30)
    assert result.score >= 0 and fake.calls.generated[-1][0] == ""  # sent whole
    grader.grade(answer(3), attempt=1, timeout_s=30)
    assert len(fake.calls.created) == 2 and fake.calls.generated[-1][0] == fake.calls.created[1]


def test_the_caches_of_an_assignment_are_deleted_once_its_round_is_graded(
    fake: FakeGeminiServer, records: SqliteContextCacheRecords, clock: Clock, tmp_path: Path
) -> None:
    from shared.adapters.embedded.assignment_store import (
        SqliteAssignmentStore,
        SqliteJobBatch,
        SqliteTally,
    )
    from shared.adapters.embedded.job_store import SqliteJobStore
    from shared.clock import FrozenClock
    from shared.service_layer.assignment_completion import AssignmentCompletion
    from tests.contract.test_assignment_store_contract import assignment, finish, submission
    from tests.contract.test_job_store_contract import T0
    from tests.fakes import FakePublisher

    grader, caches = worker(fake, records, clock)
    grader.grade(
        GradingRequest("s0", "Glycolysis.", RUBRIC, 20, assignment_id="a-1"),
        attempt=1,
        timeout_s=30,
    )
    [name] = fake.calls.created
    db = SqliteDatabase(tmp_path / "assignments.sqlite3")
    jobs = SqliteJobStore(db, on_write=SqliteTally(db).record)
    store = SqliteAssignmentStore(db)
    store.create(assignment())
    SqliteJobBatch(db, jobs).create_many([submission(i) for i in range(2)])
    completion = AssignmentCompletion(
        store, FakePublisher(), FrozenClock(T0), on_graded=caches.delete_for
    )
    completion.on_final(finish(jobs, "a-1-j0", 5.0))
    assert fake.calls.deleted == []  # one submission still to grade
    last = finish(jobs, "a-1-j1", 7.0)
    completion.on_final(last)
    completion.on_final(last)  # delivered again: the round is announced, and cleaned, once
    assert fake.calls.deleted == [name] and records.of_assignment("a-1") == []


def test_a_gemini_grader_is_built_with_context_caches_unless_turned_off(tmp_path: Path) -> None:
    from pydantic import SecretStr

    from shared.bootstrap.graders import context_caches
    from shared.config.settings import GeminiApi, GraderKind, Settings

    on = Settings(
        grader=GraderKind.GEMINI,
        grader_gemini_api=GeminiApi.DEVELOPER,
        grader_api_key=SecretStr("k"),
        data_dir=tmp_path,
    )
    assert isinstance(context_caches(on), GeminiContextCaches)
    off = on.model_copy(update={"grader_context_cache": False})
    assert context_caches(off) is None
    assert context_caches(Settings(data_dir=tmp_path)) is None  # the offline grader
