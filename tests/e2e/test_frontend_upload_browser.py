"""The reference page in headless Chromium: a student adds a photo of the written answer,
the browser PUTs it straight to the signed upload URL (not through the page's server),
and the grade appears; the offline grader names the photo it cannot read."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from localcloud.stack import FRONTEND, LocalStack
from tests.e2e.browser import artifacts_dir
from tests.e2e.operator_stack import operator_stack
from tests.support import files

pytestmark = pytest.mark.e2e

ANSWER = "Photosynthesis happens in the chloroplast; oxygen is released (see my photo)."


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with operator_stack(tmp_path_factory.mktemp("frontend-upload")) as local:
        yield local


def test_a_student_uploads_a_photo_and_sees_the_grade(
    stack: LocalStack, browser: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    photo = tmp_path / "page-1.png"
    photo.write_bytes(files.png(32, 32))
    puts: list[str] = []
    page = browser.new_page(viewport={"width": 1000, "height": 900})
    try:
        page.on("request", lambda r: puts.append(r.url) if r.method == "PUT" else None)
        page.goto(stack.config.url(FRONTEND) + "/")
        page.fill("#answer", ANSWER)
        page.set_input_files("#file", str(photo))
        page.click("#submit")
        expect(page.locator("#score")).to_have_text("5 / 10", timeout=30_000)
        expect(page.locator("#feedback")).to_contain_text("page-1.png (image/png)")
        page.screenshot(path=str(artifacts_dir() / "frontend-upload.png"), full_page=True)
    finally:
        page.close()

    [put] = puts
    intake = urlsplit(stack.config.url("intake"))
    assert urlsplit(put).netloc == intake.netloc  # straight to the signed URL
    stored = list((stack.config.data_dir / "uploads").rglob("up_*"))
    assert [p.read_bytes() for p in stored if not p.name.endswith(".json")] == [photo.read_bytes()]
