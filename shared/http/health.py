"""Liveness and readiness endpoints shared by every service."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from flask import Blueprint, Flask, Response, jsonify

from shared.domain.errors import DependencyUnavailable


def register_health(app: Flask, checks: Sequence[tuple[str, Callable[[], None]]]) -> None:
    """Add /healthz (the process answers) and /readyz (each dependency answers)."""
    bp = Blueprint("health", __name__)

    @bp.get("/healthz")
    def healthz() -> Response:
        return jsonify(status="ok")

    @bp.get("/readyz")
    def readyz() -> Response:
        results: dict[str, str] = {}
        for name, check in checks:
            try:
                check()
                results[name] = "ok"
            except DependencyUnavailable as exc:
                results[name] = exc.detail
        ready = all(v == "ok" for v in results.values())
        response = jsonify(status="ok" if ready else "unavailable", checks=results)
        response.status_code = 200 if ready else 503
        return response

    app.register_blueprint(bp)
