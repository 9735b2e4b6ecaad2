"""Run the local dispatcher: Cloud Tasks for HTTP targets on the shared SQLite file.

    python -m localcloud.tasks [--db PATH] [--queues-file FILE] [--target-base URL]
        [--grpc-host HOST]
        [--grpc-port N] [--grace-s S] [--paused] [--reclaim-leases]

Defaults come from the GRADEQ_* settings: --db is GRADEQ_DATA_DIR/gradeq.sqlite3,
--queues-file is GRADEQ_QUEUES_FILE. With GRADEQ_PUSH_AUTH=oidc each request carries an
ID token shaped as Cloud Run forwards it (signature removed) for the task's OIDC account
and audience, or for GRADEQ_TASKS_SERVICE_ACCOUNT and the target's base URL when the task
names none; otherwise GRADEQ_PUSH_TOKEN (if set) is sent as `Authorization: Bearer
<token>`. Tasks the embedded queue stores relative to the worker go to --target-base
(GRADEQ_WORKER_URL), so a stack restarted on other ports still reaches its worker. The
gRPC API listens on
127.0.0.1:8123 unless told otherwise (--grpc-port 0 picks a free port, logged at start).
SIGINT/SIGTERM stop it gracefully: attempts still in flight after --grace-s are handed
back and sent again by the next dispatcher.
"""

from __future__ import annotations

import argparse
import signal
import threading
from datetime import timedelta
from pathlib import Path
from types import FrameType

from localcloud.tasks.dispatcher import Dispatcher
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.config.queues import load_queues
from shared.config.settings import PushAuth, Settings
from shared.logs import configure_logging

DEFAULT_GRPC_PORT = 8123


def parse_args(settings: Settings, argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m localcloud.tasks",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--db", type=Path, default=settings.database_path)
    parser.add_argument("--queues-file", type=Path, default=settings.queues_file)
    parser.add_argument(
        "--target-base",
        default=settings.worker_url,
        help="base URL of tasks stored relative to the worker (default: GRADEQ_WORKER_URL)",
    )
    parser.add_argument("--grpc-host", default="127.0.0.1")
    parser.add_argument("--grpc-port", type=int, default=DEFAULT_GRPC_PORT)
    parser.add_argument(
        "--grace-s",
        type=float,
        default=10.0,
        help="how long to let requests in flight finish on shutdown",
    )
    parser.add_argument(
        "--poll-interval-s",
        type=float,
        default=1.0,
        help="how often to look for tasks written by other processes (a fallback: "
        "writers signal new tasks)",
    )
    parser.add_argument(
        "--name-reservation-s",
        type=float,
        default=3600.0,
        help="how long a finished task's name stays taken",
    )
    parser.add_argument(
        "--paused", action="store_true", help="serve the gRPC API but dispatch nothing"
    )
    parser.add_argument(
        "--reclaim-leases",
        action="store_true",
        help="resend tasks leased by a previous dispatcher at once "
        "(only when this is the database's sole dispatcher)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    settings = Settings()
    configure_logging("dispatcher", settings.log_level)
    args = parse_args(settings, argv)
    token = settings.push_token.get_secret_value() or None
    oidc_account = None
    if settings.push_auth is PushAuth.OIDC:
        if not settings.tasks_service_account:
            raise SystemExit("GRADEQ_TASKS_SERVICE_ACCOUNT is required with GRADEQ_PUSH_AUTH=oidc")
        oidc_account = settings.tasks_service_account
    dispatcher = Dispatcher(
        SqliteDatabase(args.db),
        load_queues(args.queues_file),
        push_token=token,
        oidc_account=oidc_account,
        target_base=args.target_base,
        grpc_address=f"{args.grpc_host}:{args.grpc_port}",
        poll_interval_s=args.poll_interval_s,
        name_reservation=timedelta(seconds=args.name_reservation_s),
        paused=args.paused,
        reclaim_leases=args.reclaim_leases,
    )
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    dispatcher.start()
    stop.wait()
    dispatcher.stop(args.grace_s)


if __name__ == "__main__":
    main()
