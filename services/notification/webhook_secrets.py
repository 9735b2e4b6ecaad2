"""Manage clients' webhook signing secrets in the service's database (SQLite or Firestore).

    python -m services.notification.webhook_secrets create --client CLIENT_ID [--adopt-from-stdin]
    python -m services.notification.webhook_secrets rotate --client CLIENT_ID [--overlap-hours H]
    python -m services.notification.webhook_secrets list [--client CLIENT_ID]
    python -m services.notification.webhook_secrets revoke SECRET_ID
    python -m services.notification.webhook_secrets new-sealing-key

`create` and `rotate` print the new `whsec_...` secret once, as JSON with its record; the
store keeps it sealed under GRADEQ_WEBHOOK_SECRETS_KEY, which they need (as the
notification service does). During a rotation's overlap (24 hours unless told) webhooks
carry a signature by the old and by the new secret. `create --adopt-from-stdin` stores a
secret the client already holds (an older deployment's shared one) instead of making one,
to be rotated away. `new-sealing-key` prints a fresh
value for GRADEQ_WEBHOOK_SECRETS_KEY. The backend and database come from the usual
GRADEQ_* settings.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from datetime import timedelta

from services.notification.client_secrets import ClientSecrets, Issued, SecretExists
from services.notification.sealing import Sealer, new_sealing_key
from shared.bootstrap import adapter_family, build_clock
from shared.config.settings import Settings
from shared.domain.webhook_secrets import WebhookSecretNotFound
from shared.ports import WebhookSecretStore

DEFAULT_OVERLAP_HOURS = 24.0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m services.notification.webhook_secrets",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    made = commands.add_parser("create", help="issue a client's first webhook secret")
    made.add_argument("--client", required=True)
    made.add_argument(
        "--adopt-from-stdin",
        action="store_true",
        help="adopt the whsec_ secret read from standard input (one the client holds)",
    )
    rotated = commands.add_parser("rotate", help="issue a new secret; the old ones sign a while")
    rotated.add_argument("--client", required=True)
    rotated.add_argument("--overlap-hours", type=float, default=DEFAULT_OVERLAP_HOURS)
    listed = commands.add_parser("list", help="list secrets (never the secrets themselves)")
    listed.add_argument("--client", default=None)
    revoked = commands.add_parser("revoke", help="stop signing with a secret now")
    revoked.add_argument("secret_id")
    commands.add_parser("new-sealing-key", help="print a fresh GRADEQ_WEBHOOK_SECRETS_KEY")
    return parser


def _shown(issued: Issued) -> str:
    return json.dumps({"secret": issued.secret, **issued.record.public_view()})


def main(
    argv: Sequence[str] | None = None,
    store: WebhookSecretStore | None = None,
    settings: Settings | None = None,
) -> int:
    args = _parser().parse_args(argv)
    if args.command == "new-sealing-key":
        print(new_sealing_key())
        return 0
    settings = settings or Settings()
    store = store or adapter_family(settings).webhook_secret_store()
    clock = build_clock()
    if args.command == "list":
        for secret in store.list(args.client):
            print(json.dumps(secret.public_view()))
        return 0
    if args.command == "revoke":
        try:
            print(json.dumps(store.expire(args.secret_id, clock.now()).public_view()))
        except WebhookSecretNotFound as exc:
            print(exc.detail, file=sys.stderr)
            return 1
        return 0
    if not args.client.strip():
        print("--client must not be blank", file=sys.stderr)
        return 2
    try:
        sealer = Sealer.from_setting(settings.webhook_secrets_key.get_secret_value())
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    secrets = ClientSecrets(store, sealer, clock)
    if args.command == "create":
        existing = sys.stdin.readline().strip() if args.adopt_from_stdin else None
        try:
            print(_shown(secrets.create(args.client, existing)))
        except SecretExists as exc:
            print(exc.detail, file=sys.stderr)
            return 1
        except ValueError as exc:
            print(exc, file=sys.stderr)
            return 2
        return 0
    if args.overlap_hours < 0:
        print("--overlap-hours cannot be negative", file=sys.stderr)
        return 2
    print(_shown(secrets.rotate(args.client, timedelta(hours=args.overlap_hours))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
