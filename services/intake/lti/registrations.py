"""Manage LTI 1.3 registrations and Gradeq's LTI signing keys (operator commands).

    python -m services.intake.lti.registrations tool-config
    python -m services.intake.lti.registrations add --school S --issuer URL --client-id ID \\
        --deployment-id D [--deployment-id D2 ...] --auth-url URL --token-url URL \\
        --jwks-url URL [--token-audience AUD]
    python -m services.intake.lti.registrations list [--school S]
    python -m services.intake.lti.registrations rotate-key [--lead-hours H] [--overlap-hours H]
    python -m services.intake.lti.registrations keys
    python -m services.intake.lti.registrations new-sealing-key

`tool-config` prints what a school's LMS admin enters for Gradeq (from GRADEQ_LTI_TOOL_URL).
`add` stores what the LMS shows back (adding again replaces the registration of the same
issuer and client id). `rotate-key` publishes a new signing key now, signing after the
lead (1 hour unless told), and retires the others the overlap (1 hour) after that; the
private keys are stored sealed under GRADEQ_LTI_SECRETS_KEY and never printed.
`new-sealing-key` prints a fresh value for GRADEQ_LTI_SECRETS_KEY. The backend and
database come from the usual GRADEQ_* settings.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from datetime import timedelta

from services.notification.sealing import Sealer, new_sealing_key
from shared.bootstrap import adapter_family, build_clock
from shared.config.settings import Settings
from shared.domain.lti import LtiRegistration
from shared.ports import LtiStore
from shared.service_layer.lti_keys import LtiToolKeys
from shared.service_layer.lti_launch import (
    ASSIGNMENT_PARAMETER,
    JWKS_PATH,
    LAUNCH_PATH,
    LOGIN_PATH,
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m services.intake.lti.registrations",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("tool-config", help="print what an LMS admin enters for Gradeq")
    added = commands.add_parser("add", help="store a school's platform registration")
    added.add_argument("--school", required=True)
    added.add_argument("--issuer", required=True)
    added.add_argument("--client-id", required=True)
    added.add_argument("--deployment-id", required=True, action="append")
    added.add_argument("--auth-url", required=True, help="the platform's OIDC auth endpoint")
    added.add_argument("--token-url", required=True, help="the platform's token endpoint")
    added.add_argument("--jwks-url", required=True, help="the platform's public keyset URL")
    added.add_argument("--token-audience", default=None)
    listed = commands.add_parser("list", help="list registrations")
    listed.add_argument("--school", default=None)
    rotated = commands.add_parser("rotate-key", help="publish a new LTI signing key")
    rotated.add_argument("--lead-hours", type=float, default=1.0)
    rotated.add_argument("--overlap-hours", type=float, default=1.0)
    commands.add_parser("keys", help="list the LTI signing keys (never the keys themselves)")
    commands.add_parser("new-sealing-key", help="print a fresh GRADEQ_LTI_SECRETS_KEY")
    return parser


def tool_config(tool_url: str) -> dict[str, str]:
    base = tool_url.rstrip("/")
    return {
        "login_initiation_url": base + LOGIN_PATH,
        "redirect_uri": base + LAUNCH_PATH,
        "target_link_uri": base + LAUNCH_PATH,
        "public_jwks_url": base + JWKS_PATH,
        "custom_parameter": f"{ASSIGNMENT_PARAMETER}=<the Gradeq assignment id>",
    }


def main(
    argv: Sequence[str] | None = None,
    store: LtiStore | None = None,
    settings: Settings | None = None,
) -> int:
    args = _parser().parse_args(argv)
    if args.command == "new-sealing-key":
        print(new_sealing_key())
        return 0
    settings = settings or Settings()
    if args.command == "tool-config":
        if not settings.lti_tool_url:
            print("GRADEQ_LTI_TOOL_URL must be set", file=sys.stderr)
            return 2
        print(json.dumps(tool_config(settings.lti_tool_url), indent=2))
        return 0
    store = store or adapter_family(settings).lti_store()
    if args.command == "add":
        try:
            registration = LtiRegistration(
                school=args.school,
                issuer=args.issuer,
                client_id=args.client_id,
                deployment_ids=tuple(args.deployment_id),
                auth_login_url=args.auth_url,
                auth_token_url=args.token_url,
                key_set_url=args.jwks_url,
                token_audience=args.token_audience,
            )
        except ValueError as exc:
            print(exc, file=sys.stderr)
            return 2
        store.put_registration(registration)
        print(json.dumps(registration.to_record()))
        return 0
    if args.command == "list":
        for registration in store.registrations(args.school):
            print(json.dumps(registration.to_record()))
        return 0
    try:
        sealer = Sealer.from_setting(settings.lti_secrets_key.get_secret_value())
    except ValueError:
        print("GRADEQ_LTI_SECRETS_KEY must hold base64 keys of 32 bytes", file=sys.stderr)
        return 2
    keys = LtiToolKeys(store, sealer, build_clock())
    if args.command == "keys":
        for key in store.tool_keys():
            print(json.dumps(key.public_view()))
        return 0
    if args.lead_hours < 0 or args.overlap_hours < 0:
        print("--lead-hours and --overlap-hours cannot be negative", file=sys.stderr)
        return 2
    keys.ensure()
    new = keys.rotate(timedelta(hours=args.lead_hours), timedelta(hours=args.overlap_hours))
    print(json.dumps(new.public_view()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
