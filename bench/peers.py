"""`make bench`: Gradeq's embedded default side by side with Flask + Celery and Flask + RQ.

    .venv-bench/bin/python -m bench.peers [--gradeq-python .venv/bin/python] [--rounds N]
        [--scenarios acceptance,burst,rate,inflight,idle] [--fronts production,per-core]
        [--quick] [--output-dir DIR]

Runs from its own venv (.venv-bench: Celery, RQ, redis-py, psutil); Gradeq runs from its
venv as users run it (bench.gradeq_stack). Every system gets the same workload, on
loopback only, and the runs are interleaved (Gradeq, Celery, RQ, Flask, Gradeq, ...):

1. acceptance: wrk, 32 connections for 8 s, against each HTTP front alone (Gradeq's
   intake, a Flask app calling Celery's `.delay()`, one calling RQ's `enqueue`, a bare
   Flask app answering 202): requests/s, p50/p99, and the ratio to bare Flask.
2. burst: 1000 jobs of 0.2 s at concurrency 50 submitted by 32 clients: makespan from the
   first POST to the last final job against the ideal (4.0 s); for Gradeq also until
   the subscribers recorded the last event (each what its filter admits: the jobs name
   no callback URL, so notification is pushed none). The CPU of every process over the burst
   (psutil, children included), per job.
3. rate: a 20/s queue with a 20 s backlog (400 jobs of 0 s submitted up front): the most
   completions in any 1 s window and the sustained rate.
4. inflight: 1000 gradings of 30 s held by one worker process: how many it held, how
   long after the first POST all had started, how many deliveries it refused (5xx, which
   the queue retries after its backoff) and its RSS. Run once.
5. idle: jobs of 0 s one at a time: POST answered, POST to final, and for Gradeq POST to
   the subscribers (each what its filter admits).

Acceptance and burst run once per front configuration, every producer alike: production
(1 process x 80 threads, as the container runs the intake) and one process per core with
8 threads each; their rows stand side by side in the table.

It prints one table (median of the runs, min-max) and writes every run's raw figures,
the summary and the machine's facts to DIR/peers-<UTC time>.json (and the table as .md).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
from rich.console import Console

from bench import report, stats
from bench.load import Batch, Submitter, run_wrk
from bench.processes import REPO, largest_rss, snapshot, wait_until
from bench.report import ACCEPTANCE, BURST, IDLE, INFLIGHT, RATE, SCENARIOS, on_front
from bench.runs import Results
from bench.settings import (
    CELERY,
    FLASK,
    LABELS,
    PRODUCTION_FRONT,
    RQ,
    Front,
    Workload,
    gunicorn_args,
    gunicorn_limit_args,
    per_core_front,
)
from bench.systems import (
    CORE_ROLES,
    FRONT_ROLE,
    SUBSCRIBER_ROLES,
    GradeqProfile,
    GradeqSystem,
    PeerProfile,
    System,
    peer,
)

#: The front configurations acceptance and burst run on, by --fronts name.
FRONTS = {"production": lambda: PRODUCTION_FRONT, "per-core": per_core_front}
#: Jobs each system runs before the measured rounds of a group (imports, connections).
WARM_UP_JOBS = 20
WARM_UP_WRK_S = 2.0
#: Cloud Tasks' highest dispatch rate: the queue limit when the rate is not under test.
MAX_RATE = 500.0

METHOD = [
    "Acceptance runs each HTTP front alone with its store or broker: no worker consumes.",
    "Every producer runs under the intake's production gunicorn settings: 1 process, "
    "80 threads, the request limits of shared/http/gunicorn_conf.py, no access log; "
    "acceptance and burst run again with every producer at one process per core, 8 "
    "threads each (rows marked with processes x threads).",
    "Gradeq: the embedded default stack (localcloud.stack), offline grader with a fixed "
    "latency and no failure simulation, per-client admission limits and fair spacing off; "
    "the burst queue allows 50 concurrent dispatches at 500/s, the rate and idle queue is "
    "the shipped one (20/s, 100 concurrent).",
    "Celery 5: one worker, threads pool (50 threads; 1000 for in-flight), Redis broker and "
    "result backend, task rate_limit 20/s in the rate and idle scenarios (Celery enforces "
    "it per worker).",
    "RQ 2: `rq worker-pool -n 50` (RQ runs one job per worker process, each in a forked "
    "work horse; 50 processes give it concurrency 50).",
    "CPU per job: user + system time of each process tree over the burst, divided by "
    "the jobs; HTTP front = intake or Flask producer, queue = dispatcher or Redis.",
    "Completion times are each system's own records: Gradeq's completed_at and the "
    "subscribers' processed_at, Celery's date_done, RQ's ended_at.",
]


class Bench:
    """Starts the systems group by group and runs the scenarios, interleaved."""

    def __init__(self, gradeq_python: Path, workload: Workload, workdir: Path) -> None:
        self.python = gradeq_python
        self.w = workload
        self.workdir = workdir
        self.results = Results()
        self.console = Console(stderr=True, width=None if sys.stderr.isatty() else 120)
        self.facts: dict[str, Any] = {}

    def log(self, message: str) -> None:
        self.console.log(message)

    # --- groups of systems -------------------------------------------------------------

    def gradeq(self, tag: str, profile: GradeqProfile) -> GradeqSystem:
        return GradeqSystem(self.python, self.workdir / f"gradeq-{tag}", profile)

    def peer(self, name: str, tag: str, profile: PeerProfile) -> System:
        return peer(name, self.workdir / f"{name}-{tag}", profile)

    @contextlib.contextmanager
    def running(self, systems: Sequence[System]) -> Iterator[Sequence[System]]:
        started: list[System] = []
        try:
            for system in systems:
                began = time.monotonic()
                system.start()
                started.append(system)
                self.facts.setdefault(system.name, {}).update(system.facts())
                self.log(f"{LABELS[system.name]} up in {time.monotonic() - began:.1f} s")
            yield systems
        finally:
            for system in reversed(started):
                system.stop()

    def rounds(self, systems: Sequence[System]) -> Iterator[tuple[int, System]]:
        """(round, system) in interleaved order: A, B, C, A, B, C, ..."""
        for index in range(self.w.rounds):
            for system in systems:
                yield index, system

    def warm_up(self, system: System, jobs: int = WARM_UP_JOBS) -> None:
        submitter = Submitter(system.url, system.headers, min(jobs, self.w.clients))
        try:
            system.begin()
            submitter.batch(jobs, self.key("warm", system))
            wait_until(lambda: system.finished() >= jobs, 60, 0.05, "warm-up jobs final")
            if isinstance(system, GradeqSystem):  # its events too, before a run counts them
                wait_until(
                    lambda: self.all_recorded(system, jobs),
                    self.w.subscriber_wait_s,
                    0.05,
                    "warm-up events recorded",
                )
        finally:
            submitter.close()

    @staticmethod
    def key(tag: str, system: System) -> str:
        return f"{tag}-{system.name}-{time.time_ns()}"

    # --- 1. acceptance -----------------------------------------------------------------

    def acceptance(self, front: Front = PRODUCTION_FRONT) -> None:
        w = self.w
        scenario = on_front(ACCEPTANCE, front)
        tag = f"accept-{front.workers}x{front.threads}"
        producers_only = PeerProfile(grade_s=w.burst_grade_s, concurrency=0, front=front)
        only = ("intake",)
        gradeq = GradeqProfile(
            w.burst_grade_s, MAX_RATE, w.concurrency, w.concurrency, only, front=front
        )
        systems = [
            self.gradeq(tag, gradeq),
            self.peer(CELERY, tag, producers_only),
            self.peer(RQ, tag, producers_only),
            self.peer(FLASK, tag, producers_only),
        ]
        with self.running(systems):
            for system in systems:
                run_wrk(system.url, system.headers, WARM_UP_WRK_S, w.clients, self.key("w", system))
            for index, system in self.rounds(systems):
                key = self.key("a", system)
                roles = accepting_roles(system)
                before = snapshot(roles)
                run = run_wrk(system.url, system.headers, w.accept_s, w.clients, key)
                accepted = run["requests"] - run["errors"]
                if accepted > 0:
                    run["cpu_accept_ms"] = stats.cpu_ms_per_job(
                        before, snapshot(roles), roles, accepted
                    )
                self.results.add(scenario, system.name, run)
                self.log(
                    f"{scenario} {index + 1}/{w.rounds} {LABELS[system.name]}: "
                    f"{run['rps']:.0f} req/s, p99 {run['p99_ms']:.1f} ms, errors {run['errors']}"
                )
        self.results.add_ratios(scenario)

    # --- 2. and 3. burst with CPU per job ----------------------------------------------

    def burst(self, front: Front = PRODUCTION_FRONT) -> None:
        w = self.w
        scenario = on_front(BURST, front)
        tag = f"burst-{front.workers}x{front.threads}"
        profile = PeerProfile(grade_s=w.burst_grade_s, concurrency=w.concurrency, front=front)
        gradeq = GradeqProfile(w.burst_grade_s, MAX_RATE, w.concurrency, w.concurrency, front=front)
        systems = [
            self.gradeq(tag, gradeq),
            self.peer(CELERY, tag, profile),
            self.peer(RQ, tag, profile),
        ]
        with self.running(systems):
            for system in systems:
                self.warm_up(system)
            for index, system in self.rounds(systems):
                run = self.burst_run(system)
                self.results.add(scenario, system.name, run)
                lag = run.get("lag_s")
                self.log(
                    f"{scenario} {index + 1}/{w.rounds} {LABELS[system.name]}: makespan "
                    f"{run.get('makespan_s', float('nan')):.2f} s, efficiency "
                    f"{run.get('efficiency', float('nan')):.2f}, CPU "
                    f"{run['cpu_front_core_ms']:.2f} ms/job"
                    + (f", subscribers +{lag:.2f} s" if lag is not None else "")
                )

    def burst_run(self, system: System) -> dict[str, Any]:
        w = self.w
        jobs = w.burst_jobs
        roles = system.roles()
        submitter = Submitter(system.url, system.headers, w.clients)
        system.begin()
        before = snapshot(roles)
        try:
            batch = submitter.batch(jobs, self.key("b", system))
        finally:
            submitter.close()
        with contextlib.suppress(TimeoutError):
            wait_until(lambda: system.finished() >= jobs, 60 + 10 * w.ideal_burst_s, 0.02)
        at_final = snapshot(roles)
        times = [t for t in system.completed_at(batch.ids) if t is not None]
        run: dict[str, Any] = {
            "jobs": jobs,
            "final": len(times),
            "submit_s": batch.ended - batch.started,
            "submit_retries": batch.retries,
        }
        after = at_final
        if len(times) < jobs:  # no makespan: the figures below cover the jobs that ended
            self.log(f"burst {LABELS[system.name]}: only {len(times)} of {jobs} jobs final")
        else:
            run["makespan_s"] = max(times) - batch.started
            run["efficiency"] = stats.efficiency(w.ideal_burst_s, run["makespan_s"])
            if isinstance(system, GradeqSystem):
                after = self.await_subscribers(system, jobs, run, max(times))
        for role in roles:
            source = after if role in SUBSCRIBER_ROLES else at_final
            run[f"cpu_{role}_ms"] = stats.cpu_ms_per_job(before, source, [role], jobs)
        run["cpu_core_ms"] = stats.cpu_ms_per_job(before, at_final, CORE_ROLES, jobs)
        run["cpu_front_core_ms"] = run["cpu_core_ms"] + run[f"cpu_{FRONT_ROLE}_ms"]
        if isinstance(system, GradeqSystem):
            subscribers = sum(run[f"cpu_{role}_ms"] for role in SUBSCRIBER_ROLES)
            run["cpu_all_ms"] = run["cpu_front_core_ms"] + subscribers
        run["cpu_s"] = {role: after[role] - before[role] for role in roles}
        return run

    @staticmethod
    def all_recorded(system: GradeqSystem, jobs: int) -> bool:
        """Whether every subscriber has the events its filter admits, of `jobs` since
        `begin()`: analytics (no filter) recorded them all and the bus holds no delivery
        left (the bench's jobs name no callback URL, so notification's filter admits none)."""
        recorded, _ = system.subscribers().get("analytics", (0, None))
        return recorded >= jobs and system.pending_deliveries() == 0

    def await_subscribers(
        self, system: GradeqSystem, jobs: int, run: dict[str, Any], last_final: float
    ) -> dict[str, float]:
        """Wait until the subscribers recorded every event they admit; the CPU snapshot then."""

        def recorded() -> bool:
            return self.all_recorded(system, jobs)

        roles = system.roles()
        with contextlib.suppress(TimeoutError):
            wait_until(recorded, self.w.subscriber_wait_s, 0.05, "subscribers")
        after = snapshot(roles)
        seen = system.subscribers()
        run["subscribers_recorded"] = {name: n for name, (n, _) in seen.items()}
        lasts = [last for _, last in seen.values() if last is not None]
        if recorded() and lasts:
            run["lag_s"] = max(lasts) - last_final
        else:
            self.log(f"subscribers recorded {run['subscribers_recorded']} of {jobs} events")
        return after

    # --- 4. rate fidelity and 6. idle latency ------------------------------------------

    def zero_latency_systems(self, tag: str) -> list[System]:
        """Gradeq on the shipped queue (20/s), Celery with the same task rate limit, RQ."""
        w = self.w
        rate = f"{w.rate_per_s:g}/s"
        return [
            self.gradeq(tag, GradeqProfile(0.0, w.rate_per_s, 100, w.concurrency)),
            self.peer(CELERY, tag, PeerProfile(0.0, w.concurrency, rate_limit=rate)),
            self.peer(RQ, tag, PeerProfile(0.0, w.concurrency)),
        ]

    def idle(self) -> None:
        w = self.w
        systems = self.zero_latency_systems("idle")
        with self.running(systems):
            for system in systems:
                self.warm_up(system, 5)
            for index, system in self.rounds(systems):
                run = self.idle_run(system)
                self.results.add(IDLE, system.name, run)
                self.log(
                    f"idle {index + 1}/{w.rounds} {LABELS[system.name]}: POST to final "
                    f"p50 {run['final_p50_ms']:.1f} ms"
                )

    def rate(self) -> None:
        """Each run on a freshly started system: a run that falls behind leaves a backlog."""
        w = self.w
        self.results.note(RATE, RQ, "RQ has no rate limit")
        for index in range(w.rounds):
            systems = [s for s in self.zero_latency_systems(f"rate{index}") if s.name != RQ]
            for system in systems:
                with self.running([system]):
                    run = self.rate_run(system)
                self.results.add(RATE, system.name, run)
                self.log(
                    f"rate {index + 1}/{w.rounds} {LABELS[system.name]}: "
                    f"{run['completed']} of {run['jobs']} in {run['waited_s']:.0f} s, most in "
                    f"1 s {run['max_1s']}, sustained {run['sustained']:.2f}/s"
                )

    def rate_run(self, system: System) -> dict[str, Any]:
        w = self.w
        submitter = Submitter(system.url, system.headers, w.clients)
        system.begin()
        try:
            batch = submitter.batch(w.rate_jobs, self.key("r", system))
        finally:
            submitter.close()
        # A system that keeps the rate finishes in the backlog's time; give it 5 s more,
        # then take what completed (the system is stopped, its backlog with it).
        limit_s = w.rate_jobs / w.rate_per_s + 5
        with contextlib.suppress(TimeoutError):
            wait_until(lambda: system.finished() >= w.rate_jobs, limit_s, 0.1, "rate")
        times = [t for t in system.completed_at(batch.ids) if t is not None]
        return {
            "jobs": w.rate_jobs,
            "completed": len(times),
            "waited_s": time.time() - batch.started,
            "submit_s": batch.ended - batch.started,
            "max_1s": stats.max_in_window(times, 1.0),
            "sustained": stats.sustained_rate(times),
            "span_s": max(times) - min(times) if times else None,
        }

    def idle_run(self, system: System) -> dict[str, Any]:
        submitter = Submitter(system.url, system.headers, 1)
        post, final, subscribers = [], [], []
        try:
            for i in range(self.w.idle_jobs):
                # A pause of varying length: the stack is idle, and a job does not fall
                # on the same phase of any poll each time.
                time.sleep(random.uniform(0.1, 0.3))
                system.begin()
                batch = Batch(started=time.time())
                job_id = submitter.submit(self.key(f"i{i}", system), batch)
                post.append(batch.latencies[0] * 1000)
                done = self.completion(system, job_id)
                final.append((done - batch.started) * 1000)
                if isinstance(system, GradeqSystem):
                    subscribers.append((self.subscribers_seen(system) - batch.started) * 1000)
        finally:
            submitter.close()
        run: dict[str, Any] = {
            "post_p50_ms": stats.percentile(post, 50),
            "final_p50_ms": stats.percentile(final, 50),
            "final_p99_ms": stats.percentile(final, 99),
            "post_ms": post,
            "final_ms": final,
        }
        if subscribers:
            run["subscribers_p50_ms"] = stats.percentile(subscribers, 50)
            run["subscribers_p99_ms"] = stats.percentile(subscribers, 99)
            run["subscribers_ms"] = subscribers
        return run

    @staticmethod
    def completion(system: System, job_id: str) -> float:
        """Wait for one job to become final; when it did."""
        wait_until(lambda: system.completed_at([job_id])[0] is not None, 30, 0.002, job_id)
        done = system.completed_at([job_id])[0]
        assert done is not None
        return done

    @staticmethod
    def subscribers_seen(system: GradeqSystem) -> float:
        """When the last subscriber recorded the one event since `begin()`."""

        wait_until(lambda: Bench.all_recorded(system, 1), 30, 0.002, "the subscribers")
        return max(last for _, last in system.subscribers().values() if last is not None)

    # --- 5. in flight ------------------------------------------------------------------

    def inflight(self) -> None:
        w = self.w
        grade, n = w.inflight_grade_s, w.inflight_jobs
        systems = [
            self.gradeq("inflight", GradeqProfile(grade, MAX_RATE, n, n, stop_timeout_s=3.0)),
            self.peer(
                CELERY,
                "inflight",
                PeerProfile(grade, n, count_starts=True, stop_timeout_s=2.0),
            ),
        ]
        self.results.note(
            INFLIGHT, RQ, f"an RQ worker process holds one job: {n} would take {n} processes"
        )
        for system in systems:  # one at a time: 1000 sleeping gradings each
            with self.running([system]):
                run = self.inflight_run(system)
            self.results.add(INFLIGHT, system.name, run)
            self.log(
                f"in flight {LABELS[system.name]}: held {run['held']} of {n} "
                f"(all after {run['all_held_after_s']} s), refused {run.get('refused')}, "
                f"RSS {run['rss_mb']:.0f} MB"
            )

    def inflight_run(self, system: System) -> dict[str, Any]:
        w = self.w
        holder = system.roles()["worker"]
        rss_before = largest_rss(holder)
        submitter = Submitter(system.url, system.headers, w.clients)
        system.begin()
        started = time.time()
        batch_done = threading.Event()

        def submit() -> None:
            try:
                submitter.batch(w.inflight_jobs, self.key("f", system))
            finally:
                batch_done.set()

        threading.Thread(target=submit, daemon=True).start()
        held, rss, reached_s = 0, rss_before, None
        # Watch until all are held (then a second more) or the first gradings near their end.
        deadline = started + w.inflight_grade_s - 2
        settle_until: float | None = None
        while time.time() < deadline and (settle_until is None or time.time() < settle_until):
            now_held = system.held()
            if now_held > held:
                held = now_held
            rss = max(rss, largest_rss(holder))
            if held >= w.inflight_jobs and settle_until is None:
                reached_s = time.time() - started
                settle_until = time.time() + 1.0
            time.sleep(0.25)
        batch_done.wait(timeout=w.inflight_grade_s)
        submitter.close()
        run: dict[str, Any] = {
            "jobs": w.inflight_jobs,
            "held": held,
            "all_held_after_s": reached_s,
            "rss_mb": rss / 2**20,
            "rss_idle_mb": rss_before / 2**20,
        }
        if isinstance(system, GradeqSystem):  # before any grading ends: every reply refused
            run["refused"] = system.refused()
        return run


# --- facts and output ------------------------------------------------------------------


def accepting_roles(system: System) -> dict[str, psutil.Process]:
    """The processes an accepted request costs: the HTTP front and the store it writes the
    job to before answering (Redis for the peers; Gradeq's SQLite is in the intake)."""
    return {role: p for role, p in system.roles().items() if role in (FRONT_ROLE, "queue")}


def _first_line(command: list[str]) -> str:
    """The first line a command prints (stdout, else stderr); "" if none, "missing" if absent."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=10)
    except OSError:
        return "missing"
    lines = (done.stdout or done.stderr).strip().splitlines()
    return lines[0] if lines else ""


def machine_facts() -> dict[str, Any]:
    packages = ("celery", "kombu", "rq", "redis", "flask", "gunicorn", "psutil", "urllib3")
    commit = _first_line(["git", "-C", str(REPO), "rev-parse", "HEAD"])
    dirty = bool(_first_line(["git", "-C", str(REPO), "status", "--porcelain"]).strip())
    return {
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "load_average": os.getloadavg(),
        "packages": {name: importlib.metadata.version(name) for name in packages},
        "redis_server": _first_line(["redis-server", "--version"]),
        "wrk": _first_line(["wrk", "--version"]),
        "gradeq_commit": commit + (" (uncommitted changes)" if dirty else ""),
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.peers",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--gradeq-python", type=Path, default=REPO / ".venv" / "bin" / "python")
    parser.add_argument("--rounds", type=int, help="runs of each scenario (default 3)")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument(
        "--fronts",
        default=",".join(FRONTS),
        help="front configurations for acceptance and burst: production (1 x 80), "
        "per-core (one process per core, 8 threads each)",
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run with small sizes")
    parser.add_argument("--output-dir", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--keep-workdir", action="store_true", help="keep logs and databases")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    workload = Workload().quick() if args.quick else Workload()
    if args.rounds:
        workload = Workload(**{**asdict(workload), "rounds": args.rounds})
    scenarios = [s for s in args.scenarios.split(",") if s]
    unknown = set(scenarios) - set(SCENARIOS)
    if unknown:
        raise SystemExit(f"unknown scenarios: {', '.join(sorted(unknown))}")
    try:
        fronts = [FRONTS[name]() for name in args.fronts.split(",") if name]
    except KeyError as exc:
        raise SystemExit(f"unknown front configuration: {exc}") from None
    started = time.monotonic()
    started_at = datetime.now(UTC)
    facts = machine_facts()
    workdir = Path(tempfile.mkdtemp(prefix="gradeq-bench-"))
    bench = Bench(args.gradeq_python.absolute(), workload, workdir)
    bench.log(f"make bench: {', '.join(scenarios)}; {workload.rounds} rounds; logs in {workdir}")
    error = ""
    try:
        run_scenarios(bench, scenarios, fronts)
    except BaseException as exc:
        error = repr(exc)
        raise
    finally:
        # Whatever ran is written and shown, also when a scenario failed.
        if not args.keep_workdir:
            shutil.rmtree(workdir, ignore_errors=True)
        facts["load_average_after"] = os.getloadavg()
        facts["systems"] = bench.facts
        summary = bench.results.summary()
        table = report.rows(summary, bench.results.notes, workload, fronts)
        duration = time.monotonic() - started
        output = {
            "started_at": started_at.isoformat(timespec="seconds"),
            "duration_s": round(duration, 1),
            "command": sys.argv,
            "scenarios": scenarios,
            "error": error,
            "machine": facts,
            "workload": asdict(workload),
            "producer_gunicorn": gunicorn_args() + gunicorn_limit_args(),
            "fronts": [asdict(f) for f in fronts],
            "method": METHOD,
            "summary": summary,
            "notes": bench.results.notes,
            "runs": bench.results.runs,
            "table": report.markdown(table),
        }
        args.output_dir.mkdir(parents=True, exist_ok=True)
        stem = args.output_dir / f"peers-{started_at.strftime('%Y%m%dT%H%M%SZ')}"
        stem.with_suffix(".json").write_text(json.dumps(output, indent=2) + "\n")
        stem.with_suffix(".md").write_text(report.markdown(table))
        console = Console()
        if not console.is_terminal:
            console.width = 160
        report.print_table(table, bench.results.notes, console)
        console.print(f"{workload.rounds} rounds, {duration:.0f} s; every figure in {stem}.json")


def run_scenarios(bench: Bench, scenarios: Sequence[str], fronts: Sequence[Front]) -> None:
    """The chosen scenarios, in the order that groups systems started alike."""
    if ACCEPTANCE in scenarios:
        for front in fronts:
            bench.acceptance(front)
    if BURST in scenarios:
        for front in fronts:
            bench.burst(front)
    if IDLE in scenarios:
        bench.idle()
    if RATE in scenarios:
        bench.rate()
    if INFLIGHT in scenarios:
        bench.inflight()


if __name__ == "__main__":
    main()
