"""The public JSON shape of a job."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from shared.domain.job import Job


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat().replace("+00:00", "Z") if moment else None


def job_view(job: Job) -> dict[str, Any]:
    """Render a job for its client: status, timings, and the result or error once final."""
    view: dict[str, Any] = {
        "id": job.id,
        "status": job.status.value,
        "submission_id": job.request.submission_id,
        "assignment_id": job.request.assignment_id,
        "attempts": job.attempts,
        "created_at": _iso(job.created_at),
        "started_at": _iso(job.started_at),
        "completed_at": _iso(job.completed_at),
        "last_updated_at": _iso(job.updated_at),
        "timings": job.timings(),
    }
    if job.result is not None:
        view["result"] = job.result.to_dict()
    if job.error is not None:
        view["error"] = job.error.to_dict()
    return view
