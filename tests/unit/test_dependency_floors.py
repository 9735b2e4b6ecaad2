"""pyproject's floors exclude versions with published advisories, even without the
constraints file (a `pip install gradeq` resolves anywhere within the ranges), and the
image's base is pinned by digest."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]

#: The first version free of every advisory known for each dependency; raise an entry
#: (and pyproject's floor) when a new advisory is published.
MINIMUM_SAFE = {
    # CVE-2024-1135 (22.0.0), CVE-2024-6827 request smuggling through Transfer-Encoding.
    "gunicorn": "23.0.0",
    # CVE-2024-47081 .netrc leak (2.32.4), CVE-2026-25645 extract_zipped_paths.
    "requests": "2.33.0",
    # GHSA-38jv-5279-wg99 (2.6.3); GHSA-mf9v-mfxr-j63j, GHSA-qccp-gfcp-xxvc.
    "urllib3": "2.7.0",
    # GHSA-752w-5fwx-jx9f unknown `crit` (2.12.0); PYSEC-2026-175/177/178/179.
    "pyjwt": "2.13.0",
    # CVE-2025-47278 (3.1.1); CVE-2026-27205 missing Vary: Cookie.
    "flask": "3.1.3",
    # CVE-2025-66221, CVE-2026-21860, CVE-2026-27199 safe_join on Windows.
    "werkzeug": "3.1.6",
    # CVE-2026-69247 PKCS#7 decryption oracle (dev: the tests sign tokens with it).
    "cryptography": "50.0.0",
}


def requirements() -> dict[str, Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    listed = project["dependencies"] + project["optional-dependencies"]["dev"]
    return {canonicalize_name(r.name): r for r in map(Requirement, listed)}


def floor(requirement: Requirement) -> Version | None:
    floors = [Version(s.version) for s in requirement.specifier if s.operator in (">=", "==")]
    return max(floors, default=None)


@pytest.mark.parametrize("name", sorted(MINIMUM_SAFE))
def test_the_floor_is_at_least_the_first_safe_version(name: str) -> None:
    declared = requirements()
    assert name in declared, f"{name} is imported but not declared in pyproject.toml"
    lowest = floor(declared[name])
    assert lowest is not None, f"{declared[name]} has no floor"
    assert lowest >= Version(MINIMUM_SAFE[name]), (
        f"{declared[name]} admits versions below {MINIMUM_SAFE[name]}, which have advisories"
    )


def test_the_base_image_is_pinned_by_digest() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    match = re.search(r"^ARG BASE_IMAGE=(\S+)$", dockerfile, re.M)
    assert match, "the Dockerfile declares ARG BASE_IMAGE with a default"
    assert re.fullmatch(r"python:3\.\d+-slim@sha256:[0-9a-f]{64}", match[1]), match[1]
