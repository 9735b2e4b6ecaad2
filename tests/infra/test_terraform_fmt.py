"""terraform fmt, where a terraform binary is installed (it is not promised everywhere)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.infra.tfconfig import TERRAFORM_DIR

pytestmark = pytest.mark.infra


def test_terraform_is_formatted() -> None:
    terraform = shutil.which("terraform")
    if terraform is None:
        pytest.skip(
            "SKIPPED terraform fmt: no `terraform` binary on PATH; install terraform to run it"
        )
    result = subprocess.run(
        [terraform, "fmt", "-check", "-recursive", "-diff", str(TERRAFORM_DIR)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "TF_CLI_CONFIG_FILE": "/dev/null"},
        check=False,
    )
    assert result.returncode == 0, f"run `terraform fmt -recursive terraform`:\n{result.stdout}"
