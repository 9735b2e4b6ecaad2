"""`mutmut run`, with a wall-clock timeout that signals only the child it was set for.

    python scripts/mutation_run.py run [NAME ...]

mutmut (3.8.1) gives each forked child a wall-clock deadline and, at that deadline, sends
SIGXCPU to the child's pid, whether or not that child is still alive: a deadline is never
cancelled. A long run forks thousands of children, each starting threads, and Linux hands
out pids (and thread ids) again once it reaches `kernel.pid_max` (32,768 by default): a
stale deadline then hits whichever process, or process of a thread, holds that pid now.
That is usually another mutant's child, which dies as "timed out", which counts as killed.

This wrapper replaces mutmut's deadline keeper with one that remembers each child by its
pid and its start time (`/proc/PID/stat`, field 22) and signals the pid only while both
match. Written here because mutmut has no option for it.

It also leaves unrun the mutants no test can kill, as `scripts/mutation_report.py` judges
them from the mutated tree: those that only change a log line, and those
`tests/mutation_equivalents.toml` lists with the change they make now (an entry whose
mutant now makes another change is run, and the report fails on it). The report leaves
both out of the score, and each ran every test that reaches its function to survive (in
the run of 2026-12-03, 493 log-only survivors took 67 of the 205 minutes of tests its
first 10,870 mutants ran; docs/testing.md). They are recorded as mutmut's "skipped" (exit
code 34).
And it runs first, for each mutant, the tests that killed its function's earlier mutants
in this run (`Killers`): mutmut runs them fastest first and stops at the first failure,
and in a function that hundreds of tests reach, the test that notices a change can come
after a minute of others, for every one of the function's mutants.
Everything else is mutmut's own command line.
"""

from __future__ import annotations

import contextlib
import heapq
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Container, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mutation_report import Equivalent

PROC = Path("/proc")
#: The mutated tree, from the project's root.
MUTANTS = Path("mutants")


def start_time(pid: int) -> str | None:
    """The pid's start time in clock ticks since boot, or None when no such pid lives."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # Field 2, the command, is in parentheses and may hold spaces: split after it.
    return stat.rsplit(")", 1)[1].split()[19]


class Deadlines:
    """Sends SIGXCPU to a child at its deadline, if that child is still the one registered."""

    def __init__(self, sig: int = signal.SIGXCPU) -> None:
        self._sig = sig
        self._heap: list[tuple[float, int, str]] = []
        self._ready = threading.Condition()
        self._thread: threading.Thread | None = None
        self.spared = 0  # deadlines that found their pid taken by another process

    def register(self, pid: int, timeout_s: float) -> None:
        """Called by mutmut right after it forks `pid` (not reaped yet: still ours)."""
        identity = start_time(pid)
        if identity is None:
            return  # already gone and reaped: nothing to time
        with self._ready:
            heapq.heappush(self._heap, (time.time() + timeout_s, pid, identity))
            self._ready.notify()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="deadlines", daemon=True)
                self._thread.start()

    def expire(self, now: float) -> None:
        """Signal every child whose deadline passed by `now` and that is still the same."""
        while self._heap and self._heap[0][0] <= now:
            _, pid, identity = heapq.heappop(self._heap)
            current = start_time(pid)
            if current is None:
                continue
            if current != identity:
                self.spared += 1
                continue
            with contextlib.suppress(ProcessLookupError):  # exited since the check
                os.kill(pid, self._sig)

    def _run(self) -> None:
        with self._ready:
            while True:
                while not self._heap:
                    self._ready.wait()
                now = time.time()
                self.expire(now)
                if self._heap:
                    self._ready.wait(timeout=max(0.0, self._heap[0][0] - now))


class Unrun:
    """Whether to leave a mutant unrun, read from its mutated file under `root`.

    Unrun: a mutant that only changes a log line, and one `equivalents` lists with the
    change it makes now. Each file is read once, when its first mutant is asked about, and
    only the names left unrun are kept: every mutant's child is forked from this process,
    and a child's garbage collector touches every object the parent holds, copying each
    page of them (the parsed trees of all mutated files would make each fork copy hundreds
    of megabytes).
    """

    def __init__(self, root: Path = MUTANTS, equivalents: Iterable[Equivalent] = ()) -> None:
        from mutation_report import MutatedFile

        self._root = root
        # Bound now: the stats run's tests load scripts/mutation_report.py again under the
        # same module name, and a change from that copy would be of another class.
        self._read = MutatedFile
        self._judged = {entry.mutant: entry.change for entry in equivalents}
        self._names: dict[str, frozenset[str]] = {}

    def __contains__(self, mutant: object) -> bool:
        if not isinstance(mutant, str):
            return False
        module = mutant.rsplit(".", 1)[0]
        if module not in self._names:
            self._names[module] = self._unrun_of(module)
        return mutant in self._names[module]

    def _unrun_of(self, module: str) -> frozenset[str]:
        path = self._root / (module.replace(".", "/") + ".py")
        if not path.is_file():
            return frozenset()
        source = self._read(path.read_text())
        names = (f"{module}.{short}" for short in source.functions if not short.endswith("_orig"))
        return frozenset(
            name
            for name in names
            if source.is_log_only(name)
            or (name in self._judged and source.change(name) == self._judged[name])
        )


def skip_unrun(runner: type[Any], unrun: Container[str]) -> None:
    """Make `runner.submit` record a mutant in `unrun` as skipped instead of running it."""
    from mutation_report import SKIPPED_RUN
    from mutmut.workers.isolation import MutantResult

    submit = runner.submit

    def submit_unless_unrun(
        self: Any, mutant_name: str, tests: list[str], cpu_time_limit: int, estimated: float
    ) -> None:
        if mutant_name in unrun:
            # Where mutmut puts the results it settles without a child ("no tests").
            self._no_tests_results.append(MutantResult(mutant_name, SKIPPED_RUN, 0.0))
            return
        submit(self, mutant_name, tests, cpu_time_limit, estimated)

    runner.submit = submit_unless_unrun


#: How tests/mutation_kills.py writes down a failing test: "<node id> (<phase>): <error>".
FAILED_TEST = re.compile(r"^(?P<test>.+) \((?:setup|call|teardown)\): ")


class Killers:
    """The tests that killed each function's mutants so far in this run, latest first.

    mutmut runs a function's mutants one after another (it orders mutants by the time of
    their tests, which they share), and the test that killed one usually kills the next:
    it is the test that looks at what the function decides. Read from what
    tests/mutation_kills.py wrote down under `kills`.
    """

    def __init__(self, kills: Path) -> None:
        from mutation_report import mangled_function

        self._kills = kills
        self._by_function: dict[str, list[str]] = {}
        self._function_of = mangled_function  # bound now, as in `Unrun`

    def learn(self, mutant: str) -> None:
        """Put the test that failed on `mutant` first for its function.

        Its run stops at the first failing test; the record is appended to, so a mutant
        run again by name has its latest run's test written down last.
        """
        try:
            lines = (self._kills / f"{mutant}.txt").read_text(encoding="utf-8").splitlines()
        except OSError:
            return
        failed = [match for line in lines if (match := FAILED_TEST.match(line))]
        if not failed:
            return  # nothing, or only an error after the tests: no test to put first
        known = self._by_function.setdefault(self._function_of(mutant), [])
        test = failed[-1].group("test")
        if test in known:
            known.remove(test)
        known.insert(0, test)

    def first(self, mutant: str, tests: Iterable[str]) -> list[str]:
        """Of `tests`, those that killed the function's earlier mutants, latest first."""
        known = self._by_function.get(self._function_of(mutant))
        if not known:
            return []
        given = set(tests)
        return [test for test in known if test in given]


def killers_first(
    runner: type[Any], killers: Killers, durations: Callable[[], dict[str, float]]
) -> None:
    """Make `runner` learn each kill and run a mutant's known killers before its other tests.

    mutmut's forked child orders the tests it is given by `durations()` (its stats), read
    after the fork: the killers are given negative durations in the parent until the child
    is forked, then their own back. So it works for the runner that forks from this process
    (ForkRunner), not for one forking from a server started earlier.
    """
    from mutation_report import FAILED_RUN

    submit = runner.submit
    wait_for_result = runner.wait_for_result

    def submit_killers_first(
        self: Any, mutant_name: str, tests: list[str], cpu_time_limit: int, estimated: float
    ) -> None:
        measured = durations()
        first = [test for test in killers.first(mutant_name, tests) if test in measured]
        kept = {test: measured[test] for test in first}
        for rank, test in enumerate(first):
            measured[test] = float(rank - len(first))
        try:
            submit(self, mutant_name, tests, cpu_time_limit, estimated)
        finally:
            measured.update(kept)

    def wait_and_learn(self: Any, timeout: float | None = None) -> Any:
        result = wait_for_result(self, timeout)
        if result.exit_code == FAILED_RUN:
            killers.learn(result.mutant_name)
        return result

    runner.submit = submit_killers_first
    runner.wait_for_result = wait_and_learn


def main() -> None:
    from mutation_report import EQUIVALENTS, KILLS_DIR, load_equivalents
    from mutmut.__main__ import cli
    from mutmut.state import state
    from mutmut.workers import isolation

    # What ForkRunner.submit calls, replaced where it looks the name up.
    isolation.register_timeout = Deadlines().register  # type: ignore[attr-defined,unused-ignore]
    unrun = Unrun(equivalents=load_equivalents(EQUIVALENTS))
    for runner in (isolation.ForkRunner, isolation.ForkServerRunner):
        skip_unrun(runner, unrun)
    killers = Killers(MUTANTS / KILLS_DIR)
    killers_first(isolation.ForkRunner, killers, lambda: state().duration_by_test)
    cli()


if __name__ == "__main__":
    main()
