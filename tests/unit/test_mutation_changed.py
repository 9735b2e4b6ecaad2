"""`make mutation-changed`: which mutants a change selects, by mutmut's own naming."""

from __future__ import annotations

import fnmatch
import importlib.util
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


def selector() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "mutation_changed", REPO / "scripts" / "mutation_changed.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def selects(path: str, mutant: str) -> bool:
    return any(fnmatch.fnmatch(mutant, p) for p in selector().patterns(path))


def test_a_files_patterns_match_its_mutants_and_no_other_files() -> None:
    assert selects("shared/domain/job.py", "shared.domain.job.x_task_name__mutmut_1")
    assert selects("shared/domain/job.py", "shared.domain.job.xǁJobǁfrom_record__mutmut_113")
    assert not selects("shared/domain/job.py", "shared.domain.job_events.x_of__mutmut_1")
    assert not selects("shared/domain/job.py", "shared.domain.lanes.x_urgent__mutmut_2")
    # A package's __init__ is left out of the names mutmut gives.
    assert selects("services/intake/auth/__init__.py", "services.intake.auth.x_policy__mutmut_4")
    assert not selects(
        "services/intake/auth/__init__.py", "services.intake.auth.keys.x_lookup__mutmut_1"
    )


def test_only_the_files_mutmut_mutates_are_selected() -> None:
    mutated = selector().mutated
    only = ["shared/domain/*", "shared/http/push_auth.py"]
    assert mutated("shared/domain/job.py", only)
    assert mutated("shared/http/push_auth.py", only)
    assert not mutated("shared/http/health.py", only)
    assert not mutated("shared/domain/README.md", only)
    assert not mutated("shared/domain/job.py", only, ["shared/domain/job.py"])


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("shared/adapters/embedded/job_store.py", "conditional writes, admission ceilings"),
        ("shared/adapters/google/backlog_shards.py", "the backlog ceiling's shares"),
        ("shared/adapters/embedded/erasure.py", "erasure"),
        ("shared/adapters/graders/lane_quota.py", "the per-lane provider quota"),
        ("shared/adapters/graders/limiter.py", "the limiter"),
        ("shared/config/subscription_filter.py", "the subscription filter"),
        ("shared/http/push_auth.py", "push auth"),
        ("shared/http/callback_guard.py", "the callback guard"),
        ("services/intake/auth/keys.py", "the intake's authorization"),
        ("shared/service_layer/erasure.py", "erasure"),
        ("shared/domain/job.py", "the core"),
    ],
)
def test_the_project_mutates_its_decisions(path: str, why: str) -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mutmut"]
    assert (REPO / path).is_file(), path
    assert selector().mutated(path, config["only_mutate"], config.get("do_not_mutate", [])), why


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def test_changed_files_are_those_of_the_branch_committed_uncommitted_or_new(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "config", "user.email", "dev@example.com")
    git(tmp_path, "config", "user.name", "dev")
    for name in ("a.py", "b.py", "c.py", "d.py"):
        (tmp_path / name).write_text("x = 1\n")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "base")
    git(tmp_path, "checkout", "-q", "-b", "topic")
    (tmp_path / "a.py").write_text("x = 2\n")
    git(tmp_path, "commit", "-q", "-am", "committed on the branch")
    git(tmp_path, "checkout", "-q", "main")
    (tmp_path / "c.py").write_text("x = 3\n")
    git(tmp_path, "commit", "-q", "-am", "main moved on")
    git(tmp_path, "checkout", "-q", "topic")
    (tmp_path / "b.py").write_text("x = 2\n")  # not committed yet
    (tmp_path / "e.py").write_text("x = 1\n")  # new
    monkeypatch.chdir(tmp_path)
    assert selector().changed_files("main") == ["a.py", "b.py", "e.py"]
