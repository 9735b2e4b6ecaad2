"""A loopback Google Classroom for tests: the documented shapes of `courses.courseWork`
and `courses.courseWork.studentSubmissions`, as far as a gradebook writer uses them.

Served from Google's Classroom API reference (REST v1): CourseWork and StudentSubmission
resources and their field names; `courseWork.create` and `.list`;
`studentSubmissions.list` (filter `userId`: a user id or email), `.patch` (the
`updateMask` query parameter is required; a teacher may set `draftGrade` and
`assignedGrade`), `:return` (an empty response; does not copy `draftGrade`);
`associatedWithDeveloper` on items the calling project created; PERMISSION_DENIED with
`ProjectPermissionDenied` in the message when a project changes another project's course
work (Access errors page); INVALID_ARGUMENT and NOT_FOUND; Google's JSON error body
`{"error": {"code", "message", "status"}}`. Pages follow `pageToken`/`nextPageToken`.

Where it differs from the real API (docs/gradebook.md): one project and one teacher; no
authentication (the writer's credentials are not checked); grades are not checked
against two decimal digits; no grading periods, rubrics, attachments or Drive files;
faults are injected on request (`fail_next`).
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Self

from flask import Flask, Response, jsonify, request
from werkzeug.serving import BaseWSGIServer, make_server

PROJECT_PERMISSION_DENIED = (
    "@ProjectPermissionDenied The Developer Project is not permitted to make this request."
)
GRADE_FIELDS = frozenset({"draftGrade", "assignedGrade"})


@dataclass
class Fault:
    status: int
    retry_after: str | None = None


@dataclass
class ClassroomFake:
    """Courses with students; what the writer did is kept in `history`."""

    page_size: int = 2
    courses: dict[str, dict[str, str]] = field(default_factory=dict)  # course -> {user: email}
    course_work: dict[str, dict[str, Any]] = field(default_factory=dict)
    submissions: dict[str, dict[str, Any]] = field(default_factory=dict)
    history: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    _ids: Any = field(default_factory=lambda: itertools.count(1000))
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: BaseWSGIServer | None = None
    _thread: threading.Thread | None = None

    # --- set-up ---------------------------------------------------------------------

    def add_course(self, course_id: str, students: dict[str, str]) -> None:
        """A course with students (user id -> email)."""
        self.courses[course_id] = dict(students)

    def add_foreign_course_work(self, course_id: str, description: str = "") -> str:
        """Course work another project (or the Classroom UI) created."""
        return self._create_work(
            course_id, {"title": "made by hand", "description": description}, False
        )

    def fail_next(self, *faults: Fault) -> None:
        self.faults.extend(faults)

    def submission_of(self, course_work_id: str, user_id: str) -> dict[str, Any]:
        [found] = [
            s
            for s in self.submissions.values()
            if s["courseWorkId"] == course_work_id and s["userId"] == user_id
        ]
        return found

    def created_by_gradeq(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(w) for w in self.course_work.values() if w["associatedWithDeveloper"]]

    def submissions_of(self, course_work_id: str) -> dict[str, dict[str, Any]]:
        """User id -> a copy of the user's submission to the course work (safe to read
        while the server writes)."""
        with self._lock:
            return {
                s["userId"]: dict(s)
                for s in self.submissions.values()
                if s["courseWorkId"] == course_work_id
            }

    # --- server ---------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_port}"

    def __enter__(self) -> Self:
        self._server = make_server("127.0.0.1", 0, self._app(), threaded=True)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    # --- the API --------------------------------------------------------------------

    def _now(self) -> str:
        return datetime.now(UTC).isoformat().replace("+00:00", "Z")

    def _create_work(self, course_id: str, body: dict[str, Any], ours: bool) -> str:
        work_id = str(next(self._ids))
        now = self._now()
        self.course_work[work_id] = {
            "courseId": course_id,
            "id": work_id,
            "title": body.get("title", ""),
            "description": body.get("description", ""),
            "state": body.get("state", "PUBLISHED"),
            "creationTime": now,
            "updateTime": now,
            "maxPoints": body.get("maxPoints"),
            "workType": body.get("workType", "ASSIGNMENT"),
            "associatedWithDeveloper": ours,
            "creatorUserId": "teacher-1",
        }
        for user_id in self.courses[course_id]:
            sub_id = "Cg" + str(next(self._ids))
            self.submissions[sub_id] = {
                "courseId": course_id,
                "courseWorkId": work_id,
                "id": sub_id,
                "userId": user_id,
                "creationTime": now,
                "updateTime": now,
                "state": "CREATED",
                "associatedWithDeveloper": ours,
                "courseWorkType": "ASSIGNMENT",
            }
        return work_id

    def _app(self) -> Flask:
        app = Flask("classroom-fake")
        fake = self

        def error(code: int, status: str, message: str) -> Response:
            response = jsonify(error={"code": code, "message": message, "status": status})
            response.status_code = code
            return response

        def page(items: list[dict[str, Any]], key: str) -> Response:
            start = int(request.args.get("pageToken") or 0)
            chunk = items[start : start + fake.page_size]
            body: dict[str, Any] = {key: chunk} if chunk else {}
            if start + fake.page_size < len(items):
                body["nextPageToken"] = str(start + fake.page_size)
            return jsonify(body)

        @app.before_request
        def _fault() -> Response | None:
            with fake._lock:
                fault = fake.faults.pop(0) if fake.faults else None
            if fault is None:
                return None
            statuses = {429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE", 500: "INTERNAL"}
            answer = error(fault.status, statuses.get(fault.status, "UNKNOWN"), "injected")
            if fault.retry_after is not None:
                answer.headers["Retry-After"] = fault.retry_after
            return answer

        @app.post("/v1/courses/<course_id>/courseWork")
        def create_course_work(course_id: str) -> Response:
            if course_id not in fake.courses:
                return error(404, "NOT_FOUND", "Requested entity was not found.")
            body = request.get_json(silent=True) or {}
            if not body.get("title") or body.get("workType") not in ("ASSIGNMENT",):
                return error(400, "INVALID_ARGUMENT", "title and workType are required")
            with fake._lock:
                work_id = fake._create_work(course_id, body, True)
            return jsonify(fake.course_work[work_id])

        @app.get("/v1/courses/<course_id>/courseWork")
        def list_course_work(course_id: str) -> Response:
            if course_id not in fake.courses:
                return error(404, "NOT_FOUND", "Requested entity was not found.")
            items = [w for w in fake.course_work.values() if w["courseId"] == course_id]
            return page(items, "courseWork")

        @app.get("/v1/courses/<course_id>/courseWork/<work_id>/studentSubmissions")
        def list_submissions(course_id: str, work_id: str) -> Response:
            if fake.course_work.get(work_id, {}).get("courseId") != course_id:
                return error(404, "NOT_FOUND", "Requested entity was not found.")
            wanted = request.args.get("userId")
            emails = fake.courses[course_id]
            items = [
                s
                for s in fake.submissions.values()
                if s["courseWorkId"] == work_id
                and wanted in (None, s["userId"], emails.get(s["userId"]))
            ]
            return page(items, "studentSubmissions")

        @app.route(
            "/v1/courses/<course_id>/courseWork/<work_id>/studentSubmissions/<path:tail>",
            methods=["PATCH", "POST"],
        )
        def change_submission(course_id: str, work_id: str, tail: str) -> Response:
            returning = request.method == "POST"
            sub_id = tail.removesuffix(":return") if returning else tail
            if returning and not tail.endswith(":return"):
                return error(404, "NOT_FOUND", "Requested entity was not found.")
            submission = fake.submissions.get(sub_id)
            work = fake.course_work.get(work_id)
            if (
                work is None
                or submission is None
                or work["courseId"] != course_id
                or submission["courseWorkId"] != work_id
            ):
                return error(404, "NOT_FOUND", "Requested entity was not found.")
            if not work["associatedWithDeveloper"]:
                return error(403, "PERMISSION_DENIED", PROJECT_PERMISSION_DENIED)
            if returning:
                with fake._lock:
                    submission["state"] = "RETURNED"
                    submission["updateTime"] = fake._now()
                    fake.history.append(("return", sub_id, {}))
                return jsonify({})
            mask = [m for m in (request.args.get("updateMask") or "").split(",") if m]
            if not mask:
                return error(400, "INVALID_ARGUMENT", "updateMask: a field mask is required")
            if not set(mask) <= GRADE_FIELDS:
                return error(400, "INVALID_ARGUMENT", f"updateMask: {','.join(mask)}")
            body = request.get_json(silent=True) or {}
            changes = {name: body.get(name) for name in mask}
            for name, value in changes.items():
                if value is not None and (not isinstance(value, int | float) or value < 0):
                    return error(400, "INVALID_ARGUMENT", f"{name} must be a non-negative number")
            with fake._lock:
                for name, value in changes.items():
                    if value is None:
                        submission.pop(name, None)
                    else:
                        submission[name] = value
                submission["updateTime"] = fake._now()
                fake.history.append(("patch", sub_id, changes))
            return jsonify(submission)

        return app
