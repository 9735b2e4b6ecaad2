"""A small typed client for the Gradeq intake API.

    client = GradeqClient("https://intake.example.com", api_key="gq_...")
    job = client.submit({"submission_id": "s-1", "answer": "...", "rubric": ["..."]})
    final = client.wait(job.id)
    photo = client.submit({"submission_id": "s-2", "rubric": ["..."]}, files=["page1.jpg"])

`submit` generates an Idempotency-Key and, on 429, 502, 503, 504 or a lost connection,
retries with the same key, so a retry can never make a second job. Waits follow the
server's Retry-After. `verify_webhook` checks a webhook's Standard Webhooks signature;
`PostedGrade.from_event` reads a verified posted grade's webhook.

`request` is the layer underneath: any call to the client API or (with an operator key,
`operator=True`) the admin API under `/admin/v1`, with the same retries, answering a
`Reply` (status, body, headers, Retry-After) or raising `GradeqError` with the problem.
"""

from __future__ import annotations

import copy
import math
import mimetypes
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import requests
from requests.structures import CaseInsensitiveDict
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

FINAL_STATUSES = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})
#: Busy or gateway answers: retried (with the same Idempotency-Key), like a lost connection.
RETRYABLE_STATUSES = frozenset({429, 502, 503, 504})
PROBLEM_BASE = "https://gradeq.dev/problems/"
#: The most answers one batch call takes.
MAX_BATCH = 1000
#: The CloudEvents types of the webhooks: a job's grading, and each version of a posted grade.
GRADING_COMPLETED_TYPE = "dev.gradeq.grading.completed.v1"
GRADE_POSTED_TYPE = "dev.gradeq.grade.posted.v1"


class GradeqError(Exception):
    """The API refused the request; `problem` is its RFC 9457 problem document."""

    def __init__(self, status: int, problem: Mapping[str, Any], reason: str = "") -> None:
        detail = problem.get("detail") or problem.get("title") or reason
        super().__init__(f"HTTP {status}: {detail}")
        self.status = status
        self.problem = dict(problem)
        self.reason = reason

    @property
    def type(self) -> str:
        return str(self.problem.get("type", ""))

    @property
    def slug(self) -> str:
        """The problem type without the Gradeq prefix (`http-<status>` when it has none)."""
        return self.type.removeprefix(PROBLEM_BASE) or f"http-{self.status}"

    @property
    def detail(self) -> str:
        """The problem's detail, else its title, else the HTTP reason phrase."""
        return str(self.problem.get("detail") or self.problem.get("title") or self.reason)


class Unreachable(requests.ConnectionError):
    """The intake could not be reached, after every attempt."""

    def __init__(self, url: str, cause: requests.ConnectionError) -> None:
        super().__init__(f"cannot reach {url}: {cause}", request=cause.request)
        self.url = url


class MissingKey(Exception):
    """The call needs a key (the API key, or the operator key) this client was not given."""

    def __init__(self, operator: bool) -> None:
        super().__init__("an operator key is needed" if operator else "an API key is needed")
        self.operator = operator


class InvalidWebhook(Exception):
    """A webhook whose signature, timestamp or body does not verify."""


@dataclass(frozen=True)
class Job:
    """A grading job as the API shows it (`data` holds every field)."""

    id: str
    status: str
    data: dict[str, Any]
    retry_after_s: float | None = None
    #: A submit the server answered from an earlier one with the same Idempotency-Key.
    replayed: bool = False

    @property
    def is_final(self) -> bool:
        return self.status in FINAL_STATUSES

    @property
    def result(self) -> dict[str, Any] | None:
        result = self.data.get("result")
        return dict(result) if isinstance(result, dict) else None


@dataclass(frozen=True)
class Reply:
    """A successful answer: status, JSON body (a JSON array as `{"items": [...]}`), headers
    and the Retry-After it suggested (seconds)."""

    status: int
    body: dict[str, Any]
    headers: Mapping[str, str]
    retry_after_s: float | None


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    """Retry-After in seconds: delay-seconds or an HTTP-date; None when absent or invalid."""
    value = headers.get("Retry-After", "").strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            return None
        return max(0.0, (when - datetime.now(UTC)).total_seconds())
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


class GradeqClient:
    """Submit, read, list, cancel and wait for grading jobs; `request` for anything else."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        *,
        operator_key: str | None = None,
        session: requests.Session | None = None,
        max_attempts: int = 6,
        backoff_s: float = 1.0,
        max_backoff_s: float = 60.0,
        timeout_s: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._session = session or requests.Session()
        self._api_key = api_key
        self._operator_key = operator_key
        self._max_attempts = max_attempts
        self._backoff_s = backoff_s
        self._max_backoff_s = max_backoff_s
        self._timeout_s = timeout_s
        self._sleep = sleep

    @property
    def has_operator_key(self) -> bool:
        return bool(self._operator_key)

    def at(self, base_url: str) -> GradeqClient:
        """The same client (keys, session, retries) against another base URL."""
        other = copy.copy(self)
        other.base_url = base_url.rstrip("/")
        return other

    # --- requests ------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        operator: bool = False,
        retry: bool = True,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Reply:
        """One call (with `operator`, under /admin/v1 with the operator key); with `retry`,
        again after 429, 502, 503, 504 or a lost connection, at the server's Retry-After
        (a Retry-After longer than `max_backoff_s`, such as a daily quota's, is raised).

        Raises GradeqError for an error answer, Unreachable when every attempt failed to
        connect, MissingKey when the key it needs was not given."""
        key = self._operator_key if operator else self._api_key
        if not key:
            raise MissingKey(operator)
        url = self.base_url + ("/admin/v1" if operator else "") + path
        sent = {"Authorization": f"Bearer {key}", **(headers or {})}
        query = {k: v for k, v in (params or {}).items() if v is not None}
        for attempt in range(1, self._max_attempts + 1):
            delay = min(self._max_backoff_s, self._backoff_s * 2 ** (attempt - 1))
            last = not retry or attempt == self._max_attempts
            try:
                response = self._session.request(
                    method, url, json=json, params=query, headers=sent, timeout=self._timeout_s
                )
            except requests.ConnectionError as exc:
                if last:
                    raise Unreachable(url, exc) from exc
                self._sleep(delay)
                continue
            wait = retry_after_s(response.headers) or delay
            if (
                response.status_code in RETRYABLE_STATUSES
                and not last
                and wait <= self._max_backoff_s
            ):
                self._sleep(wait)
                continue
            return self._reply(response)
        raise AssertionError("unreachable")

    @staticmethod
    def _reply(response: requests.Response) -> Reply:
        try:
            body = response.json()
        except ValueError:
            body = None
        if response.status_code >= 400:
            problem = body if isinstance(body, dict) else {}
            raise GradeqError(response.status_code, problem, response.reason or "")
        return Reply(
            response.status_code,
            body if isinstance(body, dict) else {"items": body} if isinstance(body, list) else {},
            CaseInsensitiveDict(response.headers),
            retry_after_s(response.headers),
        )

    @staticmethod
    def _job(reply: Reply) -> Job:
        data = reply.body
        replayed = reply.headers.get("Idempotent-Replayed") == "true"
        return Job(data["id"], data["status"], data, reply.retry_after_s, replayed)

    # --- the client API ------------------------------------------------------------------

    def submit(
        self,
        request: Mapping[str, Any],
        idempotency_key: str | None = None,
        files: Sequence[str | Path] = (),
    ) -> Job:
        """Submit a job; safe to call again with the same key after any failure.

        `files` are uploaded first (`upload_file`) and named in the request's `files`.
        Each upload is new: to retry a submission with files under the same key, upload
        once and pass the returned references in `request["files"]` instead.
        """
        key = idempotency_key or str(uuid.uuid4())
        body = dict(request)
        if files:
            body["files"] = [*body.get("files", ()), *(self.upload_file(f) for f in files)]
        # The same key on every attempt: at most one job.
        reply = self.request(
            "POST", "/v1/grading-jobs", json=body, headers={"Idempotency-Key": key}
        )
        return self._job(reply)

    def upload(
        self, data: bytes, content_type: str, name: str = "", student_id: str | None = None
    ) -> dict[str, Any]:
        """Upload one file through a signed URL; return the reference a job's `files` takes.

        With `student_id`, the file is that student's: only their submissions may name it,
        and erasing the student removes it, named by a job or not.
        """
        declared = {"content_type": content_type, "size": len(data)}
        asked = {**declared, "student_id": student_id} if student_id is not None else declared
        grant = self.request("POST", "/v1/uploads", json=asked).body
        # The signed URL is the credential: no Authorization header goes to the store.
        response = self._session.put(
            grant["upload_url"], data=data, headers=grant["headers"], timeout=self._timeout_s
        )
        if response.status_code >= 300:
            try:
                problem = response.json()
            except ValueError:
                problem = {"detail": response.text[:500]}  # Cloud Storage answers XML
            raise GradeqError(response.status_code, problem, response.reason or "")
        return {"upload_id": grant["upload_id"], "name": name, **declared}

    def upload_file(self, path: str | Path) -> dict[str, Any]:
        """Upload a file from disk, its type guessed from its name (see `content_type_of`)."""
        file = Path(path)
        return self.upload(file.read_bytes(), content_type_of(file), file.name)

    def get(self, job_id: str) -> Job:
        return self._job(self.request("GET", f"/v1/grading-jobs/{job_id}"))

    def cancel(self, job_id: str) -> Job:
        # A repeated cancel answers the cancelled job again, so a retry is harmless.
        return self._job(self.request("POST", f"/v1/grading-jobs/{job_id}/cancel"))

    def jobs(self, status: str | None = None, submission_id: str | None = None) -> Iterator[Job]:
        """Every job of this client (newest first), fetched a page at a time."""
        params = {"status": status or None, "submission_id": submission_id or None}
        while True:
            page = self.request("GET", "/v1/grading-jobs", params=params).body
            for data in page["jobs"]:
                yield Job(data["id"], data["status"], data)
            if not page.get("next_cursor"):
                return
            params["cursor"] = page["next_cursor"]

    def wait(
        self,
        job_id: str,
        timeout_s: float = 3600.0,
        default_poll_s: float = 2.0,
        on_update: Callable[[Job], None] | None = None,
    ) -> Job:
        """Poll until the job is final, at the pace the server's Retry-After asks;
        `on_update` sees every state read. TimeoutError after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while True:
            job = self.get(job_id)
            if on_update:
                on_update(job)
            if job.is_final:
                return job
            if time.monotonic() >= deadline:
                raise TimeoutError(f"job {job_id} is still {job.status}")
            self._sleep(job.retry_after_s or default_poll_s)

    # --- erasure and review ---------------------------------------------------------------

    def erase(self, job_id: str) -> dict[str, Any]:
        """Erase one submission; the answer lists what was removed and what remains where.

        Not retried: a second DELETE of an erased job answers 404 job-not-found."""
        return self.request("DELETE", f"/v1/grading-jobs/{job_id}", retry=False).body

    def erase_student(self, student_id: str) -> dict[str, Any]:
        """Erase everything of one student (the `student_id` set on submission); safe to
        repeat: a second call finds nothing more to remove."""
        return self.request("DELETE", f"/v1/students/{quote(student_id, safe='')}").body

    def held_grades(self, assignment_id: str | None = None) -> Iterator[dict[str, Any]]:
        """Grades held for review, oldest first (the client's key must be a reviewer key)."""
        params: dict[str, Any] = {"assignment_id": assignment_id}
        while True:
            page = self.request("GET", "/v1/reviews", params=params).body
            yield from page["reviews"]
            if not page.get("next_cursor"):
                return
            params["cursor"] = page["next_cursor"]

    def held_grade(self, job_id: str) -> dict[str, Any]:
        """One held grade with the answer, rubric, model grade and reviews."""
        return self.request("GET", f"/v1/reviews/{job_id}").body

    def review(
        self,
        job_id: str,
        reason: str,
        score: float | None = None,
        criteria: list[dict[str, Any]] | None = None,
        feedback: str | None = None,
    ) -> dict[str, Any]:
        """Accept the model's grade (no score) or override it; not retried, since each
        review is recorded (and announced) as one more."""
        body: dict[str, Any] = {"decision": "accept" if score is None else "override"}
        body["reason"] = reason
        for name, value in (("score", score), ("criteria", criteria), ("feedback", feedback)):
            if value is not None:
                body[name] = value
        return self.request("POST", f"/v1/reviews/{job_id}", json=body, retry=False).body

    def request_regrade(self, job_id: str, reason: str) -> dict[str, Any]:
        """A student asks, once per grade, for a second look at it; not retried (a second
        request is answered 409 regrade-already-requested)."""
        body = {"reason": reason}
        path = f"/v1/grading-jobs/{job_id}/regrade-request"
        return self.request("POST", path, json=body, retry=False).body

    def answer_regrade_request(
        self,
        job_id: str,
        reason: str,
        score: float | None = None,
        feedback: str | None = None,
    ) -> dict[str, Any]:
        """Answer a student's regrade request: keep the grade (no score) or change it."""
        body: dict[str, Any] = {"answer": "keep" if score is None else "change", "reason": reason}
        for name, value in (("score", score), ("feedback", feedback)):
            if value is not None:
                body[name] = value
        path = f"/v1/reviews/{job_id}/request"
        return self.request("POST", path, json=body, retry=False).body

    def agreement(self, assignment_id: str) -> dict[str, Any]:
        """Model against teacher on the assignment's reviewed grades (operator key)."""
        return self.admin("GET", f"/assignments/{assignment_id}/agreement").body

    # --- assignments ---------------------------------------------------------------------

    def create_assignment(
        self, assignment: Mapping[str, Any], idempotency_key: str | None = None
    ) -> dict[str, Any]:
        """Create an assignment (title, rubric, max_score, prompt_version); safe to retry."""
        key = idempotency_key or str(uuid.uuid4())
        reply = self.request(
            "POST", "/v1/assignments", json=dict(assignment), headers={"Idempotency-Key": key}
        )
        return reply.body

    def assignment(self, assignment_id: str) -> Reply:
        """The assignment with its progress (`body["progress"]`) and the Retry-After."""
        return self.request("GET", f"/v1/assignments/{assignment_id}")

    def assignments(self) -> Iterator[dict[str, Any]]:
        """Every assignment of this client, newest first, a page at a time."""
        yield from self._pages("/v1/assignments", "assignments")

    def revise_rubric(self, assignment_id: str, rubric: str | list[str]) -> dict[str, Any]:
        """Make `rubric` the assignment's next rubric version."""
        return self.request(
            "PATCH", f"/v1/assignments/{assignment_id}", json={"rubric": rubric}
        ).body

    def submit_batch(
        self, assignment_id: str, answers: list[Mapping[str, Any]], batch_size: int = MAX_BATCH
    ) -> dict[str, Any]:
        """Submit answers (each with its submission_id) in batches; the items of all of them.

        Each submission id is its key in the assignment, so sending again after any
        failure creates nothing twice and completes what was cut off.
        """
        totals: dict[str, Any] = {"accepted": 0, "existing": 0, "refused": 0, "items": []}
        for start in range(0, len(answers), batch_size):
            chunk = [dict(a) for a in answers[start : start + batch_size]]
            body = self.request(
                "POST",
                f"/v1/assignments/{assignment_id}/submissions:batch",
                json={"answers": chunk},
            ).body
            for name in ("accepted", "existing", "refused"):
                totals[name] += body[name]
            totals["items"].extend(body["items"])
        return totals

    def grades(self, assignment_id: str) -> Iterator[Job]:
        """Every job of the assignment, newest first, a page at a time."""
        for data in self._pages(f"/v1/assignments/{assignment_id}/grades", "jobs"):
            yield Job(data["id"], data["status"], data)

    def grade_sheet(self, assignment_id: str) -> Iterator[dict[str, Any]]:
        """Every row of the grade sheet (final score and its source, model and teacher
        score, reviewer, reason, feedback, posted at), a page at a time."""
        yield from self._pages(f"/v1/assignments/{assignment_id}/grades", "grades")

    def post_grades(
        self, assignment_id: str, submission_ids: list[str] | None = None
    ) -> dict[str, Any]:
        """Post the assignment's final grades (or the chosen submissions') to students and
        downstream systems; what it did, by submission id."""
        body = {} if submission_ids is None else {"submission_ids": submission_ids}
        path = f"/v1/assignments/{assignment_id}/grades:post"
        return self.request("POST", path, json=body).body

    def grades_csv(self, assignment_id: str) -> Iterator[str]:
        """The grade sheet as CSV lines, streamed as the server writes them."""
        if not self._api_key:
            raise MissingKey(False)
        response = self._session.get(
            f"{self.base_url}/v1/assignments/{assignment_id}/grades",
            headers={"Authorization": f"Bearer {self._api_key}", "Accept": "text/csv"},
            stream=True,
            timeout=self._timeout_s,
        )
        if response.status_code >= 400:
            self._reply(response)
        with response:
            yield from response.iter_lines(decode_unicode=True)

    def regrade(
        self,
        assignment_id: str,
        rubric: str | list[str] | None = None,
        prompt_version: str | None = None,
        reopen_reviewed: bool = False,
    ) -> dict[str, Any]:
        """Grade every final submission again in a new round (or finish one cut off);
        `reopen_reviewed` puts the grades teachers reviewed back in their queue."""
        body: dict[str, Any] = {}
        if rubric is not None:
            body["rubric"] = rubric
        if prompt_version is not None:
            body["prompt_version"] = prompt_version
        if reopen_reviewed:
            body["reopen_reviewed"] = True
        return self.request("POST", f"/v1/assignments/{assignment_id}/regrade", json=body).body

    def regrade_report(self, assignment_id: str, threshold: float = 1.0) -> dict[str, Any]:
        """Old and new scores of the last regrade, the mean shift and the kappa."""
        path = f"/v1/assignments/{assignment_id}/regrade"
        return self.request("GET", path, params={"threshold": threshold}).body

    def wait_assignment(
        self,
        assignment_id: str,
        timeout_s: float = 24 * 3600.0,
        default_poll_s: float = 2.0,
        on_update: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """Poll until the assignment's current round is graded; TimeoutError after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while True:
            reply = self.assignment(assignment_id)
            if on_update:
                on_update(reply.body)
            progress = reply.body.get("progress") or {}
            if progress.get("done"):
                return reply.body
            if time.monotonic() >= deadline:
                raise TimeoutError(f"assignment {assignment_id} is not graded yet")
            self._sleep(reply.retry_after_s or default_poll_s)

    def _pages(self, path: str, key: str) -> Iterator[dict[str, Any]]:
        params: dict[str, Any] = {}
        while True:
            page = self.request("GET", path, params=params).body
            yield from page[key]
            if not page.get("next_cursor"):
                return
            params["cursor"] = page["next_cursor"]

    # --- the admin API (operator key) ----------------------------------------------------

    def admin(self, method: str, path: str, **kwargs: Any) -> Reply:
        """A call to the admin API, `path` under /admin/v1, with the operator key."""
        return self.request(method, path, operator=True, **kwargs)


#: Types the server accepts whose suffixes `mimetypes` may not know (or knows otherwise).
_TYPES = {
    ".webp": "image/webp",
    ".md": "text/markdown",
    ".py": "text/x-python",
    ".java": "text/x-java-source",
    ".c": "text/x-c",
    ".h": "text/x-c",
    ".js": "text/javascript",
    ".zip": "application/zip",
}


def content_type_of(path: Path) -> str:
    """The content type to declare for a file: by suffix, text/plain when unknown."""
    suffix = path.suffix.lower()
    return _TYPES.get(suffix) or mimetypes.guess_type(path.name)[0] or "text/plain"


@dataclass(frozen=True)
class PostedGrade:
    """One version of a student's posted grade, as its webhook carries it.

    `event_id` is stable per (submission, version): the first post is version 1 and every
    later change (a teacher's override, a regrade) is the next version, each sent once.
    """

    event_id: str
    school: str
    assignment_id: str
    student_id: str | None
    submission_id: str
    job_id: str
    version: int
    score: float
    max_score: float
    source: str
    feedback: str
    grading_progress: str
    posted_at: datetime
    reason: str

    @classmethod
    def from_event(cls, event: Mapping[str, Any]) -> PostedGrade:
        """Read a verified `dev.gradeq.grade.posted.v1` webhook; raise InvalidWebhook."""
        if event.get("type") != GRADE_POSTED_TYPE:
            raise InvalidWebhook(f"the webhook is not a posted grade: {event.get('type')!r}")
        data = event.get("data")
        event_id = event.get("id")
        if not isinstance(data, dict) or not isinstance(event_id, str) or not event_id:
            raise InvalidWebhook("the posted grade has no id or no data")

        def text(name: str) -> str:
            value = data.get(name)
            if not isinstance(value, str):
                raise InvalidWebhook(f"the posted grade's {name!r} is not a string")
            return value

        def number(name: str) -> float:
            value = data.get(name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise InvalidWebhook(f"the posted grade's {name!r} is not a number")
            if not math.isfinite(value):
                raise InvalidWebhook(f"the posted grade's {name!r} is not finite")
            return float(value)

        version = data.get("version")
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise InvalidWebhook("the posted grade's 'version' is not a positive integer")
        student_id = data.get("student_id")
        if student_id is not None and not isinstance(student_id, str):
            raise InvalidWebhook("the posted grade's 'student_id' is not a string")
        try:
            posted_at = datetime.fromisoformat(text("posted_at"))
        except ValueError as exc:
            raise InvalidWebhook("the posted grade's 'posted_at' is not RFC 3339") from exc
        return cls(
            event_id=event_id,
            school=text("school"),
            assignment_id=text("assignment_id"),
            student_id=student_id,
            submission_id=text("submission_id"),
            job_id=text("job_id"),
            version=version,
            score=number("score"),
            max_score=number("max_score"),
            source=text("source"),
            feedback=text("feedback"),
            grading_progress=text("grading_progress"),
            posted_at=posted_at,
            reason=text("reason"),
        )


def verify_webhook(
    secret: str,
    body: bytes | str,
    headers: Mapping[str, str],
    *,
    client_id: str,
    author: str | None = None,
) -> dict[str, Any]:
    """Check a webhook's signature, age, school and author; return its CloudEvent, or
    raise InvalidWebhook.

    `secret` is this client's `whsec_...` webhook secret and `client_id` its own client id:
    an event signed with the secret but about another client's job is refused, and so is
    a student's practice job (never the school's). The event's `data.author` names who in
    the school submitted the job (`"server"` for the school's API key, else a signed-in
    user's id); with `author` given, an event of any other author is refused (pass
    `author="server"` to take only the grades of jobs the school's server submitted).
    `headers` must hold webhook-id, webhook-timestamp and webhook-signature (during a
    rotation the signature header holds one signature per secret; either verifies).

    A posted grade (`type` GRADE_POSTED_TYPE, one webhook per version) names its school in
    `data.school` and is checked field by field (`PostedGrade.from_event` reads it); it
    names no author, so with `author` given it is refused.
    """
    lowered = {k.lower(): v for k, v in headers.items()}
    try:
        text = body.decode("utf-8") if isinstance(body, bytes) else body
        event = Webhook(secret).verify(text, lowered)
    except (WebhookVerificationError, ValueError) as exc:
        # ValueError: a body that is not UTF-8 or JSON, a malformed signature header.
        raise InvalidWebhook(str(exc) or type(exc).__name__) from exc
    if not isinstance(event, dict):
        raise InvalidWebhook("the body is not a JSON object")
    if event.get("type") == GRADE_POSTED_TYPE:
        posted = PostedGrade.from_event(event)
        if posted.school != client_id:
            raise InvalidWebhook("the webhook is about another client's grade")
        if author is not None:
            raise InvalidWebhook("a posted grade names no author; it is refused with `author`")
        return event
    data = event.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("client_id"), str):
        raise InvalidWebhook("the webhook names no client")
    # Events published before jobs had an author name a user's job `<client>:user:<uid>`.
    school, mark, uid = data["client_id"].partition(":user:")
    written_by = data.get("author") or (uid if mark else "server")
    if school != client_id:
        raise InvalidWebhook("the webhook is about another client's job")
    if data.get("practice") is True:
        raise InvalidWebhook("the webhook is about a practice job, which is never the school's")
    if author is not None and written_by != author:
        raise InvalidWebhook(f"the webhook's job was submitted by {written_by!r}, not {author!r}")
    data["author"] = written_by
    return event
