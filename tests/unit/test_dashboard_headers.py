"""The intake's static pages (the operator dashboard, the review page) and the script they
share tell the browser to run only their own files, never inside a frame, and keep the
key typed in the page in that page's memory only."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin

import pytest
from flask.testing import FlaskClient

from services.intake.app import create_app
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings

REPO = Path(__file__).parents[2]
INTAKE = REPO / "services" / "intake"
ADMIN = INTAKE / "admin" / "static"
REVIEW = INTAKE / "reviews" / "page" / "static"
KIT = INTAKE / "page_kit" / "static" / "kit.js"
KIT_PATH = "/page-kit/static/kit.js"
#: Each page: its URL, its HTML file and its own script, loaded after the shared one.
PAGES = [
    ("/admin/", ADMIN / "dashboard.html", "static/dashboard.js"),
    ("/review/", REVIEW / "review.html", "static/review.js"),
]
PATHS = [
    "/admin/",
    "/admin/static/dashboard.js",
    "/admin/static/dashboard.css",
    "/review/",
    "/review/static/review.js",
    "/review/static/review.css",
    KIT_PATH,
]
SCRIPTS = [ADMIN / "dashboard.js", REVIEW / "review.js", KIT]


@pytest.fixture
def client(settings: Settings, adapters: Adapters, clock: FrozenClock) -> FlaskClient:
    return create_app(settings, adapters, clock).test_client()


def directives(policy: str) -> dict[str, list[str]]:
    parts = (d.split() for d in policy.split(";") if d.strip())
    return {name: values for name, *values in parts}


class _Scripts(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.sources: list[str | None] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "script":
            self.sources.append(dict(attrs).get("src"))


def script_sources(html: str) -> list[str | None]:
    parser = _Scripts()
    parser.feed(html)
    return parser.sources


@pytest.mark.parametrize("path", PATHS)
def test_every_page_file_carries_the_browser_policies(client: FlaskClient, path: str) -> None:
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


@pytest.mark.parametrize(("url", "html", "own"), PAGES)
def test_each_page_loads_the_shared_script_from_the_intake_before_its_own(
    client: FlaskClient, url: str, html: Path, own: str
) -> None:
    sources = script_sources(html.read_text())
    assert len(sources) == 2 and sources[1] == own
    shared = sources[0]
    assert shared is not None
    # Relative, so the pages keep working behind a path prefix; same origin for script-src.
    assert "//" not in shared and not shared.startswith("/")
    assert urljoin(url, shared) == KIT_PATH
    with client.get(urljoin(url, shared)) as response:
        assert response.status_code == 200
        assert response.mimetype == "text/javascript"
        assert response.data == KIT.read_bytes()
    script = html.with_name(Path(own).name).read_text()
    assert "pageKit.caller(" in script
    assert "function el(" not in script and "async function call(" not in script


@pytest.mark.parametrize(("url", "html", "own"), PAGES)
def test_the_pages_have_no_inline_script_or_style(url: str, html: Path, own: str) -> None:
    # The policy refuses inline code: the pages must not need any.
    text = html.read_text()
    assert re.findall(r"<script(?![^>]*\bsrc=)", text) == []
    assert "<style" not in text
    assert re.findall(r"\sstyle=|\son[a-z]+=", text) == []


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_no_script_builds_markup_from_strings(script: Path) -> None:
    text = script.read_text()
    assert re.findall(r"setAttribute\(\s*[\"'](style|on[a-z]+)[\"']|innerHTML|eval\(", text) == []


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_the_key_is_kept_in_memory_only(script: Path) -> None:
    text = script.read_text()
    for storage in ("sessionStorage", "localStorage", "indexedDB", "document.cookie"):
        assert storage not in text


def test_the_shared_script_keeps_no_state_of_its_own() -> None:
    # The key reaches it only through the function a page passes to pageKit.caller: the
    # shared script declares no variable that could hold it.
    text = KIT.read_text()
    assert re.findall(r"\b(let|var)\b|\bwindow\.|\bglobalThis\b", text) == []
    assert "Object.freeze(" in text


def test_every_static_file_of_the_services_ships_in_the_package() -> None:
    # The image installs the package (pip install .), not the checkout: a page file the
    # package data leaves out is missing from the deployed intake.
    with (REPO / "pyproject.toml").open("rb") as file:
        package_data = tomllib.load(file)["tool"]["setuptools"]["package-data"]
    files = sorted((REPO / "services").glob("**/static/*"))
    assert KIT in files
    for path in files:
        package = ".".join(path.parent.parent.relative_to(REPO).parts)
        inside = f"static/{path.name}"
        patterns = package_data.get(package, [])
        assert any(fnmatch.fnmatch(inside, p) for p in patterns), f"{path} is not shipped"
