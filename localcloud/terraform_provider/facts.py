"""What hashicorp/google checks itself, beyond its published schema (provider_facts.json).

`provider_facts.json` holds, per resource type terraform/ uses, facts read from the
provider's own Go schema at the pinned version (scripts/provider_facts.py names the files):
which attributes force a new resource (`ForceNew`, magic-modules' `immutable`), which
optional ones are also computed, integers, enums, name formats and literal regular
expressions, conflicting and one-of groups. With them the stand-in:

- serves an optional attribute as computed only where the provider does, so an unset
  one plans null, or its `Default`, as it does against the real provider;
- refuses, at validate, what the provider's validators refuse (`validate`);
- reports `RequiresReplace` where a change to a `ForceNew` attribute makes the provider
  plan "must be replaced" (`requires_replace`).

Paths are dotted attribute names; a nested block's attributes sit under its name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localcloud.terraform_provider.schema import Block
from localcloud.terraform_provider.values import UNKNOWN

FACTS_FILE = Path(__file__).with_name("provider_facts.json")

# A step of an attribute path: an attribute's name, or an element's index in a list.
Step = str | int


@dataclass(frozen=True)
class Finding:
    """One refusal: where (attribute path) and what the provider says."""

    path: tuple[Step, ...]
    summary: str
    detail: str


@dataclass
class ResourceFacts:
    """The facts of one resource type (the `resources` entries of provider_facts.json)."""

    attributes: dict[str, dict[str, Any]]
    custom_force_new: dict[str, str] = field(default_factory=dict)
    _children: dict[str, list[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for path in self.attributes:
            parent, _, name = path.rpartition(".")
            self._children.setdefault(parent, []).append(name)

    def children(self, parent: str) -> list[str]:
        return self._children.get(parent, [])

    def forces_new(self, path: str) -> bool:
        return bool(self.attributes[path].get("force_new")) or path in self.custom_force_new


def load(path: Path = FACTS_FILE) -> dict[str, ResourceFacts]:
    """Facts per resource type; types without an entry get none (the schema alone)."""
    raw = json.loads(path.read_text())
    return {
        rtype: ResourceFacts(entry["attributes"], entry.get("custom_force_new", {}))
        for rtype, entry in raw["resources"].items()
    }


def refine(block: Block, facts: ResourceFacts, prefix: str = "") -> Block:
    """`block` with each optional attribute computed only where the provider computes it."""
    attributes = []
    for attribute in block["attributes"]:
        fact = facts.attributes.get(prefix + attribute["name"])
        if fact is not None and attribute["optional"]:
            attribute = attribute | {"computed": bool(fact.get("computed"))}
        attributes.append(attribute)
    blocks = [
        nested | {"block": refine(nested["block"], facts, f"{prefix}{nested['name']}.")}
        for nested in block["blocks"]
    ]
    return {"attributes": attributes, "blocks": blocks}


def with_defaults(facts: ResourceFacts, planned: Any, prefix: str = "") -> Any:
    """`planned` with each unset argument that has a `Default` set to it, as the
    provider plans it (inside the nested blocks present only)."""
    if not isinstance(planned, dict):
        return planned
    result = dict(planned)
    for name in facts.children(prefix.rstrip(".")):
        fact = facts.attributes[prefix + name]
        if fact.get("block"):
            value = result.get(name)
            if isinstance(value, list):
                result[name] = [with_defaults(facts, v, f"{prefix}{name}.") for v in value]
        elif "default" in fact and result.get(name) is None and name in result:
            result[name] = fact["default"]
    return result


def _is_set(value: Any) -> bool:
    return value is not None and value != [] and value != {}


def _elements(value: Any) -> list[Any]:
    """A nested block's elements: a list block's list, a single block's one object."""
    if isinstance(value, list):
        return value
    return [] if value is None or value is UNKNOWN else [value]


def _lookup(root: dict[str, Any], path: str) -> Any:
    """The value at an SDK-style path from the resource's root (first element of blocks)."""
    value: Any = root
    for name in path.split("."):
        if isinstance(value, list):
            value = value[0] if value else None
        if not isinstance(value, dict):
            return None
        value = value.get(name)
    return value


def _go_list(values: list[str]) -> str:
    """A []string as Go's %q prints it, as the provider's messages do."""
    return "[" + " ".join(json.dumps(v) for v in values) + "]"


def _check_value(key: str, fact: dict[str, Any], value: Any) -> list[str]:
    """What the provider's type and value validators say of one known, set value."""
    problems = []
    kind = fact["type"]
    if kind == "int" and isinstance(value, float) and not value.is_integer():
        problems.append(f"Attribute must be a whole number, got {value}")
    if kind in ("int", "float") and "range" in fact and isinstance(value, int | float):
        low, high = fact["range"]
        if not low <= value <= high:
            problems.append(f"expected {key} to be in the range ({low} - {high}), got {value}")
    if isinstance(value, str):
        if "enum" in fact and value not in fact["enum"]:
            problems.append(f"expected {key} to be one of {_go_list(fact['enum'])}, got {value}")
        quoted = f"{json.dumps(key)} ({json.dumps(value)})"
        if "length" in fact:
            low, high = fact["length"]
            if not low <= len(value) <= high:
                problems.append(f"{quoted} must be between {low} and {high} characters long")
        if "pattern" in fact and not re.search(fact["pattern"], value):
            problems.append(f"{quoted} must match regex {json.dumps(fact['pattern'])}")
        if "regexp" in fact and not re.search(fact["regexp"], value):
            problems.append(f"{quoted} doesn't match regexp {json.dumps(fact['regexp'])}")
    return problems


def validate(facts: ResourceFacts, config: dict[str, Any]) -> list[Finding]:
    """The provider's own refusals of a resource's configuration (unknowns pass)."""
    return list(_validate(facts, config, config, "", ()))


def _validate(
    facts: ResourceFacts,
    root: dict[str, Any],
    level: dict[str, Any],
    prefix: str,
    steps: tuple[Step, ...],
) -> Iterator[Finding]:
    for name in facts.children(prefix.rstrip(".")):
        path = prefix + name
        fact = facts.attributes[path]
        value = level.get(name)
        here = (*steps, name)
        if value is UNKNOWN:
            continue
        configured = _is_set(value)
        if configured and not (fact.get("optional") or fact.get("required")):
            yield Finding(
                here,
                "Value for unconfigurable attribute",
                f'"{path}": computed attributes cannot be set, but a value was set',
            )
            continue
        for group in ("exactly_one_of", "at_least_one_of"):
            # Checked once per group, at its first member, where its block is present.
            members = fact.get(group, [])
            if not members or members[0] != path:
                continue
            chosen = [m for m in members if _is_set(_lookup(root, m))]
            if not chosen or (group == "exactly_one_of" and len(chosen) > 1):
                wanted = "only one of" if chosen else "one of"
                yield Finding(
                    here,
                    "Invalid combination of arguments",
                    f'"{path}": {wanted} `{",".join(members)}` must be specified',
                )
        if not configured:
            continue
        for other in fact.get("conflicts_with", []):
            conflicting = _lookup(root, other)
            if _is_set(conflicting) and conflicting is not UNKNOWN:
                yield Finding(
                    here, "Conflicting configuration arguments", f'"{path}": conflicts with {other}'
                )
        if fact.get("block"):
            for index, element in enumerate(_elements(value)):
                if isinstance(element, dict):
                    yield from _validate(facts, root, element, path + ".", (*here, index))
            continue
        items: list[Any] = [value]
        item_fact = fact
        if fact["type"] in ("list", "set", "map"):
            items = list(value.values()) if isinstance(value, dict) else list(value or [])
            item_fact = {"type": fact.get("element", "string")} | fact.get("element_validator", {})
        for item in items:
            if item is not UNKNOWN and item is not None:
                for problem in _check_value(path, item_fact, item):
                    yield Finding(here, "Invalid value", problem)


_ZERO = {"string": "", "int": 0, "float": 0, "bool": False}


def _same(fact: dict[str, Any], before: Any, after: Any) -> bool:
    """Equal as the provider's diff sees it: unset and the type's zero value are alike."""
    zero = _ZERO.get(fact["type"], [] if fact["type"] in ("list", "set") else {})
    before = zero if before is None else before
    after = zero if after is None else after
    return bool(before == after)


def _known_only_by_id(prior: dict[str, Any]) -> bool:
    """A state that holds nothing but an id: an import, or a hand-made state. The stand-in
    cannot read the object the provider would refresh it from, so it plans no replacement."""
    return not any(_is_set(v) for k, v in prior.items() if k != "id")


def requires_replace(facts: ResourceFacts, prior: Any, planned: Any) -> list[tuple[Step, ...]]:
    """Paths whose planned change forces the provider to replace the object."""
    if not isinstance(prior, dict) or not isinstance(planned, dict) or _known_only_by_id(prior):
        return []
    return list(_replaced(facts, prior, planned, "", ()))


def _replaced(
    facts: ResourceFacts,
    prior: dict[str, Any],
    planned: dict[str, Any],
    prefix: str,
    steps: tuple[Step, ...],
) -> Iterator[tuple[Step, ...]]:
    for name in facts.children(prefix.rstrip(".")):
        path = prefix + name
        fact = facts.attributes[path]
        before, after = prior.get(name), planned.get(name)
        here = (*steps, name)
        if fact.get("block"):
            old, new = _elements(before), _elements(after)
            if after is UNKNOWN or len(old) != len(new):
                if facts.forces_new(path):
                    yield here
                continue
            for index, (a, b) in enumerate(zip(old, new, strict=True)):
                if isinstance(a, dict) and isinstance(b, dict):
                    yield from _replaced(facts, a, b, path + ".", (*here, index))
            continue
        if not facts.forces_new(path):
            continue
        # A new value known only after apply replaces the object, as it does in the
        # provider's diff (a computed new value of a ForceNew attribute).
        if after is UNKNOWN or _contains_unknown(after):
            if before is not None:
                yield here
        elif not _same(fact, before, after):
            yield here


def _contains_unknown(value: Any) -> bool:
    if value is UNKNOWN:
        return True
    if isinstance(value, list):
        return any(_contains_unknown(v) for v in value)
    if isinstance(value, dict):
        return any(_contains_unknown(v) for v in value.values())
    return False
