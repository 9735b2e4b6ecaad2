"""`gradeq doctor`: one job end to end through a deployment's public API, after a deploy.

It asks the intake whether it is ready, submits one small job with the client's API key,
follows it to its final state at the server's Retry-After, and then, where an analytics
service serves its records (`--analytics-url`: the local stack), waits for the job's
GradingCompleted event to be recorded there once. Each check is printed with what it saw
and how long after the start; any failed check makes the exit status 8.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import requests

from gradeq.client import GradeqClient, GradeqError, Job, MissingKey, Unreachable

#: The exit status when a check failed.
DOCTOR_FAILED = 8

#: The job the doctor submits: the offline grader and a model grade it in seconds.
PROBE_JOB: dict[str, Any] = {
    "answer": "The mitochondria produce ATP through cellular respiration.",
    "rubric": ["mentions mitochondria", "names ATP"],
    "max_score": 2,
}


@dataclass
class Check:
    """One step: passed or not, when it ended (ms after the start), what it saw."""

    name: str
    ok: bool | None  # None: not checked
    at_ms: int
    detail: str
    seen: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        status = "skipped" if self.ok is None else "ok" if self.ok else "failed"
        fields = {"check": self.name, "status": status, "at_ms": self.at_ms}
        return {**fields, "detail": self.detail, **self.seen}


@dataclass
class Report:
    """The checks in the order they ran; `ok` when none failed."""

    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok is not False for c in self.checks)


class Doctor:
    """Runs the checks against `client`'s intake (and `analytics`, when given)."""

    def __init__(
        self,
        client: GradeqClient,
        analytics: GradeqClient | None = None,
        timeout_s: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._client = client
        self._analytics = analytics
        self._timeout_s = timeout_s
        self._clock = clock
        self._sleep = sleep
        self._start = clock()
        self.report = Report()

    def _ms(self) -> int:
        return round((self._clock() - self._start) * 1000)

    def _add(self, name: str, ok: bool | None, detail: str, **seen: Any) -> bool:
        self.report.checks.append(Check(name, ok, self._ms(), detail, seen))
        return ok is not False

    def run(self) -> Report:
        """Every check in turn; a step that cannot pass ends the run."""
        self._start = self._clock()
        if self._ready():
            job = self._submit()
            if job is not None:
                final = self._follow(job)
                if final is not None and self._succeeded(final):
                    self._recorded(final)
        return self.report

    def _ready(self) -> bool:
        url = self._client.base_url + "/health/ready"
        try:
            response = requests.get(url, timeout=10)
        except requests.RequestException as exc:
            return self._add("intake ready", False, f"cannot reach {url}: {exc}")
        if response.status_code != 200:
            return self._add("intake ready", False, f"GET /health/ready: {response.status_code}")
        return self._add("intake ready", True, "GET /health/ready: 200")

    def _submit(self) -> Job | None:
        body = {**PROBE_JOB, "submission_id": f"gradeq-doctor-{uuid.uuid4().hex[:12]}"}
        try:
            job = self._client.submit(body, f"doctor-{uuid.uuid4()}")
        except (GradeqError, Unreachable, MissingKey) as exc:
            self._add("submit", False, _failure(exc))
            return None
        self._add("submit", True, f"202: job {job.id} is {job.status}", job_id=job.id)
        return job

    def _follow(self, job: Job) -> Job | None:
        """Poll the job until final; each status it passes through is one line."""
        seen = [job.status]

        def on_update(current: Job) -> None:
            if current.status != seen[-1]:
                seen.append(current.status)
                self._add("status", True, current.status, job_id=current.id)

        try:
            return self._client.wait(job.id, self._timeout_s, 0.5, on_update)
        except TimeoutError:
            detail = f"still {seen[-1]} after {self._timeout_s:g}s"
        except (GradeqError, Unreachable, MissingKey) as exc:
            detail = _failure(exc)
        self._add("final state", False, detail, job_id=job.id)
        return None

    def _succeeded(self, job: Job) -> bool:
        timings = job.data.get("timings") or {}
        result = job.result or {}
        seen = {
            "job_id": job.id,
            "attempts": job.data.get("attempts"),
            "queue_wait_ms": timings.get("queue_wait_ms"),
            "processing_ms": timings.get("processing_ms"),
            "total_ms": timings.get("total_ms"),
        }
        if job.status != "SUCCEEDED":
            error = job.data.get("error") or {}
            why = f"{error.get('type')}: {error.get('message')}" if error else "no error given"
            return self._add("final state", False, f"{job.status} ({why})", **seen)
        grader = result.get("model") or result.get("grader")
        score = f"{result.get('score'):g}/{result.get('max_score'):g}"
        detail = (
            f"SUCCEEDED: {score} by {grader}; queue wait {_ms(seen['queue_wait_ms'])}, "
            f"grading {_ms(seen['processing_ms'])}, total {_ms(seen['total_ms'])}"
        )
        return self._add("final state", True, detail, **seen)

    def _recorded(self, job: Job) -> bool:
        """The job's GradingCompleted as analytics recorded it: exactly one, matching the job."""
        if self._analytics is None:
            return self._add(
                "event recorded",
                None,
                "not checked: no --analytics-url (on Google Cloud, query the BigQuery view "
                "grading_completed_v1 for the job id)",
            )
        path = f"/v1/events/{job.id}"
        deadline = self._clock() + self._timeout_s
        while True:
            try:
                events = self._analytics.request("GET", path).body.get("events") or []
            except (GradeqError, Unreachable, MissingKey) as exc:
                return self._add("event recorded", False, f"GET {path}: {_failure(exc)}")
            if events or self._clock() >= deadline:
                break
            self._sleep(0.5)
        if len(events) != 1:
            return self._add("event recorded", False, f"{len(events)} records of the job's event")
        [event] = events
        expected = {"job_id": job.id, "outcome": job.status.lower()}
        wrong = {k: event.get(k) for k, v in expected.items() if event.get(k) != v}
        score = (job.result or {}).get("score")
        if event.get("score", score) != score:
            wrong["score"] = event.get("score")
        seen = {"event_id": event.get("event_id"), "publish_time": event.get("publish_time")}
        if wrong or not event.get("event_id"):
            return self._add("event recorded", False, f"the record differs: {wrong}", **seen)
        return self._add(
            "event recorded", True, f"GradingCompleted {event['event_id']} recorded once", **seen
        )


def _ms(value: object) -> str:
    return f"{value} ms" if isinstance(value, int) else "-"


def _failure(exc: GradeqError | Unreachable | MissingKey) -> str:
    if isinstance(exc, GradeqError):
        return f"{exc.status} {exc.slug}: {exc.detail}"
    return str(exc)
