"""The mutation scorer, on results shaped as mutmut 3 writes them (mutants/<file>.meta)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]

#: A file as mutmut writes it: the original of `ceiling` beside three mutants, and a
#: function whose mutant only changes a log line.
MUTATED = """\
import logging

log = logging.getLogger(__name__)


def x_ceiling__mutmut_orig(count, limit):
    if count >= limit:
        return "refused"
    return "admitted"


def x_ceiling__mutmut_1(count, limit):
    if count > limit:
        return "refused"
    return "admitted"


def x_ceiling__mutmut_2(count, limit):
    if count >= limit:
        return "XXrefusedXX"
    return "admitted"


def x_ceiling__mutmut_3(count, limit):
    if count >= limit:
        return "refused"
    return "XXadmittedXX"


def x_clamp__mutmut_orig(count, limit):
    return min(
        count,
        limit,
    )


def x_clamp__mutmut_1(count, limit):
    return min(
        count,
    )


def x_note__mutmut_orig(count):
    log.info("counted %d", count)
    return count


def x_note__mutmut_1(count):
    log.info("XXcounted %dXX", count)
    return count
"""

RAISED = ("if count >= limit:", "if count > limit:")


def scorer() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "mutation_report", REPO / "scripts" / "mutation_report.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def mutants(tmp_path: Path, codes: dict[str, int | None], source: str = MUTATED) -> Path:
    """A mutants/ folder holding one mutated file, shared/domain/limits.py, and its results."""
    folder = tmp_path / "mutants"
    target = folder / "shared" / "domain" / "limits.py"
    target.parent.mkdir(parents=True)
    target.write_text(source)
    meta = {
        "exit_code_by_key": {f"shared.domain.limits.{k}": v for k, v in codes.items()},
        "hash_by_function_name": {},
        "type_check_error_by_key": {},
        "durations_by_key": {},
        "estimated_durations_by_key": {},
    }
    Path(f"{target}.meta").write_text(json.dumps(meta))
    return folder


def equivalents(tmp_path: Path, *entries: dict[str, str]) -> Path:
    lines = []
    for entry in entries:
        lines.append("[[equivalent]]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in entry.items()]
    path = tmp_path / "equivalents.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def entry(number: int, before: str, after: str, reason: str = "why") -> dict[str, str]:
    return {
        "mutant": f"shared.domain.limits.x_ceiling__mutmut_{number}",
        "before": before,
        "after": after,
        "reason": reason,
    }


def run(folder: Path, listed: Path | None = None, minimum: float = 95.0) -> int:
    args = ["--mutants", str(folder), "--min", str(minimum)]
    args += ["--equivalents", str(listed or folder / "none.toml")]
    status: int = scorer().main(args)
    return status


def test_mutants_no_test_runs_count_as_surviving(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = mutants(tmp_path, {"x_ceiling__mutmut_1": 1, "x_ceiling__mutmut_2": 33})
    status = run(folder, minimum=50.0)
    out = capsys.readouterr().out
    assert "shared/domain/limits.py" in out and " 50.0%" in out
    assert "shared.domain.limits.x_ceiling__mutmut_2 (no tests)" in out
    assert status == 0
    assert run(folder, minimum=95.0) == 1


@pytest.mark.parametrize("code", [36, -24, 255])
def test_a_mutant_whose_tests_ran_past_their_cpu_limit_counts_as_killed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], code: int
) -> None:
    folder = mutants(tmp_path, {"x_ceiling__mutmut_1": 0, "x_ceiling__mutmut_2": code})
    assert run(folder, minimum=50.0) == 0
    assert " 50.0%" in capsys.readouterr().out


@pytest.mark.parametrize("code", [0, 34], ids=["survived", "left unrun"])
def test_a_listed_equivalent_is_left_out_of_the_score(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], code: int
) -> None:
    folder = mutants(tmp_path, {"x_ceiling__mutmut_1": code, "x_ceiling__mutmut_2": 1})
    listed = equivalents(tmp_path, entry(1, *RAISED, reason="count never equals limit"))
    status = run(folder, listed)
    out = capsys.readouterr().out
    assert status == 0
    assert "100.0%" in out and "count never equals limit" in out
    assert "stale" not in out


def test_an_equivalent_whose_mutant_now_makes_another_change_fails_and_still_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The entry was judged on mutant 1's change; an edit renumbered it to 3's place.
    folder = mutants(tmp_path, {"x_ceiling__mutmut_1": 1, "x_ceiling__mutmut_3": 0})
    listed = equivalents(tmp_path, entry(3, *RAISED))
    status = run(folder, listed, minimum=0.0)
    out = capsys.readouterr().out
    assert status == 1
    assert "shared.domain.limits.x_ceiling__mutmut_3: now makes another change" in out
    assert "the listed change is now shared.domain.limits.x_ceiling__mutmut_1" in out
    assert '+ return "XXadmittedXX"' in out  # the change mutant 3 makes now
    assert " 50.0%" in out  # the survivor the entry no longer covers is scored


def test_an_equivalent_whose_mutant_is_gone_or_killed_is_stale(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = mutants(tmp_path, {"x_ceiling__mutmut_1": 1})
    gone = {**entry(1, *RAISED), "mutant": "shared.domain.limits.x_ceiling__mutmut_9"}
    listed = equivalents(tmp_path, gone, entry(1, *RAISED))
    assert run(folder, listed) == 1
    out = capsys.readouterr().out
    assert "x_ceiling__mutmut_9: no such mutant any more" in out
    assert "x_ceiling__mutmut_1: killed, so not equivalent" in out


@pytest.mark.parametrize("missing", ["reason", "before", "after", "mutant"])
def test_an_equivalent_without_its_change_or_reason_is_refused(
    tmp_path: Path, missing: str, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = mutants(tmp_path, {"x_ceiling__mutmut_1": 0})
    incomplete = {k: v for k, v in entry(1, *RAISED).items() if k != missing}
    assert run(folder, equivalents(tmp_path, incomplete)) == 2
    assert f"missing {missing}" in capsys.readouterr().err


def test_a_mutant_listed_twice_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = mutants(tmp_path, {"x_ceiling__mutmut_1": 0})
    twice = equivalents(tmp_path, entry(1, *RAISED), entry(1, *RAISED))
    assert run(folder, twice) == 2
    assert "entry 2: shared.domain.limits.x_ceiling__mutmut_1 is listed already (entry 1)" in (
        capsys.readouterr().err
    )


def test_an_equivalent_that_removes_a_line_is_written_with_an_empty_after(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = mutants(tmp_path, {"x_ceiling__mutmut_1": 1, "x_clamp__mutmut_1": 0})
    removed = {
        "mutant": "shared.domain.limits.x_clamp__mutmut_1",
        "before": "limit,",
        "after": "",
        "reason": "limit is never below count here",
    }
    assert run(folder, equivalents(tmp_path, removed)) == 0
    assert "limit is never below count here" in capsys.readouterr().out


def test_equivalents_listed_by_name_alone_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = mutants(tmp_path, {"x_ceiling__mutmut_1": 0})
    listed = tmp_path / "old.toml"
    listed.write_text('[equivalent]\n"shared.domain.limits.x_ceiling__mutmut_1" = "why"\n')
    assert run(folder, listed) == 2
    assert "array of tables" in capsys.readouterr().err


def test_a_mutant_that_only_changes_a_log_line_is_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = mutants(tmp_path, {"x_note__mutmut_1": 0, "x_ceiling__mutmut_1": 1})
    assert run(folder) == 0
    out = capsys.readouterr().out
    assert "100.0%" in out and "x_note__mutmut_1" not in out.split("surviving mutants")[1]


def test_files_left_unchecked_by_a_partial_run_are_not_scored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = mutants(tmp_path, {"x_ceiling__mutmut_1": None, "x_ceiling__mutmut_2": None})
    assert run(folder) == 2
    assert "no mutation results" in capsys.readouterr().err


def test_a_killed_equivalent_names_the_tests_that_failed_on_its_mutant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = mutants(tmp_path, {"x_ceiling__mutmut_1": 1})
    kills = folder / ".mutmut-kills"
    kills.mkdir()
    (kills / "shared.domain.limits.x_ceiling__mutmut_1.txt").write_text(
        "tests/unit/test_a.py::test_b (call): AssertionError\n", encoding="utf-8"
    )
    assert run(folder, equivalents(tmp_path, entry(1, *RAISED))) == 1
    out = capsys.readouterr().out
    assert "failed: tests/unit/test_a.py::test_b (call): AssertionError" in out


def kills_written(folder: Path, **lines: str) -> None:
    """What tests/mutation_kills.py wrote down, by mutant (the short name)."""
    kills = folder / ".mutmut-kills"
    kills.mkdir()
    for short, text in lines.items():
        (kills / f"shared.domain.limits.{short}.txt").write_text(text, encoding="utf-8")


def test_a_run_that_failed_with_no_test_failing_is_not_a_kill(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = mutants(
        tmp_path,
        {"x_ceiling__mutmut_1": 1, "x_ceiling__mutmut_2": 1, "x_ceiling__mutmut_3": 1},
    )
    after = "after the tests: PytestUnraisableExceptionWarning: Exception ignored in: <socket>\n"
    test = "tests/unit/test_a.py::test_b (call): AssertionError\n"
    # 1: a test failed; 2: only the end of the run did; 3: nothing was written down.
    kills_written(folder, x_ceiling__mutmut_1=test + after, x_ceiling__mutmut_2=after)
    assert run(folder, minimum=30.0) == 0
    out = capsys.readouterr().out
    assert " 33.3%" in out
    assert "shared.domain.limits.x_ceiling__mutmut_2 (failed outside any test)" in out
    assert "shared.domain.limits.x_ceiling__mutmut_3 (failed outside any test)" in out
    assert "x_ceiling__mutmut_1 (failed" not in out
    assert "x_ceiling__mutmut_2: after the tests: PytestUnraisableExceptionWarning" in out
    assert "x_ceiling__mutmut_3: nothing written down" in out


def test_an_error_raised_out_of_the_run_after_the_tests_is_not_a_kill(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # mutmut writes 255 when the test run raises; 36 is a CPU-limit timeout with no record.
    folder = mutants(tmp_path, {"x_ceiling__mutmut_1": 255, "x_ceiling__mutmut_2": 36})
    kills_written(folder, x_ceiling__mutmut_1="after the tests: ResourceWarning: unclosed\n")
    assert run(folder, minimum=50.0) == 0
    out = capsys.readouterr().out
    assert " 50.0%" in out
    assert "shared.domain.limits.x_ceiling__mutmut_1 (failed outside any test)" in out
    assert "x_ceiling__mutmut_2 (" not in out


def test_an_equivalent_whose_run_failed_with_no_test_failing_is_not_stale(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = mutants(tmp_path, {"x_ceiling__mutmut_1": 1, "x_ceiling__mutmut_2": 1})
    kills_written(
        folder,
        x_ceiling__mutmut_1="after the tests: ResourceWarning: unclosed <socket>\n",
        x_ceiling__mutmut_2="tests/unit/test_a.py::test_b (call): AssertionError\n",
    )
    assert run(folder, equivalents(tmp_path, entry(1, *RAISED))) == 0
    out = capsys.readouterr().out
    assert "stale" not in out and "100.0%" in out


def test_a_changed_def_line_is_shown_under_the_functions_own_name() -> None:
    source = (
        "class C:\n"
        "    def xǁCǁstart__mutmut_orig(self, name=''):\n"
        "        return name\n"
        "    def xǁCǁstart__mutmut_1(self, name='XXXX'):\n"
        "        return name\n"
    )
    change = scorer().MutatedFile(source).change("m.xǁCǁstart__mutmut_1")
    assert (change.before, change.after) == (
        "def start(self, name=''):",
        "def start(self, name='XXXX'):",
    )


def test_a_skipped_mutant_is_log_only_when_it_changes_a_log_line_and_surviving_otherwise(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = mutants(tmp_path, {"x_note__mutmut_1": 34, "x_ceiling__mutmut_1": 34})
    assert run(folder, minimum=0.0) == 0
    out = capsys.readouterr().out
    assert "shared/domain/limits.py" in out and "  0.0%" in out
    survivors = out.split("surviving mutants")[1]
    assert "x_ceiling__mutmut_1" in survivors and "x_note__mutmut_1" not in survivors
