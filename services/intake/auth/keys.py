"""Manage server clients' API keys in the job store's database (SQLite or Firestore).

    python -m services.intake.auth.keys create --client CLIENT_ID [--expires-in-days N]
    python -m services.intake.auth.keys list [--client CLIENT_ID]
    python -m services.intake.auth.keys revoke KEY_ID

`create` prints the key once, as JSON with the record; only its SHA-256 digest is stored.
The backend and database come from the usual GRADEQ_* settings.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from shared.bootstrap import adapter_family, build_clock
from shared.config.settings import Settings
from shared.domain.api_keys import ApiKey, ApiKeyNotFound
from shared.ports import ApiKeyStore, Clock


def create(
    store: ApiKeyStore, clock: Clock, client_id: str, expires_in_days: float | None = None
) -> dict[str, Any]:
    """Issue a key for `client_id`; the result holds the key, shown only this once.

    Without `expires_in_days` the key works until revoked; with it, it must be positive.
    """
    if expires_in_days is not None and not expires_in_days > 0:
        raise ValueError("--expires-in-days must be more than 0 (leave it out: no expiry)")
    now = clock.now()
    try:
        expires_at = now + timedelta(days=expires_in_days) if expires_in_days is not None else None
    except OverflowError as exc:
        raise ValueError("--expires-in-days is too large") from exc
    key, record = ApiKey.issue(client_id, now, expires_at)
    store.add(record)
    return {"key": key, **record.public_view()}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m services.intake.auth.keys", description=__doc__
    )
    commands = parser.add_subparsers(dest="command", required=True)
    made = commands.add_parser("create", help="issue a key for a client")
    made.add_argument("--client", required=True, help="the client id jobs are scoped to")
    made.add_argument("--expires-in-days", type=float, default=None)
    listed = commands.add_parser("list", help="list keys (never the keys themselves)")
    listed.add_argument("--client", default=None)
    revoked = commands.add_parser("revoke", help="revoke a key by its key id")
    revoked.add_argument("key_id")
    return parser


def main(argv: Sequence[str] | None = None, store: ApiKeyStore | None = None) -> int:
    args = _parser().parse_args(argv)
    store = store or adapter_family(Settings()).api_key_store()
    clock = build_clock()
    if args.command == "create":
        try:
            print(json.dumps(create(store, clock, args.client, args.expires_in_days)))
        except ValueError as exc:
            print(exc, file=sys.stderr)
            return 2
    elif args.command == "list":
        for key in store.list(args.client):
            print(json.dumps(key.public_view()))
    else:
        try:
            print(json.dumps(store.revoke(args.key_id, clock.now()).public_view()))
        except ApiKeyNotFound as exc:
            print(exc.detail, file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
