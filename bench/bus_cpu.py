"""CPU per job of the queue, the bus and the subscribers, for one or more checkouts.

    .venv-bench/bin/python -m bench.bus_cpu [--jobs 500] [--repetitions 5]
        [--gradeq-python .venv/bin/python] [--checkout DIR ...]

Starts Gradeq's embedded stack (bench.gradeq_stack, the burst's settings of `make bench`)
from each checkout given (this one by default), warms each up, then submits bursts of
`--jobs` jobs through the intake, each checkout in turn, and waits until analytics recorded
every event and the bus has no delivery left (analytics' records come from its own process
where the bus pushes to it, from the bus where it writes the BigQuery subscription itself:
the sum of the roles compares the two; the jobs name no callback URL, so notification is
pushed them only where its subscription has no filter). The CPU (user + system, psutil)
each process used over a burst, divided by the jobs, is one sample; the table gives the
median of each process and checkout with the lowest and highest sample in brackets. The
stacks of the checkouts run side by side but take bursts one at a time, so CPU figures of
one run compare with each other (never quote wall-clock figures from a loaded machine).
Give a second checkout (e.g. `git archive main | tar -x -C /tmp/base`) to compare a change
with its base.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from statistics import median

import psutil

from bench import processes
from bench.load import Submitter

REPO = Path(__file__).resolve().parents[1]
ROLES = ("dispatcher", "bus", "notification", "analytics", "worker", "intake")
ANALYTICS = "analytics"


@dataclass
class Stack:
    """One checkout's stack, started by its own bench.gradeq_stack."""

    checkout: Path
    python: Path
    workdir: Path
    launcher: subprocess.Popen[str] | None = None
    pids: dict[str, int] = field(default_factory=dict)
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    database: Path = Path()

    def start(self, args: argparse.Namespace) -> None:
        command = [
            str(self.python), "-m", "localcloud.child",
            str(self.python), "-m", "bench.gradeq_stack", "--data-dir", str(self.workdir),
            "--grader-latency-s", str(args.grader_latency_s), "--rate", str(args.rate),
            "--concurrency", str(args.concurrency), "--worker-threads", str(args.concurrency),
        ]  # fmt: skip
        self.workdir.mkdir(parents=True, exist_ok=True)
        with (self.workdir.parent / f"{self.workdir.name}-launcher.log").open("a") as log:
            self.launcher = subprocess.Popen(
                command,
                cwd=self.checkout,
                env={**os.environ, "PYTHONPATH": str(self.checkout)},
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                start_new_session=True,
            )
        assert self.launcher.stdout is not None
        line = self.launcher.stdout.readline()
        if not line:
            raise RuntimeError(f"the stack of {self.checkout} did not start ({self.workdir})")
        ready = json.loads(line)
        self.url = ready["intake_url"]
        self.headers = {"Authorization": f"Bearer {ready['api_key']}"}
        self.database = Path(ready["database"])
        self.pids = ready["pids"]

    def stop(self) -> None:
        if self.launcher is not None:
            assert self.launcher.stdin is not None
            self.launcher.stdin.close()
            processes.stop(self.launcher, timeout_s=30)
            self.launcher = None

    def cpu(self) -> dict[str, float]:
        return processes.snapshot({r: psutil.Process(self.pids[r]) for r in ROLES})

    def recorded(self, since: str) -> int:
        """Events analytics recorded since `since`; 0 while the bus still holds a delivery
        (to notification too, where its filter admits the event)."""
        conn = sqlite3.connect(f"file:{self.database}?mode=ro", uri=True, timeout=30)
        try:
            recorded = conn.execute(
                "SELECT count(*) FROM processed_events WHERE processed_at >= ? AND subscriber = ?",
                (since, ANALYTICS),
            ).fetchone()[0]
            pending = conn.execute("SELECT count(*) FROM bus_deliveries").fetchone()[0]
        finally:
            conn.close()
        return 0 if pending else int(recorded)

    def burst(self, jobs: int, clients: int, prefix: str) -> dict[str, float]:
        """CPU ms per job of each process over one burst, until every delivery is done."""
        # The subscribers' processed_at is an ISO 8601 UTC time: strings compare in order.
        since = datetime.now(UTC).isoformat()
        before = self.cpu()
        submitter = Submitter(self.url, self.headers, clients)
        try:
            submitter.batch(jobs, prefix)
        finally:
            submitter.close()
        processes.wait_until(lambda: self.recorded(since) >= jobs, 120, 0.05, "subscribers")
        after = self.cpu()
        return {role: (after[role] - before[role]) * 1000 / jobs for role in ROLES}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.bus_cpu", description=__doc__)
    parser.add_argument("--checkout", type=Path, action="append", default=[])
    parser.add_argument("--gradeq-python", type=Path, default=REPO / ".venv" / "bin" / "python")
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--grader-latency-s", type=float, default=0.2)
    parser.add_argument("--rate", type=float, default=500.0)
    parser.add_argument("--concurrency", type=int, default=50)
    return parser.parse_args(argv)


def table(samples: dict[str, list[dict[str, float]]]) -> str:
    names = list(samples)
    lines = [
        "| CPU ms/job | " + " | ".join(names) + " |",
        "| --- |" + " ---: |" * len(names),
    ]
    for role in (*ROLES, "subscribers and queue"):
        cells = []
        for name in names:
            if role in ROLES:
                values = [s[role] for s in samples[name]]
            else:
                values = [sum(s[r] for r in ROLES[:4]) for s in samples[name]]
            cells.append(f"{median(values):.2f} ({min(values):.2f}-{max(values):.2f})")
        label = role if role in ROLES else "dispatcher + bus + subscribers"
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    checkouts = [c.resolve() for c in args.checkout] or [REPO]
    python = args.gradeq_python.absolute()
    samples: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="bus-cpu-") as tmp:
        stacks = {
            f"{i}:{c.name}": Stack(c, python, Path(tmp) / f"stack{i}")
            for i, c in enumerate(checkouts)
        }
        try:
            for stack in stacks.values():
                stack.start(args)
            for i, (name, stack) in enumerate(stacks.items()):
                stack.burst(min(args.jobs, 200), args.clients, f"warm-{i}")
                samples[name] = []
            for rep in range(args.repetitions):
                for i, (name, stack) in enumerate(stacks.items()):
                    sample = stack.burst(args.jobs, args.clients, f"r{rep}-{i}")
                    samples[name].append(sample)
                    print(name, {k: round(v, 3) for k, v in sample.items()}, file=sys.stderr)
        finally:
            for stack in stacks.values():
                stack.stop()
    print(table(samples))
    print(json.dumps({"samples": samples, "args": vars(args)}, default=str))


if __name__ == "__main__":
    main()
