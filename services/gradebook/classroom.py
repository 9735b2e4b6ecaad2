"""Google Classroom as a school's gradebook: `ClassroomWriter`.

A small typed REST client over google-auth's AuthorizedSession (four calls; the
discovery-based google-api-python-client would add a large dependency for them).

Classroom lets an app change only the course work its own Google Cloud project created
(the API answers 403 `ProjectPermissionDenied` otherwise), so Gradeq creates one course
work item per assignment in the school's course and finds it again by the marker in its
description (`associatedWithDeveloper` tells which items this project created). Classroom
has no idempotent create, so the creation is claimed first (services.gradebook.claims):
of two instances (or two deliveries) writing an assignment's first grades at once, one
looks for the item and creates it while the other is answered "held" (redelivered), and
every later write reads the recorded id. A school may link an assignment to a course work id instead
(`course_work`); linking one that another project created ends in GradebookRejected for
each grade. For each posted grade:

1. the student's submission is found (`studentSubmissions.list?userId=`: the LMS user id
   is the student's Classroom user id or email);
2. `studentSubmissions.patch?updateMask=draftGrade` puts the score as a draft (only the
   teachers see it);
3. once the grade is final (`FullyGraded`), `patch?updateMask=assignedGrade` and
   `:return` hand it to the student. `return` does not copy the draft into the assigned
   grade, hence the explicit patch.

Every step is idempotent, so writing the same version twice leaves the same grade.
Errors: 429, 5xx, timeouts and refused connections -> GradebookBusy (the grade is
retried); 403 ProjectPermissionDenied, 400 and 404 -> GradebookRejected; any other 401 or
403 (a credential or the Workspace admin's grant missing) -> GradebookBusy with the
reason, so the outage is shown and the grades wait until the access is fixed.

Credentials: Google's API (an https base URL) is called as the connection's teacher
through domain-wide delegation. A Classroom stand-in on this machine (an http base URL on
a loopback host, as the local stack and the tests use) is called without credentials;
any other base URL stops the service at start (`classroom_access`).
"""

from __future__ import annotations

import logging
import math
import threading
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final
from urllib.parse import urlsplit

import requests
from google.auth.exceptions import GoogleAuthError

from services.gradebook.claims import ItemClaims
from services.gradebook.ports import GradebookBusy, GradebookRejected, PostedGrade
from services.gradebook.settings import GradebookSettings

#: The scopes a Classroom connection needs (docs/gradebook.md): course work and
#: submissions of the students, and the course itself (read-only).
SCOPES: Final = (
    "https://www.googleapis.com/auth/classroom.coursework.students",
    "https://www.googleapis.com/auth/classroom.courses.readonly",
)
TOKEN_URI: Final = "https://oauth2.googleapis.com/token"  # noqa: S105 (an endpoint)
#: What marks the course work Gradeq made for an assignment (in its description).
MARKER_PREFIX: Final = "gradeq-assignment:"
#: The hosts of a Classroom stand-in on this machine (called without credentials).
LOOPBACK_HOSTS: Final = frozenset({"127.0.0.1", "localhost", "::1"})

log = logging.getLogger(__name__)


class ClassroomAccess(StrEnum):
    """How the gradebook signs in to the Classroom at its base URL."""

    #: Google's API: as the connection's teacher, through domain-wide delegation.
    DELEGATED = "delegated"
    #: A stand-in on this machine (the local stack, the tests): no credentials.
    LOOPBACK = "loopback"


def classroom_access(base_url: str) -> ClassroomAccess:
    """How to call the Classroom at `base_url`: https is Google's API (delegation); plain
    http only on a loopback host (a local stand-in, no credentials). Anything else is a
    ValueError, so neither a grade nor a credential travels unencrypted off the machine."""
    parts = urlsplit(base_url)
    try:
        host = parts.hostname
        _ = parts.port  # a malformed port raises here
    except ValueError as exc:
        raise ValueError(f"the Classroom base URL {base_url!r} is malformed") from exc
    if parts.scheme == "https" and host:
        return ClassroomAccess.DELEGATED
    if parts.scheme == "http" and host in LOOPBACK_HOSTS and not parts.username:
        return ClassroomAccess.LOOPBACK
    raise ValueError(
        f"the Classroom base URL {base_url!r} must be https (or http on a loopback host for a"
        " local stand-in)"
    )


def marker(assignment_id: str) -> str:
    return f"{MARKER_PREFIX}{assignment_id}"


@dataclass(frozen=True)
class ApiError:
    status: int
    reason: str
    message: str


def _error(response: requests.Response) -> ApiError:
    try:
        body = response.json()
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return ApiError(
            response.status_code, str(error.get("status", "")), str(error.get("message", ""))
        )
    return ApiError(response.status_code, "", response.text[:200])


def _retry_after(response: requests.Response) -> float | None:
    value = response.headers.get("Retry-After", "")
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


class ClassroomWriter:
    """One school's Classroom course as its gradebook."""

    def __init__(
        self,
        session: requests.Session,
        course_id: str,
        *,
        base_url: str = "https://classroom.googleapis.com",
        timeout_s: float = 20.0,
        linked: Mapping[str, str] | None = None,
        claims: ItemClaims | None = None,
    ) -> None:
        """`claims`: where instances agree on each assignment's course work (without:
        this instance alone makes one at a time)."""
        self._session = session
        self._course = course_id
        self._base = base_url.rstrip("/") + f"/v1/courses/{course_id}"
        self._timeout_s = timeout_s
        #: assignment id -> course work id: linked by the school, or found or made here.
        self._course_work: dict[str, str] = dict(linked or {})
        self._creating = threading.Lock()
        self._claims = claims

    def write(self, grade: PostedGrade) -> None:
        if grade.lms_user_id is None:
            raise GradebookRejected(
                f"student {grade.student_id} has no Classroom user in the roster mapping"
            )
        if grade.score is None:
            return  # nothing to put in the gradebook yet
        work = self._course_work_id(grade)
        submission = self._submission(work, grade.lms_user_id)
        path = f"/courseWork/{work}/studentSubmissions/{submission}"
        self._call("PATCH", path, {"updateMask": "draftGrade"}, {"draftGrade": grade.score})
        if grade.grading_progress == "FullyGraded":
            self._call(
                "PATCH", path, {"updateMask": "assignedGrade"}, {"assignedGrade": grade.score}
            )
            self._call("POST", path + ":return", None, {})

    def _course_work_id(self, grade: PostedGrade) -> str:
        found = self._course_work.get(grade.assignment_id)
        if found is not None:
            return found
        with self._creating:  # one creation per assignment from this instance
            found = self._course_work.get(grade.assignment_id)
            if found is None:
                found = (
                    self._find_or_create(grade)
                    if self._claims is None
                    else self._claimed(self._claims, grade)
                )
            self._course_work[grade.assignment_id] = found
            return found

    def _claimed(self, claims: ItemClaims, grade: PostedGrade) -> str:
        """The course work the instances agreed on: recorded, or found or made under the
        claim and recorded."""
        school, assignment, holder = grade.school, grade.assignment_id, uuid.uuid4().hex
        recorded = claims.settled(school, assignment, holder)
        if recorded is not None:
            return recorded
        try:
            found = self._find_or_create(grade)
        except BaseException:
            claims.release(school, assignment, holder)
            raise
        claims.record(school, assignment, holder, found)
        return found

    def _find_or_create(self, grade: PostedGrade) -> str:
        found = self._find(grade.assignment_id)
        if found is not None:
            return found
        created = self._call(
            "POST",
            "/courseWork",
            None,
            {
                "title": f"Gradeq: {grade.assignment_id}",
                "description": marker(grade.assignment_id),
                "workType": "ASSIGNMENT",
                "state": "PUBLISHED",
                "maxPoints": grade.max_score,
            },
        )
        return str(created["id"])

    def _find(self, assignment_id: str) -> str | None:
        wanted = marker(assignment_id)
        for item in self._pages("/courseWork", "courseWork", {}):
            if item.get("associatedWithDeveloper") and item.get("description") == wanted:
                return str(item["id"])
        return None

    def _submission(self, work: str, user_id: str) -> str:
        path = f"/courseWork/{work}/studentSubmissions"
        for item in self._pages(path, "studentSubmissions", {"userId": user_id}):
            return str(item["id"])
        raise GradebookRejected(f"Classroom user {user_id} has no submission in course work {work}")

    def _pages(self, path: str, key: str, params: Mapping[str, str]) -> Iterator[dict[str, Any]]:
        token = ""
        while True:
            query = {**params, **({"pageToken": token} if token else {})}
            page = self._call("GET", path, query, None)
            items = page.get(key) or []
            yield from (i for i in items if isinstance(i, dict))
            token = str(page.get("nextPageToken") or "")
            if not token:
                return

    def _call(
        self,
        method: str,
        path: str,
        params: Mapping[str, str] | None,
        body: dict[str, Any] | None,
    ) -> dict[str, Any]:
        url = self._base + path
        try:
            response = self._session.request(
                method, url, params=params, json=body, timeout=self._timeout_s
            )
        except (requests.RequestException, GoogleAuthError) as exc:
            # GoogleAuthError: no token (the Workspace admin's grant is missing or revoked).
            raise GradebookBusy(None, f"Classroom {method} failed: {type(exc).__name__}") from exc
        if response.ok:
            payload = response.json() if response.content else {}
            return payload if isinstance(payload, dict) else {}
        error = _error(response)
        what = f"Classroom answered {error.status} {error.reason}: {error.message}".strip()
        if error.status == 429 or error.status >= 500:
            raise GradebookBusy(_retry_after(response), what)
        if error.status == 403 and "ProjectPermissionDenied" in error.message:
            raise GradebookRejected(
                "the course work was created by another Google Cloud project; Classroom lets"
                " Gradeq change only its own"
            )
        if error.status in (401, 403):
            raise GradebookBusy(None, what)
        raise GradebookRejected(what)


def delegated_session(teacher: str) -> requests.Session:
    """A session acting as `teacher` through domain-wide delegation, signed by the
    runtime's own service account (no key file: IAM signs the assertion)."""
    import google.auth
    from google.auth import iam
    from google.auth.transport.requests import AuthorizedSession, Request
    from google.oauth2 import service_account

    source, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
    email = getattr(source, "service_account_email", None)
    if not isinstance(email, str) or "@" not in email:
        raise ValueError("Classroom needs the runtime to be a service account")
    signer = iam.Signer(Request(), source, email)  # type: ignore[no-untyped-call]
    credentials = service_account.Credentials(  # type: ignore[no-untyped-call]
        signer, email, TOKEN_URI, scopes=list(SCOPES), subject=teacher
    )
    session: requests.Session = AuthorizedSession(credentials)  # type: ignore[no-untyped-call]
    return session


def classroom_writer(
    school: str,
    entry: Mapping[str, Any],
    settings: GradebookSettings,
    claims: ItemClaims | None = None,
) -> ClassroomWriter:
    """The writer a connections file entry of kind "classroom" names."""
    course_id, teacher = entry.get("course_id"), entry.get("teacher")
    if not isinstance(course_id, str) or not course_id:
        raise ValueError(f"school {school!r}: a classroom connection needs 'course_id'")
    if not isinstance(teacher, str) or "@" not in teacher:
        raise ValueError(f"school {school!r}: a classroom connection needs the 'teacher' email")
    linked = entry.get("course_work") or {}
    if not isinstance(linked, dict):
        raise ValueError(f"school {school!r}: 'course_work' must map assignment ids to ids")
    if classroom_access(settings.classroom_base_url) is ClassroomAccess.LOOPBACK:
        log.warning(
            "Classroom is a local stand-in: called without credentials",
            extra={"school": school, "base_url": settings.classroom_base_url},
        )
        session = requests.Session()
    else:
        session = delegated_session(teacher)
    return ClassroomWriter(
        session,
        course_id,
        base_url=settings.classroom_base_url,
        timeout_s=settings.request_timeout_s,
        linked={str(k): str(v) for k, v in linked.items()},
        claims=claims,
    )
