"""Headless Chromium for the browser tests: Debian's chromium driven by Playwright.

The browser comes from the system (scripts/install-chromium.sh installs it on a fresh
machine); Playwright never downloads one. Without it the tests skip, saying why.
Screenshots go to $GRADEQ_TEST_ARTIFACTS (default: test-artifacts/ in the checkout).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
INSTALLER = REPO / "scripts" / "install-chromium.sh"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def artifacts_dir() -> Path:
    path = Path(os.environ.get("GRADEQ_TEST_ARTIFACTS") or REPO / "test-artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


def _chromium_missing() -> str | None:
    if CHROMIUM.exists():
        return None
    done = subprocess.run(
        ["bash", str(INSTALLER)], capture_output=True, text=True, timeout=600, check=False
    )
    if CHROMIUM.exists():
        return None
    return f"{CHROMIUM} is missing and {INSTALLER.name} could not install it: {done.stderr[-300:]}"


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """A headless Chromium for the session, or a skip that names what is missing."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        pytest.skip(f"BROWSER TESTS SKIPPED: playwright is not installed ({exc})")
    if reason := _chromium_missing():
        pytest.skip(f"BROWSER TESTS SKIPPED: {reason}")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield chromium
        finally:
            chromium.close()
