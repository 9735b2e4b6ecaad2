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


class NestingTooDeep(GradeqError):
    slug = "nesting-too-deep"
    title = "The JSON body is nested too deeply"
    status = 400


class UriTooLong(GradeqError):
    slug = "uri-too-long"
    title = "The request target is too long"
    status = 414


class HeaderFieldsTooLarge(GradeqError):
    slug = "header-fields-too-large"
    title = "A request header is too large"
    status = 431


class JsonTooComplex(GradeqError):
    slug = "json-too-complex"
    title = "The JSON body holds too many tokens or too long a key"
    status = 400
