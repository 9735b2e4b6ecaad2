"""Command line of the embedded bus: run the pump, or list dead letters.

    python -m localcloud.pubsub [run] --subscription notification=http://127.0.0.1:8083 \\
        [--db data/gradeq.sqlite3]
    python -m localcloud.pubsub dead-letters [--subscription NAME] [--json]

A push subscription is POSTed to the URL given for it. A BigQuery subscription (`"kind":
"bigquery"` in the subscriptions file: analytics) takes no URL: as Pub/Sub writes such a
subscription's table itself, the bus writes its events into the database's analytics
records, which the analytics service reports from.

Defaults come from the environment: GRADEQ_DATA_DIR (the database), GRADEQ_PUSH_AUTH
(`oidc`: send ID tokens shaped as Cloud Run forwards them, for the push service account
GRADEQ_BUS_SERVICE_ACCOUNT; otherwise GRADEQ_PUSH_TOKEN as a bearer token),
GRADEQ_BUS_SUBSCRIPTIONS ("name=url,name=url" when no
--subscription is given) and GRADEQ_LOG_LEVEL. A URL without a path gets the
subscription's push_path from the subscriptions file.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from types import FrameType

from localcloud.pubsub.deliveries import SqliteDeliveryStore
from localcloud.pubsub.push_bus import Bus, Endpoint
from localcloud.pubsub.table_subscription import TableSubscription
from shared.adapters.embedded.processed_events import SqliteProcessedEvents
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.config.settings import PushAuth, Settings
from shared.config.subscriptions import (
    DEFAULT_SUBSCRIPTIONS_FILE,
    SubscriptionConfig,
    SubscriptionKind,
    TopicConfig,
    load_subscriptions,
)
from shared.logs import configure_logging

log = logging.getLogger("localcloud.pubsub")


def _parser(settings: Settings) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m localcloud.pubsub",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="deliver messages until SIGINT/SIGTERM")
    dead = commands.add_parser("dead-letters", help="list dead-lettered messages")
    for sub in (run, dead):
        sub.add_argument("--db", type=Path, default=settings.database_path)
    run.add_argument(
        "--subscription",
        action="append",
        default=[],
        metavar="NAME=URL",
        help="push endpoint of a push subscription (repeat per subscription)",
    )
    run.add_argument(
        "--service-account",
        default=os.environ.get("GRADEQ_BUS_SERVICE_ACCOUNT", ""),
        help="with GRADEQ_PUSH_AUTH=oidc: the push subscriptions' OIDC service account",
    )
    run.add_argument("--subscriptions-file", type=Path, default=DEFAULT_SUBSCRIPTIONS_FILE)
    run.add_argument("--concurrency", type=int, default=8)
    run.add_argument("--poll-interval", type=float, default=0.2, metavar="SECONDS")
    run.add_argument("--jitter", type=float, default=0.2, help="0..1, fraction of the backoff")
    run.add_argument("--ack-deadline", type=float, metavar="SECONDS", help="override the file")
    run.add_argument("--min-backoff", type=float, metavar="SECONDS", help="override the file")
    run.add_argument("--max-backoff", type=float, metavar="SECONDS", help="override the file")
    run.add_argument("--max-delivery-attempts", type=int, help="override the file")
    dead.add_argument("--subscription", help="only this subscription")
    dead.add_argument("--json", action="store_true", help="one JSON object per line")
    return parser


def _endpoints(args: argparse.Namespace, topic: TopicConfig) -> dict[str, Endpoint]:
    pairs = args.subscription or [
        p.strip() for p in os.environ.get("GRADEQ_BUS_SUBSCRIPTIONS", "").split(",") if p.strip()
    ]
    endpoints = {}
    for pair in pairs:
        name, sep, url = pair.partition("=")
        if not sep or not url:
            raise SystemExit(f"--subscription must look like NAME=URL, got {pair!r}")
        if name not in topic.subscriptions:
            raise SystemExit(f"unknown subscription {name!r}; known: {sorted(topic.subscriptions)}")
        config = topic.subscriptions[name]
        if config.kind is not SubscriptionKind.PUSH:
            raise SystemExit(
                f"{name} is a {config.kind} subscription: the bus writes its events into"
                " the database itself, give it no URL"
            )
        endpoints[name] = Endpoint(_override(config, args), url)
    return endpoints


def _tables(
    args: argparse.Namespace, topic: TopicConfig, db: SqliteDatabase
) -> dict[str, TableSubscription]:
    """The BigQuery subscriptions, written into the database's analytics records."""
    names = [n for n, c in topic.subscriptions.items() if c.kind is SubscriptionKind.BIGQUERY]
    if not names:
        return {}
    records = SqliteProcessedEvents(db)
    return {n: TableSubscription(_override(topic.subscriptions[n], args), records) for n in names}


def _override(config: SubscriptionConfig, args: argparse.Namespace) -> SubscriptionConfig:
    changes: dict[str, object] = {}
    if args.ack_deadline is not None:
        changes["ack_deadline"] = timedelta(seconds=args.ack_deadline)
    if args.min_backoff is not None:
        changes["minimum_backoff"] = timedelta(seconds=args.min_backoff)
    if args.max_backoff is not None:
        changes["maximum_backoff"] = timedelta(seconds=args.max_backoff)
    if args.max_delivery_attempts is not None:
        changes["max_delivery_attempts"] = args.max_delivery_attempts
    return dataclasses.replace(config, **changes)  # type: ignore[arg-type]


def _run(args: argparse.Namespace, settings: Settings) -> int:
    oidc_account = None
    if settings.push_auth is PushAuth.OIDC:
        if not args.service_account:
            raise SystemExit("GRADEQ_PUSH_AUTH=oidc needs --service-account")
        oidc_account = args.service_account
    topic = load_subscriptions(args.subscriptions_file)
    db = SqliteDatabase(args.db)
    endpoints, tables = _endpoints(args, topic), _tables(args, topic, db)
    if not endpoints and not tables:
        raise SystemExit("no endpoints: pass --subscription NAME=URL or GRADEQ_BUS_SUBSCRIPTIONS")
    for name in sorted(set(topic.subscriptions) - set(endpoints) - set(tables)):
        log.warning("subscription %s has no endpoint: its messages wait in the database", name)
    bus = Bus(
        db,
        endpoints,
        tables=tables,
        push_token=settings.push_token.get_secret_value(),
        oidc_account=oidc_account,
        concurrency=args.concurrency,
        poll_interval_s=args.poll_interval,
        jitter=args.jitter,
    )
    stopping = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        log.info("received %s, stopping", signal.Signals(signum).name)
        stopping.set()

    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    bus.start()
    stopping.wait()
    bus.stop()
    return 0


def _dead_letters(args: argparse.Namespace) -> int:
    letters = SqliteDeliveryStore(SqliteDatabase(args.db)).dead_letters(args.subscription)
    for letter in letters:
        if args.json:
            row = dataclasses.asdict(letter)
            row["data"] = letter.data.decode("utf-8", errors="replace")
            print(json.dumps(row))
        else:
            print(
                f"{letter.dead_at}  {letter.subscription}  message={letter.message_id}"
                f"  event={letter.event_id}  job={letter.job_id}  attempts={letter.attempts}"
                f"  status={letter.last_status}  error={letter.last_error}"
            )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the bus command line; `run` is the default command."""
    settings = Settings()
    args_in = list(sys.argv[1:] if argv is None else argv)
    if not args_in or args_in[0] not in ("run", "dead-letters", "-h", "--help"):
        args_in.insert(0, "run")
    args = _parser(settings).parse_args(args_in)
    if args.command == "dead-letters":
        return _dead_letters(args)
    configure_logging("bus", settings.log_level)
    return _run(args, settings)
