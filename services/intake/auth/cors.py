"""CORS for the configured frontend origins only: browsers elsewhere get no CORS headers."""

from __future__ import annotations

from flask import Flask
from flask_cors import CORS

#: What a browser may send and read; credentials travel in Authorization, never cookies.
ALLOWED_HEADERS = ["Authorization", "Content-Type", "Idempotency-Key", "Gradeq-Scope"]
EXPOSED_HEADERS = [
    "Location",
    "Retry-After",
    "Idempotent-Replayed",
    "RateLimit-Limit",
    "RateLimit-Remaining",
    "RateLimit-Reset",
    "RateLimit-Policy",
]
PREFLIGHT_MAX_AGE_S = 600
#: Every method the API serves: PATCH revises a rubric, DELETE erases, PUT is the embedded
#: store's signed upload URL.
ALLOWED_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]


def register_cors(app: Flask, origins: list[str]) -> None:
    """Answer preflights and add CORS headers for `origins` on the API routes."""
    if not origins:
        return
    CORS(
        app,
        resources={r"/v1/*": {}, "/openapi.json": {}},
        origins=origins,
        methods=ALLOWED_METHODS,
        allow_headers=ALLOWED_HEADERS,
        expose_headers=EXPOSED_HEADERS,
        supports_credentials=False,
        max_age=PREFLIGHT_MAX_AGE_S,
        vary_header=True,
    )
