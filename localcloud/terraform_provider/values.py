"""Terraform values on the wire (msgpack, unknown as extension 0) and how the stand-in plans them.

Values are decoded to plain Python: objects are dicts, lists and sets are lists, an unknown
value is `UNKNOWN`. Attributes of type `dynamic` arrive as [type JSON, value] pairs and are
passed through untouched.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import msgpack

from localcloud.terraform_provider.schema import Block


class _Unknown:
    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Any = _Unknown()


def _ext_hook(code: int, data: bytes) -> Any:
    if code == 0:
        return UNKNOWN
    return msgpack.ExtType(code, data)


def _default(value: Any) -> Any:
    if value is UNKNOWN:
        return msgpack.ExtType(0, b"")
    raise TypeError(f"cannot encode {value!r}")


def decode(raw: bytes) -> Any:
    """A DynamicValue's msgpack bytes to Python."""
    if not raw:
        return None
    return msgpack.unpackb(raw, ext_hook=_ext_hook, raw=False, strict_map_key=False)


def encode(value: Any) -> bytes:
    return bytes(msgpack.packb(value, default=_default, use_bin_type=True))


def _null_object(block: Block) -> dict[str, Any]:
    value: dict[str, Any] = {a["name"]: None for a in block["attributes"]}
    for nested in block["blocks"]:
        value[nested["name"]] = None if nested["nesting"] == "single" else []
    return value


def conform(block: Block, value: dict[str, Any] | None) -> dict[str, Any]:
    """`value` with every attribute and block of the schema present (missing ones null)."""
    result = _null_object(block)
    for name, item in (value or {}).items():
        if name in result:
            result[name] = item
    for nested in block["blocks"]:
        item = result[nested["name"]]
        if nested["nesting"] == "single":
            result[nested["name"]] = None if item is None else conform(nested["block"], item)
        elif isinstance(item, list):
            result[nested["name"]] = [conform(nested["block"], element) for element in item]
    return result


def plan(block: Block, proposed: Any, prior: Any) -> Any:
    """The planned object: what is configured, and every computed attribute left unset
    unknown unless the prior state already knows it (all of them on create)."""
    if proposed is None or proposed is UNKNOWN:
        return proposed
    prior = prior if isinstance(prior, dict) else {}
    planned = dict(proposed)
    for attribute in block["attributes"]:
        name = attribute["name"]
        if attribute["computed"] and planned.get(name) is None:
            known = prior.get(name)
            planned[name] = known if known is not None else UNKNOWN
    for nested in block["blocks"]:
        name = nested["name"]
        value, before = planned.get(name), prior.get(name)
        if nested["nesting"] == "single":
            planned[name] = plan(nested["block"], value, before)
        elif isinstance(value, list):
            earlier = before if isinstance(before, list) else []
            planned[name] = [
                plan(nested["block"], item, earlier[i] if i < len(earlier) else None)
                for i, item in enumerate(value)
            ]
    return planned


# Plausible values for what a data source reads (a read result must be wholly known).
_SAMPLES = {"number": "123456789012", "project_number": "123456789012"}


def _sample(name: str, cty_type: Any, context: dict[str, Any]) -> Any:
    if cty_type == "string":
        if name in _SAMPLES:
            return _SAMPLES[name]
        if name in ("project", "project_id", "id", "name") and context.get("project_id"):
            return context["project_id"]
        return f"standin-{name.replace('_', '-')}"
    if cty_type == "number":
        return 0
    if cty_type == "bool":
        return False
    if isinstance(cty_type, list) and cty_type[0] in ("list", "set"):
        return []
    if isinstance(cty_type, list) and cty_type[0] == "map":
        return {}
    if isinstance(cty_type, list) and cty_type[0] == "object":
        return {key: _sample(key, t, context) for key, t in cty_type[1].items()}
    return None


def read_data(block: Block, config: dict[str, Any]) -> dict[str, Any]:
    """A data source's result: its configuration with every unset attribute filled in."""
    result = conform(block, config)
    for attribute in block["attributes"]:
        name = attribute["name"]
        if result.get(name) is None and attribute["computed"]:
            result[name] = _sample(name, attribute["type"], result)
    return result


def cty_type_json(cty_type: Any) -> bytes:
    return json.dumps(cty_type, separators=(",", ":")).encode()


# What every object of one deployment shares (the provider's project and region).
_SHARED = {"project", "region", "location", "zone"}


def _settled(name: str, cty_type: Any, value: Any, context: dict[str, Any]) -> Any:
    """`value` with every unknown inside it replaced by a plausible known value."""
    if value is UNKNOWN:
        if cty_type == "string" and name not in _SAMPLES and name not in _SHARED:
            # Distinct per object (a digest of what the plan knew), the same on every run.
            return f"standin-{name.replace('_', '-')}-{context['_seed']}"
        return _sample(name, cty_type, context)
    if isinstance(cty_type, list) and isinstance(value, list):
        return [_settled(name, cty_type[1], item, context) for item in value]
    if isinstance(cty_type, list) and cty_type[0] == "map" and isinstance(value, dict):
        return {key: _settled(key, cty_type[1], item, context) for key, item in value.items()}
    if isinstance(cty_type, list) and cty_type[0] == "object" and isinstance(value, dict):
        return {
            key: _settled(key, cty_type[1][key], value.get(key), context) for key in cty_type[1]
        }
    return value


def settle(block: Block, planned: Any) -> Any:
    """The object an apply of `planned` leaves: what the plan knew, and for each value
    known only after apply a plausible one (nothing is created anywhere)."""
    if not isinstance(planned, dict):
        return planned
    result = dict(planned)
    context = planned | {"_seed": hashlib.sha256(encode(planned)).hexdigest()[:8]}
    for attribute in block["attributes"]:
        name = attribute["name"]
        result[name] = _settled(name, attribute["type"], result.get(name), context)
    for nested in block["blocks"]:
        name = nested["name"]
        value = result.get(name)
        if nested["nesting"] == "single":
            result[name] = settle(nested["block"], value)
        elif isinstance(value, list):
            result[name] = [settle(nested["block"], item) for item in value]
    return result
