"""The body of a grading task: `{"job_id": "..."}` in JSON, and nothing else.

Both task queue adapters encode it, the worker decodes it, and the local dispatcher reads
the job id from it for its log lines.
"""

from __future__ import annotations

import json

from shared.domain.errors import GradeqError

CONTENT_TYPE = "application/json"


class MalformedTaskBody(GradeqError):
    """The body is not exactly `{"job_id": "<non-empty string>"}`."""

    slug = "task-body-malformed"
    title = "The task body is malformed"
    status = 400


def encode_task_body(job_id: str) -> bytes:
    """The JSON body of the task that grades `job_id`."""
    return json.dumps({"job_id": job_id}, separators=(",", ":")).encode()


def decode_task_body(body: bytes) -> str:
    """Return the job id a task body carries; raise MalformedTaskBody otherwise."""
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        # RecursionError: arrays or objects nested deeper than the parser's stack.
        raise MalformedTaskBody("the body is not JSON") from exc
    if not isinstance(payload, dict) or set(payload) != {"job_id"}:
        raise MalformedTaskBody('the body must be {"job_id": "..."}')
    job_id = payload["job_id"]
    if not isinstance(job_id, str) or not job_id:
        raise MalformedTaskBody("job_id must be a non-empty string")
    return job_id
