"""The worker process alone: CPU per job over bursts, or threads and RSS with gradings held.

    .venv-bench/bin/python -m bench.worker_cpu burst [--jobs 300] [--rounds 3]
    .venv-bench/bin/python -m bench.worker_cpu inflight [--jobs 1000] [--grade-s 30]
        [--gradeq-python PATH]

Starts Gradeq's embedded stack as `make bench` does (bench.systems.GradeqSystem, from the
checkout this module is in), then:

- burst: after one warm-up burst, `--rounds` bursts of `--jobs` jobs of `--grade-s`
  seconds; for each, the CPU milliseconds per job of every process role (psutil
  cpu_times of each role's process tree, before and after the jobs are final). CPU time,
  not wall-clock: comparable across runs on a shared machine, unlike throughput.
- inflight: `--jobs` gradings of `--grade-s` seconds submitted at once; once all are
  held, the worker's threads (summed over its process tree) and largest RSS.

To compare two checkouts, run it from each, alternately, in the same session.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

from bench.load import Submitter
from bench.processes import REPO, largest_rss, snapshot, wait_until
from bench.systems import GradeqProfile, GradeqSystem

#: Admission and queue rate out of the way: the worker's own cost is measured.
RATE = 1000.0
CLIENTS = 32


def _threads(root: psutil.Process) -> int:
    total = 0
    for process in [root, *root.children(recursive=True)]:
        try:
            total += process.num_threads()
        except psutil.Error:
            continue
    return total


def burst(system: GradeqSystem, jobs: int, rounds: int) -> list[dict[str, float]]:
    roles = system.roles()
    runs: list[dict[str, float]] = []
    for index in range(rounds + 1):  # the first burst warms the stack up
        submitter = Submitter(system.url, system.headers, CLIENTS)
        system.begin()
        before = snapshot(roles)
        try:
            submitter.batch(jobs, f"cpu{index}-{time.time_ns()}")
        finally:
            submitter.close()
        wait_until(lambda: system.finished() >= jobs, 300, 0.05, "the burst's jobs")
        time.sleep(1.0)  # announcements and the subscribers' work settle
        after = snapshot(roles)
        if index:
            run = {role: (after[role] - before[role]) * 1000 / jobs for role in after}
            runs.append(run)
            print(json.dumps({k: round(v, 3) for k, v in run.items()}), flush=True)
    return runs


def inflight(system: GradeqSystem, jobs: int, grade_s: float) -> dict[str, float]:
    holder = system.roles()["worker"]
    idle_rss = largest_rss(holder)
    submitter = Submitter(system.url, system.headers, CLIENTS)
    system.begin()
    submit = threading.Thread(
        target=submitter.batch, args=(jobs, f"held-{time.time_ns()}"), daemon=True
    )
    submit.start()
    held, rss, threads = 0, idle_rss, 0
    deadline = time.monotonic() + grade_s - 2  # before the first grading ends
    while time.monotonic() < deadline and held < jobs:
        held = max(held, system.held())
        rss, threads = max(rss, largest_rss(holder)), max(threads, _threads(holder))
        time.sleep(0.25)
    time.sleep(1.0)
    rss, threads = max(rss, largest_rss(holder)), max(threads, _threads(holder))
    submit.join(grade_s + 30)
    submitter.close()
    return {
        "jobs": jobs,
        "held": held,
        "threads": threads,
        "rss_mb": round(rss / 2**20, 1),
        "rss_idle_mb": round(idle_rss / 2**20, 1),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.worker_cpu", description=__doc__)
    parser.add_argument("mode", choices=("burst", "inflight"))
    parser.add_argument("--jobs", type=int)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--grade-s", type=float)
    parser.add_argument("--concurrency", type=int, default=50, help="burst: worker threads")
    parser.add_argument("--gradeq-python", type=Path, default=REPO / ".venv" / "bin" / "python")
    args = parser.parse_args(argv)
    held = args.mode == "inflight"
    jobs = args.jobs or (1000 if held else 300)
    grade_s = args.grade_s if args.grade_s is not None else (30.0 if held else 0.2)
    threads = jobs if held else args.concurrency
    profile = GradeqProfile(grade_s, RATE, threads, threads, stop_timeout_s=3.0)
    workdir = Path(tempfile.mkdtemp(prefix="gradeq-worker-cpu-")) / "gradeq"
    system = GradeqSystem(args.gradeq_python, workdir, profile)
    system.start()
    try:
        if held:
            print(json.dumps(inflight(system, jobs, grade_s)), flush=True)
        else:
            runs = burst(system, jobs, args.rounds)
            print("worker ms/job:", [round(run["worker"], 3) for run in runs])
    finally:
        system.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
