"""Read terraform/ with python-hcl2 and answer structural questions about it."""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hcl2

REPO = Path(__file__).resolve().parents[2]
TERRAFORM_DIR = REPO / "terraform"

_OPTIONS = hcl2.SerializationOptions(strip_string_quotes=True, explicit_blocks=False)
_REF = re.compile(
    r"(?<![\w.\"])(?:(var|local|module)\.([A-Za-z_][\w-]*)|data\.(\w+)\.([\w-]+)"
    r"|((?:google|time)_\w+)\.([\w-]+))"
)
_PATH = re.compile(r"^\$\{([A-Za-z_][\w.\[\]\"-]*)\}$")


@dataclass
class Terraform:
    """All blocks of one terraform directory, merged across files."""

    resources: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    data: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    variables: dict[str, dict[str, Any]] = field(default_factory=dict)
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    locals: dict[str, Any] = field(default_factory=dict)
    modules: dict[str, dict[str, Any]] = field(default_factory=dict)
    imports: list[dict[str, Any]] = field(default_factory=list)
    checks: dict[str, dict[str, Any]] = field(default_factory=dict)
    directory: Path = TERRAFORM_DIR

    def of_type(self, rtype: str) -> dict[str, dict[str, Any]]:
        return {name: body for (t, name), body in self.resources.items() if t == rtype}

    def resource(self, rtype: str, name: str) -> dict[str, Any]:
        return self.resources[(rtype, name)]


def load(directory: Path = TERRAFORM_DIR) -> Terraform:
    """Parse every *.tf file of `directory` (not sub-directories)."""
    tf = Terraform(directory=directory)
    for path in sorted(directory.glob("*.tf")):
        with path.open() as handle:
            doc = hcl2.load(handle, serialization_options=_OPTIONS)
        for entry in doc.get("resource", []):
            for rtype, named in entry.items():
                for name, body in named.items():
                    tf.resources[(rtype, name)] = body
        for entry in doc.get("data", []):
            for dtype, named in entry.items():
                for name, body in named.items():
                    tf.data[(dtype, name)] = body
        for entry in doc.get("variable", []):
            tf.variables.update(entry)
        for entry in doc.get("output", []):
            tf.outputs.update(entry)
        for entry in doc.get("locals", []):
            tf.locals.update({k: v for k, v in entry.items() if k != "__comments__"})
        for entry in doc.get("module", []):
            tf.modules.update(entry)
        tf.imports.extend(doc.get("import", []))
        for entry in doc.get("check", []):
            tf.checks.update(entry)
    return tf


def block(body: dict[str, Any], *path: str) -> dict[str, Any] | None:
    """Follow nested single blocks (`block(r, "template", "scaling")`); None if absent."""
    current: Any = body
    for name in path:
        if not isinstance(current, dict) or name not in current:
            return None
        current = current[name]
        if isinstance(current, list):
            if len(current) != 1:
                return None
            current = current[0]
    return current if isinstance(current, dict) else None


def strings(value: Any) -> Iterator[str]:
    """Every string inside a parsed value, comments excluded."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in ("__comments__", "__inline_comments__"):
                yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def interpolations(text: str) -> Iterator[str]:
    """The expressions inside `${...}` of one string, braces balanced."""
    start = text.find("${")
    while start != -1:
        depth, i = 0, start + 1
        while i < len(text):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        yield text[start + 2 : i]
        start = text.find("${", i)


def references(value: Any) -> set[tuple[str, ...]]:
    """(kind, name...) of every var/local/module/data/resource reference in `value`."""
    found: set[tuple[str, ...]] = set()
    for text in strings(value):
        for expr in interpolations(text):
            for m in _REF.finditer(expr):
                if m.group(1):
                    found.add((m.group(1), m.group(2)))
                elif m.group(3):
                    found.add(("data", m.group(3), m.group(4)))
                else:
                    found.add(("resource", m.group(5), m.group(6)))
    return found


def unresolved(tf: Terraform) -> list[str]:
    """References that point at nothing declared in `tf`."""
    declared_resources = set(tf.resources)
    missing = []
    everything = {
        "resource": tf.resources,
        "data": tf.data,
        "locals": tf.locals,
        "output": tf.outputs,
        "variable": tf.variables,
        "module": tf.modules,
        "import": tf.imports,
        "check": tf.checks,
    }
    for ref in sorted(references(everything)):
        kind = ref[0]
        ok = (
            (kind == "var" and ref[1] in tf.variables)
            or (kind == "local" and ref[1] in tf.locals)
            or (kind == "module" and ref[1] in tf.modules)
            or (kind == "data" and (ref[1], ref[2]) in tf.data)
            or (kind == "resource" and (ref[1], ref[2]) in declared_resources)
        )
        if not ok:
            missing.append(".".join(ref if kind != "resource" else ref[1:]))
    return missing


# --- Gradeq's own modules and for_each resources (terraform/modules, iam.tf).

RUN_SERVICE_MODULE = "./modules/run_service"
_ACCOUNT = re.compile(r'google_service_account\.main\["([\w-]+)"\]')
_SECRET_ENV = re.compile(
    r"\b([A-Z][A-Z0-9_]*)\s*=\s*google_secret_manager_secret\.(\w+)(?:\[0\])?\.secret_id"
)


def services(tf: Terraform) -> dict[str, dict[str, Any]]:
    """The Cloud Run services: the calls of modules/run_service (run.tf), by name."""
    return {
        name: body for name, body in tf.modules.items() if body.get("source") == RUN_SERVICE_MODULE
    }


def service(tf: Terraform, name: str) -> dict[str, Any]:
    """One Cloud Run service's module call: its inputs (`env`, `secret_env`, `sizing`...)."""
    return services(tf)[name]


def run_service_module() -> Terraform:
    """terraform/modules/run_service itself: the Cloud Run resource every service shares."""
    return load(TERRAFORM_DIR / "modules" / "run_service")


def local_modules(tf: Terraform) -> dict[str, Terraform]:
    """Each call of a module in this repository (`source = "./modules/..."`), parsed."""
    return {
        name: load((tf.directory / body["source"]).resolve())
        for name, body in tf.modules.items()
        if str(body.get("source", "")).startswith("./")
    }


def every_resource(tf: Terraform) -> dict[tuple[str, str], dict[str, Any]]:
    """tf.resources and those of the local modules it calls (named `module.<call>.<name>`)."""
    found = dict(tf.resources)
    for call, module in local_modules(tf).items():
        found |= {
            (rtype, f"module.{call}.{name}"): b for (rtype, name), b in module.resources.items()
        }
    return found


def accounts(value: Any) -> set[str]:
    """Keys of the service accounts (`google_service_account.main["worker"]`) named in `value`."""
    return {m for text in strings(value) for m in _ACCOUNT.findall(text)}


def account_of(expression: Any) -> str | None:
    """`"${google_service_account.main["worker"].email}"` -> "worker"; None otherwise."""
    m = re.fullmatch(r'\$\{google_service_account\.main\["([\w-]+)"\]\.email\}', str(expression))
    return m.group(1) if m else None


def secret_env(tf: Terraform, name: str) -> dict[str, str]:
    """A service's env read from Secret Manager: {env name: google_secret_manager_secret name}.

    Every `NAME = google_secret_manager_secret.x.secret_id` entry in its `secret_env`
    input, whether or not a condition leaves it out of a given deployment.
    """
    value = service(tf, name).get("secret_env", "")
    if isinstance(value, dict):  # a literal map: {NAME: "${google_secret_manager_secret...}"}
        value = ", ".join(f"{k} = {v[2:-1]}" for k, v in value.items() if k.isupper())
    return dict(_SECRET_ENV.findall(str(value)))


def depends_on(body: dict[str, Any]) -> set[tuple[str, str]]:
    """The resources named in a block's explicit `depends_on`."""
    return {
        (ref[1], ref[2]) for ref in references(body.get("depends_on", [])) if ref[0] == "resource"
    }


def dependencies(tf: Terraform, rtype: str, name: str) -> set[tuple[str, str]]:
    """Every resource that (rtype, name) waits for, through references, depends_on and locals."""
    return dependencies_of(tf, tf.resource(rtype, name))


def dependencies_of(tf: Terraform, body: dict[str, Any]) -> set[tuple[str, str]]:
    """Every resource a block (a resource, a module call) waits for, as `dependencies`."""
    seen: set[tuple[str, str]] = set()
    seen_locals: set[str] = set()
    seen_modules: set[str] = set()
    pending: list[Any] = [body]
    while pending:
        for ref in references(pending.pop()):
            if ref[0] == "resource" and (ref[1], ref[2]) not in seen:
                seen.add((ref[1], ref[2]))
                if (ref[1], ref[2]) in tf.resources:
                    pending.append(tf.resources[(ref[1], ref[2])])
            elif ref[0] == "local" and ref[1] not in seen_locals and ref[1] in tf.locals:
                seen_locals.add(ref[1])
                pending.append(tf.locals[ref[1]])
            elif ref[0] == "module" and ref[1] not in seen_modules and ref[1] in tf.modules:
                # A module's outputs wait for its inputs and its depends_on.
                seen_modules.add(ref[1])
                pending.append(tf.modules[ref[1]])
    return seen


def path_of(expression: Any) -> list[str] | None:
    """`"${local.a.b}"` -> ["local", "a", "b"]; None when not a plain reference path."""
    if not isinstance(expression, str):
        return None
    m = _PATH.match(expression)
    return m.group(1).split(".") if m else None


class Evaluator:
    """Evaluate the small subset of expressions used to wire settings files in.

    Supports literals, `each.value...` against a given object, and `local.x...` paths
    where the local is another path or `jsondecode(file("${path.module}/..."))`.
    """

    _JSON_FILE = re.compile(r'^\$\{jsondecode\(file\("\$\{path\.module\}/([^"]+)"\)\)\}$')

    def __init__(self, tf: Terraform) -> None:
        self.tf = tf

    def json_file(self, local_name: str) -> Path | None:
        m = self._JSON_FILE.match(str(self.tf.locals.get(local_name, "")))
        return (self.tf.directory / m.group(1)).resolve() if m else None

    def value(self, expression: Any, each_value: Any = None) -> Any:
        parts = path_of(expression)
        if parts is None:
            if isinstance(expression, str) and "${" in expression:
                raise ValueError(f"cannot evaluate {expression!r}")
            return expression
        if parts[:2] == ["each", "value"]:
            return _walk(each_value, parts[2:])
        if parts[0] == "local":
            return _walk(self.local(parts[1]), parts[2:])
        raise ValueError(f"cannot evaluate {expression!r}")

    def local(self, name: str) -> Any:
        path = self.json_file(name)
        if path is not None:
            return json.loads(path.read_text())
        return self.value(self.tf.locals[name])


def _walk(value: Any, keys: list[str]) -> Any:
    for key in keys:
        value = value[key]
    return value


_VALUE_REF = re.compile(r"(?<![\w.\"])((?:var|local)\.[A-Za-z_][\w.]*)")
_FUNCTIONS: dict[str, Any] = {
    "floor": math.floor,
    "max": max,
    "min": min,
    "contains": lambda items, value: value in items,
    "length": len,
    # The first argument that is neither null nor an empty string, like terraform's.
    "coalesce": lambda *items: next(item for item in items if item not in (None, "")),
    "true": True,
    "false": False,
}
# `COND ? A : B` as a whole expression (one level, no nesting).
_CONDITIONAL = re.compile(r"^(?P<cond>[^?]+?)\s\?\s(?P<then>[^?:]+?)\s:\s(?P<else>[^?:]+)$", re.S)
_ALLOWED_NODES = (
    ast.Expression,
    ast.BoolOp,
    ast.And,
    ast.Or,
    ast.UnaryOp,
    ast.Not,
    ast.USub,
    ast.BinOp,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.Div,
    ast.Compare,
    ast.Eq,
    ast.NotEq,
    ast.Lt,
    ast.LtE,
    ast.Gt,
    ast.GtE,
    ast.Constant,
    ast.List,
    ast.Name,
    ast.Load,
    ast.Call,
    ast.IfExp,
)


def evaluate(expression: str, values: Mapping[str, Any]) -> Any:
    """Evaluate one terraform expression of the kind conditions use, over `values`.

    `values` maps each reference (`"var.lease_s"`, `"var.grader.kind"`,
    `"local.dispatch_deadline_s"`) to its value; a reference without a value raises
    KeyError. Supported: numbers, strings, lists, true/false, arithmetic, comparisons,
    `&&`, `||`, `!`, parentheses, one `COND ? A : B` around the whole expression and
    floor/max/min/contains/length/coalesce. Anything else raises ValueError, so a
    condition rewritten beyond this subset fails its test instead of passing unchecked.
    """
    text = expression.strip()
    if text.startswith("${") and text.endswith("}"):
        text = text[2:-1]
    names: dict[str, Any] = {}

    def name_for(match: re.Match[str]) -> str:
        name = f"_ref{len(names)}"
        names[name] = values[match.group(1)]
        return name

    text = _VALUE_REF.sub(name_for, text)
    text = text.replace("&&", " and ").replace("||", " or ")
    text = re.sub(r"!(?!=)", " not ", text)
    conditional = _CONDITIONAL.match(text.strip())
    if conditional:
        text = f"({conditional['then']}) if ({conditional['cond']}) else ({conditional['else']})"
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"cannot evaluate {expression!r}") from exc
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            raise ValueError(f"cannot evaluate {expression!r}: {type(node).__name__}")
        if isinstance(node, ast.Name) and node.id not in names and node.id not in _FUNCTIONS:
            raise ValueError(f"cannot evaluate {expression!r}: unknown name {node.id}")
        if isinstance(node, ast.Call) and not (
            isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS
        ):
            raise ValueError(f"cannot evaluate {expression!r}: unsupported call")
    code = compile(tree, "<terraform>", "eval")
    return eval(code, {"__builtins__": {}}, {**_FUNCTIONS, **names})  # noqa: S307 - checked AST


def optional_defaults(type_expression: str) -> dict[str, Any]:
    """`object({a = optional(number, 1), b = optional(string, "x"), c = optional(bool,
    true)})` -> {"a": 1, "b": "x", "c": True}."""
    found = re.findall(
        r"(\w+)\s*=\s*optional\(\w+,\s*(\"[^\"]*\"|[-\d.]+|true|false)\)", type_expression
    )
    return {name: json.loads(value) for name, value in found}


def literal_map(expression: str) -> dict[str, str]:
    """The last `{NAME = expr, ...}` literal inside an expression, as {NAME: "${expr}"}."""
    start = expression.rfind("{", 0, expression.rfind("}"))
    body = expression[start + 1 : expression.find("}", start)]
    entries = re.split(r",\s*(?=[A-Za-z_]\w*\s*=(?!=))", body)
    result = {}
    for entry in entries:
        name, _, value = entry.partition("=")
        value = value.strip()
        result[name.strip()] = value[1:-1] if value.startswith('"') else f"${{{value}}}"
    return result
