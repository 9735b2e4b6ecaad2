"""Under `make mutation`, each failing test is written down under the mutant it failed on.

mutmut keeps only a mutant's exit code; a mutant "killed" by a test that failed for its own
reasons (a shared file, a clock) looks like any other kill. This plugin appends the failing
test's id and the last line of its error to `.mutmut-kills/<mutant>.txt` in the mutated
tree, so `scripts/mutation_report.py` can name what killed an entry judged equivalent.

A run can also fail after its last test passed: pytest collects the garbage at the end,
and an object a test left open (a socket, say) warns then, which the warning filters
make an error. That error is written down too, under AFTER_THE_TESTS, and the report
does not count it as a kill: no test failed on the mutant.
Outside a mutant's run (no `MUTANT_UNDER_TEST`, or mutmut's own passes) it does nothing.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from pathlib import Path

import pytest

#: Absolute, taken where pytest starts (the mutated tree), as a test may change directory.
KILLS_DIR = Path(".mutmut-kills").absolute()
#: Values mutmut gives MUTANT_UNDER_TEST for its own passes, not for a mutant.
NOT_A_MUTANT = {"", "fail", "stats", "list_all_tests", "mutant_generation"}
#: How an error raised once the tests have run (as the session ends) is written down.
AFTER_THE_TESTS = "after the tests"


def kills_file(mutant: str) -> Path:
    return KILLS_DIR / f"{mutant}.txt"


def _write_down(mutant: str, what: str, error: str) -> None:
    lines = error.strip().splitlines()
    KILLS_DIR.mkdir(exist_ok=True)
    with kills_file(mutant).open("a", encoding="utf-8") as out:
        out.write(f"{what}: {lines[-1] if lines else '?'}\n")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    mutant = os.environ.get("MUTANT_UNDER_TEST", "")
    if report.failed and mutant not in NOT_A_MUTANT:
        _write_down(mutant, f"{report.nodeid} ({report.when})", str(report.longrepr))


@pytest.hookimpl(wrapper=True)
def pytest_cmdline_main(config: pytest.Config) -> Generator[None, object, object]:
    # The session turns what fails in a test into an exit status; what escapes it was
    # raised as the session ended (its unconfigure and cleanups: unraisables, threads).
    mutant = os.environ.get("MUTANT_UNDER_TEST", "")
    try:
        return (yield)
    except Exception as exc:
        if mutant not in NOT_A_MUTANT:
            _write_down(mutant, AFTER_THE_TESTS, f"{type(exc).__name__}: {exc}".splitlines()[0])
        raise
