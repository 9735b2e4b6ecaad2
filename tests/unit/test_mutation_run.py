"""scripts/mutation_run.py: a child's deadline signals it only while its pid is still it."""

from __future__ import annotations

import importlib.util
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

import pytest

from tests.unit.test_mutation_report import MUTATED

SCRIPT = Path(__file__).parents[2] / "scripts" / "mutation_run.py"


@pytest.fixture(scope="module")
def run() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mutation_run", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutation_run"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(["sleep", "30"])
    yield process
    process.kill()
    process.wait()


def test_a_live_childs_start_time_is_read_and_a_gone_one_is_none(
    run: ModuleType, child: subprocess.Popen[bytes]
) -> None:
    assert run.start_time(child.pid) is not None
    assert run.start_time(child.pid) == run.start_time(child.pid)
    child.kill()
    child.wait()
    assert run.start_time(child.pid) is None


def test_a_child_past_its_deadline_is_signalled(
    run: ModuleType, child: subprocess.Popen[bytes]
) -> None:
    deadlines = run.Deadlines(sig=signal.SIGTERM)
    deadlines.register(child.pid, 0.0)
    deadlines.expire(time.time())
    assert child.wait(timeout=10) == -signal.SIGTERM


def test_a_deadline_not_reached_signals_nothing(
    run: ModuleType, child: subprocess.Popen[bytes]
) -> None:
    deadlines = run.Deadlines(sig=signal.SIGTERM)
    deadlines.register(child.pid, 60.0)
    deadlines.expire(time.time())
    assert child.poll() is None


def test_a_pid_now_held_by_another_process_is_spared(
    run: ModuleType, child: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    deadlines = run.Deadlines(sig=signal.SIGTERM)
    deadlines.register(child.pid, 0.0)
    # The registered child is gone and its pid went to a process started later.
    monkeypatch.setattr(run, "start_time", lambda pid: "a later start")
    deadlines.expire(time.time())
    assert child.poll() is None and deadlines.spared == 1


def test_the_keeper_thread_signals_at_the_deadline(
    run: ModuleType, child: subprocess.Popen[bytes]
) -> None:
    deadlines = run.Deadlines(sig=signal.SIGTERM)
    deadlines.register(child.pid, 0.2)
    assert child.wait(timeout=10) == -signal.SIGTERM


def test_main_puts_the_guarded_deadlines_where_mutmuts_runner_looks_them_up(
    run: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Stand-ins for the two mutmut modules main() reaches (mutmut lives in .venv-mutation).
    monkeypatch.syspath_prepend(str(SCRIPT.parent))  # where mutation_report.py is
    called: list[str] = []
    isolation = ModuleType("mutmut.workers.isolation")
    isolation.register_timeout = lambda pid, timeout_s: None  # type: ignore[attr-defined]
    isolation.ForkRunner = type("ForkRunner", (Runner,), {})  # type: ignore[attr-defined]
    isolation.ForkServerRunner = type("ForkServerRunner", (Runner,), {})  # type: ignore[attr-defined]
    isolation.MutantResult = Result  # type: ignore[attr-defined]
    entry = ModuleType("mutmut.__main__")
    entry.cli = lambda: called.append("cli")  # type: ignore[attr-defined]
    workers = ModuleType("mutmut.workers")
    workers.isolation = isolation  # type: ignore[attr-defined]
    mutmut_state = ModuleType("mutmut.state")
    mutmut_state.state = lambda: None  # type: ignore[attr-defined]
    for name, module in {
        "mutmut": ModuleType("mutmut"),
        "mutmut.__main__": entry,
        "mutmut.state": mutmut_state,
        "mutmut.workers": workers,
        "mutmut.workers.isolation": isolation,
    }.items():
        monkeypatch.setitem(sys.modules, name, module)
    run.main()
    keeper = isolation.register_timeout
    assert called == ["cli"] and isinstance(keeper.__self__, run.Deadlines)
    for runner in (isolation.ForkRunner, isolation.ForkServerRunner):
        assert runner.submit is not Runner.submit
    learning = isolation.ForkRunner.wait_for_result
    assert learning is not Runner.wait_for_result


class Result(NamedTuple):
    """mutmut's MutantResult, positionally."""

    mutant_name: str
    exit_code: int
    duration: float


class Runner:
    """A mutmut runner's submit: what it was given to run, and what it settled itself."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self._no_tests_results: list[Result] = []

    def submit(self, mutant_name: str, tests: list[str], limit: int, estimated: float) -> None:
        self.ran.append(mutant_name)

    def wait_for_result(self, timeout: float | None = None) -> Result:
        return self._no_tests_results.pop(0)


def reloaded_report() -> ModuleType:
    report = SCRIPT.parent / "mutation_report.py"
    spec = importlib.util.spec_from_file_location("mutation_report", report)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_mutant_no_test_can_kill_is_skipped_and_the_others_run(
    run: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(SCRIPT.parent))  # where mutation_report.py is
    from mutation_report import Change, Equivalent

    mutated = tmp_path / "shared" / "domain" / "limits.py"
    mutated.parent.mkdir(parents=True)
    mutated.write_text(MUTATED)  # x_note__mutmut_1 changes a log line, the others not
    runner = type("ForkRunner", (Runner,), {})
    monkeypatch.setitem(sys.modules, "mutmut", ModuleType("mutmut"))
    monkeypatch.setitem(sys.modules, "mutmut.workers", ModuleType("mutmut.workers"))
    isolation = ModuleType("mutmut.workers.isolation")
    isolation.MutantResult = Result  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "mutmut.workers.isolation", isolation)
    judged = [
        # Listed with the change it makes: left unrun.
        Equivalent(
            "shared.domain.limits.x_ceiling__mutmut_2",
            Change('return "refused"', 'return "XXrefusedXX"'),
            "a reason",
        ),
        # Listed with a change it no longer makes: run, for the report to name it.
        Equivalent(
            "shared.domain.limits.x_ceiling__mutmut_3",
            Change('return "refused"', 'return "XXrefusedXX"'),
            "a reason",
        ),
    ]
    unrun = run.Unrun(tmp_path, equivalents=judged)
    # The stats run's own tests load mutation_report.py again under its module name.
    monkeypatch.setitem(sys.modules, "mutation_report", reloaded_report())
    assert "shared.domain.limits.x_note__mutmut_orig" not in unrun  # no mutant
    run.skip_unrun(runner, unrun)
    submitted = runner()
    for number in ("x_note__mutmut_1", "x_ceiling__mutmut_1", "x_ceiling__mutmut_2"):
        submitted.submit(f"shared.domain.limits.{number}", ["t"], 10, 1.0)
    submitted.submit("shared.domain.limits.x_ceiling__mutmut_3", ["t"], 10, 1.0)
    submitted.submit("shared.domain.gone.x_f__mutmut_1", ["t"], 10, 1.0)  # no such file: run
    assert submitted.ran == [
        "shared.domain.limits.x_ceiling__mutmut_1",
        "shared.domain.limits.x_ceiling__mutmut_3",
        "shared.domain.gone.x_f__mutmut_1",
    ]
    assert submitted._no_tests_results == [
        Result("shared.domain.limits.x_note__mutmut_1", 34, 0.0),
        Result("shared.domain.limits.x_ceiling__mutmut_2", 34, 0.0),
    ]


SIBLING = "shared.domain.limits.x_ceiling__mutmut_"


def killed(kills: Path, mutant: str, *lines: str) -> None:
    """What tests/mutation_kills.py writes down for a mutant its tests failed on."""
    kills.mkdir(exist_ok=True)
    (kills / f"{mutant}.txt").write_text("".join(f"{line}\n" for line in lines))


def test_a_functions_killers_are_its_first_failing_tests_latest_first(
    run: ModuleType, tmp_path: Path
) -> None:
    killers = run.Killers(tmp_path)
    killed(
        tmp_path, f"{SIBLING}1", "tests/t.py::a[x (y)] (call): AssertionError", "after the tests: E"
    )
    killed(tmp_path, f"{SIBLING}2", "tests/t.py::b (setup): KeyError")
    killed(tmp_path, f"{SIBLING}3", "after the tests: ResourceWarning")  # no test failed
    # Run again by name: its record holds the earlier run's test, then this run's (a again).
    killed(tmp_path, f"{SIBLING}4", "tests/t.py::c (call): E", "tests/t.py::a[x (y)] (teardown): E")
    killed(tmp_path, "shared.domain.limits.x_clamp__mutmut_1", "tests/t.py::c (call): E")
    for number in (1, 2, 3, 4, 5):  # 5: nothing written down
        killers.learn(f"{SIBLING}{number}")
    killers.learn("shared.domain.limits.x_clamp__mutmut_1")
    tests = {"tests/t.py::a[x (y)]", "tests/t.py::b", "tests/t.py::c"}
    assert killers.first(f"{SIBLING}9", tests) == ["tests/t.py::a[x (y)]", "tests/t.py::b"]
    assert killers.first(f"{SIBLING}9", {"tests/t.py::b"}) == ["tests/t.py::b"]
    assert killers.first("shared.domain.limits.x_note__mutmut_1", tests) == []


class Forking:
    """mutmut's ForkRunner, as far as ordering goes: the child sorts its tests by duration
    (read when it is forked), and results come back in the order they are queued."""

    def __init__(self, durations: dict[str, float], results: list[Result]) -> None:
        self._durations = durations
        self._results = results
        self.ran: list[list[str]] = []

    def submit(self, mutant_name: str, tests: list[str], limit: int, estimated: float) -> None:
        self.ran.append(sorted(tests, key=lambda test: self._durations[test]))

    def wait_for_result(self, timeout: float | None = None) -> Result:
        return self._results.pop(0)


def test_a_mutant_runs_its_functions_killers_first_and_the_stats_are_left_as_they_were(
    run: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(SCRIPT.parent))  # where mutation_report.py is
    durations = {"fast": 0.1, "slow": 3.0, "slower": 9.0}
    stats = dict(durations)
    results = [Result(f"{SIBLING}1", 1, 9.0), Result(f"{SIBLING}2", 0, 9.0)]
    runner = type("ForkRunner", (Forking,), {})
    run.killers_first(runner, run.Killers(tmp_path), lambda: durations)
    forking = runner(durations, results)
    killed(tmp_path, f"{SIBLING}1", "slower (call): AssertionError")
    killed(tmp_path, f"{SIBLING}2", "slow (call): AssertionError")  # survived: not learned

    forking.submit(f"{SIBLING}1", ["slower", "fast", "slow"], 10, 1.0)
    assert forking.wait_for_result().mutant_name == f"{SIBLING}1"
    forking.submit(f"{SIBLING}2", ["slower", "fast", "slow"], 10, 1.0)
    assert forking.wait_for_result().exit_code == 0
    forking.submit(f"{SIBLING}3", ["fast", "slow", "slower"], 10, 1.0)
    forking.submit("shared.domain.limits.x_clamp__mutmut_1", ["fast", "slower"], 10, 1.0)
    assert forking.ran == [
        ["fast", "slow", "slower"],
        ["slower", "fast", "slow"],
        ["slower", "fast", "slow"],
        ["fast", "slower"],
    ]
    assert durations == stats
