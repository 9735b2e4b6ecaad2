"""The state a deployment of the previous release left, for plans of today's terraform/.

`tests/infra/release/state.json` is what `terraform apply` of terraform/ at the
release's commit (RELEASE_FILE names it) with examples/minimal.tfvars would leave,
made with the provider stand-in's local apply (every value known only after apply made
up, every reference resolved by terraform). Rebuild it when a release is cut:

    .venv/bin/python -m tests.infra.release_state <commit>

It is recorded, not rebuilt by each test run: the tests then need no git history, and a
change to today's terraform/ is always planned against the same objects.
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from localcloud.terraform_provider.check import Workspace
from tests.infra.tfconfig import REPO

RELEASE_DIR = Path(__file__).parent / "release"
# A state file by content; not named *.tfstate, which .gitignore keeps out (real states
# hold secrets: this one holds made-up values only).
STATE_FILE = RELEASE_DIR / "state.json"
RELEASE_FILE = RELEASE_DIR / "release.json"


def _checkout(commit: str, destination: Path) -> Path:
    """terraform/ and shared/config at `commit`, side by side as terraform/ reads them."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", commit, "terraform", "shared/config"],
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(destination, filter="data")
    return destination / "terraform"


def _compact(state: dict[str, Any]) -> dict[str, Any]:
    """Leave out top-level nulls (the stand-in reads a missing attribute as null), and what
    differs between two builds of the same commit."""
    # The oldest terraform the checks support (docs/terraform-check.md) reads it.
    state |= {"terraform_version": "1.9.0", "serial": 1}
    state["lineage"] = "00000000-0000-0000-0000-000000000001"
    state.pop("check_results", None)  # re-evaluated by each plan, in no fixed order
    for resource in state["resources"]:
        for instance in resource["instances"]:
            attributes = instance["attributes"]
            instance["attributes"] = {k: v for k, v in attributes.items() if v is not None}
            instance.pop("sensitive_attributes", None)
            instance.pop("identity_schema_version", None)
    return state


def build(commit: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="release-state-") as folder:
        root = Path(folder)
        directory = _checkout(commit, root / "release")
        workspace = Workspace(root / "work", apply=True)
        state = root / "applied.tfstate"
        applied = workspace.apply(directory, state, directory / "examples" / "minimal.tfvars")
        if applied.returncode != 0:
            raise RuntimeError(applied.output)
        loaded: dict[str, Any] = json.loads(state.read_text())
    return _compact(loaded)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("commit", help="the previous release's commit")
    args = parser.parse_args(argv)
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", args.commit],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    state = build(commit)
    RELEASE_DIR.mkdir(exist_ok=True)
    STATE_FILE.write_text(json.dumps(state, indent=1, sort_keys=True) + "\n")
    RELEASE_FILE.write_text(
        json.dumps({"commit": commit, "var_file": "terraform/examples/minimal.tfvars"}, indent=1)
        + "\n"
    )
    print(f"{STATE_FILE}: {len(state['resources'])} resources from {commit}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
