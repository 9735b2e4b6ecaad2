"""`make run`: the whole pipeline on this machine, a sample job, and curl commands to try.

    python -m localcloud [--backend embedded|google-emulators] [--data-dir data]
        [--no-sample]

Ctrl-C (SIGINT) or SIGTERM stops every process cleanly.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from types import FrameType

import requests

from localcloud.stack import EMBEDDED, GOOGLE_EMULATORS, LocalStack, StackConfig

DEMO_OPERATOR_KEY = "demo-operator-key"

SAMPLE = {
    "submission_id": "sub-001",
    "assignment_id": "bio-101-hw3",
    "answer": (
        "Photosynthesis happens in the chloroplast: chlorophyll absorbs light energy, "
        "water is split and oxygen released, and carbon dioxide is fixed into glucose."
    ),
    "rubric": [
        "mentions the chloroplast",
        "explains that chlorophyll absorbs light",
        "states that oxygen is released",
        "describes the Calvin cycle",
    ],
    "max_score": 10,
}


def installed(command: str) -> str:
    """How a new shell in this folder runs a command of this environment: `.venv/bin/X`.

    The package's commands are in the virtual environment's bin folder, which a new shell
    does not have on its PATH.
    """
    path = Path(sys.executable).parent / command
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def banner(stack: LocalStack) -> str:
    intake = stack.config.url("intake")
    key = stack.api_key
    body = json.dumps(SAMPLE)
    gradeq, python = installed("gradeq"), installed("python")
    return f"""
Gradeq is running locally ({stack.config.backend} backend, data in {stack.config.data_dir}/).
  intake        {intake}
  worker        {stack.config.url("worker")}
  notification  {stack.config.url("notification")}
  analytics     {stack.config.url("analytics")}
  frontend      {stack.config.url("frontend")}/   (a student submits an answer)
  dashboard     {intake}/admin/   (operator key: {DEMO_OPERATOR_KEY})

The gradeq command talks to this stack (it is in {Path(gradeq).parent}/; in a new shell,
from this folder):
  export GRADEQ_URL={intake} GRADEQ_API_KEY={key} GRADEQ_OPERATOR_KEY={DEMO_OPERATOR_KEY}
  {gradeq} stats; {gradeq} failed; {gradeq} replay <id>

A development API key for client "{stack.config.client_id}" (stored hashed; make more with
`{python} -m services.intake.auth.keys create --client NAME`):
  {key}

Webhooks to client "{stack.config.client_id}" are signed with its own secret (verify with
gradeq.client.verify_webhook(secret, body, headers, client_id="{stack.config.client_id}");
rotate with `{python} -m services.notification.webhook_secrets rotate --client NAME`):
  {stack.webhook_secret}

Submit a job (change the Idempotency-Key for a new one):
  curl -i -X POST {intake}/v1/grading-jobs \\
    -H 'Authorization: Bearer {key}' -H 'Content-Type: application/json' \\
    -H 'Idempotency-Key: my-first-job' \\
    -d '{body}'

Poll it (use the Location header from the answer):
  curl -s {intake}/v1/grading-jobs/<id> -H 'Authorization: Bearer {key}'

Make the offline grader fail twice before succeeding, or refuse for good:
  add "metadata": {{"simulate": {{"failure": "transient", "times": 2}}}}  (or "permanent")

Analytics over completed jobs:
  curl -s {stack.config.url("analytics")}/v1/stats -H 'Authorization: Bearer {key}'

Ctrl-C stops everything.
"""


def follow_sample(stack: LocalStack, stopped: threading.Event, timeout_s: float = 60.0) -> None:
    """Submit one sample job and print its status until it is final (or `timeout_s`)."""
    intake = stack.config.url("intake")
    headers = {
        "Authorization": f"Bearer {stack.api_key}",
        "Idempotency-Key": f"sample-{uuid.uuid4()}",
    }
    try:
        response = requests.post(
            f"{intake}/v1/grading-jobs", json=SAMPLE, headers=headers, timeout=10
        )
    except requests.RequestException as exc:
        print(f"\n>>> sample job not submitted: {exc}", flush=True)
        return
    location = response.headers.get("Location")
    if location is None:
        print(f"\n>>> sample job refused: {response.status_code} {response.text}", flush=True)
        return
    print(f"\n>>> sample job submitted: {response.status_code} Location: {location}", flush=True)
    last = None
    deadline = time.monotonic() + timeout_s
    while not stopped.is_set():
        if time.monotonic() > deadline:
            print(f">>> sample job still {last} after {timeout_s:g} s; poll it below", flush=True)
            return
        try:
            job = requests.get(intake + location, headers=headers, timeout=10).json()
        except requests.RequestException as exc:
            print(f">>> sample job not followed further: {exc}", flush=True)
            return
        if job["status"] != last:
            last = job["status"]
            print(f">>> sample job is {last}", flush=True)
        if job["status"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
            print(">>> final:", json.dumps(job, indent=2), flush=True)
            return
        stopped.wait(0.2)


def serve(
    stack: LocalStack, stopped: threading.Event, sample: Callable[[], None] | None
) -> str | None:
    """Start the stack and follow the sample job, then print the banner; watch until stopped.

    The banner comes last, after the services' start-up lines and the sample job, so it
    is what a newcomer sees. Returns the name of a process that died, if one did.
    """
    stack.start()  # every web service answers /healthz: their start-up lines are out
    if sample is not None:
        sample()
    stack.settle()  # the lines the processes still print (the sample's event delivered)
    if not stopped.is_set():
        print(banner(stack), flush=True)
    return stack.watch(stopped.is_set)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m localcloud", description=__doc__)
    parser.add_argument("--data-dir", type=Path, default=Path("data"))
    parser.add_argument("--no-sample", action="store_true", help="do not submit a sample job")
    parser.add_argument(
        "--backend",
        choices=(EMBEDDED, GOOGLE_EMULATORS),
        default=EMBEDDED,
        help="embedded (SQLite, local bus) or the Google adapters on the official emulators",
    )
    args = parser.parse_args()

    config = StackConfig(
        data_dir=args.data_dir.resolve(),
        backend=args.backend,
        env={"GRADEQ_OPERATOR_KEYS": f"demo-operator={DEMO_OPERATOR_KEY}"},
    )
    stack = LocalStack(config)
    stopped = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopped.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    sample = None if args.no_sample else (lambda: follow_sample(stack, stopped))
    try:
        dead = serve(stack, stopped, sample)
        if dead:
            print(f"\n{dead} exited unexpectedly; stopping the stack", flush=True)
    finally:
        print("\nstopping...", flush=True)
        stack.stop()
        time.sleep(0.1)


if __name__ == "__main__":
    main()
