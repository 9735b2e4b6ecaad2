"""Read the request body within its limits: size (also when chunked) and nesting depth.

Both are checked before the JSON parser runs, so no body can exhaust memory or the
parser's recursion limit; the depth is measured in time linear in the body's size, so a
body of any shape costs about what a normal one of its size does.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate

from flask import request

from shared.domain.errors import ValidationFailed
from shared.http.errors import HeaderFieldsTooLarge, NestingTooDeep, PayloadTooLarge, UriTooLong

#: The longest path and query string the API answers (gunicorn's own limit is higher).
MAX_TARGET_BYTES = 2048
#: The longest single header value the API reads (gunicorn's own limit is higher).
MAX_HEADER_BYTES = 4096
#: Objects and arrays may nest this deep in all (the body itself is level 1).
MAX_JSON_DEPTH = 32

# A string up to its closing quote, or else to the end of the body. A match never fails
# once it starts at a quote, so `sub` reads each byte once; a pattern that needs the
# closing quote rescans the rest of the body from every quote of an unterminated string
# (escaped quotes, `\"` repeated, took minutes for 160 KB). An unterminated string is
# not JSON, so the parser refuses it after this count.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_READ_CHUNK = 64 * 1024


def nesting_depth(raw: bytes) -> int:
    """The deepest nesting of objects and arrays in `raw`, ignoring brackets in strings."""
    brackets = _STRING.sub(b"", raw).translate(None, _NOT_BRACKET)
    return max(accumulate(1 if b in b"[{" else -1 for b in brackets), default=0)


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


def read_json_body(limit: int, max_depth: int = MAX_JSON_DEPTH) -> object:
    """Decode the JSON body within `limit` bytes and `max_depth` levels of nesting."""
    raw = read_body(limit)
    depth = nesting_depth(raw)
    if depth > max_depth:
        raise NestingTooDeep(f"objects and arrays may nest at most {max_depth} levels deep")
    try:
        return json.loads(raw)
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
