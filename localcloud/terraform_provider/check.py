"""Run terraform validate, plan and test on a terraform folder against the provider stand-in.

`python -m localcloud.terraform_provider.check` (what `make terraform-check` runs):
terraform finds hashicorp/google, google-beta and time through a CLI configuration whose
`dev_overrides` point at small launchers of this package, so nothing is downloaded and no
`terraform init` is needed. The plan is made on an empty state and shown as JSON.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from localcloud.terraform_provider import schema
from localcloud.terraform_provider.server import APPLY_TO_LOCAL_STATE

REPO = Path(__file__).resolve().parents[2]
DEFAULT_CACHE = REPO / ".cache"
PROVIDERS = {"google": "hashicorp/google", "google-beta": "hashicorp/google-beta"}
PROVIDERS |= {"time": "hashicorp/time"}


def terraform_binary() -> str | None:
    """The terraform on PATH, or None (the caller must say so, never pass silently)."""
    return shutil.which(os.environ.get("TERRAFORM", "terraform"))


@dataclass
class Result:
    command: list[str]
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


class Workspace:
    """Launchers and a CLI configuration under `root`; runs terraform against them."""

    def __init__(self, root: Path, cache: Path = DEFAULT_CACHE, apply: bool = False) -> None:
        terraform = terraform_binary()
        if terraform is None:
            raise FileNotFoundError("terraform is not on PATH")
        self.terraform = terraform
        self.root = root
        bin_dir = root / "providers"
        bin_dir.mkdir(parents=True, exist_ok=True)
        overrides = []
        for name, source in PROVIDERS.items():
            # Extract and cache the schema now: each terraform command starts the
            # providers several times, and a cold start would install the package.
            schema.load(name, cache)
            launcher = bin_dir / f"terraform-provider-{name}"
            launcher.write_text(
                "#!/bin/sh\n"
                f"GRADEQ_PROVIDER_SCHEMA_CACHE='{cache}' exec '{sys.executable}' "
                f"-m localcloud.terraform_provider {name}\n"
            )
            launcher.chmod(0o755)
            overrides.append(f'    "{source}" = "{bin_dir}"')
        self.cli_config = root / "terraform.tfrc"
        self.cli_config.write_text(
            "provider_installation {\n  dev_overrides {\n"
            + "\n".join(overrides)
            + "\n  }\n  direct {}\n}\n"
        )
        self.env = {
            **os.environ,
            "TF_CLI_CONFIG_FILE": str(self.cli_config),
            "TF_IN_AUTOMATION": "1",
            "CHECKPOINT_DISABLE": "1",
            "TF_DATA_DIR": str(root / "data"),
            "PYTHONPATH": str(REPO),
        }
        if apply:
            # The stand-in then "applies" into the local state file only (see `apply`).
            self.env[APPLY_TO_LOCAL_STATE] = "1"

    def run(self, directory: Path, *args: str, timeout: float = 300) -> Result:
        command = [self.terraform, *args]
        completed = subprocess.run(
            command,
            cwd=directory,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return Result(command, completed.returncode, completed.stdout, completed.stderr)

    def modules(self, directory: Path) -> Result:
        """Install the configuration's local modules (`terraform get`: no provider lookup).

        `terraform init` would also ask the registry for the providers, which the dev
        overrides already supply; `get` records only the module tree.
        """
        return self.run(directory, "get", "-no-color")

    def validate(self, directory: Path) -> Result:
        installed = self.modules(directory)
        if installed.returncode != 0:
            return installed
        return self.run(directory, "validate", "-no-color")

    def plan(self, directory: Path, *var_files: Path, extra: tuple[str, ...] = ()) -> Result:
        """Plan on an empty state into root/plan.bin (see `show_json`)."""
        installed = self.modules(directory)
        if installed.returncode != 0:
            return installed
        state = self.root / "empty.tfstate"
        state.unlink(missing_ok=True)
        args = ["plan", "-no-color", "-input=false", "-lock=false", f"-state={state}"]
        args += [f"-var-file={f}" for f in var_files]
        return self.run(directory, *args, *extra, f"-out={self.root / 'plan.bin'}")

    def apply(self, directory: Path, state: Path, *var_files: Path) -> Result:
        """`terraform apply` into a local state file: what a deployment of `directory`
        would leave, with every value known only after apply made up (values.settle).
        Only a Workspace made with apply=True; nothing is created anywhere."""
        installed = self.modules(directory)
        if installed.returncode != 0:
            return installed
        args = ["apply", "-no-color", "-input=false", "-lock=false", "-auto-approve"]
        args += [f"-state={state}", *(f"-var-file={f}" for f in var_files)]
        return self.run(directory, *args)

    def show_json(self, directory: Path) -> Result:
        return self.run(directory, "show", "-json", "-no-color", str(self.root / "plan.bin"))

    def test(self, directory: Path) -> Result:
        installed = self.modules(directory)
        if installed.returncode != 0:
            return installed
        return self.run(directory, "test", "-no-color")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=REPO / "terraform")
    parser.add_argument("--var-file", type=Path, default=None)
    parser.add_argument("--work", type=Path, default=REPO / ".cache" / "terraform-check")
    args = parser.parse_args(argv)
    if terraform_binary() is None:
        print("terraform-check: terraform is not on PATH; nothing was checked.", file=sys.stderr)
        return 2
    directory = args.dir.resolve()
    var_file = (args.var_file or directory / "examples" / "minimal.tfvars").resolve()
    workspace = Workspace(args.work.resolve())
    steps: list[tuple[str, Callable[[], Result]]] = [
        ("validate", lambda: workspace.validate(directory)),
        ("plan", lambda: workspace.plan(directory, var_file)),
        ("show -json", lambda: workspace.show_json(directory)),
        ("test", lambda: workspace.test(directory)),
    ]
    for name, step in steps:
        result = step()
        if result.returncode != 0:
            print(result.output, file=sys.stderr)
            print(f"terraform-check: terraform {name} failed", file=sys.stderr)
            return 1
        if name == "show -json":
            (workspace.root / "plan.json").write_text(result.stdout)
        else:
            lines = result.stdout.splitlines()
            summary = [line for line in lines if line.startswith(("Success", "Plan:"))]
            print(f"terraform {name}: {(summary or lines[-1:] or [''])[0]}")
    print(f"terraform-check: plan JSON in {workspace.root / 'plan.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
