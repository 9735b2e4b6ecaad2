"""HTTP calls to an intake: the client API and the admin API, problems as exceptions."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

import requests

from gradeq_cli.config import Target

#: Connection failures and these statuses are retried with the same Idempotency-Key.
RETRYABLE = frozenset({429, 502, 503, 504})
PROBLEM_BASE = "https://gradeq.dev/problems/"


class CliError(Exception):
    """A failure the CLI reports with a problem type and an exit code."""

    def __init__(self, problem_type: str, detail: str, exit_code: int) -> None:
        super().__init__(detail)
        self.problem_type = problem_type
        self.detail = detail
        self.exit_code = exit_code


class ApiProblem(CliError):
    """The intake answered with a problem document (or another error status)."""


class Unreachable(CliError):
    """The intake could not be reached."""


class MissingCredential(CliError):
    """The command needs a key the configuration does not give."""


@dataclass(frozen=True)
class Reply:
    """A successful answer: its JSON body and the Retry-After it suggested (seconds)."""

    body: dict[str, Any]
    retry_after_s: float | None
    headers: dict[str, str]


def new_idempotency_key() -> str:
    return f"cli-{uuid.uuid4()}"


class GradeqClient:
    """One intake, reached with the client key or the operator key."""

    def __init__(
        self,
        target: Target,
        *,
        timeout_s: float = 30.0,
        retries: int = 4,
        session: requests.Session | None = None,
    ) -> None:
        self._target = target
        self._timeout_s = timeout_s
        self._retries = retries
        self._http = session or requests.Session()

    @property
    def has_operator_key(self) -> bool:
        return bool(self._target.operator_key)

    def _key(self, operator: bool) -> str:
        key = self._target.operator_key if operator else self._target.api_key
        if not key:
            name = "operator key (--operator-key, GRADEQ_OPERATOR_KEY)"
            if not operator:
                name = "API key (--api-key, GRADEQ_API_KEY)"
            raise MissingCredential("missing-credential", f"this command needs an {name}", 2)
        return key

    def request(
        self,
        method: str,
        path: str,
        *,
        operator: bool = False,
        json: Any = None,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        """Send one request, retrying connection failures and busy answers as told."""
        all_headers = {"Authorization": f"Bearer {self._key(operator)}", **(headers or {})}
        url = self._target.url + path
        clean = {k: v for k, v in (params or {}).items() if v is not None}
        for attempt in range(self._retries + 1):
            try:
                response = self._http.request(
                    method,
                    url,
                    json=json,
                    params=clean,
                    headers=all_headers,
                    timeout=self._timeout_s,
                )
            except requests.ConnectionError as exc:
                if attempt == self._retries:
                    raise Unreachable("unreachable", f"cannot reach {url}: {exc}", 6) from exc
                time.sleep(min(8.0, 0.5 * 2**attempt))
                continue
            if response.status_code in RETRYABLE and attempt < self._retries:
                time.sleep(_retry_after(response) or min(8.0, 0.5 * 2**attempt))
                continue
            return _reply(response)
        raise AssertionError("unreachable")

    # --- client API --------------------------------------------------------------------

    def submit(self, body: dict[str, Any], idempotency_key: str) -> Reply:
        return self.request(
            "POST", "/v1/grading-jobs", json=body, headers={"Idempotency-Key": idempotency_key}
        )

    def job(self, job_id: str) -> Reply:
        return self.request("GET", f"/v1/grading-jobs/{job_id}")

    def cancel(self, job_id: str) -> Reply:
        return self.request("POST", f"/v1/grading-jobs/{job_id}/cancel")

    # --- admin API ---------------------------------------------------------------------

    def admin(self, method: str, path: str, **kwargs: Any) -> Reply:
        return self.request(method, "/admin/v1" + path, operator=True, **kwargs)


def _retry_after(response: requests.Response) -> float | None:
    try:
        return float(response.headers.get("Retry-After", ""))
    except ValueError:
        return None


def _reply(response: requests.Response) -> Reply:
    try:
        body = response.json()
    except ValueError:
        body = {}
    if response.status_code >= 400:
        problem_type = str(body.get("type") or f"http-{response.status_code}")
        detail = str(body.get("detail") or body.get("title") or response.reason)
        raise ApiProblem(problem_type.removeprefix(PROBLEM_BASE), detail, 5)
    return Reply(
        body if isinstance(body, dict) else {"items": body},
        _retry_after(response),
        dict(response.headers),
    )
