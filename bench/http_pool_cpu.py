"""CPU per request of the local dispatcher's and bus's HTTP client against urllib3's.

    .venv/bin/python -m bench.http_pool_cpu [--requests 400] [--rounds 7]

Both clients send the same push (a 1,200-byte body, a 700-character bearer token) one at
a time to a keep-alive loopback server answering 204, interleaved round by round. Each
round times the sending thread's own CPU (time.thread_time: the server's threads are not
counted) over `--requests` requests. Prints each client's median CPU microseconds per
request with its lowest and highest round, and the median of the per-round ratios.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from statistics import median
from threading import Thread

import urllib3

from localcloud.http_pool import pool, send

BODY = b"x" * 1200
HEADERS = {"Authorization": "Bearer " + "t" * 700}


class _Accept(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def _cpu_us(request: Callable[[], object], n: int) -> float:
    started = time.thread_time()
    for _ in range(n):
        request()
    return (time.thread_time() - started) / n * 1e6


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Accept)
    server.daemon_threads = True
    Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/pubsub/push"
    ours = pool(4)
    manager = urllib3.PoolManager(num_pools=16, maxsize=4, block=False, retries=False)
    timeout = urllib3.Timeout(connect=5.0, read=5.0)
    clients: dict[str, Callable[[], object]] = {
        "localcloud.http_pool": lambda: send(ours, "POST", url, BODY, HEADERS, 5.0),
        "urllib3.PoolManager": lambda: manager.request(
            "POST", url, body=BODY, headers=HEADERS, timeout=timeout, redirect=False
        ),
    }
    samples: dict[str, list[float]] = {name: [] for name in clients}
    try:
        for request in clients.values():  # warm both connections and code paths
            _cpu_us(request, 50)
        for _ in range(args.rounds):
            for name, request in clients.items():
                samples[name].append(_cpu_us(request, args.requests))
    finally:
        server.shutdown()
        server.server_close()
    for name, values in samples.items():
        print(
            f"{name:22} median {median(values):7.1f} us CPU per request"
            f"  (min {min(values):.1f}, max {max(values):.1f}, {args.rounds} rounds)"
        )
    ours_us, theirs_us = samples.values()
    ratios = [a / b for a, b in zip(ours_us, theirs_us, strict=True)]
    low, high = min(ratios), max(ratios)
    print(f"ratio, per round: median {median(ratios):.2f} (min {low:.2f}, max {high:.2f})")


if __name__ == "__main__":
    main()
