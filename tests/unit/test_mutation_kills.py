"""tests/mutation_kills.py: under a mutant, a failing test is written down; otherwise nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest

from tests import mutation_kills


def report(
    outcome: Literal["passed", "failed", "skipped"], longrepr: str = ""
) -> pytest.TestReport:
    return pytest.TestReport(
        "tests/unit/test_x.py::test_y", ("test_x.py", 1, "test_y"), {}, outcome, longrepr, "call"
    )


def test_a_test_failing_on_a_mutant_is_written_down_with_its_last_error_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mutation_kills, "KILLS_DIR", tmp_path / ".mutmut-kills")
    monkeypatch.setenv("MUTANT_UNDER_TEST", "shared.domain.ids.x__b32__mutmut_2")
    mutation_kills.pytest_runtest_logreport(report("failed", "Traceback\nAssertionError: 2 != 3"))
    mutation_kills.pytest_runtest_logreport(report("passed"))
    written = (tmp_path / ".mutmut-kills" / "shared.domain.ids.x__b32__mutmut_2.txt").read_text()
    assert written == "tests/unit/test_x.py::test_y (call): AssertionError: 2 != 3\n"


@pytest.mark.parametrize("mutant", ["", "fail", "stats"])
def test_outside_a_mutants_run_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mutant: str
) -> None:
    monkeypatch.setattr(mutation_kills, "KILLS_DIR", tmp_path / ".mutmut-kills")
    monkeypatch.setenv("MUTANT_UNDER_TEST", mutant)
    mutation_kills.pytest_runtest_logreport(report("failed", "AssertionError"))
    assert not (tmp_path / ".mutmut-kills").exists()


def end_of_run(error: Exception) -> Exception | None:
    """Drive the session's wrapper as pytest does when the session ends raising `error`."""
    run = mutation_kills.pytest_cmdline_main(None)  # type: ignore[arg-type]
    next(run)
    try:
        run.throw(error)
    except Exception as raised:
        return raised
    return None


def test_an_error_after_the_tests_is_written_down_apart_and_still_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mutation_kills, "KILLS_DIR", tmp_path / ".mutmut-kills")
    monkeypatch.setenv("MUTANT_UNDER_TEST", "shared.domain.ids.x__b32__mutmut_2")
    leaked = pytest.PytestUnraisableExceptionWarning(
        "Exception ignored in: <socket.socket fd=39>\nEnable tracemalloc to get traceback"
    )
    assert end_of_run(leaked) is leaked
    written = (tmp_path / ".mutmut-kills" / "shared.domain.ids.x__b32__mutmut_2.txt").read_text()
    assert written == (
        "after the tests: PytestUnraisableExceptionWarning:"
        " Exception ignored in: <socket.socket fd=39>\n"
    )


def test_an_error_after_the_tests_outside_a_mutants_run_is_only_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mutation_kills, "KILLS_DIR", tmp_path / ".mutmut-kills")
    monkeypatch.setenv("MUTANT_UNDER_TEST", "")
    leaked = ResourceWarning("unclosed")
    assert end_of_run(leaked) is leaked
    assert not (tmp_path / ".mutmut-kills").exists()
