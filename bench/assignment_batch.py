"""`make bench-assignments`: a class's answers in one batch, side by side with single POSTs.

    .venv/bin/python -m bench.assignment_batch [--n 1000] [--clients 32] [--output-dir DIR]

On the embedded default (the local stack, as `make run` starts it, the intake under the
container's gunicorn settings), in one fresh stack each:

1. batch: create an assignment, POST its N answers in one `submissions:batch` call, time
   the call (accepted), then until the assignment reports every submission final
   (graded), polling its progress as a frontend would.
2. singles: N POSTs to /v1/grading-jobs from `--clients` threads (the way a frontend
   submits a class today): the time until the last is accepted.

Prints one JSON document (and writes it to DIR/assignments-<UTC time>.json) with both
timings and the ratio singles accepted / batch accepted; the target is at least 5.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import requests

#: The repository root: the stack runs from it.
REPO = Path(__file__).resolve().parent.parent
RUBRIC = ["mentions photosynthesis", "explains chlorophyll absorbs light"]


@contextlib.contextmanager
def stack(python: str, data_dir: Path) -> Iterator[dict[str, Any]]:
    """A fresh local stack (grader latency 0, a fast queue); its ready line."""
    command = [
        python, "-m", "bench.gradeq_stack", "--data-dir", str(data_dir),
        "--grader-latency-s", "0", "--rate", "500", "--concurrency", "50",
    ]  # fmt: skip
    process = subprocess.Popen(
        command, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None and process.stdin is not None
    try:
        line = process.stdout.readline()
        if not line:
            raise RuntimeError(f"the stack did not start; see {data_dir / 'stack.log'}")
        yield json.loads(line)
    finally:
        process.stdin.close()
        process.wait(timeout=60)


def answers(n: int) -> list[dict[str, Any]]:
    return [
        {"submission_id": f"s-{i}", "answer": f"Plants use photosynthesis; chlorophyll {i}."}
        for i in range(n)
    ]


def run_batch(url: str, api_key: str, n: int, timeout_s: float) -> dict[str, float]:
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {api_key}"
    created = session.post(
        f"{url}/v1/assignments",
        json={"title": "bench", "rubric": RUBRIC, "max_score": 10},
        headers={"Idempotency-Key": str(uuid.uuid4())},
        timeout=30,
    )
    created.raise_for_status()
    assignment_id = created.json()["id"]
    start = time.perf_counter()
    response = session.post(
        f"{url}/v1/assignments/{assignment_id}/submissions:batch",
        json={"answers": answers(n)},
        timeout=timeout_s,
    )
    accepted_s = time.perf_counter() - start
    response.raise_for_status()
    body = response.json()
    if body["accepted"] != n:
        raise RuntimeError(f"the batch accepted {body['accepted']} of {n}")
    deadline = time.monotonic() + timeout_s
    while True:
        progress = session.get(f"{url}/v1/assignments/{assignment_id}", timeout=30).json()
        if progress["progress"]["done"]:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"not graded: {progress['progress']}")
        time.sleep(0.2)
    graded_s = time.perf_counter() - start
    again_start = time.perf_counter()
    retried = session.post(
        f"{url}/v1/assignments/{assignment_id}/submissions:batch",
        json={"answers": answers(n)},
        timeout=timeout_s,
    ).json()
    return {
        "accepted_s": accepted_s,
        "graded_s": graded_s,
        "retry_s": time.perf_counter() - again_start,
        "retry_created": float(retried["accepted"]),
        "mean_score": float(progress["progress"]["mean_score"] or 0.0),
    }


def run_singles(url: str, api_key: str, n: int, clients: int) -> dict[str, float]:
    sessions: dict[int, requests.Session] = {}

    def post(i: int) -> int:
        # One connection per client thread, as 32 browsers or workers would hold.
        session = sessions.setdefault(threading.get_ident(), requests.Session())
        response = session.post(
            f"{url}/v1/grading-jobs",
            json=_single(i),
            headers={"Authorization": f"Bearer {api_key}", "Idempotency-Key": f"single-{i}"},
            timeout=60,
        )
        return response.status_code

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=clients) as pool:
        statuses = list(pool.map(post, range(n)))
    accepted_s = time.perf_counter() - start
    refused = sum(1 for s in statuses if s != 202)
    if refused:
        raise RuntimeError(f"{refused} single POSTs were not accepted")
    return {"accepted_s": accepted_s}


def _single(i: int) -> dict[str, Any]:
    return {
        "submission_id": f"s-{i}",
        "answer": f"Plants use photosynthesis; chlorophyll {i}.",
        "rubric": RUBRIC,
        "max_score": 10,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.assignment_batch", description=__doc__)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--timeout-s", type=float, default=600.0)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--output-dir", type=Path, default=REPO / "bench" / "results")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="gradeq-bench-") as tmp:
        with stack(args.python, Path(tmp) / "batch") as ready:
            batch = run_batch(ready["intake_url"], ready["api_key"], args.n, args.timeout_s)
        with stack(args.python, Path(tmp) / "singles") as ready:
            singles = run_singles(ready["intake_url"], ready["api_key"], args.n, args.clients)
    result = {
        "n": args.n,
        "clients": args.clients,
        "batch": batch,
        "singles": singles,
        "accept_speedup": singles["accepted_s"] / batch["accepted_s"],
        "target_speedup": 5.0,
    }
    print(json.dumps(result, indent=2))
    args.output_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    (args.output_dir / f"assignments-{stamp}.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
