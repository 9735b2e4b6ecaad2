"""Errors that only exist at the HTTP edge: headers, media types, sizes, credentials."""

from __future__ import annotations

from shared.domain.errors import GradeqError


class Unauthenticated(GradeqError):
    slug = "unauthenticated"
    title = "Missing or invalid credentials"
    status = 401


class UnsupportedMediaType(GradeqError):
    slug = "unsupported-media-type"
    title = "The request body must be application/json"
    status = 415


class PayloadTooLarge(GradeqError):
    slug = "payload-too-large"
    title = "The request body is too large"
    status = 413


class IdempotencyKeyInvalid(GradeqError):
    slug = "idempotency-key-invalid"
    title = "Idempotency-Key header missing or malformed"
    status = 400
