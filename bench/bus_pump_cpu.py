"""CPU of the embedded bus's pump per pushed message, for one or more checkouts.

    .venv/bin/python -m bench.bus_pump_cpu [--messages 2000] [--repetitions 5]
        [--checkout DIR ...]

For each repetition and checkout in turn (this one by default), a child process running
that checkout's code publishes `--messages` messages to one push subscription, then times
its own CPU (time.process_time: the pump, the push threads and their connections) from
the bus's start until every delivery is acknowledged and recorded and the bus stopped.
The subscriber is a keep-alive HTTP server answering 204 in a process of its own, so its
CPU is not counted. Prints the median CPU ms per message of each checkout, with the lowest
and highest sample. Give a second checkout (e.g. `git archive main | tar -x -C /tmp/base`)
to compare a change with its base; figures of one run compare with each other.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from statistics import median

REPO = Path(__file__).resolve().parents[1]


class _Accept(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def serve() -> None:
    """The subscriber: print its port, answer until stdin closes."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Accept)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()
    server.shutdown()


def measure(messages: int, url: str) -> float:
    """CPU seconds the bus spent pushing `messages` messages (this process's checkout)."""
    from localcloud.pubsub.push_bus import Bus, Endpoint
    from shared.adapters.embedded.event_publisher import SqliteEventPublisher
    from shared.adapters.embedded.sqlite import SqliteDatabase
    from shared.config.subscriptions import SubscriptionConfig, TopicConfig
    from tests.contract.harness_events import sample_event

    config = SubscriptionConfig(
        name="notification",
        push_path="/pubsub/push",
        ack_deadline=timedelta(seconds=30),
        minimum_backoff=timedelta(seconds=1),
        maximum_backoff=timedelta(seconds=10),
        max_delivery_attempts=5,
    )
    with tempfile.TemporaryDirectory() as tmp:
        db = SqliteDatabase(Path(tmp) / "bus.sqlite3")
        events = SqliteEventPublisher(db, TopicConfig("grading-completed", {config.name: config}))
        for n in range(messages):
            events.publish(sample_event(key=f"key-{n}"))
        bus = Bus(db, {config.name: Endpoint(config, url)}, poll_interval_s=0.2)
        started = time.process_time()
        bus.start()
        while bus.store.pending():
            time.sleep(0.05)
        bus.stop(timeout_s=30)
        return time.process_time() - started


def run_child(checkout: Path, messages: int, url: str) -> float:
    command = [sys.executable, str(Path(__file__)), "--child", str(messages), url]
    env = {**os.environ, "PYTHONPATH": str(checkout), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{checkout}: {done.stderr}")
    return float(json.loads(done.stdout.splitlines()[-1])["cpu_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--checkout", type=Path, action="append")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve()
        return
    if args.child:
        cpu_s = measure(int(args.child[0]), args.child[1])
        print(json.dumps({"cpu_s": cpu_s}))
        return
    checkouts = [c.resolve() for c in args.checkout or [REPO]]
    target = subprocess.Popen(
        [sys.executable, str(Path(__file__)), "--serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert target.stdout is not None and target.stdin is not None
    url = f"http://127.0.0.1:{target.stdout.readline().strip()}"
    samples: dict[Path, list[float]] = {c: [] for c in checkouts}
    try:
        for _ in range(args.repetitions):
            for checkout in checkouts:
                cpu_s = run_child(checkout, args.messages, url)
                samples[checkout].append(cpu_s * 1000 / args.messages)
    finally:
        target.stdin.close()
        target.wait(timeout=10)
    for checkout, ms in samples.items():
        print(f"{checkout}: {median(ms):.3f} CPU ms/message [{min(ms):.3f}-{max(ms):.3f}]")


if __name__ == "__main__":
    main()
