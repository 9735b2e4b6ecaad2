"""CPU per accepted POST of Gradeq's intake, optionally against another checkout's.

    .venv-bench/bin/python -m bench.intake_cpu --gradeq-python .venv/bin/python
        [--baseline DIR] [--rounds 5] [--seconds 5] [--fronts production,per-core]

Starts the intake alone (bench.gradeq_stack --only intake) under each front of `make
bench` (one process x 80 threads, one per core x 8), drives it with the acceptance
scenario's wrk load (32 connections, a new Idempotency-Key per POST) and divides the user
+ system CPU of the intake's gunicorn processes (psutil) by the POSTs wrk saw answered.
With --baseline the same runs go to a second checkout (its own bench.gradeq_stack, with
the same Python), interleaved round by round, so a change is measured against the code
before it under the same load. Prints each run and the medians (min-max) as JSON lines.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil

from bench import processes, stats
from bench.load import run_wrk
from bench.settings import PRODUCTION_FRONT, Front, per_core_front

WARM_UP_S = 2.0
CLIENTS = 32


@dataclass
class Intake:
    """One running intake: where to POST, and its gunicorn master."""

    label: str
    front: Front
    url: str
    headers: dict[str, str]
    master: psutil.Process


@contextmanager
def intake(python: Path, repo: Path, label: str, front: Front, workdir: Path) -> Iterator[Intake]:
    """Run `repo`'s intake alone on `front` until the block ends."""
    data = workdir / f"{label}-{front.workers}x{front.threads}"
    command = [
        str(python.absolute()), "-m", "bench.gradeq_stack",
        "--data-dir", str(data), "--only", "intake",
        "--front-workers", str(front.workers), "--front-threads", str(front.threads),
    ]  # fmt: skip
    launcher = processes.spawn(
        command, data.with_suffix(".log"), stdin=subprocess.PIPE, stdout=subprocess.PIPE, repo=repo
    )
    try:
        assert launcher.stdout is not None
        line = launcher.stdout.readline()
        if not line:
            raise RuntimeError(f"the intake of {repo} did not start (see {data}/stack.log)")
        ready = json.loads(line)
        headers = {"Authorization": f"Bearer {ready['api_key']}"}
        master = psutil.Process(ready["pids"]["intake"])
        yield Intake(label, front, ready["intake_url"], headers, master)
    finally:
        if launcher.stdin is not None:
            launcher.stdin.close()  # the launcher stops the stack when its stdin closes
        processes.stop(launcher, timeout_s=30)


def context_switches(root: psutil.Process) -> int:
    """Voluntary context switches of every thread of the tree (Linux: /proc/PID/task).

    Each is a thread going to sleep (a lock, a wait, a hand-off to another thread): a
    figure that shows hand-offs apart from the CPU they cost, and that other load on the
    machine moves less than CPU time.
    """
    total = 0
    for process in [root, *root.children(recursive=True)]:
        for task in Path(f"/proc/{process.pid}/task").glob("*/status"):
            with contextlib.suppress(OSError):
                for line in task.read_text().splitlines():
                    if line.startswith("voluntary_ctxt_switches:"):
                        total += int(line.split()[-1])
    return total


def measure(target: Intake, seconds: float, key: str) -> dict[str, float]:
    """One wrk run against `target`: answered POSTs, the intake's CPU ms and context
    switches per POST."""
    cpu_before = processes.cpu_seconds(target.master)
    switches_before = context_switches(target.master)
    run = run_wrk(target.url, target.headers, seconds, CLIENTS, key)
    cpu_after = processes.cpu_seconds(target.master)
    switches_after = context_switches(target.master)
    return {
        "requests": run["requests"],
        "errors": run["errors"],
        "rps": run["rps"],
        "cpu_ms_per_post": (cpu_after - cpu_before) * 1000 / run["requests"],
        "switches_per_post": (switches_after - switches_before) / run["requests"],
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.intake_cpu", description=__doc__)
    parser.add_argument("--gradeq-python", type=Path, required=True, help="Gradeq's venv python")
    parser.add_argument("--baseline", type=Path, help="another checkout to measure alike")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=5.0, help="wrk's duration per run")
    parser.add_argument("--fronts", default="production,per-core")
    return parser.parse_args(argv)


def fronts(names: str) -> list[Front]:
    """The fronts named: `production` (1 x 80) and `per-core` (one process per core x 8)."""
    known = {"production": PRODUCTION_FRONT, "per-core": per_core_front()}
    return [known[name] for name in names.split(",") if name]


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    checkouts = {"this": processes.REPO}
    if args.baseline is not None:
        checkouts["baseline"] = args.baseline.resolve()
    runs: dict[tuple[str, str], list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="intake-cpu-") as tmp, ExitStack() as stack:
        targets = [
            stack.enter_context(intake(args.gradeq_python, repo, label, front, Path(tmp)))
            for front in fronts(args.fronts)
            for label, repo in checkouts.items()
        ]
        for target in targets:
            run_wrk(target.url, target.headers, WARM_UP_S, CLIENTS, f"warm-{target.label}")
        for index in range(args.rounds):
            for target in targets:
                run = measure(target, args.seconds, f"r{index}-{target.label}")
                row = {"round": index + 1, "checkout": target.label, "front": target.front.tag}
                print(json.dumps({**row, **run}), flush=True)
                if run["errors"]:
                    print("warning: some POSTs were not accepted", file=sys.stderr)
                runs.setdefault((target.front.tag, target.label), []).append(run)
    for (front, label), measured in runs.items():
        summary: dict[str, object] = {"front": front, "checkout": label}
        for figure in ("cpu_ms_per_post", "switches_per_post"):
            spread = stats.spread(run[figure] for run in measured)
            assert spread is not None
            summary[figure] = spread.as_dict()
        print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
