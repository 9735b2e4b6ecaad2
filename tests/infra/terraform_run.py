"""Terraform itself, run offline against the provider stand-in (localcloud/terraform_provider).

Skips (with the reason, never silently) where terraform or npm is missing; every other
failure fails the test.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from localcloud.terraform_provider.check import Result, Workspace, terraform_binary
from tests.infra.tfconfig import REPO

# GRADEQ_TERRAFORM_DIR runs the same checks on another copy (e.g. an older revision's).
TERRAFORM_DIR = Path(os.environ.get("GRADEQ_TERRAFORM_DIR", REPO / "terraform"))
MINIMAL_VARS = TERRAFORM_DIR / "examples" / "minimal.tfvars"
KEYED_GRADER_VARS = Path(__file__).parent / "tfvars" / "keyed_grader.tfvars"


def workspace(root: Path) -> Workspace:
    if terraform_binary() is None:
        pytest.skip("SKIPPED terraform check: the terraform binary is not on PATH")
    if shutil.which("npm") is None:
        pytest.skip("SKIPPED terraform check: npm (for the provider schema packages) is missing")
    try:
        return Workspace(root)
    except subprocess.CalledProcessError as error:
        pytest.fail(f"installing the provider schema packages failed: {error.stderr}")


def copy_configuration(destination: Path) -> Path:
    """terraform/ and the shared config files it reads (../shared/config), side by side."""
    ignore = shutil.ignore_patterns(".terraform*")
    shutil.copytree(TERRAFORM_DIR, destination / "terraform", ignore=ignore)
    shutil.copytree(REPO / "shared" / "config", destination / "shared" / "config")
    return destination / "terraform"


def plan_json(
    ws: Workspace, directory: Path, *var_files: Path, extra: tuple[str, ...] = ()
) -> dict[str, Any]:
    planned = ws.plan(directory, *var_files, extra=extra)
    assert planned.returncode == 0, planned.output
    shown = ws.show_json(directory)
    assert shown.returncode == 0, shown.output
    loaded: dict[str, Any] = json.loads(shown.stdout)
    return loaded


def refused(result: Result) -> str:
    """Terraform's error output; fails the test when terraform accepted the configuration."""
    assert result.returncode != 0, f"terraform accepted it:\n{result.output}"
    return result.output
