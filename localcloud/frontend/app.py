"""The frontend's backend: serves the page and relays it to the intake with the API key."""

from __future__ import annotations

import os

import requests
from flask import Flask, Response, request

#: Headers of the intake's answer the page needs.
PASSED_ON = ("Content-Type", "Retry-After", "Idempotent-Replayed", "Location")
TIMEOUT_S = 30


def create_app(intake_url: str | None = None, api_key: str | None = None) -> Flask:
    """Build the frontend; gunicorn calls it with no arguments (settings from env)."""
    intake = (intake_url or os.environ["GRADEQ_FRONTEND_INTAKE_URL"]).rstrip("/")
    key = api_key or os.environ["GRADEQ_FRONTEND_API_KEY"]
    app = Flask(__name__, static_folder="static", static_url_path="/static")
    http = requests.Session()

    def relay(answer: requests.Response) -> Response:
        headers = {h: answer.headers[h] for h in PASSED_ON if h in answer.headers}
        return Response(answer.content, status=answer.status_code, headers=headers)

    @app.get("/")
    def index() -> Response:
        return app.send_static_file("index.html")

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/api/submissions")
    def submit() -> Response:
        headers = {
            "Authorization": f"Bearer {key}",
            "Content-Type": "application/json",
            # The page's key, unchanged: its retries must reach the same job.
            "Idempotency-Key": request.headers.get("Idempotency-Key", ""),
        }
        answer = http.post(
            f"{intake}/v1/grading-jobs", data=request.get_data(), headers=headers, timeout=TIMEOUT_S
        )
        return relay(answer)

    @app.get("/api/submissions/<job_id>")
    def status(job_id: str) -> Response:
        answer = http.get(
            f"{intake}/v1/grading-jobs/{job_id}",
            headers={"Authorization": f"Bearer {key}"},
            timeout=TIMEOUT_S,
        )
        return relay(answer)

    return app
