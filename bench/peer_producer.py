"""The peers' HTTP front: a small Flask app that takes the same POST as Gradeq's intake.

    gunicorn ... 'bench.peer_producer:create_app()'

BENCH_PEER picks what it does with a valid submission: `flask` only answers 202,
`celery` calls the task's `.delay()`, `rq` enqueues the job function; both then answer
202 with the job's id. BENCH_REDIS_URL is the broker, BENCH_GRADE_S the grading time each
job is given.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from typing import Any

from flask import Flask, Response, jsonify, request

from bench.settings import SUBMIT_PATH

Enqueue = Callable[[dict[str, Any]], str]


def _flask_only(body: dict[str, Any]) -> str:
    return uuid.uuid4().hex


def _celery(seconds: float) -> Enqueue:
    from bench.celery_tasks import grade

    def enqueue(body: dict[str, Any]) -> str:
        return str(grade.delay(body, seconds).id)

    return enqueue


def _rq(redis_url: str, seconds: float) -> Enqueue:
    from redis import Redis
    from rq import Queue

    from bench.rq_tasks import grade

    queue = Queue(connection=Redis.from_url(redis_url))

    def enqueue(body: dict[str, Any]) -> str:
        return str(queue.enqueue(grade, body, seconds).id)

    return enqueue


def _enqueue_for(peer: str) -> Enqueue:
    seconds = float(os.environ.get("BENCH_GRADE_S", "0"))
    redis_url = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
    if peer == "flask":
        return _flask_only
    if peer == "celery":
        return _celery(seconds)
    if peer == "rq":
        return _rq(redis_url, seconds)
    raise ValueError(f"unknown BENCH_PEER {peer!r}")


def invalid(body: object) -> str | None:
    """Why a submission is refused, or None: the fields Gradeq requires, with their types."""
    if not isinstance(body, dict):
        return "the body must be a JSON object"
    for name in ("submission_id", "answer"):
        if not isinstance(body.get(name), str) or not body[name]:
            return f"{name} must be a non-empty string"
    rubric = body.get("rubric")
    if not (isinstance(rubric, str) or (isinstance(rubric, list) and rubric)):
        return "rubric must be a string or a list of strings"
    return None


def create_app() -> Flask:
    app = Flask(__name__)
    enqueue = _enqueue_for(os.environ.get("BENCH_PEER", "flask"))

    @app.post(SUBMIT_PATH)
    def submit() -> tuple[Response, int]:
        if not request.headers.get("Idempotency-Key"):
            return jsonify(error="Idempotency-Key is required"), 400
        body = request.get_json(silent=True)
        reason = invalid(body)
        if reason is not None:
            return jsonify(error=reason), 400
        assert isinstance(body, dict)
        return jsonify(id=enqueue(body)), 202

    return app
