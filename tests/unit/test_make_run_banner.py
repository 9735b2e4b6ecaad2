"""`make run`'s banner: printed last, naming commands that work in a new shell."""

from __future__ import annotations

import os
import re
import shlex
import sys
import threading
from pathlib import Path
from typing import cast

import pytest

from localcloud.__main__ import banner, serve
from localcloud.stack import LocalStack, StackConfig


class FakeStack:
    """What `serve` asks of a stack; each step prints what the real one's processes would."""

    def __init__(self, data_dir: Path) -> None:
        self.config = StackConfig(data_dir=data_dir)
        self.api_key = "gq_dev_key"
        self.webhook_secret = "whsec_dev"

    def start(self) -> None:
        print("      worker | on SIGTERM, gradings in flight get 5.0 s to finish")

    def settle(self) -> None:
        print("         bus | delivered the sample's event")

    def watch(self, stopped: object) -> None:
        print("      intake | a request after the banner")


def _banner(tmp_path: Path) -> str:
    return banner(cast(LocalStack, FakeStack(tmp_path)))


def test_the_banner_comes_after_start_up_lines_the_sample_and_late_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def sample() -> None:
        print(">>> sample job is SUCCEEDED")

    assert serve(cast(LocalStack, FakeStack(tmp_path)), threading.Event(), sample) is None
    out = capsys.readouterr().out
    order = [
        out.index("gradings in flight"),
        out.index(">>> sample job is SUCCEEDED"),
        out.index("delivered the sample's event"),
        out.index("Gradeq is running locally"),
        out.index("a request after the banner"),
    ]
    assert order == sorted(order)


def test_every_command_the_banner_names_runs_from_a_new_shell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A project folder whose environment has the package's commands installed, whichever
    # environment runs this test (the mutation run's has no `gradeq` command).
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("python", "gradeq"):
        (bin_dir / name).write_text("#!/bin/sh\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(bin_dir / "python"))
    monkeypatch.chdir(tmp_path)
    text = _banner(tmp_path)
    commands = [
        shlex.split(line)[0]
        for line in re.findall(r"(?:^ +|`|; )([.\w/-]*(?:gradeq|python) [^;`\n]*)", text, re.M)
    ]
    assert commands, "the banner names no gradeq or python command"
    for command in commands:
        # A bare name is looked up on a new shell's PATH, which has no .venv/bin.
        assert "/" in command, f"{command!r} is only found inside the virtual environment"
        assert os.access(command, os.X_OK), f"{command} does not run from {Path.cwd()}"
    assert {Path(c).name for c in commands} >= {"gradeq", "python"}
