"""The image and the test venv install the same, fully pinned, runtime dependencies."""

from __future__ import annotations

import re
import runpy
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
CONSTRAINTS = REPO / "services" / "constraints.txt"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!-]+)$")


def pins() -> dict[str, str]:
    found: dict[str, str] = {}
    for line in CONSTRAINTS.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        match = PIN.match(line.strip())
        assert match, f"not an exact pin: {line!r}"
        name = canonicalize_name(match[1])
        assert name not in found, f"{name} pinned twice"
        found[name] = match[2]
    return found


def runtime_requirements() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return [Requirement(r) for r in project["dependencies"]]


def test_every_runtime_dependency_is_pinned_within_its_range() -> None:
    pinned = pins()
    for requirement in runtime_requirements():
        name = canonicalize_name(requirement.name)
        assert name in pinned, f"{requirement.name} is not pinned in {CONSTRAINTS.name}"
        assert requirement.specifier.contains(pinned[name], prereleases=True), (
            f"{name}=={pinned[name]} is outside pyproject's {requirement}"
        )


def test_the_tests_run_on_the_pinned_versions() -> None:
    for name, version in pins().items():
        assert metadata.version(name) == version, f"{name}: installed != pinned; make install"


def test_the_image_and_make_install_use_the_constraints() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "COPY services/constraints.txt" in dockerfile
    assert re.search(r"pip install -c constraints\.txt -r /tmp/requirements\.txt", dockerfile)
    makefile = (REPO / "Makefile").read_text()
    assert "CONSTRAINTS := services/constraints.txt" in makefile
    assert "pip install --quiet -c $(CONSTRAINTS) -e '.[dev]'" in makefile


def test_the_pins_are_what_make_constraints_writes() -> None:
    """Exactly the runtime closure: nothing missing, no development tool."""
    script = runpy.run_path(str(REPO / "scripts" / "freeze-constraints.py"))
    closure = script["runtime_closure"]([str(r) for r in runtime_requirements()])
    assert pins() == closure
    assert not {"pytest", "ruff", "mypy", "gradeq"} & set(closure)
