"""A small typed client for the Gradeq intake API.

    client = GradeqClient("https://intake.example.com", api_key="gq_...")
    job = client.submit({"submission_id": "s-1", "answer": "...", "rubric": ["..."]})
    final = client.wait(job.id)

`submit` generates an Idempotency-Key and, on 429, 503 or a lost connection, retries with
the same key, so a retry can never make a second job. Waits follow the server's
Retry-After. `verify_webhook` checks a webhook's Standard Webhooks signature.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import requests
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

FINAL_STATUSES = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})
RETRYABLE_STATUSES = frozenset({429, 503})


class GradeqError(Exception):
    """The API refused the request; `problem` is its RFC 9457 problem document."""

    def __init__(self, status: int, problem: Mapping[str, Any]) -> None:
        super().__init__(f"HTTP {status}: {problem.get('detail') or problem.get('title')}")
        self.status = status
        self.problem = dict(problem)

    @property
    def type(self) -> str:
        return str(self.problem.get("type", ""))


class InvalidWebhook(Exception):
    """A webhook whose signature, timestamp or body does not verify."""


@dataclass(frozen=True)
class Job:
    """A grading job as the API shows it (`data` holds every field)."""

    id: str
    status: str
    data: dict[str, Any]
    retry_after_s: float | None = None

    @property
    def is_final(self) -> bool:
        return self.status in FINAL_STATUSES

    @property
    def result(self) -> dict[str, Any] | None:
        result = self.data.get("result")
        return dict(result) if isinstance(result, dict) else None


def _retry_after(response: requests.Response) -> float | None:
    value = response.headers.get("Retry-After", "")
    return float(value) if value.isdigit() else None


class GradeqClient:
    """Submit, read, list, cancel and wait for grading jobs."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        session: requests.Session | None = None,
        max_attempts: int = 6,
        backoff_s: float = 1.0,
        max_backoff_s: float = 60.0,
        timeout_s: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._base = base_url.rstrip("/")
        self._session = session or requests.Session()
        self._headers = {"Authorization": f"Bearer {api_key}"}
        self._max_attempts = max_attempts
        self._backoff_s = backoff_s
        self._max_backoff_s = max_backoff_s
        self._timeout_s = timeout_s
        self._sleep = sleep

    # --- requests ------------------------------------------------------------------------

    def _send(self, method: str, path: str, *, retry: bool, **kwargs: Any) -> requests.Response:
        """One request; with `retry`, again after 429, 503 or a connection error."""
        headers = {**self._headers, **kwargs.pop("headers", {})}
        for attempt in range(1, self._max_attempts + 1):
            delay = min(self._max_backoff_s, self._backoff_s * 2 ** (attempt - 1))
            try:
                response = self._session.request(
                    method, self._base + path, headers=headers, timeout=self._timeout_s, **kwargs
                )
            except requests.ConnectionError:
                if not retry or attempt == self._max_attempts:
                    raise
                self._sleep(delay)
                continue
            retryable = retry and response.status_code in RETRYABLE_STATUSES
            if retryable and attempt < self._max_attempts:
                self._sleep(_retry_after(response) or delay)
                continue
            if response.status_code >= 400:
                raise GradeqError(response.status_code, self._problem(response))
            return response
        raise AssertionError("unreachable")

    @staticmethod
    def _problem(response: requests.Response) -> dict[str, Any]:
        try:
            body = response.json()
        except ValueError:
            body = None
        return body if isinstance(body, dict) else {"title": response.reason, "detail": ""}

    @staticmethod
    def _job(response: requests.Response) -> Job:
        data: dict[str, Any] = response.json()
        return Job(data["id"], data["status"], data, _retry_after(response))

    # --- the API -------------------------------------------------------------------------

    def submit(self, request: Mapping[str, Any], idempotency_key: str | None = None) -> Job:
        """Submit a job; safe to call again with the same key after any failure."""
        key = idempotency_key or str(uuid.uuid4())
        response = self._send(
            "POST",
            "/v1/grading-jobs",
            retry=True,  # the same key on every attempt: at most one job
            data=json.dumps(dict(request)),
            headers={"Content-Type": "application/json", "Idempotency-Key": key},
        )
        return self._job(response)

    def get(self, job_id: str) -> Job:
        return self._job(self._send("GET", f"/v1/grading-jobs/{job_id}", retry=True))

    def cancel(self, job_id: str) -> Job:
        # Cancelling twice answers 409 job-already-final, so a retry is harmless.
        return self._job(self._send("POST", f"/v1/grading-jobs/{job_id}/cancel", retry=True))

    def jobs(self, status: str | None = None, submission_id: str | None = None) -> Iterator[Job]:
        """Every job of this client (newest first), fetched a page at a time."""
        params: dict[str, str] = {}
        if status:
            params["status"] = status
        if submission_id:
            params["submission_id"] = submission_id
        while True:
            page = self._send("GET", "/v1/grading-jobs", retry=True, params=params).json()
            for data in page["jobs"]:
                yield Job(data["id"], data["status"], data)
            if not page.get("next_cursor"):
                return
            params["cursor"] = page["next_cursor"]

    def wait(self, job_id: str, timeout_s: float = 3600.0, default_poll_s: float = 2.0) -> Job:
        """Poll until the job is final, at the pace the server's Retry-After asks."""
        deadline = time.monotonic() + timeout_s
        while True:
            job = self.get(job_id)
            if job.is_final:
                return job
            if time.monotonic() >= deadline:
                raise TimeoutError(f"job {job_id} is still {job.status}")
            self._sleep(job.retry_after_s or default_poll_s)


def verify_webhook(secret: str, body: bytes | str, headers: Mapping[str, str]) -> dict[str, Any]:
    """Check a webhook's signature and age; return its CloudEvent, or raise InvalidWebhook.

    `secret` is the `whsec_...` secret shared with Gradeq; `headers` must hold
    webhook-id, webhook-timestamp and webhook-signature.
    """
    text = body.decode("utf-8") if isinstance(body, bytes) else body
    lowered = {k.lower(): v for k, v in headers.items()}
    try:
        event = Webhook(secret).verify(text, lowered)
    except WebhookVerificationError as exc:
        raise InvalidWebhook(str(exc)) from exc
    if not isinstance(event, dict):
        raise InvalidWebhook("the body is not a JSON object")
    return event
