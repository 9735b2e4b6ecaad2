"""The authorization matrix, generated from the one policy table.

Every route of the intake x every role (operator, the school's server key, a teacher, a
reviewer, a student, anonymous) x every object's relation to the caller (own, same
school, other school, own student: a student of the caller's school, other student: one
of another school) is called through the Flask test client, on the embedded store and on
the Google adapters against the Firestore emulator, and must answer what
`shared.domain.authorization.POLICY` says: the route's success status where the role
may, 403 where it may read the object but not act on it, 404 where it may not even read
it (another school's object always), 401 without a school credential.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from functools import cache
from itertools import count
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from services.intake.app import create_app
from services.intake.auth.firebase import CachingRequest, FirebaseAuthenticator
from shared.adapters.embedded.api_key_store import SqliteApiKeyStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.bootstrap import Adapters
from shared.bootstrap.embedded import EmbeddedFamily
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.api_keys import ApiKey
from shared.domain.assignment import Assignment
from shared.domain.authorization import POLICY, SERVER, Action, Relation, Role
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest, Job
from shared.domain.review import HoldReason, Release, ReviewState, ReviewStatus
from tests.fakes import FakePublisher, FakeTaskQueue
from tests.unit.conftest import KEY_TIME
from tests.unit.test_intake_firebase_auth import PROJECT, FakeCertEndpoint, token

SCHOOL, OTHER = "school-a", "school-b"
SERVER_KEY, _SERVER_RECORD = ApiKey.issue(SCHOOL, KEY_TIME, key_id="schoola", secret="a" * 43)
OTHER_KEY, _OTHER_RECORD = ApiKey.issue(OTHER, KEY_TIME, key_id="schoolb", secret="b" * 43)
REVIEWER_KEY = "reviewer-secret-of-school-a"
OPERATOR_KEY = "operator-secret"


# --- the callers ---------------------------------------------------------------------


@dataclass(frozen=True)
class Caller:
    role: Role
    author: str | None  # within SCHOOL; None: no author (operator, anonymous)

    def headers(self) -> dict[str, str]:
        credential = _credentials().get(self.role)
        return {"Authorization": f"Bearer {credential}"} if credential else {}


@cache
def _credentials() -> dict[Role, str]:
    """Each role's credential (ID tokens signed once: they are valid for the hour)."""
    return {
        Role.OPERATOR: OPERATOR_KEY,
        Role.SERVER: SERVER_KEY,
        Role.TEACHER: token(gradeq_client=SCHOOL, sub="t-1", gradeq_role="teacher"),
        Role.REVIEWER: REVIEWER_KEY,
        Role.STUDENT: token(gradeq_client=SCHOOL, sub="s-1"),
    }


CALLERS = {
    Role.OPERATOR: Caller(Role.OPERATOR, None),
    Role.SERVER: Caller(Role.SERVER, SERVER),
    Role.TEACHER: Caller(Role.TEACHER, "t-1"),
    Role.REVIEWER: Caller(Role.REVIEWER, "key:ms"),
    Role.STUDENT: Caller(Role.STUDENT, "s-1"),
    Role.ANONYMOUS: Caller(Role.ANONYMOUS, None),
}

# --- the objects: whose they are, for a caller -----------------------------------------

#: The matrix's columns and what each is to the caller in the policy's terms.
COLUMNS: dict[str, Relation] = {
    "own": Relation.OWN,
    "same school": Relation.SAME_SCHOOL,
    "other school": Relation.OTHER_SCHOOL,
    "own student": Relation.SAME_SCHOOL,
    "other student": Relation.OTHER_SCHOOL,
}


def owner_for(caller: Caller, column: str) -> tuple[str, str] | None:
    """(school, author) of the column's object for this caller; None: no such object."""
    if column == "own":
        return (SCHOOL, caller.author) if caller.author is not None else None
    if column == "same school":
        return (SCHOOL, "t-2" if caller.author == SERVER else SERVER)
    if column == "other school":
        return (OTHER, SERVER)
    if column == "own student":
        return (SCHOOL, "s-9")  # another student than the caller, of the caller's school
    return (OTHER, "s-8")


# --- the routes ----------------------------------------------------------------------


@dataclass(frozen=True)
class Route:
    method: str
    path: str  # {job} or {assignment} names the object; neither: a school-level route
    action: Action
    ok: int
    body: Any = None
    read: Action = Action.JOB_READ
    missing: str = "job-not-found"
    forbidden: str = "forbidden"

    @property
    def object(self) -> str | None:
        for kind in ("job", "assignment"):
            if "{" + kind + "}" in self.path:
                return kind
        return None

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


def _assignment_route(method: str, tail: str, action: Action, ok: int, body: Any = None) -> Route:
    return Route(
        method,
        "/v1/assignments/{assignment}" + tail,
        action,
        ok,
        body,
        read=Action.ASSIGNMENT_READ,
        missing="assignment-not-found",
    )


ROUTES = [
    Route("GET", "/v1/grading-jobs/{job}", Action.JOB_READ, 200),
    # The seeded jobs are final: a cancel the policy allows is refused by the job's state.
    Route("POST", "/v1/grading-jobs/{job}/cancel", Action.JOB_CANCEL, 409),
    Route("DELETE", "/v1/grading-jobs/{job}", Action.JOB_ERASE, 200),
    Route("GET", "/v1/reviews/{job}", Action.REVIEW_READ, 200),
    # The seeded jobs have no files: a read the policy allows finds none (404).
    Route("GET", "/v1/reviews/{job}/files/0", Action.REVIEW_READ, 404),
    Route(
        "POST",
        "/v1/reviews/{job}",
        Action.REVIEW_DECIDE,
        200,
        {"decision": "accept", "reason": "fair"},
    ),
    # The seeded jobs are in no assignment: a request the policy allows is refused by the
    # assignment's deadline (none), an answer by there being no request (409 each).
    Route(
        "POST",
        "/v1/grading-jobs/{job}/regrade-request",
        Action.REGRADE_REQUEST,
        409,
        {"reason": "I named it"},
    ),
    Route(
        "POST",
        "/v1/reviews/{job}/request",
        Action.REGRADE_ANSWER,
        409,
        {"answer": "keep", "reason": "fair"},
    ),
    _assignment_route("GET", "", Action.ASSIGNMENT_READ, 200),
    _assignment_route("PATCH", "", Action.ASSIGNMENT_EDIT, 200, {"rubric": "a new rubric"}),
    _assignment_route(
        "POST",
        "/submissions:batch",
        Action.ASSIGNMENT_BATCH,
        200,
        {"answers": [{"submission_id": "m-1", "answer": "an answer"}]},
    ),
    _assignment_route("GET", "/grades", Action.ASSIGNMENT_GRADES, 200),
    # Nothing graded yet: a regrade the policy allows has nothing to regrade (400).
    _assignment_route("POST", "/regrade", Action.ASSIGNMENT_REGRADE, 400, {}),
    _assignment_route("GET", "/regrade", Action.ASSIGNMENT_GRADES, 200),
    _assignment_route("POST", "/grades:post", Action.ASSIGNMENT_POST, 200, {}),
    # Every member of a school lists jobs: what each list shows is checked below.
    Route("GET", "/v1/reviews", Action.REVIEW_LIST, 200),
    Route("GET", "/v1/reviews:agreement", Action.REVIEW_LIST, 200),
    Route(
        "POST",
        "/v1/grading-jobs",
        Action.JOB_CONFIGURE,
        202,
        {"submission_id": "x", "answer": "an answer", "rubric": "light", "max_score": 10},
    ),
    Route(
        "POST",
        "/v1/assignments",
        Action.ASSIGNMENT_CREATE,
        201,
        {"title": "Light", "rubric": "mentions light"},
    ),
    Route("GET", "/v1/assignments", Action.ASSIGNMENT_LIST, 200),
    Route("DELETE", "/v1/students/nobody", Action.STUDENT_ERASE, 200),
    Route(
        "POST",
        "/v1/uploads",
        Action.UPLOAD_CREATE,
        201,
        {"content_type": "application/pdf", "size": 10},
    ),
    Route(
        "GET",
        "/admin/v1/jobs/{job}",
        Action.OPERATE,
        200,
        forbidden="operator-credential-required",
    ),
    Route(
        "GET",
        "/admin/v1/assignments/{assignment}",
        Action.OPERATE,
        200,
        read=Action.OPERATE,
        missing="assignment-not-found",
        forbidden="operator-credential-required",
    ),
]


def expected(route: Route, role: Role, relation: Relation) -> tuple[int, str | None]:
    """What the policy table says the route answers (status, problem type or None)."""
    if role is Role.ANONYMOUS:
        return 401, "unauthenticated"
    if route.action is Action.OPERATE:
        allowed = Relation.OTHER_SCHOOL in POLICY[role].get(Action.OPERATE, frozenset())
        return (route.ok, None) if allowed else (403, route.forbidden)
    if role is Role.OPERATOR:
        return 401, "unauthenticated"  # an operator key is no school's credential
    allowed = relation in POLICY[role].get(route.action, frozenset())
    forbidden = route.forbidden
    if route.action is Action.JOB_CONFIGURE and relation in POLICY[role].get(
        Action.JOB_PRACTICE, frozenset()
    ):
        forbidden = "assignment-required"  # may practise, where the school takes practice
    if route.object is not None and relation not in POLICY[role].get(route.read, frozenset()):
        return 404, route.missing
    return (route.ok, None) if allowed else (403, forbidden)


# --- the world: both stores ------------------------------------------------------------


@dataclass
class World:
    client: FlaskClient
    adapters: Adapters
    clock: FrozenClock
    ids: Iterator[int] = field(default_factory=count)

    def job(self, school: str, author: str) -> str:
        now = self.clock.now()
        job_id = f"job-{next(self.ids)}"
        request = GradingRequest("s1", "an answer", "light", 10, student_id=author)
        job = Job.new(job_id, school, request, "fp", now, author=author)
        job = job.claim("w", now, timedelta(minutes=1)).succeed("w", GradeResult(4, 10, "ok"), now)
        held = ReviewState(ReviewStatus.HELD, (HoldReason.SAMPLED,), Release.IMMEDIATELY, now, 0)
        self.adapters.store.create(job.hold(held))
        return job_id

    def assignment(self, school: str, author: str) -> str:
        assert self.adapters.assignments is not None
        now = self.clock.now()
        assignment_id = f"a-{next(self.ids)}"
        new = Assignment.new(
            assignment_id, school, "t", "light", 10.0, "grading-v1", now, author=author
        )
        self.adapters.assignments.create(new)
        return assignment_id


def _settings(tmp_path: Path) -> Settings:
    settings = Settings(
        data_dir=tmp_path,
        reviewer_keys=f"{SCHOOL}/ms={REVIEWER_KEY}",  # type: ignore[arg-type]
        operator_keys=f"olga={OPERATOR_KEY}",  # type: ignore[arg-type]
        auth_failure_burst=100_000,  # the matrix's 401s are no attack
        submit_burst=100_000,
        upload_burst=100_000,
    )
    keys = SqliteApiKeyStore(SqliteDatabase(settings.database_path))
    keys.add(_SERVER_RECORD)
    keys.add(_OTHER_RECORD)
    return settings


@pytest.fixture(params=["embedded", "google"])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> World:
    settings = _settings(tmp_path)
    clock = FrozenClock()
    local = EmbeddedFamily(settings)
    if request.param == "embedded":
        family: Any = local
    else:
        from tests.contract.emulator_family import EmulatorFamily

        family = EmulatorFamily(settings, request.getfixturevalue("firestore_clean"), local)
    adapters = Adapters(
        store=family.job_store(),
        queue=FakeTaskQueue(),
        publisher=FakePublisher(),
        uow=family.unit_of_work(),
        assignments=family.assignment_store(),
        batch=family.job_batch(),
    )
    firebase = FirebaseAuthenticator(
        PROJECT, "gradeq_client", {}, CachingRequest(FakeCertEndpoint())
    )
    app = create_app(
        settings,
        adapters,
        clock,
        api_keys=SqliteApiKeyStore(SqliteDatabase(settings.database_path)),
        firebase=firebase,
        family=family,
    )
    return World(app.test_client(), adapters, clock)


def _call(world: World, route: Route, caller: Caller, column: str) -> tuple[str, Any] | None:
    """Call the route on the column's object; None when the caller has no such object."""
    path = route.path
    if route.object is not None:
        owner = owner_for(caller, column)
        if owner is None:
            return None
        make = world.job if route.object == "job" else world.assignment
        path = path.replace("{" + route.object + "}", make(*owner))
    headers = caller.headers()
    if route.method in ("POST", "PATCH"):
        headers["Idempotency-Key"] = f"k-{next(world.ids)}"
    response = world.client.open(path, method=route.method, json=route.body, headers=headers)
    return path, response


@pytest.mark.parametrize("route", ROUTES, ids=str)
def test_every_role_and_relation_gets_what_the_policy_says(world: World, route: Route) -> None:
    wrong = []
    columns = list(COLUMNS) if route.object is not None else ["same school"]
    for role, caller in CALLERS.items():
        for column in columns:
            called = _call(world, route, caller, column)
            if called is None:
                continue
            path, response = called
            status, problem = expected(route, role, COLUMNS[column])
            body = response.get_json(silent=True) or {}
            got_type = str(body.get("type", "")).rsplit("/", 1)[-1] or None
            if response.status_code != status or (problem is not None and got_type != problem):
                wrong.append(
                    f"{role.value} on {column}: {route.method} {path} answered "
                    f"{response.status_code} {got_type}, the policy says {status} {problem}"
                )
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("listing", ["/v1/grading-jobs", "/v1/reviews"])
def test_lists_show_exactly_what_the_policy_lets_each_role_read(world: World, listing: str) -> None:
    """Every column's job is in the store at once; each role's list holds the ones the
    policy lets it read (the review queue: review), and no other."""
    action = Action.JOB_READ if listing == "/v1/grading-jobs" else Action.REVIEW_READ
    wrong = []
    for role in (Role.SERVER, Role.TEACHER, Role.REVIEWER, Role.STUDENT):
        caller = CALLERS[role]
        made: dict[str, str] = {}
        for column in COLUMNS:
            owner = owner_for(caller, column)
            assert owner is not None
            made[world.job(*owner)] = column
        response = world.client.get(listing + "?limit=100", headers=caller.headers())
        if Relation.SAME_SCHOOL not in POLICY[role].get(Action.REVIEW_LIST, frozenset()) and (
            listing == "/v1/reviews"
        ):
            assert response.status_code == 403, (role, response.get_json())
            continue
        body = response.get_json()
        shown = {
            j.get("id") or j.get("job_id") for j in body["jobs" if "jobs" in body else "reviews"]
        }
        want = {
            job_id
            for job_id, column in made.items()
            if COLUMNS[column] in POLICY[role].get(action, frozenset())
            and COLUMNS[column] in POLICY[role].get(Action.JOB_READ, frozenset())
        }
        if shown & set(made) != want:
            wrong.append(f"{role.value}: shows {sorted(made[j] for j in shown & set(made))}")
    assert not wrong, "\n".join(wrong)
