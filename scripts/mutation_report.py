"""Score a finished `mutmut run` per file, leaving out mutants that only touch log calls.

    python scripts/mutation_report.py [--mutants mutants] [--equivalents FILE] [--min 95]

mutmut records each mutant's test exit code in `mutants/<file>.meta`. A mutant no test
runs ("no tests") counts as surviving: nothing would notice the change. A survivor whose
function, with every `log.<level>(...)` statement removed, is the same as the original
function with the same removal, only changed what is logged: it is reported apart and left
out of the score, as are the survivors listed as equivalent in the equivalents file.
scripts/mutation_run.py does not run either kind at all (mutmut's "skipped"); one skipped
for another reason counts as surviving.

A kill is a test failing on the mutant. A mutant whose run failed with no test failing
(tests/mutation_kills.py wrote down only an error after the tests, or nothing at all) is
counted as surviving and listed as failed outside any test: something the tests left
behind failed the run, whatever the mutant changed.

Each equivalent names its mutant, the change it makes (the lines `mutmut show NAME` prints
as removed and added) and why no input can tell it from the original. An entry whose
mutant no longer exists, now makes another change (mutmut numbers a function's mutants in
order, so an edit above renumbers them) or is killed is stale: it is printed with the
change the mutant makes now, and the run fails rather than hide a survivor behind it.

Only files with results are scored (a run limited to some files leaves the others
unchecked). Exit status 1 when a file scores below --min or an equivalent is stale, 2
when there are no results.

Written here because mutmut prints survivors but no score per file, and knows nothing of
log-only mutants or equivalents.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import sys
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

#: mutmut's exit codes per mutant (mutmut/stats.py): 1 and 3 are kills (37: refused by
#: the type checker), 0 a survivor; 33 (and pytest's 5) mean no test runs the mutant.
#: A mutant whose tests ran past their CPU limit (36, 255, SIGXCPU) made them hang: the
#: tests noticed it, so it counts as killed, as mutation tools count a timeout.
TIMED_OUT = {36, 255, 24, -24, 152}
KILLED = {1, 3, 37} | TIMED_OUT
SURVIVED = {0}
NO_TESTS = {5, 33}
#: mutmut's "skipped": left unrun by scripts/mutation_run.py as only changing a log line.
SKIPPED_RUN = 34
SKIPPED = {SKIPPED_RUN}
NOT_CHECKED = None
LOGGERS = {"log", "logger", "logging"}
ENTRY_KEYS = {"mutant", "before", "after", "reason"}
#: Where tests/mutation_kills.py writes down, per mutant, the tests that failed on it.
KILLS_DIR = ".mutmut-kills"
#: The equivalents file, from the project's root.
EQUIVALENTS = Path("tests/mutation_equivalents.toml")
#: The exit code of a run in which something failed (a test, or the run after them).
FAILED_RUN = 1
#: How tests/mutation_kills.py writes down an error raised after the tests.
AFTER_THE_TESTS = "after the tests: "


@dataclass(frozen=True)
class Change:
    """The lines a mutant removes from its function and those it adds, stripped."""

    before: str
    after: str

    def __str__(self) -> str:
        return f"- {self.before}\n      + {self.after}"


@dataclass(frozen=True)
class Equivalent:
    """A survivor judged equivalent: its mutant, the change it was judged on, and why."""

    mutant: str
    change: Change
    reason: str


@dataclass
class FileScore:
    """What happened to one file's mutants."""

    path: str
    counts: Counter[str] = field(default_factory=Counter)
    survivors: list[str] = field(default_factory=list)
    no_tests: list[str] = field(default_factory=list)
    #: Of the survivors, those whose run failed though no test failed on them.
    outside_tests: list[str] = field(default_factory=list)
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


def mangled_function(name: str) -> str:
    """A mutant's function as mutmut names it: `m.x_f__mutmut_3` is `m.x_f` (and a short
    name's is short)."""
    return name.rsplit("__mutmut_", 1)[0]


class MutatedFile:
    """A file as mutmut wrote it: the original of each function beside its mutants."""

    def __init__(self, source: str) -> None:
        self._lines = source.splitlines()
        self.functions: dict[str, ast.FunctionDef] = {}
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef) and "__mutmut_" in node.name:
                self.functions[node.name] = node

    @staticmethod
    def original_of(short: str) -> str:
        return mangled_function(short) + "__mutmut_orig"

    def _text(self, node: ast.FunctionDef) -> list[str]:
        lines = self._lines[node.lineno - 1 : node.end_lineno]
        return [lines[0].replace(f"def {node.name}(", "def _(", 1), *lines[1:]]

    def change(self, name: str) -> Change | None:
        """What mutant `name` changes (None: no such mutant here), as `mutmut show` has it."""
        short = name.rsplit(".", 1)[-1]
        original = self.original_of(short)
        if short not in self.functions or original not in self.functions:
            return None
        removed: list[str] = []
        added: list[str] = []
        old, new = self._text(self.functions[original]), self._text(self.functions[short])
        for line in difflib.unified_diff(old, new, lineterm="", n=0):
            if line.startswith(("---", "+++", "@@")):
                continue
            (removed if line.startswith("-") else added).append(line[1:].strip())
        # A changed `def` line is compared under a neutral name; shown under its own.
        own = f"def {self.function_name(short)}("
        before, after = ("\n".join(lines) for lines in (removed, added))
        return Change(before.replace("def _(", own, 1), after.replace("def _(", own, 1))

    @staticmethod
    def function_name(short: str) -> str:
        """The mutated function's own name: `x_f__mutmut_1` and `xǁCǁf__mutmut_1` are `f`."""
        mangled = mangled_function(short)
        return mangled.rsplit("ǁ", 1)[-1] if "ǁ" in mangled else mangled.removeprefix("x_")

    def mutants_of_function(self, name: str) -> list[str]:
        """The names of the other mutants of `name`'s function, in the same module."""
        module, _, short = name.rpartition(".")
        stem = mangled_function(short) + "__mutmut_"
        return [
            f"{module}.{other}"
            for other in self.functions
            if other.startswith(stem) and not other.endswith("__mutmut_orig")
        ]

    def is_log_only(self, name: str) -> bool:
        short = name.rsplit(".", 1)[-1]
        original = self.original_of(short)
        if short not in self.functions or original not in self.functions:
            return False
        return _without_logs(self.functions[short]) == _without_logs(self.functions[original])


def _without_logs(node: ast.FunctionDef) -> str:
    copy = ast.parse(ast.unparse(node)).body[0]
    return ast.dump(_DropLogCalls().visit(copy))


def load_equivalents(path: Path) -> list[Equivalent]:
    """Read the equivalents file; an entry missing a key (or with an unknown one), or
    naming a mutant listed before it, is refused."""
    if not path.exists():
        return []
    entries = tomllib.loads(path.read_text()).get("equivalent", [])
    if not isinstance(entries, list):
        raise ValueError(f"{path}: `equivalent` must be an array of tables ([[equivalent]])")
    found: list[Equivalent] = []
    first_of: dict[str, int] = {}
    for number, entry in enumerate(entries, 1):
        # `after` may be empty (the mutant removes the line) but must be written.
        missing = sorted(
            k for k in ENTRY_KEYS if k not in entry or (k != "after" and not str(entry[k]).strip())
        )
        unknown = sorted(set(entry) - ENTRY_KEYS)
        if missing or unknown:
            problems = [f"missing {', '.join(missing)}"] if missing else []
            problems += [f"unknown {', '.join(unknown)}"] if unknown else []
            raise ValueError(f"{path}: entry {number}: {'; '.join(problems)}")
        if entry["mutant"] in first_of:
            raise ValueError(
                f"{path}: entry {number}: {entry['mutant']} is listed already "
                f"(entry {first_of[entry['mutant']]})"
            )
        first_of[entry["mutant"]] = number
        found.append(
            Equivalent(
                entry["mutant"],
                Change(entry["before"].strip(), entry["after"].strip()),
                entry["reason"].strip(),
            )
        )
    return found


def score_file(
    codes: dict[str, int | None],
    source: MutatedFile,
    path: str,
    equivalent: set[str],
    outside_tests: frozenset[str] = frozenset(),
) -> FileScore:
    """Score one file's results; `equivalent` holds the mutants judged (and checked) so,
    `outside_tests` those whose run failed with no test failing (not killed)."""
    result = FileScore(path)
    for name, code in sorted(codes.items()):
        if code in KILLED and name not in outside_tests:
            result.counts["killed"] += 1
        elif code in SURVIVED or code in NO_TESTS or code in SKIPPED or name in outside_tests:
            if name in equivalent:
                result.equivalent.append(name)
            elif source.is_log_only(name):
                result.log_only.append(name)
            else:
                result.survivors.append(name)
                if code in NO_TESTS:
                    result.no_tests.append(name)
                if name in outside_tests:
                    result.outside_tests.append(name)
        elif code is NOT_CHECKED:
            result.counts["not checked"] += 1
        else:
            result.counts[f"exit {code}"] += 1
    return result


@dataclass
class Results:
    """Every mutated file's results and source, by the mutants' module prefix."""

    codes: dict[str, dict[str, int | None]] = field(default_factory=dict)
    sources: dict[str, MutatedFile] = field(default_factory=dict)
    file_of: dict[str, str] = field(default_factory=dict)
    #: The tests that failed on each mutant, as tests/mutation_kills.py wrote them down.
    kills: dict[str, list[str]] = field(default_factory=dict)
    #: Whether the run wrote them down (its tests loaded tests/mutation_kills.py).
    recorded_kills: bool = False

    @classmethod
    def read(cls, mutants: Path) -> Results:
        found = cls()
        for meta in sorted(mutants.rglob("*.py.meta")):
            codes: dict[str, int | None] = json.loads(meta.read_text())["exit_code_by_key"]
            if not codes:
                continue
            path = str(meta.with_suffix("").relative_to(mutants))
            found.codes[path] = codes
            found.sources[path] = MutatedFile(meta.with_suffix("").read_text())
            for name in codes:
                found.file_of[name] = path
        found.recorded_kills = (mutants / KILLS_DIR).is_dir()
        for kills in sorted((mutants / KILLS_DIR).glob("*.txt")):
            found.kills[kills.stem] = kills.read_text(encoding="utf-8").splitlines()
        return found

    def checked(self, path: str) -> bool:
        return any(code is not NOT_CHECKED for code in self.codes[path].values())

    @cached_property
    def failed_outside_tests(self) -> frozenset[str]:
        """The mutants whose run failed though no test failed on them (none without a record).

        Their record holds only errors after the tests, or, for a failed run (exit 1),
        nothing: a test failing on the mutant is always written down.
        """
        if not self.recorded_kills:
            return frozenset()
        found = set()
        for codes in self.codes.values():
            for name, code in codes.items():
                lines = self.kills.get(name, [])
                if code not in KILLED or (not lines and code != FAILED_RUN):
                    continue
                if all(line.startswith(AFTER_THE_TESTS) for line in lines):
                    found.add(name)
        return frozenset(found)


def stale_equivalents(results: Results, equivalents: list[Equivalent]) -> dict[str, str]:
    """Why each stale entry is stale, with the change its mutant makes now, by mutant."""
    stale: dict[str, str] = {}
    outside_tests = results.failed_outside_tests
    for entry in equivalents:
        path = results.file_of.get(entry.mutant)
        if path is None:
            stale[entry.mutant] = "no such mutant any more"
            continue
        source = results.sources[path]
        now = source.change(entry.mutant)
        if now != entry.change:
            moved = [
                other
                for other in source.mutants_of_function(entry.mutant)
                if source.change(other) == entry.change
            ]
            where = f"; the listed change is now {', '.join(moved)}" if moved else ""
            stale[entry.mutant] = f"now makes another change{where}\n      {now}"
        elif results.codes[path][entry.mutant] in KILLED and entry.mutant not in outside_tests:
            by = "".join(f"\n      failed: {k}" for k in results.kills.get(entry.mutant, []))
            stale[entry.mutant] = f"killed, so not equivalent\n      {now}{by}"
    return stale


def report(results: Results, equivalents: list[Equivalent], minimum: float) -> int:
    """Print the scores, the survivors and the stale equivalents; return the exit status."""
    stale = stale_equivalents(results, equivalents)
    listed = {e.mutant for e in equivalents} - set(stale)
    outside_tests = results.failed_outside_tests
    scores = [
        score_file(results.codes[path], results.sources[path], path, listed, outside_tests)
        for path in sorted(results.codes)
        if results.checked(path)
    ]
    status = 0
    if scores:
        _print_scores(scores)
        if outside_tests:
            print("\nruns that failed with no test failing on the mutant (not kills):")
            for name in sorted(outside_tests):
                why = "; ".join(results.kills.get(name, [])) or "nothing written down"
                print(f"  {name}: {why}")
        if equivalents:
            print("\njudged equivalent:")
            for e in sorted(equivalents, key=lambda e: e.mutant):
                print(f"  {e.mutant}: {e.reason}")
    else:
        print("no mutation results: run `mutmut run` first", file=sys.stderr)
        status = 2
    if stale:
        print(f"\nstale entries in the equivalents file ({len(stale)}):")
        for name, why in stale.items():
            print(f"  {name}: {why}")
        status = status or 1
    low = [s.path for s in scores if s.score < minimum]
    if low:
        print(f"\nbelow {minimum:g}%: {', '.join(low)}")
        status = status or 1
    return status


def _print_scores(scores: list[FileScore]) -> None:
    header = f"{'file':<48} {'killed':>6} {'surv.':>5} {'(none)':>6} {'log':>4} {'equiv':>5}"
    print(f"{header} {'score':>6}")
    for s in scores:
        print(
            f"{s.path:<48} {s.counts['killed']:>6} {len(s.survivors):>5} {len(s.no_tests):>6}"
            f" {len(s.log_only):>4} {len(s.equivalent):>5} {s.score:>5.1f}%"
        )
    killed = sum(s.counts["killed"] for s in scores)
    scored = sum(s.scored for s in scores)
    no_tests = sum(len(s.no_tests) for s in scores)
    total = 100 * killed / scored if scored else 100.0
    print(
        f"{'all':<48} {killed:>6} {scored - killed:>5} {no_tests:>6} {'':>4} {'':>5} {total:>5.1f}%"
    )
    print("(none): of the surviving, those no test runs")
    other = sum((s.counts for s in scores), Counter())
    del other["killed"]
    if other:
        print("not scored:", ", ".join(f"{k}: {v}" for k, v in sorted(other.items())))
    print("\nsurviving mutants (`mutmut show NAME` prints the change):")
    for s in scores:
        for name in s.survivors:
            note = " (no tests)" if name in s.no_tests else ""
            note += " (failed outside any test)" if name in s.outside_tests else ""
            print(f"  {name}{note}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--mutants", type=Path, default=Path("mutants"))
    parser.add_argument("--equivalents", type=Path, default=EQUIVALENTS)
    parser.add_argument("--min", type=float, default=95.0, help="lowest acceptable score")
    args = parser.parse_args(argv)
    try:
        equivalents = load_equivalents(args.equivalents)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        print(exc, file=sys.stderr)
        return 2
    return report(Results.read(args.mutants), equivalents, args.min)


if __name__ == "__main__":
    sys.exit(main())
