"""Print the authorization policy table, or write it into docs/auth.md (--write).

The table is generated from shared/domain/authorization.py (`POLICY`), the one place the
intake's authorization is decided; docs/auth.md holds it between two markers and a unit
test checks that what it holds is what this prints.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from shared.domain.authorization import policy_table  # noqa: E402

DOC = ROOT / "docs" / "auth.md"
START = "<!-- policy-table:start (scripts/auth-policy-table.py --write) -->"
END = "<!-- policy-table:end -->"


def with_table(text: str) -> str:
    """`text` with the block between the markers replaced by the current table."""
    head, start, rest = text.partition(START)
    _, end, tail = rest.partition(END)
    if not start or not end:
        raise SystemExit(f"{DOC} lacks the markers {START!r} and {END!r}")
    return f"{head}{START}\n{policy_table()}{END}{tail}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help="rewrite docs/auth.md's table")
    args = parser.parse_args()
    if args.write:
        DOC.write_text(with_table(DOC.read_text("utf-8")), "utf-8")
    else:
        sys.stdout.write(policy_table())


if __name__ == "__main__":
    main()
