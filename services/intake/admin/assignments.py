"""The operator's view of assignments: any client's assignment, its progress and histogram."""

from __future__ import annotations

from flask import Blueprint, Response, current_app, jsonify, request

from services.intake.admin.auth import OperatorAuthenticator
from services.intake.assignments.views import assignment_view
from services.intake.reviews.routes import agreement_view
from shared.domain.errors import AssignmentNotFound
from shared.ports import AssignmentStore, ReviewQueue
from shared.service_layer.review import agreement_report

admin_assignments = Blueprint("admin_assignments", __name__, url_prefix="/admin/v1/assignments")


@admin_assignments.before_request
def _authenticate() -> None:
    auth: OperatorAuthenticator = current_app.extensions["gradeq.operator_auth"]
    request.environ["gradeq.operator"] = auth.operator()


@admin_assignments.get("/<assignment_id>")
def get_assignment(assignment_id: str) -> Response:
    """The assignment of any client, with its client and the current round's progress."""
    store: AssignmentStore = current_app.extensions["gradeq.admin_assignments"]
    assignment = store.get(assignment_id)
    if assignment is None:
        raise AssignmentNotFound(f"no assignment {assignment_id}")
    view = assignment_view(assignment, store.tally(assignment.id, assignment.round))
    return jsonify({**view.model_dump(mode="json"), "client_id": assignment.client_id})


@admin_assignments.get("/<assignment_id>/agreement")
def get_agreement(assignment_id: str) -> Response:
    """Model against teacher on the assignment's reviewed grades (docs/review.md)."""
    store: AssignmentStore = current_app.extensions["gradeq.admin_assignments"]
    assignment = store.get(assignment_id)
    if assignment is None:
        raise AssignmentNotFound(f"no assignment {assignment_id}")
    queue: ReviewQueue = current_app.extensions["gradeq.review_queue"]
    report = agreement_report(queue, assignment.client_id, assignment.id)
    return jsonify(
        {**agreement_view(report).model_dump(mode="json"), "client_id": assignment.client_id}
    )
