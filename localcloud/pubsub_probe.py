"""Does the Pub/Sub emulator redeliver pushes that failed under a retry policy?

    python -m localcloud.pubsub_probe [--messages 8] [--down 5] [--wait 60]

Starts the official Pub/Sub emulator and a loopback push endpoint, subscribes it with
the shipped notification subscription's settings (ack deadline, retry policy, dead-letter
policy: shared/config/subscriptions.json), publishes `--messages` messages while the
endpoint answers 503 (for `--down` seconds, as a restarting subscriber's front would),
then keeps answering 204. One message published later and never refused shows whether
the push loop itself still works. After `--wait` seconds it prints, per message, every
push with its time and answer, and which messages were never delivered; then it turns
the subscription into a pull one to show what the emulator still holds for it.

Real Pub/Sub redelivers a refused message after its retry policy's backoff (10-600 s,
growing) and dead-letters it after the maximum attempts. See docs/emulators.md for what
the emulator does instead.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from localcloud import emulators
from shared.config.subscriptions import load_subscriptions

PROJECT = "demo-gradeq-probe"


class Endpoint:
    """A push endpoint that refuses every push until `up_at`, and records each one."""

    def __init__(self, down_s: float) -> None:
        self.started = time.monotonic()
        self.up_at = self.started + down_s
        self.pushes: list[tuple[float, str, int]] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                now = time.monotonic()
                status = 204 if now >= endpoint.up_at else 503
                at = round(now - endpoint.started, 1)
                endpoint.pushes.append((at, body["message"]["messageId"], status))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, args=(0.1,), daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/push"


def probe(messages: int, down_s: float, wait_s: float) -> dict[str, Any]:
    """Run the probe; return each message's pushes and what the emulator still holds."""
    reason = emulators.missing_reason("pubsub")
    if reason:
        raise SystemExit(f"cannot probe: {reason}")
    emulator = emulators.start_pubsub()
    os.environ[emulators.PUBSUB_HOST_ENV] = emulator.host
    try:
        from google.cloud import pubsub_v1

        publisher, subscriber = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()
        config = load_subscriptions().subscriptions["notification"]
        topic = publisher.create_topic(name=publisher.topic_path(PROJECT, "probe-topic")).name
        dead = publisher.create_topic(name=publisher.topic_path(PROJECT, "probe-dead")).name
        dead_sub = subscriber.create_subscription(
            name=subscriber.subscription_path(PROJECT, "probe-dead"), topic=dead
        ).name
        endpoint = Endpoint(down_s)
        subscription = subscriber.create_subscription(
            request={
                "name": subscriber.subscription_path(PROJECT, "probe-push"),
                "topic": topic,
                "push_config": {"push_endpoint": endpoint.url},
                "ack_deadline_seconds": int(config.ack_deadline.total_seconds()),
                "retry_policy": {
                    "minimum_backoff": config.minimum_backoff,
                    "maximum_backoff": config.maximum_backoff,
                },
                "dead_letter_policy": {
                    "dead_letter_topic": dead,
                    "max_delivery_attempts": config.max_delivery_attempts,
                },
            }
        ).name
        endpoint.started = time.monotonic()
        endpoint.up_at = endpoint.started + down_s
        refused = [publisher.publish(topic, b"refused at first") for _ in range(messages)]
        ids = [f.result() for f in refused]
        time.sleep(max(0.0, down_s + 1 - (time.monotonic() - endpoint.started)))
        control = publisher.publish(topic, b"never refused").result()
        time.sleep(max(0.0, wait_s - (time.monotonic() - endpoint.started)))
        by_message: dict[str, list[tuple[float, int]]] = {}
        for at, message_id, status in endpoint.pushes:
            by_message.setdefault(message_id, []).append((at, status))
        subscriber.modify_push_config(subscription=subscription, push_config={})
        held = subscriber.pull(subscription=subscription, max_messages=100, timeout=10)
        dead_lettered = subscriber.pull(subscription=dead_sub, max_messages=100, timeout=10)
        publisher.stop()
        subscriber.close()
    finally:
        emulator.stop()
        del os.environ[emulators.PUBSUB_HOST_ENV]
    delivered = {m for m, pushes in by_message.items() if any(s == 204 for _, s in pushes)}
    return {
        "settings": {
            "messages": messages,
            "endpoint_down_s": down_s,
            "waited_s": wait_s,
            "retry_policy": [str(config.minimum_backoff), str(config.maximum_backoff)],
            "max_delivery_attempts": config.max_delivery_attempts,
        },
        "pushes": {m: by_message.get(m, []) for m in ids},
        "control_message": {control: by_message.get(control, [])},
        "never_delivered": [m for m in ids if m not in delivered],
        "still_held_by_the_subscription": [m.message.message_id for m in held.received_messages],
        "dead_lettered": len(dead_lettered.received_messages),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=8)
    parser.add_argument("--down", type=float, default=5.0, help="seconds the endpoint refuses")
    parser.add_argument("--wait", type=float, default=60.0, help="seconds to watch in all")
    args = parser.parse_args()
    print(json.dumps(probe(args.messages, args.down, args.wait), indent=2))


if __name__ == "__main__":
    main()
