"""bench/bill.py on a few answers: the prefix is cached from the second answer on, and each
way is priced from the price table."""

from __future__ import annotations

import pytest

from bench.bill import measure, render
from shared.config.prices import load_prices


def test_the_bill_bench_caches_the_rubric_and_prices_each_way() -> None:
    result = measure(8, "gpt-4.1-mini", load_prices())
    assert result["shared_prefix_tokens_estimate"] >= 1500
    rows = {row["way"]: row for row in result["rows"]}
    assert rows["naive"]["cached_input_tokens_per_answer"] == 0
    # Every answer after the first reads the shared prefix from the cache, in whole steps
    # of 128 tokens.
    cached = rows["prefix-cached"]["cached_input_tokens_per_answer"]
    assert cached >= (result["shared_prefix_tokens_estimate"] - 128) * 7 / 8
    assert rows["prefix-cached"]["saving"] > 0.25
    assert rows["batch-priced"]["saving"] == pytest.approx(0.5, abs=0.01)
    assert rows["both"]["saving"] > rows["batch-priced"]["saving"]
    assert "| prefix-cached |" in render(result)


def test_the_bill_bench_prices_gemini_with_its_explicit_cache_and_its_storage() -> None:
    result = measure(6, "gemini-2.5-flash", load_prices())
    rows = {row["way"]: row for row in result["rows"]}
    explicit = rows["explicit cache"]
    # Every answer reads the whole prefix from the cache, the first one too.
    assert explicit["cached_input_tokens_per_answer"] >= result["shared_prefix_tokens_estimate"]
    # Six answers do not pay for an hour of storage: the cache costs more than it saves.
    assert explicit["saving"] < rows["prefix-cached"]["saving"]
