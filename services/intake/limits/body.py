"""Read the request body within its limits: size (also when chunked), nesting depth,
how many JSON tokens it holds and how long its keys are.

All are checked before the JSON parser runs, in one pass over the raw bytes that keeps
nothing but counters, so no body can exhaust memory or the parser's recursion limit:
what the parser builds is bounded by the body's bytes (its strings) plus a fixed number
of objects (the token limit), whatever the body's shape. The pass stops at the first
limit passed, so a hostile body costs at most the limit's worth of steps.
"""

from __future__ import annotations

import json
import re

from flask import request

from shared.domain.errors import ValidationFailed
from shared.http.errors import (
    HeaderFieldsTooLarge,
    JsonTooComplex,
    NestingTooDeep,
    PayloadTooLarge,
    UriTooLong,
)

#: The longest path and query string the API answers (gunicorn's own limit is higher).
MAX_TARGET_BYTES = 2048
#: The longest single header value the API reads (gunicorn's own limit is higher).
MAX_HEADER_BYTES = 4096
#: Objects and arrays may nest this deep in all (the body itself is level 1).
MAX_JSON_DEPTH = 32
#: Tokens a body of a single resource may hold: strings (keys included), objects, arrays
#: and the commas between items. The largest valid job body (100 criteria, 100 files,
#: 4 KB of metadata) holds about 3,500.
MAX_JSON_TOKENS = 4096
#: The longest object key, in bytes as sent.
MAX_KEY_BYTES = 256

# A token: a string, a bracket, a comma or a colon. A string runs to its closing quote,
# or else to the end of the body: a match never fails once it starts at a quote, so the
# scan reads each byte once; a pattern that needs the closing quote rescans the rest of
# the body from every quote of an unterminated string (escaped quotes, `\"` repeated,
# took minutes for 160 KB). The repeats are possessive: a plain `*` on the group keeps a
# backtracking entry per escape (22 bytes of memory per byte of `\u00e9\u00e9...`).
# An unterminated string is not JSON: the parser refuses it.
_TOKEN = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"?|[\[\]{},:]', re.DOTALL)
_QUOTE, _COLON = ord('"'), ord(":")
_OPEN, _CLOSE = frozenset(b"[{"), frozenset(b"]}")
_READ_CHUNK = 64 * 1024


def nesting_depth(raw: bytes) -> int:
    """The deepest nesting of objects and arrays in `raw`, ignoring brackets in strings."""
    depth = deepest = 0
    for match in _TOKEN.finditer(raw):
        first = raw[match.start()]
        if first in _OPEN:
            depth += 1
            deepest = max(deepest, depth)
        elif first in _CLOSE:
            depth -= 1
    return deepest


def within_shape_by_counts(raw: bytes, max_depth: int, max_tokens: int) -> bool:
    """Whether byte counts alone show `raw` within every shape limit (the common small
    body): a key no longer than the body, a token per byte at most, a level per opening
    bracket at most. Each count is a pass in C; False means the token scan decides."""
    return (
        len(raw) <= MAX_KEY_BYTES + 2
        and len(raw) <= max_tokens
        and raw.count(b"[") + raw.count(b"{") <= max_depth
    )


def check_json_shape(raw: bytes, max_depth: int, max_tokens: int) -> None:
    """Refuse a body nested deeper than `max_depth`, holding more than `max_tokens` tokens
    or a key longer than MAX_KEY_BYTES, before any of it is decoded."""
    if within_shape_by_counts(raw, max_depth, max_tokens):
        return
    depth = tokens = 0
    string_bytes = -1  # the last token's length when it was a string (a key, if ":" follows)
    for match in _TOKEN.finditer(raw):
        start = match.start()
        first = raw[start]  # an int: the token itself is never copied
        if first == _COLON:
            if string_bytes - 2 > MAX_KEY_BYTES:
                raise JsonTooComplex(f"an object key may be at most {MAX_KEY_BYTES} bytes")
            string_bytes = -1
            continue
        string_bytes = match.end() - start if first == _QUOTE else -1
        if first in _CLOSE:
            depth -= 1
            continue
        tokens += 1
        if tokens > max_tokens:
            raise JsonTooComplex(
                f"the body may hold at most {max_tokens} JSON tokens"
                " (strings and keys, objects, arrays and commas)"
            )
        if first in _OPEN:
            depth += 1
            if depth > max_depth:
                raise NestingTooDeep(f"objects and arrays may nest at most {max_depth} levels deep")


def read_body(limit: int) -> bytes:
    """The raw body, refusing more than `limit` bytes with 413 even without Content-Length."""
    if request.content_length is not None:
        # Werkzeug refuses a declared length above MAX_CONTENT_LENGTH with 413.
        return request.get_data(cache=False)
    if not request.environ.get("wsgi.input_terminated"):
        return b""  # the server cannot tell where such a body ends (Werkzeug does the same)
    # A chunked body: Werkzeug would silently cut it at the limit, so read it here.
    stream = request.environ["wsgi.input"]
    chunks: list[bytes] = []
    size = 0
    while chunk := stream.read(min(_READ_CHUNK, limit + 1 - size)):
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"the limit is {limit} bytes")
    return b"".join(chunks)


def read_json_body(
    limit: int, max_depth: int = MAX_JSON_DEPTH, max_tokens: int = MAX_JSON_TOKENS
) -> object:
    """Decode the JSON body within `limit` bytes, `max_depth` levels of nesting and
    `max_tokens` tokens (check_json_shape)."""
    raw = read_body(limit)
    check_json_shape(raw, max_depth, max_tokens)
    try:
        # Decoded first and the bytes let go, so the bytes, their text and what the parser
        # builds from it are never all held at once.
        text = raw.decode(json.detect_encoding(raw), "surrogatepass")
        del raw
        return json.loads(text)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ValidationFailed(
            "the body is not valid JSON", errors=[{"field": "", "message": str(exc)}]
        ) from exc


def check_request_head() -> None:
    """Refuse a target or header beyond the API's limits before any handler reads it."""
    target = request.environ.get("RAW_URI") or request.full_path
    if len(target.encode("utf-8", "surrogateescape")) > MAX_TARGET_BYTES:
        raise UriTooLong(f"the path and query may be at most {MAX_TARGET_BYTES} bytes")
    for name, value in request.headers.items():
        if len(value) > MAX_HEADER_BYTES:
            raise HeaderFieldsTooLarge(f"header {name} is longer than {MAX_HEADER_BYTES} bytes")
