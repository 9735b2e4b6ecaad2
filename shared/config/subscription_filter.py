"""Pub/Sub subscription filters on message attributes: the subset `subscriptions.json` uses.

Pub/Sub evaluates a subscription's filter when a message is published: a message it does
not admit is acknowledged for that subscription and never delivered. The embedded bus
does the same with this evaluator. Supported: `attributes.KEY = "value"`, the presence
test `attributes:KEY`, `NOT` before either, and a chain of them joined by only `AND` or
only `OR` (Pub/Sub also refuses a mix without parentheses). Anything else is refused
when the file is read, so a filter the bus cannot honour exactly never starts a bus.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

# No maintained PyPI package evaluates Pub/Sub filter expressions, and the file needs
# three forms, so this small evaluator is written here.

_KEY = r"[A-Za-z_][A-Za-z0-9_-]*"
_TOKEN = re.compile(
    rf'attributes\.(?P<key>{_KEY})\s*=\s*"(?P<value>[^"\\]*)"'
    rf"|attributes:(?P<has>{_KEY})"
    r"|(?P<word>AND|OR|NOT)(?![A-Za-z0-9_])"
)


class UnsupportedFilter(ValueError):
    """A filter outside the subset the embedded bus evaluates."""


@dataclass(frozen=True)
class Condition:
    """One test of the attributes: equality (value given) or presence, maybe negated."""

    key: str
    value: str | None
    negated: bool = False

    def holds(self, attributes: Mapping[str, str]) -> bool:
        if self.value is None:
            found = self.key in attributes
        else:
            found = attributes.get(self.key) == self.value
        return found is not self.negated


@dataclass(frozen=True)
class SubscriptionFilter:
    """A parsed filter: its conditions, all of which (AND) or any of which (OR) must hold."""

    expression: str
    conditions: tuple[Condition, ...]
    any_of: bool = False

    def admits(self, attributes: Mapping[str, str]) -> bool:
        """Whether a message with these attributes is delivered to the subscription."""
        results = (condition.holds(attributes) for condition in self.conditions)
        return any(results) if self.any_of else all(results)

    @classmethod
    def parse(cls, expression: str) -> SubscriptionFilter:
        """Parse `expression`; raise UnsupportedFilter for anything outside the subset."""
        tokens = _tokens(expression)
        conditions: list[Condition] = []
        joiners: set[str] = set()
        negated = False
        expect_condition = True
        for word, condition in tokens:
            if expect_condition:
                if word == "NOT" and not negated:
                    negated = True
                    continue
                if condition is None:
                    raise UnsupportedFilter(
                        f"expected a condition before {word!r} in the filter {expression!r}"
                    )
                conditions.append(Condition(condition.key, condition.value, negated))
                negated, expect_condition = False, False
            elif word in ("AND", "OR"):
                joiners.add(word)
                expect_condition = True
            else:
                raise UnsupportedFilter(
                    f"expected AND or OR between conditions in the filter {expression!r}"
                )
        if expect_condition:
            raise UnsupportedFilter(f"the filter {expression!r} ends without a condition")
        if len(joiners) > 1:
            raise UnsupportedFilter(
                f"AND and OR are mixed without parentheses in the filter {expression!r}"
            )
        return cls(expression, tuple(conditions), any_of=joiners == {"OR"})


def _tokens(expression: str) -> list[tuple[str | None, Condition | None]]:
    tokens: list[tuple[str | None, Condition | None]] = []
    position = 0
    while True:
        while position < len(expression) and expression[position].isspace():
            position += 1
        if position == len(expression):
            return tokens
        match = _TOKEN.match(expression, position)
        if match is None:
            raise UnsupportedFilter(
                f"unsupported syntax at {expression[position:]!r} in the filter {expression!r}:"
                ' the embedded bus evaluates only attributes.KEY = "value", attributes:KEY,'
                " NOT, and AND or OR"
            )
        if match["word"]:
            tokens.append((match["word"], None))
        elif match["has"]:
            tokens.append((None, Condition(match["has"], None)))
        else:
            tokens.append((None, Condition(match["key"], match["value"])))
        position = match.end()
