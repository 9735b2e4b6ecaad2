"""The price table: what one model's tokens cost, read from `prices.json`.

Prices are per `per_tokens` tokens in `currency`, for each model: `input`, `cached_input`
(input tokens the provider served from its prefix cache), `output` (thinking and
reasoning tokens included, as the providers bill them), the batch prices
(`batch_input`, `batch_output`, and `batch_cached_input` where a provider discounts
cached input inside a batch too; without it cached input in a batch costs
`batch_input`), the smallest prefix a provider caches (`min_cached_prefix_tokens`) and,
for explicit context caches, the storage price per `per_tokens` tokens and hour
(`cache_storage_per_hour`). `read` is the date the sources were read: prices change, so
the file is configuration (`GRADEQ_PRICES_FILE` points at another one).

Money is kept in millionths of the currency unit (micro-dollars for USD), an integer, so
a month of gradings sums without rounding drift.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

DEFAULT_PRICES_FILE = Path(__file__).parent / "prices.json"
MICROS = 1_000_000


@dataclass(frozen=True)
class ModelPrice:
    """One model's prices, per `per_tokens` tokens."""

    model: str
    input: float
    cached_input: float
    output: float
    batch_input: float
    batch_output: float
    batch_cached_input: float | None = None
    min_cached_prefix_tokens: int = 1024
    cache_storage_per_hour: float | None = None

    def cost_micros(self, usage: dict[str, int], *, per_tokens: int, batch: bool = False) -> int:
        """What `usage` (input_tokens with cached_input_tokens among them, output_tokens)
        costs, in millionths of the currency unit, rounded to the nearest."""
        inputs = int(usage.get("input_tokens", 0))
        cached = min(inputs, int(usage.get("cached_input_tokens", 0)))
        outputs = int(usage.get("output_tokens", 0))
        if batch:
            cached_price = (
                self.batch_cached_input if self.batch_cached_input is not None else self.batch_input
            )
            amount = (
                (inputs - cached) * self.batch_input
                + cached * cached_price
                + outputs * self.batch_output
            )
        else:
            amount = (
                (inputs - cached) * self.input + cached * self.cached_input + outputs * self.output
            )
        return round(amount * MICROS / per_tokens)


@dataclass(frozen=True)
class PriceTable:
    currency: str
    per_tokens: int
    read: str
    sources: tuple[str, ...]
    models: dict[str, ModelPrice]

    def price_of(self, model: str) -> ModelPrice | None:
        """The model's prices: by exact name, else by the longest listed name it starts
        with (a dated snapshot such as gpt-4.1-mini-2025-04-14 is its family's)."""
        name = model.removeprefix("models/")
        if name in self.models:
            return self.models[name]
        matches = [m for m in self.models if name.startswith(m + "-")]
        return self.models[max(matches, key=len)] if matches else None

    def cost_micros(self, model: str, usage: dict[str, int], *, batch: bool = False) -> int | None:
        """The cost of `usage` on `model`, or None for a model the table does not list."""
        price = self.price_of(model)
        if price is None:
            return None
        return price.cost_micros(usage, per_tokens=self.per_tokens, batch=batch)

    def explicit_cache_pays(
        self, model: str, prefix_tokens: int, expected_answers: int, hours: float
    ) -> bool:
        """Whether an explicit context cache of `prefix_tokens`, kept `hours`, costs less
        than sending the prefix with each of `expected_answers` answers: the model must
        offer storage and cache a prefix that long, and the answers' saving (the input
        price less the cached one) pass the cache's creation (at the input price) and
        storage."""
        price = self.price_of(model)
        if price is None or price.cache_storage_per_hour is None:
            return False
        if prefix_tokens < price.min_cached_prefix_tokens:
            return False
        saving = expected_answers * prefix_tokens * (price.input - price.cached_input)
        cost = prefix_tokens * (price.input + price.cache_storage_per_hour * hours)
        return saving > cost

    @classmethod
    def parse(cls, data: dict[str, Any]) -> PriceTable:
        models: dict[str, ModelPrice] = {}
        for name, row in data["models"].items():
            fields = {k: v for k, v in row.items() if k != "provider"}
            price = ModelPrice(model=name, **fields)
            for key in ("input", "cached_input", "output", "batch_input", "batch_output"):
                if float(getattr(price, key)) < 0:
                    raise ValueError(f"prices of {name}: {key} is negative")
            models[name] = price
        return cls(
            currency=str(data["currency"]),
            per_tokens=int(data["per_tokens"]),
            read=str(data["read"]),
            sources=tuple(data.get("sources") or ()),
            models=models,
        )


@cache
def load_prices(path: Path = DEFAULT_PRICES_FILE) -> PriceTable:
    """The price table in `path` (read once per path)."""
    return PriceTable.parse(json.loads(path.read_text("utf-8")))
