"""Under `make mutation`, each failing test is written down under the mutant it failed on.

mutmut keeps only a mutant's exit code; a mutant "killed" by a test that failed for its own
reasons (a shared file, a clock) looks like any other kill. This plugin appends the failing
test's id and the last line of its error to `.mutmut-kills/<mutant>.txt` in the mutated
tree, so `scripts/mutation_report.py` can name what killed an entry judged equivalent.
Outside a mutant's run (no `MUTANT_UNDER_TEST`, or mutmut's own passes) it does nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

#: Absolute, taken where pytest starts (the mutated tree), as a test may change directory.
KILLS_DIR = Path(".mutmut-kills").absolute()
#: Values mutmut gives MUTANT_UNDER_TEST for its own passes, not for a mutant.
NOT_A_MUTANT = {"", "fail", "stats", "list_all_tests", "mutant_generation"}


def kills_file(mutant: str) -> Path:
    return KILLS_DIR / f"{mutant}.txt"


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    mutant = os.environ.get("MUTANT_UNDER_TEST", "")
    if not report.failed or mutant in NOT_A_MUTANT:
        return
    lines = str(report.longrepr).strip().splitlines()
    KILLS_DIR.mkdir(exist_ok=True)
    with kills_file(mutant).open("a", encoding="utf-8") as out:
        out.write(f"{report.nodeid} ({report.when}): {lines[-1] if lines else '?'}\n")
