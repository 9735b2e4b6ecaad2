"""The admin API's gradebooks: each school's gradebook health and the refused grades.

The gradebook service writes both (shared.domain.gradebook); the operator reads them
here, next to the rest of the admin API: a school in `outages` has an LMS that stopped
taking grades (they wait in the subscription and arrive when it answers again), and
`rejected` lists the grades an LMS refused for good, with its reason.
"""

from __future__ import annotations

from collections.abc import Callable

from flask import Blueprint, Response, current_app, jsonify, request

from services.intake.admin.auth import OperatorAuthenticator
from shared.domain.gradebook import HealthState
from shared.ports import GradebookMarks

gradebooks_api = Blueprint("admin_gradebooks", __name__, url_prefix="/admin/v1/gradebooks")


@gradebooks_api.before_request
def _authenticate() -> None:
    auth: OperatorAuthenticator = current_app.extensions["gradeq.operator_auth"]
    request.environ["gradeq.operator"] = auth.operator()


def _marks() -> GradebookMarks:
    marks: Callable[[], GradebookMarks] = current_app.extensions["gradeq.gradebook_marks"]
    return marks()


@gradebooks_api.get("")
def list_gradebooks() -> Response:
    school = request.args.get("school") or None
    marks = _marks()
    health = [h for h in marks.health() if school is None or h.school == school]
    return jsonify(
        gradebooks=[h.as_dict() for h in health],
        outages=[h.school for h in health if h.state is HealthState.OUTAGE],
        rejected=[m.as_dict() for m in marks.rejected(school)],
    )
