"""Write services/constraints.txt: the exact versions of the runtime dependencies, tested.

Run by `make constraints` with the project's venv: it walks pyproject.toml's runtime
dependencies and everything they require (markers evaluated for this interpreter, extras
followed) through the installed distributions, and pins each at its installed version.
Development tools and the project itself are left out. The Dockerfile installs the image
with these constraints and `make install` installs the venv with them, so the image runs
on the versions the tests ran on.
"""

from __future__ import annotations

import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "services" / "constraints.txt"
HEADER = """\
# The versions the image and the test venv install (pip install -c services/constraints.txt).
# The runtime dependencies of pyproject.toml and all they require, as installed in the
# venv the tests ran in. Regenerate with `make constraints` after changing a dependency.
"""


def runtime_closure(requirements: list[str]) -> dict[str, str]:
    """Map each distribution the requirements need (transitively) to its installed version."""
    pinned: dict[str, str] = {}
    visited: set[tuple[str, str]] = set()  # (distribution, extra) already expanded
    pending = [(Requirement(r), "") for r in requirements]
    while pending:
        requirement, extra = pending.pop()
        if requirement.marker and not requirement.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(requirement.name)
        distribution = metadata.distribution(requirement.name)
        pinned[name] = distribution.version
        for chosen in ("", *sorted(requirement.extras)):
            if (name, chosen) not in visited:
                visited.add((name, chosen))
                pending.extend((Requirement(raw), chosen) for raw in distribution.requires or [])
    return pinned


def main() -> int:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = runtime_closure(project["dependencies"])
    pins.pop(canonicalize_name(project["name"]), None)
    lines = [f"{name}=={version}" for name, version in sorted(pins.items())]
    OUTPUT.write_text(HEADER + "\n".join(lines) + "\n")
    print(f"wrote {len(lines)} pins to {OUTPUT.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
