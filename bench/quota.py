"""One provider quota shared by 1, 4 and 16 worker processes, and the adaptive limit.

    .venv/bin/python -m bench.quota [--case all|declared|adaptive] [--window-s 6] [--json out.json]

Each worker process grades with the real grader stack (`grader_for`: the OpenAI-compatible
grader, its prompt, the `shared` quota mode's limiter on the embedded SQLite ledger)
against a loopback fake provider (tests/support/fake_openai.py) that enforces a quota and
answers 429 past it. Every process has a standing backlog of standard-lane jobs, and exam
jobs arrive at a tenth of the quota in all (spread over the processes, at random). A
refused grading waits the time the limiter or the provider names, as the deferred task
would.

- declared: the fake enforces `--rpm` requests and `--tpm` tokens per rolling window; run
  with 1, 4 and 16 processes. Reports the quota used (requests and tokens the fake
  admitted per window, after the first window), the 429s it answered, and the exam
  jobs' p99 wait (arrival to the provider receiving the request).
- adaptive: no quota is declared; the fake admits a hidden rate (`--capacity` a window,
  halved mid-run). Reports what the shared limit admitted against the capacity, and the
  429s, per phase after the limit had two windows to settle.

The quota's window is a minute on the real providers; here it is `--window-s` (6 s: the
"minute" is ten times shorter, and with it the limiter's leases, paces and epochs, which
are fractions of the window), so the whole bench runs in about four minutes on two
cores. Waits are reported in real seconds and, scaled back, in seconds of a 60 s window.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

from tests.support.fake_openai import FakeOpenAIServer
from tests.support.provider_quota import HiddenCapacity, RollingQuota

#: Targets (docs/benchmarks.md).
MIN_USED = 0.90
MAX_THROTTLED = 0.02
WITHIN = 0.10


def worker(config: dict[str, Any]) -> None:
    """One worker process: grade until `seconds` pass after "go" on stdin."""
    from shared.adapters.graders.shared_quota import SharedQuotaLimiter
    from shared.bootstrap.graders import grader_for
    from shared.config.settings import Settings
    from shared.domain.errors import GradingError, ProviderQuotaExhausted
    from shared.domain.job import GradingRequest
    from shared.domain.lanes import lane_var
    from shared.logs import job_id_var

    settings = Settings(**config["settings"])
    grader = grader_for(settings)
    rng = random.Random(config["seed"])
    exam: deque[tuple[str, float]] = deque()
    arrivals: dict[str, float] = {}
    counts = {"graded": 0, "deferred": 0, "throttled": 0, "failed": 0}
    lock = threading.Lock()
    print("ready", flush=True)
    sys.stdin.readline()
    end = time.monotonic() + config["seconds"]
    cap = config["window_s"] / 10

    def arrive() -> None:
        n = 0
        while True:
            time.sleep(rng.expovariate(config["exam_per_s"]))
            if time.monotonic() >= end:
                return
            marker = f"exam-{config['seed']}-{n}"
            n += 1
            with lock:
                arrivals[marker] = time.monotonic()
                exam.append((marker, arrivals[marker]))

    def grade() -> None:
        n = 0
        while time.monotonic() < end:
            with lock:
                job = exam.popleft() if exam else None
            lane, marker = ("exam", job[0]) if job else ("grading", f"std-{n}")
            n += 0 if job else 1
            request = GradingRequest(marker, f"Mitochondria make ATP. {marker}", ("ATP",), 2)
            lane_token = lane_var.set(lane)
            job_token = job_id_var.set(f"{config['seed']}-{marker}")
            wait = 0.0
            try:
                grader.grade(request, attempt=1, timeout_s=30)
                counts["graded"] += 1
            except ProviderQuotaExhausted as exc:
                counts["deferred"] += 1
                wait = exc.retry_after_s or cap
            except GradingError as exc:
                counts["throttled" if exc.status == 429 else "failed"] += 1
                wait = getattr(exc, "retry_after_s", None) or cap
            finally:
                lane_var.reset(lane_token)
                job_id_var.reset(job_token)
            if wait:
                if job:
                    with lock:
                        exam.appendleft(job)  # it waits for its deferred delivery
                time.sleep(min(wait, cap))

    threads = [threading.Thread(target=grade) for _ in range(config["threads"])]
    threads.append(threading.Thread(target=arrive, daemon=True))
    for thread in threads:
        thread.start()
    for thread in threads[:-1]:
        thread.join()
    limiter = getattr(grader, "_limiter", None)
    takes = limiter.takes if isinstance(limiter, SharedQuotaLimiter) else 0
    status = limiter.status() if isinstance(limiter, SharedQuotaLimiter) else {}
    print(json.dumps({"counts": counts, "arrivals": arrivals, "takes": takes, "pool": status}))


def run(
    args: argparse.Namespace,
    processes: int,
    fake: FakeOpenAIServer,
    mode: str,
    seconds: float,
    trace: list[dict[str, Any]] | None = None,
    started: threading.Event | None = None,
) -> tuple[list[dict[str, Any]], float]:
    """Start the worker processes, let them grade for `seconds`; their reports and t0.

    `trace` gets the pool's status every tenth of a window, read from the ledger;
    `started` is set once the processes are told to go (t0)."""
    directory = Path(tempfile.mkdtemp(prefix="bench-quota-"))
    settings = {
        "data_dir": str(directory),
        "grader": "openai",
        "grader_base_url": fake.url,
        "grader_model": "bench-model",
        "grader_api_key": "bench",
        "grader_quota_mode": mode,
        "grader_quota_rpm": args.rpm,
        "grader_quota_tpm": args.tpm,
        "grader_quota_headroom": 1.0,
        "grader_quota_window_s": args.window_s,
        "grader_adaptive_start_rpm": max(1, args.capacity // 4),
        "grader_max_output_tokens": 256,
        "grader_answer_retries": 0,
        "grader_request_timeout_s": 30,
        "log_level": "WARNING",
    }
    threads = max(2, 32 // processes)
    children = []
    for p in range(processes):
        config = {
            "settings": settings,
            "seed": p,
            "seconds": seconds,
            "window_s": args.window_s,
            "threads": threads,
            "exam_per_s": args.rpm / 10 / args.window_s / processes,
        }
        children.append(
            subprocess.Popen(
                [sys.executable, "-m", "bench.quota", "--worker", json.dumps(config)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env={**os.environ, "GRADEQ_LOG_LEVEL": "WARNING"},
            )
        )
    for child in children:
        assert child.stdout is not None
        line = child.stdout.readline()
        if line.strip() != "ready":
            raise SystemExit(f"a worker process did not start: {line!r}")
    t0 = time.monotonic()
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    if started is not None:
        started.set()
    if trace is not None:
        sampler = threading.Thread(target=sample, args=(directory, args, t0, seconds, trace))
        sampler.start()
    reports = []
    for child in children:
        out, _ = child.communicate(timeout=seconds + 120)
        reports.append(json.loads(out.strip().splitlines()[-1]))
    return reports, t0


def sample(
    directory: Path, args: argparse.Namespace, t0: float, seconds: float, trace: list[Any]
) -> None:
    from shared.adapters.embedded.quota_ledger import SqliteQuotaLedger
    from shared.adapters.embedded.sqlite import SqliteDatabase
    from shared.adapters.graders.quota_pool import ADAPTIVE_PARTS, Adaptive, PoolLimits, status

    ledger = SqliteQuotaLedger(SqliteDatabase(directory / "gradeq.sqlite3"))
    limits = PoolLimits(0, 0, args.window_s, Adaptive(), ADAPTIVE_PARTS)
    while time.monotonic() < t0 + seconds:
        time.sleep(args.window_s / 10)
        report = status(ledger.read("openai/bench-model"), limits, time.time())
        trace.append({"t": round(time.monotonic() - t0, 2), **report.get("adaptive", {})})


def p99(values: list[float]) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)]


def declared(args: argparse.Namespace, processes: int) -> dict[str, Any]:
    fake = FakeOpenAIServer()
    quota = RollingQuota(args.rpm, args.tpm, args.window_s)
    fake.quota = quota
    fake.latency_s = args.latency_s
    with fake:
        seconds = args.window_s * (args.windows + 1)
        reports, t0 = run(args, processes, fake, "shared", seconds)
        served = list(fake.served)
    start, end = t0 + args.window_s, t0 + seconds
    measured = [at for at in quota.admitted if start <= at < end]
    tokens = sum(t for at, t in quota.tokens if start <= at < end)
    windows = (end - start) / args.window_s
    first_served: dict[str, float] = {}
    for s in served:
        if s.status == 200:
            marker = s.answer.rsplit(" ", 1)[-1]
            first_served.setdefault(marker, s.at)
    waits = [
        first_served[m] - arrived
        for r in reports
        for m, arrived in r["arrivals"].items()
        if m in first_served and arrived >= start
    ]
    counts = {k: sum(r["counts"][k] for r in reports) for k in reports[0]["counts"]}
    requests = len(quota.admitted) + len(quota.refused)
    return {
        "processes": processes,
        "rpm_used": len(measured) / windows / args.rpm,
        "tpm_used": tokens / windows / args.tpm if args.tpm else math.nan,
        "provider_429s": len(quota.refused),
        "requests": requests,
        "exam_jobs": len(waits),
        "exam_p99_wait_s": p99(waits),
        "ledger_writes_per_grading": sum(r["takes"] for r in reports) / max(1, counts["graded"]),
        "counts": counts,
    }


def adaptive(args: argparse.Namespace, processes: int) -> dict[str, Any]:
    fake = FakeOpenAIServer()
    capacity = HiddenCapacity(args.capacity, args.window_s)
    fake.quota = capacity
    fake.latency_s = args.latency_s
    phase_s = args.window_s * args.adaptive_windows
    started = threading.Event()

    def drop() -> None:
        # A phase counts from when the processes start grading, not from their launch
        # (a few seconds of imports on a busy machine).
        started.wait()
        time.sleep(phase_s)
        capacity.rpm = args.capacity / 2

    with fake:
        timer = threading.Thread(target=drop, daemon=True)
        timer.start()
        trace: list[dict[str, Any]] = []
        reports, t0 = run(args, processes, fake, "adaptive", 2 * phase_s, trace, started)
    phases = []
    for index, (begin, rate) in enumerate(((t0, args.capacity), (t0 + phase_s, args.capacity / 2))):
        start, end = begin + 2 * args.window_s, begin + phase_s
        admitted = [at for at in capacity.admitted if start <= at < end]
        refused = [at for at in capacity.refused if start <= at < end]
        windows = (end - start) / args.window_s
        phases.append(
            {
                "phase": index + 1,
                "capacity": rate,
                "admitted_per_window": len(admitted) / windows,
                "share": len(admitted) / windows / rate,
                "throttled": len(refused) / max(1, len(admitted) + len(refused)),
            }
        )
    pool: dict[str, Any] = next((r["pool"] for r in reports if r["pool"]), {})
    return {"processes": processes, "phases": phases, "pool": pool, "trace": trace}


def table(
    rows: list[dict[str, Any]], result: dict[str, Any] | None, args: argparse.Namespace
) -> str:
    scale = 60 / args.window_s
    lines: list[str] = []
    if rows:
        lines += [
            f"declared quota: {args.rpm} requests and {args.tpm} tokens per "
            f"{args.window_s:g} s window (a minute x {1 / scale:g}); provider latency "
            f"{args.latency_s:g} s",
            "",
            "| worker processes | quota used (requests) | quota used (tokens) "
            "| 429s / requests | exam jobs | exam p99 wait (s; at a 60 s window) "
            "| ledger writes per grading |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
    for r in rows:
        lines.append(
            f"| {r['processes']} | {r['rpm_used']:.1%} | {r['tpm_used']:.1%} "
            f"| {r['provider_429s']} / {r['requests']} | {r['exam_jobs']} "
            f"| {r['exam_p99_wait_s']:.2f} ({r['exam_p99_wait_s'] * scale:.1f}) "
            f"| {r['ledger_writes_per_grading']:.2f} |"
        )
    phases = result["phases"] if result else []
    if result:
        lines += [
            "",
            f"adaptive, {result['processes']} worker processes, hidden capacity "
            f"{args.capacity} then {args.capacity // 2} per window:",
            "",
            "| phase | capacity per window | admitted per window | of the capacity | 429s |",
            "| --- | --- | --- | --- | --- |",
        ]
    for p in phases:
        lines.append(
            f"| {p['phase']} | {p['capacity']:g} | {p['admitted_per_window']:.1f} "
            f"| {p['share']:.1%} | {p['throttled']:.2%} |"
        )
    lines.append("")
    misses = [
        f"{r['processes']} processes: {r['rpm_used']:.1%} of the quota used"
        for r in rows
        if r["rpm_used"] < MIN_USED
    ]
    misses += [
        f"{r['processes']} processes: {r['provider_429s']} requests past the quota"
        for r in rows
        if r["provider_429s"]
    ]
    for p in phases:
        if abs(p["share"] - 1) > WITHIN:
            misses.append(f"adaptive phase {p['phase']}: {p['share']:.1%} of the capacity")
        if p["throttled"] >= MAX_THROTTLED:
            misses.append(f"adaptive phase {p['phase']}: {p['throttled']:.2%} answered 429")
    lines.append("targets: " + ("all met" if not misses else "missed: " + "; ".join(misses)))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--window-s", type=float, default=6.0)
    parser.add_argument("--windows", type=int, default=3, help="measured, after one warm-up")
    parser.add_argument("--adaptive-windows", type=int, default=5, help="per phase")
    parser.add_argument("--rpm", type=int, default=120)
    parser.add_argument("--tpm", type=int, default=120_000)
    parser.add_argument("--capacity", type=int, default=180, help="adaptive: hidden, per window")
    parser.add_argument("--latency-s", type=float, default=0.4)
    parser.add_argument("--processes", type=int, nargs="*", default=[1, 4, 16])
    parser.add_argument("--adaptive-processes", type=int, default=4)
    parser.add_argument(
        "--case",
        choices=("all", "declared", "adaptive"),
        default="all",
        help="Run only the declared quota's case or only the adaptive limit's.",
    )
    parser.add_argument("--json", type=Path, help="Also write the figures here.")
    args = parser.parse_args(argv)
    if args.worker:
        worker(json.loads(args.worker))
        return
    rows = []
    if args.case in ("all", "declared"):
        for n in args.processes:
            rows.append(declared(args, n))
            print(f"declared, {n} processes: {rows[-1]['rpm_used']:.1%}", file=sys.stderr)
    result = adaptive(args, args.adaptive_processes) if args.case != "declared" else None
    print(table(rows, result, args))
    if args.json:
        args.json.write_text(json.dumps({"declared": rows, "adaptive": result}, indent=2))


if __name__ == "__main__":
    main()
