"""Liveness and readiness endpoints shared by every service.

Each answers on two paths: `/healthz` and `/readyz` for the probes Cloud Run runs inside
the container, and `/health/live` and `/health/ready` for requests from outside, because
Cloud Run's front reserves some paths ending in `z` for itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from flask import Blueprint, Flask, Response, jsonify

from shared.domain.errors import DependencyUnavailable

log = logging.getLogger(__name__)


def register_health(app: Flask, checks: Sequence[tuple[str, Callable[[], None]]]) -> None:
    """Add liveness (the process answers) and readiness (each dependency answers)."""
    bp = Blueprint("health", __name__)

    @bp.get("/healthz")
    @bp.get("/health/live")
    def live() -> Response:
        return jsonify(status="ok")

    @bp.get("/readyz")
    @bp.get("/health/ready")
    def ready() -> Response:
        results: dict[str, str] = {}
        for name, check in checks:
            try:
                check()
                results[name] = "ok"
            except DependencyUnavailable as exc:
                # The probe answers anyone: the cause (addresses, backend words) is logged.
                log.warning("readiness check %s failed: %s", name, exc.detail)
                results[name] = "unavailable"
        ready = all(v == "ok" for v in results.values())
        response = jsonify(status="ok" if ready else "unavailable", checks=results)
        response.status_code = 200 if ready else 503
        return response

    app.register_blueprint(bp)
