"""The operator's JSON shapes: a job with its attempts, errors and timings; cursors."""

from __future__ import annotations

import base64
import binascii
import json
from datetime import datetime
from typing import Any

from shared.domain.errors import ValidationFailed
from shared.domain.job import Job
from shared.ports import JobCursor


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat().replace("+00:00", "Z") if moment else None


def admin_job_view(job: Job, *, detail: bool = False) -> dict[str, Any]:
    """A listing row; `detail` adds the attempt history, the replays and the request."""
    view: dict[str, Any] = {
        "id": job.id,
        "client_id": job.client_id,
        "status": job.status.value,
        "lane": job.lane,
        "submission_id": job.request.submission_id,
        "assignment_id": job.request.assignment_id,
        "attempts": job.attempts,
        "generation": job.generation,
        "created_at": _iso(job.created_at),
        "updated_at": _iso(job.updated_at),
        "completed_at": _iso(job.completed_at),
        "timings": job.timings(),
        "last_error": job.error.to_dict() if job.error else None,
        "replays": len(job.replays),
    }
    wait = job.provider_batch
    if wait is not None and job.waits_in_batch:
        view["waiting"] = {
            "kind": "provider-batch",
            "provider": wait.provider,
            "batch_id": wait.batch_id,
            "since": _iso(wait.since),
        }
    held = job.held_since
    if held is not None:
        view["waiting"] = {"kind": "budget-hold", "since": _iso(held)}
    if detail:
        view["history"] = [
            {
                "attempt": a.number,
                "generation": a.generation,
                "owner": a.owner,
                "started_at": _iso(a.started_at),
                "ended_at": _iso(a.ended_at),
                "outcome": a.outcome.value,
                "error": a.error.to_dict() if a.error else None,
            }
            for a in job.history
        ]
        view["replays"] = [
            {
                "at": _iso(r.at),
                "by": r.by,
                "generation": r.generation,
                "error": r.error.to_dict() if r.error else None,
            }
            for r in job.replays
        ]
        view["result"] = job.result.to_dict() if job.result else None
        view["max_score"] = job.request.max_score
    return view


def encode_cursor(cursor: JobCursor | None) -> str | None:
    if cursor is None:
        return None
    raw = json.dumps({"c": cursor.created_at.isoformat(), "id": cursor.job_id})
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(text: str | None) -> JobCursor | None:
    if not text:
        return None
    try:
        raw = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        return JobCursor(datetime.fromisoformat(raw["c"]), str(raw["id"]))
    except (binascii.Error, ValueError, KeyError, TypeError) as exc:
        raise ValidationFailed(
            "the cursor is not one this API returned",
            errors=[{"field": "cursor", "message": "invalid cursor"}],
        ) from exc
