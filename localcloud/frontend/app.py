"""The frontend's backend: serves the page and relays it to the intake with the API key.

The browser decides only what a student may: the answer text and a submission reference.
A class page (`/class?assignment=ID`) follows an assignment of this server's client: its
title, progress, mean score and score histogram, never one student's answer nor the
rubric (its visitors are anonymous: the page shows what a student may see).
The assignment, its rubric and maximum score come from this server's configuration, and
nothing else the page sends (a callback URL, another score) reaches the intake. A browser
session (a signed cookie) remembers the jobs it submitted, and only those are relayed.

A student may also send a photo or PDF of the answer: the page asks this server for an
upload (relayed to the intake's POST /v1/uploads), PUTs the file straight to the signed
URL it gets, and names the upload in the submission; only uploads this browser session
asked for are passed on.
"""

from __future__ import annotations

import os
import re
import secrets
from dataclasses import dataclass, field
from typing import Any

import requests
from flask import Flask, Response, jsonify, request, session

#: Headers of the intake's answer the page needs.
PASSED_ON = ("Content-Type", "Retry-After", "Idempotent-Replayed")
TIMEOUT_S = 30
MAX_ANSWER_CHARS = 20_000
#: Jobs one browser session remembers (the oldest are forgotten first).
MAX_JOBS_PER_SESSION = 20
_REFERENCE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_IDEMPOTENCY_KEY = re.compile(r"^[A-Za-z0-9._:-]{1,100}$")
#: What a student may upload from this page: a photo or a scan of the answer.
UPLOAD_TYPES = frozenset({"image/png", "image/jpeg", "image/webp", "application/pdf"})
MAX_UPLOAD_BYTES = 10 * 1024 * 1024
#: What the class page shows of an assignment: never the rubric, its versions or settings.
CLASS_PAGE_FIELDS = ("id", "title", "max_score", "progress")
#: Files one submission may name, and uploads one session remembers.
MAX_FILES = 4
MAX_UPLOADS_PER_SESSION = 20


@dataclass(frozen=True)
class Assignment:
    """What the server fixes for every submission of this page."""

    assignment_id: str = "bio-101-hw3"
    rubric: tuple[str, ...] = (
        "mentions the chloroplast",
        "explains that chlorophyll absorbs light",
        "states that oxygen is released",
        "describes the Calvin cycle",
    )
    max_score: float = 10
    metadata: dict[str, Any] = field(default_factory=dict)


def _problem(status: int, slug: str, detail: str) -> Response:
    response = jsonify(type=f"https://gradeq.dev/problems/{slug}", status=status, detail=detail)
    response.status_code = status
    response.mimetype = "application/problem+json"
    return response


def create_app(
    intake_url: str | None = None,
    api_key: str | None = None,
    session_key: str | None = None,
    assignment: Assignment | None = None,
) -> Flask:
    """Build the frontend; gunicorn calls it with no arguments (settings from env)."""
    intake = (intake_url or os.environ["GRADEQ_FRONTEND_INTAKE_URL"]).rstrip("/")
    key = api_key or os.environ["GRADEQ_FRONTEND_API_KEY"]
    assignment = assignment or Assignment()
    app = Flask(__name__, static_folder="static", static_url_path="/static")
    # Sessions sign with this key; without one, a key made at start (sessions end with
    # the process, which is fine for one local process and wrong for several).
    app.secret_key = (
        session_key or os.environ.get("GRADEQ_FRONTEND_SESSION_KEY") or secrets.token_hex(32)
    )
    app.config.update(
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        SESSION_COOKIE_SECURE=os.environ.get("GRADEQ_FRONTEND_SECURE_COOKIE") == "true",
    )
    http = requests.Session()

    def relay(answer: requests.Response) -> Response:
        headers = {h: answer.headers[h] for h in PASSED_ON if h in answer.headers}
        return Response(answer.content, status=answer.status_code, headers=headers)

    def session_id() -> str:
        if "sid" not in session:
            session["sid"] = secrets.token_urlsafe(16)
        return str(session["sid"])

    @app.get("/")
    def index() -> Response:
        session_id()  # the session starts with the page, before its first submission
        return app.send_static_file("index.html")

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/api/uploads")
    def upload() -> Response:
        sent = request.get_json(silent=True)
        content_type = sent.get("content_type") if isinstance(sent, dict) else None
        size = sent.get("size") if isinstance(sent, dict) else None
        if content_type not in UPLOAD_TYPES:
            return _problem(415, "upload-type-not-allowed", "send a photo (PNG, JPEG, WebP) or PDF")
        if not isinstance(size, int) or isinstance(size, bool) or not 0 < size <= MAX_UPLOAD_BYTES:
            return _problem(413, "upload-too-large", f"files may be up to {MAX_UPLOAD_BYTES} bytes")
        answer_back = http.post(
            f"{intake}/v1/uploads",
            json={"content_type": content_type, "size": size},
            headers={"Authorization": f"Bearer {key}"},
            timeout=TIMEOUT_S,
        )
        if answer_back.status_code == 201:
            granted = {"upload_id": answer_back.json()["upload_id"], "content_type": content_type}
            uploads = [*session.get("uploads", []), {**granted, "size": size}]
            session["uploads"] = uploads[-MAX_UPLOADS_PER_SESSION:]
        return relay(answer_back)

    def files_of(sent: dict[str, Any]) -> list[dict[str, Any]] | None:
        """The submission's files, each one of this session's uploads; None if any is not."""
        named = sent.get("files") or []
        if not isinstance(named, list) or len(named) > MAX_FILES:
            return None
        mine = {u["upload_id"]: u for u in session.get("uploads", [])}
        files = []
        for item in named:
            upload = mine.get(item.get("upload_id")) if isinstance(item, dict) else None
            if upload is None:
                return None
            name = item.get("name")
            safe_name = name[:200] if isinstance(name, str) else ""
            files.append({**upload, "name": safe_name})
        return files

    @app.post("/api/submissions")
    def submit() -> Response:
        sent = request.get_json(silent=True)
        answer = sent.get("answer", "") if isinstance(sent, dict) else None
        files = files_of(sent) if isinstance(sent, dict) else None
        if files is None:
            return _problem(400, "validation-error", "name only files this page uploaded")
        if not isinstance(answer, str) or len(answer) > MAX_ANSWER_CHARS:
            return _problem(400, "validation-error", "send an answer (text)")
        if not answer.strip() and not files:
            return _problem(400, "validation-error", "send an answer (text), a file, or both")
        reference = sent.get("submission_id") if isinstance(sent, dict) else None
        if not isinstance(reference, str) or not _REFERENCE.match(reference):
            return _problem(400, "validation-error", "send a submission_id of letters, digits")
        page_key = request.headers.get("Idempotency-Key", "")
        if not _IDEMPOTENCY_KEY.match(page_key):
            return _problem(400, "validation-error", "send an Idempotency-Key")
        body = {
            "submission_id": reference,
            "assignment_id": assignment.assignment_id,
            "answer": answer,
            **({"files": files} if files else {}),
            "rubric": list(assignment.rubric),
            "max_score": assignment.max_score,
            **({"metadata": assignment.metadata} if assignment.metadata else {}),
        }
        headers = {
            "Authorization": f"Bearer {key}",
            # The page's key, unchanged on its retries (so they reach the same job), made
            # this session's own: another visitor's key never finds this visitor's job.
            "Idempotency-Key": f"{session_id()}:{page_key}",
        }
        answer_back = http.post(
            f"{intake}/v1/grading-jobs", json=body, headers=headers, timeout=TIMEOUT_S
        )
        if answer_back.status_code in (200, 201, 202):
            job_id = answer_back.json().get("id")
            jobs = [j for j in session.get("jobs", []) if j != job_id]
            session["jobs"] = [*jobs, job_id][-MAX_JOBS_PER_SESSION:]
        return relay(answer_back)

    @app.get("/api/submissions/<job_id>")
    def status(job_id: str) -> Response:
        if job_id not in session.get("jobs", []):
            return _problem(404, "job-not-found", "this browser submitted no such job")
        answer = http.get(
            f"{intake}/v1/grading-jobs/{job_id}",
            headers={"Authorization": f"Bearer {key}"},
            timeout=TIMEOUT_S,
        )
        return relay(answer)

    @app.get("/class")
    def class_page() -> Response:
        return app.send_static_file("class.html")

    @app.get("/api/assignments/<assignment_id>")
    def assignment_progress(assignment_id: str) -> Response:
        # A class's progress: counts, mean score and histogram, never one student's answer.
        if not _REFERENCE.match(assignment_id):
            return _problem(404, "assignment-not-found", "no such assignment")
        answer = http.get(
            f"{intake}/v1/assignments/{assignment_id}",
            headers={"Authorization": f"Bearer {key}"},
            timeout=TIMEOUT_S,
        )
        if answer.status_code != 200:
            return relay(answer)
        full = answer.json()
        shown = jsonify({k: full[k] for k in CLASS_PAGE_FIELDS if k in full})
        if "Retry-After" in answer.headers:
            shown.headers["Retry-After"] = answer.headers["Retry-After"]
        return shown

    return app
