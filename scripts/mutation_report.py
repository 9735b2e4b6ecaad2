"""Score a finished `mutmut run` per file, leaving out mutants that only touch log calls.

    python scripts/mutation_report.py [--mutants mutants] [--equivalents FILE] [--min 90]

mutmut records each mutant's test exit code in `mutants/<file>.meta`. A survivor whose
function, with every `log.<level>(...)` statement removed, is the same as the original
function with the same removal, only changed what is logged: it is reported apart and left
out of the score, as are the survivors listed as equivalent (with a reason) in the
equivalents file. Exit status 1 when a file scores below --min.

Written here because mutmut prints survivors but no score per file, and knows nothing of
log-only mutants.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

#: mutmut's exit codes per mutant (mutmut/stats.py): 1 and 3 are kills, 0 a survivor.
KILLED = {1, 3, 37}
SURVIVED = {0}
LOGGERS = {"log", "logger", "logging"}


@dataclass
class FileScore:
    """What happened to one file's mutants."""

    path: str
    counts: Counter[str] = field(default_factory=Counter)
    survivors: list[str] = field(default_factory=list)
    log_only: list[str] = field(default_factory=list)
    equivalent: list[str] = field(default_factory=list)

    @property
    def scored(self) -> int:
        return self.counts["killed"] + len(self.survivors)

    @property
    def score(self) -> float:
        return 100.0 * self.counts["killed"] / self.scored if self.scored else 100.0


class _DropLogCalls(ast.NodeTransformer):
    """Remove what only shapes log lines; name the function alike for comparison."""

    def visit_Expr(self, node: ast.Expr) -> ast.AST | None:
        call = node.value
        if (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and isinstance(call.func.value, ast.Name)
            and call.func.value.id in LOGGERS
        ):
            return ast.Pass()
        return node

    def visit_With(self, node: ast.With) -> ast.AST | list[ast.stmt]:
        # `with job_context(...)` only tags log lines: keep its body, drop the tagging.
        self.generic_visit(node)
        tags = [
            item.context_expr
            for item in node.items
            if isinstance(item.context_expr, ast.Call)
            and isinstance(item.context_expr.func, ast.Name)
            and item.context_expr.func.id == "job_context"
        ]
        return node.body if len(tags) == len(node.items) else node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        node.name = "_"
        self.generic_visit(node)
        return node


def _functions(source: str) -> dict[str, ast.FunctionDef]:
    found: dict[str, ast.FunctionDef] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and "__mutmut_" in node.name:
            found[node.name] = node
    return found


def _without_logs(node: ast.FunctionDef) -> str:
    copy = ast.parse(ast.unparse(node)).body[0]
    return ast.dump(_DropLogCalls().visit(copy))


def _is_log_only(name: str, functions: dict[str, ast.FunctionDef]) -> bool:
    short = name.rsplit(".", 1)[-1]
    original = short.rsplit("__mutmut_", 1)[0] + "__mutmut_orig"
    if short not in functions or original not in functions:
        return False
    return _without_logs(functions[short]) == _without_logs(functions[original])


def score_file(meta: Path, equivalents: dict[str, str]) -> FileScore:
    source_file = meta.with_suffix("")
    codes: dict[str, int | None] = json.loads(meta.read_text())["exit_code_by_key"]
    functions = _functions(source_file.read_text())
    result = FileScore(str(source_file))
    for name, code in sorted(codes.items()):
        if code in KILLED:
            result.counts["killed"] += 1
        elif code in SURVIVED:
            if name in equivalents:
                result.equivalent.append(name)
            elif _is_log_only(name, functions):
                result.log_only.append(name)
            else:
                result.survivors.append(name)
        else:
            result.counts[f"exit {code}"] += 1
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutants", type=Path, default=Path("mutants"))
    parser.add_argument("--equivalents", type=Path, default=Path("tests/mutation_equivalents.toml"))
    parser.add_argument("--min", type=float, default=90.0, help="lowest acceptable score")
    args = parser.parse_args()

    equivalents: dict[str, str] = {}
    if args.equivalents.exists():
        equivalents = tomllib.loads(args.equivalents.read_text())["equivalent"]
    scores = [
        score_file(meta, equivalents)
        for meta in sorted(args.mutants.rglob("*.py.meta"))
        if json.loads(meta.read_text())["exit_code_by_key"]
    ]
    if not scores:
        print("no mutation results: run `mutmut run` first", file=sys.stderr)
        return 2
    print(f"{'file':<48} {'killed':>6} {'surv.':>5} {'log':>4} {'equiv':>5} {'score':>6}")
    for s in scores:
        path = s.path.removeprefix(str(args.mutants) + "/")
        print(
            f"{path:<48} {s.counts['killed']:>6} {len(s.survivors):>5} {len(s.log_only):>4}"
            f" {len(s.equivalent):>5} {s.score:>5.1f}%"
        )
    killed = sum(s.counts["killed"] for s in scores)
    scored = sum(s.scored for s in scores)
    total = 100 * killed / scored
    print(f"{'all':<48} {killed:>6} {scored - killed:>5} {'':>4} {'':>5} {total:>5.1f}%")
    other = sum((s.counts for s in scores), Counter())
    del other["killed"]
    if other:
        print("not scored:", ", ".join(f"{k}: {v}" for k, v in sorted(other.items())))
    print("\nsurviving mutants (`mutmut show NAME` prints the change):")
    for s in scores:
        for name in s.survivors:
            print(f"  {name}")
    if equivalents:
        print("\njudged equivalent:")
        for name, why in sorted(equivalents.items()):
            print(f"  {name}: {why}")
    low = [s.path for s in scores if s.score < args.min]
    if low:
        print(f"\nbelow {args.min:.0f}%: {', '.join(low)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
