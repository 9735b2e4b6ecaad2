"""What the topic docs state about the code, checked against the code."""

from __future__ import annotations

import re
from pathlib import Path

from services.intake.app import create_app
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_the_lane_assignments_md_names_for_regrades_is_the_one_they_go_to(
    settings: Settings,
) -> None:
    text = (DOCS / "assignments.md").read_text()
    named = re.search(r"A regrade's tasks go to the lowest-priority lane \(`(\w+)`", text)
    assert named is not None, "docs/assignments.md no longer says where regrades go"
    assert named.group(1) == settings.regrade_lane()
    assert "no priority lanes" not in text


def test_the_erasure_calls_uploads_md_names_delete_jobs_and_their_files(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    text = (DOCS / "uploads.md").read_text()
    assert "no code path deletes a job" not in text
    named = set(re.findall(r"`DELETE (/v1/[^`]+)`", text))
    assert named == {"/v1/grading-jobs/{id}", "/v1/students/{student_id}"}
    app = create_app(settings, adapters, clock)
    routes = {
        re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", rule.rule)
        for rule in app.url_map.iter_rules()
        if "DELETE" in (rule.methods or ())
    }
    assert {p.replace("{id}", "{job_id}") for p in named} <= routes
