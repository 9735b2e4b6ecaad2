"""Argument and block names of provider resources, read from the @cdktf/provider-* packages.

Each resource's index.js maps its configuration to terraform names in functions named
`...ToTerraform`; following the nested ones gives every argument and block name.
scripts/provider-schema.sh installs the google package; `install` fetches the others the
configuration uses (google-beta, time) the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from localcloud.terraform_provider.schema import PACKAGES, package_dir

_FUNCTION = re.compile(r"^function (\w+ToTerraform)\(struct\) \{\n(.*?)^\}", re.M | re.S)
_SYNTH = re.compile(r"^    synthesizeAttributes\(\) \{\n(.*?)^    \}", re.M | re.S)
_TYPE = re.compile(r'\.tfResourceType = "([\w]+)";')
_FIELD = re.compile(r"^\s+(\w+): (.*?),?$", re.M)
_NESTED = re.compile(r"(?<![.\w])(\w+ToTerraform)\b")


@dataclass
class Schema:
    """Names allowed at each nesting level of one resource type."""

    names: set[str] = field(default_factory=set)
    blocks: dict[str, Schema] = field(default_factory=dict)


def _parse_fields(body: str, functions: dict[str, str], depth: int = 0) -> Schema:
    schema = Schema()
    returned = body.split("return {", 1)[-1]
    for name, expression in _FIELD.findall(returned):
        schema.names.add(name)
        nested = [n for n in _NESTED.findall(expression) if n in functions]
        if nested and depth < 12:
            schema.blocks[name] = _parse_fields(functions[nested[0]], functions, depth + 1)
    return schema


def load_resource(index_js: Path) -> tuple[str, Schema] | None:
    text = index_js.read_text()
    rtype, synth = _TYPE.search(text), _SYNTH.search(text)
    if rtype is None or synth is None:
        return None
    functions = {m.group(1): m.group(2) for m in _FUNCTION.finditer(text)}
    return rtype.group(1), _parse_fields(synth.group(1), functions)


# The packages of the other providers the configuration uses (the stand-in's list).
EXTRA_PACKAGES = {name: package for name, package in PACKAGES.items() if name != "google"}


def install(provider: str, cache: Path) -> Path:
    """Install the package of `provider` (EXTRA_PACKAGES) under `cache`; return its lib/."""
    return package_dir(provider, cache) / "lib"


def load(lib: Path, wanted: set[str], prefix: str = "google_") -> dict[str, Schema]:
    """Schemas of the `wanted` resource types found under the package's lib/."""
    schemas = {}
    for index_js in lib.glob("*/index.js"):
        folder = index_js.parent.name.replace("-", "_")
        # google: pubsub-topic; google-beta: google-project-service-identity; time: sleep.
        if not {prefix + folder, folder} & wanted:
            continue
        loaded = load_resource(index_js)
        if loaded:
            schemas[loaded[0]] = loaded[1]
    return schemas


def load_data(lib: Path, wanted: set[str]) -> dict[str, Schema]:
    """Schemas of the `wanted` data sources (package folders named data-google-...)."""
    schemas = {}
    for dtype in wanted:
        index_js = lib / ("data-" + dtype.replace("_", "-")) / "index.js"
        if index_js.exists():
            loaded = load_resource(index_js)
            if loaded:
                schemas[loaded[0]] = loaded[1]
    return schemas
