"""Provider schemas read from the prebuilt CDK for Terraform packages on the npm registry.

`@cdktf/provider-google` (and -google-beta, -time) are generated from the provider's own
`terraform providers schema -json`; their jsii assembly (`.jsii`) keeps, for every resource,
data source and the provider block: each argument and whether it is optional, each nested
block (a struct type), and each attribute the provider computes (a getter with no matching
argument). The generated code (lib/*/index.js) names the computed attributes in terraform's
spelling. Read once, the schema is cached as JSON beside the package.

What the packages do not say, and what the stand-in does instead:
- whether an optional argument is also computed: served as optional + computed, so an
  unset one plans as unknown, unless provider_facts.json (facts.py) knows the type;
- lists and sets: collections and repeated blocks are served as lists;
- sensitivity and validators (enums, formats): not known here; facts.py applies those
  provider_facts.json records, and terraform checks names, types, required arguments,
  block counts of single blocks, references and unknowns.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Terraform provider name -> (npm package generated from its schema, package version).
PACKAGES = {
    "google": ("@cdktf/provider-google", "16.12.1"),  # hashicorp/google 6.50.0
    "google-beta": ("@cdktf/provider-google-beta", "16.12.1"),  # hashicorp/google-beta 6.50.0
    "time": ("@cdktf/provider-time", "11.0.1"),  # hashicorp/time 0.13.1
}
PROVIDER_VERSIONS = {"google": "6.50.0", "google-beta": "6.50.0", "time": "0.13.1"}

# Bump when the cached JSON's layout changes.
_FORMAT = 4

_TYPE_LINK = re.compile(r"/docs/(resources|data-sources)/\w+ (\w+)\}")
_ARG_LINK = re.compile(r"#(\w+) \w+#\w+\}")
_GETTER = re.compile(r"get (\w+)\(\) \{\n\s+return this\.get\w+Attribute\('(\w+)'\);", re.M)
_STORED = re.compile(r"this\._(\w+) = new [\w.]+\(this, \"(\w+)\"(?:, (true|false))?\)")
_CAMEL = re.compile(r"(?<=[a-z0-9])([A-Z])")

Block = dict[str, Any]


def _snake(name: str) -> str:
    return _CAMEL.sub(r"_\1", name).lower()


def package_dir(provider: str, cache: Path) -> Path:
    """Install the npm package that carries `provider`'s schema under `cache` (once)."""
    package, version = PACKAGES[provider]
    # The google package shares the folder scripts/provider-schema.sh installs it in.
    folder = "provider-schema" if provider == "google" else f"provider-schema-{provider}"
    directory = cache / folder
    root = directory / "node_modules" / package
    manifest = root / "package.json"
    if not (manifest.exists() and json.loads(manifest.read_text())["version"] == version):
        directory.mkdir(parents=True, exist_ok=True)
        quiet = ["--silent", "--no-save", "--no-audit", "--no-fund"]
        subprocess.run(
            ["npm", "install", *quiet, "--prefix", str(directory), f"{package}@{version}"],
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
        )
    return root


@dataclass
class _Assembly:
    types: dict[str, Any]
    lib: Path
    names: dict[str, dict[str, str]]  # module folder -> camelCase getter -> terraform name
    wraps_set: dict[str, dict[str, bool]]

    def module_names(self, fqn: str) -> dict[str, str]:
        module = self._module(fqn)
        if module not in self.names:
            self._read_module(module)
        return self.names[module]

    def module_sets(self, fqn: str) -> dict[str, bool]:
        module = self._module(fqn)
        if module not in self.wraps_set:
            self._read_module(module)
        return self.wraps_set[module]

    def _module(self, fqn: str) -> str:
        return str(self.types[fqn].get("locationInModule", {}).get("filename", "")).split("/")[1]

    def _read_module(self, module: str) -> None:
        index = self.lib / module / "index.js"
        text = index.read_text() if index.exists() else ""
        names = {camel: name for camel, name in _GETTER.findall(text)}
        sets: dict[str, bool] = {}
        for camel, name, wraps in _STORED.findall(text):
            names[camel] = name
            sets[name] = wraps == "true"
        self.names[module] = names
        self.wraps_set[module] = sets


def _primitive(kind: str) -> Any:
    return {"string": "string", "number": "number", "boolean": "bool"}.get(kind, "string")


def _attr_type(type_ref: dict[str, Any], asm: _Assembly, wraps_set: bool = False) -> Any:
    """cty type (terraform's JSON type notation) of a jsii type reference."""
    if "primitive" in type_ref:
        return _primitive(type_ref["primitive"])
    if "union" in type_ref:
        members = [t for t in type_ref["union"]["types"] if t.get("fqn") != "cdktf.IResolvable"]
        return _attr_type(members[0], asm) if members else "bool"
    if "collection" in type_ref:
        collection = type_ref["collection"]
        element = _attr_type(collection["elementtype"], asm)
        return ["map" if collection["kind"] == "map" else "list", element]
    fqn = type_ref.get("fqn", "")
    maps = {"cdktf.StringMap": "string", "cdktf.NumberMap": "number"}
    maps |= {"cdktf.BooleanMap": "bool", "cdktf.AnyMap": "string"}
    if fqn in maps:
        return ["map", maps[fqn]]
    if fqn == "cdktf.IResolvable":
        return "bool"
    if fqn.endswith("List") and fqn[: -len("List")] + "OutputReference" in asm.types:
        element = _object_type(fqn[: -len("List")] + "OutputReference", asm)
        return ["set" if wraps_set else "list", element]
    if fqn.endswith("OutputReference") and fqn in asm.types:
        return ["list", _object_type(fqn, asm)]
    if fqn in asm.types and asm.types[fqn].get("datatype"):
        return ["list", _object_type_of_struct(fqn, asm)]
    return "string"


def _object_type(output_reference: str, asm: _Assembly) -> Any:
    """Object type of a computed nested value, from its OutputReference getters."""
    names = asm.module_names(output_reference)
    attributes = {}
    for prop in _own_getters(asm.types[output_reference]):
        attributes[names.get(prop["name"], _snake(prop["name"]))] = _attr_type(prop["type"], asm)
    return ["object", attributes]


def _object_type_of_struct(fqn: str, asm: _Assembly) -> Any:
    attributes = {}
    for prop in asm.types[fqn].get("properties", []):
        attributes[_tf_name(prop)] = _attr_type(prop["type"], asm)
    return ["object", attributes]


_INTERNAL = {"internalValue", "fqn", "creationStack", "terraformResource", "node"}


def _own_getters(cls: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        p
        for p in cls.get("properties", [])
        if not p.get("static") and not p["name"].endswith("Input") and p["name"] not in _INTERNAL
    ]


def _tf_name(prop: dict[str, Any]) -> str:
    docs = prop.get("docs", {})
    match = _ARG_LINK.search(docs.get("remarks", "") + " " + docs.get("summary", ""))
    return match.group(1) if match else _snake(prop["name"])


def _block_of(struct_fqn: str, output_fqn: str | None, asm: _Assembly) -> Block:
    """Arguments and nested blocks of one struct, plus the computed attributes of its class."""
    struct = asm.types[struct_fqn]
    attributes: list[dict[str, Any]] = []
    blocks: list[dict[str, Any]] = []
    configured = set()
    # The class's `xInput` getters type a single nested block (timeouts, plugin-framework
    # single blocks) as "struct or IResolvable", a list block of at most one as the struct.
    inputs = {
        p["name"][: -len("Input")]: p["type"]
        for p in (asm.types[output_fqn].get("properties", []) if output_fqn else [])
        if p["name"].endswith("Input")
    }
    for prop in struct.get("properties", []):
        configured.add(prop["name"])
        name = _tf_name(prop)
        nested = _nested_struct(inputs.get(prop["name"], prop["type"]), asm)
        optional = bool(prop.get("optional"))
        if nested is not None:
            fqn, nesting = nested
            output = fqn + ("OutputReference" if fqn + "OutputReference" in asm.types else "")
            block = _block_of(fqn, output if output in asm.types else None, asm)
            entry: dict[str, Any] = {"name": name, "nesting": nesting, "block": block}
            entry["min_items"] = 0 if optional or nesting == "single" else 1
            entry["max_items"] = 1 if nesting == "list1" else 0
            entry["nesting"] = "list" if nesting == "list1" else nesting
            blocks.append(entry)
            continue
        attributes.append(
            {
                "name": name,
                "type": _attr_type(prop["type"], asm),
                "required": not optional,
                "optional": optional,
                # Unknown from the package: see the module docstring.
                "computed": optional,
                "description": prop.get("docs", {}).get("summary", ""),
            }
        )
    if output_fqn is not None:
        names = asm.module_names(output_fqn)
        sets = asm.module_sets(output_fqn)
        for prop in _own_getters(asm.types[output_fqn]):
            if prop["name"] in configured:
                continue
            name = names.get(prop["name"], _snake(prop["name"]))
            if any(a["name"] == name for a in attributes) or any(b["name"] == name for b in blocks):
                continue
            attributes.append(
                {
                    "name": name,
                    "type": _attr_type(prop["type"], asm, sets.get(name, False)),
                    "required": False,
                    "optional": False,
                    "computed": True,
                    "description": "",
                }
            )
    attributes.sort(key=lambda a: a["name"])
    blocks.sort(key=lambda b: b["name"])
    return {"attributes": attributes, "blocks": blocks}


def _nested_struct(type_ref: dict[str, Any], asm: _Assembly) -> tuple[str, str] | None:
    """(struct fqn, nesting) when the argument is a nested block."""

    def struct(ref: dict[str, Any]) -> str | None:
        fqn = ref.get("fqn", "")
        return fqn if fqn in asm.types and asm.types[fqn].get("datatype") else None

    if (fqn := struct(type_ref)) is not None:
        return fqn, "list1"  # SDKv2 block with max_items = 1
    if "union" in type_ref:
        for member in type_ref["union"]["types"]:
            if (fqn := struct(member)) is not None:
                return fqn, "single"  # e.g. timeouts
            collection = member.get("collection")
            if collection and (fqn := struct(collection["elementtype"])) is not None:
                return fqn, "list"
    return None


def extract(root: Path) -> dict[str, Any]:
    """The provider block, resources and data sources of one CDK provider package."""
    assembly = json.loads((root / ".jsii").read_text())
    asm = _Assembly(assembly["types"], root / "lib", {}, {})
    schema: dict[str, Any] = {"provider": None, "resources": {}, "data_sources": {}}
    for fqn, cls in asm.types.items():
        if cls.get("kind") != "class" or "initializer" not in cls:
            continue
        base = cls.get("base", "")
        params = cls["initializer"].get("parameters", [])
        config = next((p["type"].get("fqn") for p in params if p["name"] == "config"), None)
        if config is None or config not in asm.types:
            continue
        if base == "cdktf.TerraformProvider":
            schema["provider"] = _block_of(config, None, asm)
            continue
        match = _TYPE_LINK.search(cls.get("docs", {}).get("summary", ""))
        if match is None or base not in ("cdktf.TerraformResource", "cdktf.TerraformDataSource"):
            continue
        kind = "resources" if match.group(1) == "resources" else "data_sources"
        schema[kind][match.group(2)] = _block_of(config, fqn, asm)
    return schema


def load(provider: str, cache: Path) -> dict[str, Any]:
    """`provider`'s schema, extracted once and then read from the JSON cache."""
    root = package_dir(provider, cache)
    cached = root.parents[2] / f"schema-{PACKAGES[provider][1]}-v{_FORMAT}.json"
    if cached.exists():
        loaded: dict[str, Any] = json.loads(cached.read_text())
        return loaded
    schema = extract(root)
    tmp = cached.with_suffix(".tmp")
    tmp.write_text(json.dumps(schema))
    tmp.replace(cached)
    return schema
