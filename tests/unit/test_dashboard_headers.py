"""The operator dashboard tells the browser to run only its own files, never inside a frame,
and keeps the operator key in the page's memory only."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from services.intake.app import create_app
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings

STATIC = Path(__file__).parents[2] / "services" / "intake" / "admin" / "static"
PATHS = ["/admin/", "/admin/static/dashboard.js", "/admin/static/dashboard.css"]


@pytest.fixture
def client(settings: Settings, adapters: Adapters, clock: FrozenClock) -> FlaskClient:
    return create_app(settings, adapters, clock).test_client()


def directives(policy: str) -> dict[str, list[str]]:
    parts = (d.split() for d in policy.split(";") if d.strip())
    return {name: values for name, *values in parts}


@pytest.mark.parametrize("path", PATHS)
def test_every_dashboard_file_carries_the_browser_policies(client: FlaskClient, path: str) -> None:
    with client.get(path) as response:
        assert response.status_code == 200
        headers = response.headers
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["X-Frame-Options"] == "DENY"
    assert headers["Referrer-Policy"] == "no-referrer"
    policy = directives(headers["Content-Security-Policy"])
    assert policy["default-src"] == ["'none'"]
    assert policy["script-src"] == ["'self'"]
    assert policy["style-src"] == ["'self'"]
    assert policy["connect-src"] == ["'self'"]
    assert policy["frame-ancestors"] == ["'none'"]
    assert policy["base-uri"] == ["'none'"]
    assert policy["form-action"] == ["'none'"]
    assert "unsafe-inline" not in headers["Content-Security-Policy"]
    assert "unsafe-eval" not in headers["Content-Security-Policy"]


def test_the_page_has_no_inline_script_or_style() -> None:
    # The policy refuses inline code: the page must not need any.
    html = (STATIC / "dashboard.html").read_text()
    assert re.findall(r"<script(?![^>]*\bsrc=)", html) == []
    assert "<style" not in html
    assert re.findall(r"\sstyle=|\son[a-z]+=", html) == []
    script = (STATIC / "dashboard.js").read_text()
    assert re.findall(r"setAttribute\(\s*[\"'](style|on[a-z]+)[\"']|innerHTML|eval\(", script) == []


def test_the_operator_key_is_kept_in_memory_only() -> None:
    script = (STATIC / "dashboard.js").read_text()
    for storage in ("sessionStorage", "localStorage", "indexedDB", "document.cookie"):
        assert storage not in script
