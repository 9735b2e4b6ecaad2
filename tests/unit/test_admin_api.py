"""The admin API: operator credential only, listings with cursors, dead letters, replay,
cancel and queue health, on the intake app built through its factory."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

import pytest
from flask.testing import FlaskClient
from pydantic import SecretStr

from services.intake.app import create_app
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.errors import PROBLEM_BASE
from shared.domain.grade import GradeResult
from shared.domain.ids import job_id_for, task_name_for
from shared.domain.job import GradingRequest, Job, JobError
from shared.domain.status import JobStatus
from tests.fakes import FakePublisher, FakeTaskQueue
from tests.unit.conftest import API_KEY

OPERATOR_KEY = "operator-secret"
HASHED_KEY = "second-operator-secret"
LEASE = timedelta(seconds=30)
FATAL = JobError("grading-permanent", "answer unreadable")


@pytest.fixture
def admin_settings(settings: Settings) -> Settings:
    digest = hashlib.sha256(HASHED_KEY.encode()).hexdigest()
    keys = f"alice={OPERATOR_KEY},bob=sha256:{digest}"
    return settings.model_copy(update={"operator_keys": SecretStr(keys)})


@pytest.fixture
def client(admin_settings: Settings, adapters: Adapters, clock: FrozenClock) -> FlaskClient:
    return create_app(admin_settings, adapters, clock).test_client()


def auth(key: str = OPERATOR_KEY) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def seed(
    adapters: Adapters,
    clock: FrozenClock,
    key: str,
    client: str = "client-a",
    assignment: str = "hw-1",
) -> str:
    job_id = job_id_for(client, key)
    request = GradingRequest(submission_id=key, answer="a", rubric="r", assignment_id=assignment)
    adapters.store.create(Job.new(job_id, client, request, "fp", clock.now()))
    clock.advance(timedelta(seconds=1))
    return job_id


def fail(adapters: Adapters, clock: FrozenClock, job_id: str, error: JobError = FATAL) -> None:
    store = adapters.store
    store.update(job_id, lambda j: j.claim("w1", clock.now(), LEASE))
    clock.advance(timedelta(seconds=2))
    store.update(job_id, lambda j: j.fail("w1", error, clock.now()))
    store.update(job_id, lambda j: j.mark_event_published(clock.now()))
    clock.advance(timedelta(seconds=1))


def succeed(adapters: Adapters, clock: FrozenClock, job_id: str, wait: int, work: int) -> None:
    clock.advance(timedelta(seconds=wait))
    adapters.store.update(job_id, lambda j: j.claim("w1", clock.now(), LEASE))
    clock.advance(timedelta(seconds=work))
    result = GradeResult(5, 10, "ok")
    adapters.store.update(job_id, lambda j: j.succeed("w1", result, clock.now()))


def queue_of(adapters: Adapters) -> FakeTaskQueue:
    assert isinstance(adapters.queue, FakeTaskQueue)
    return adapters.queue


def assert_problem(response: Any, status: int, slug: str) -> dict[str, Any]:
    assert response.status_code == status, response.get_json()
    assert response.mimetype == "application/problem+json"
    body: dict[str, Any] = response.get_json()
    assert body["type"] == PROBLEM_BASE + slug
    return body


ROUTES = [
    ("get", "/admin/v1/jobs"),
    ("get", "/admin/v1/jobs/some-id"),
    ("get", "/admin/v1/dead-letters"),
    ("post", "/admin/v1/jobs/some-id/replay"),
    ("post", "/admin/v1/dead-letters/replay"),
    ("post", "/admin/v1/jobs/some-id/cancel"),
    ("get", "/admin/v1/queue-health"),
]


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_every_admin_route_refuses_a_client_key_and_no_key(
    client: FlaskClient, method: str, path: str
) -> None:
    call = getattr(client, method)
    assert_problem(call(path, headers=auth(API_KEY)), 403, "operator-credential-required")
    assert_problem(call(path, headers=auth("guess")), 403, "operator-credential-required")
    assert_problem(call(path), 401, "unauthenticated")
    assert_problem(call(path, headers={"Authorization": OPERATOR_KEY}), 401, "unauthenticated")


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_every_admin_route_answers_an_operator(
    client: FlaskClient, adapters: Adapters, clock: FrozenClock, method: str, path: str
) -> None:
    failed = seed(adapters, clock, "k")
    fail(adapters, clock, failed)
    waiting = seed(adapters, clock, "w")
    job_id = waiting if path.endswith("/cancel") else failed
    response = getattr(client, method)(path.replace("some-id", job_id), headers=auth())
    assert response.status_code == 200, response.get_json()


def test_without_operator_keys_every_key_is_refused(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    bare = create_app(settings, adapters, clock).test_client()
    response = bare.get("/admin/v1/jobs", headers=auth())
    assert_problem(response, 403, "operator-credential-required")


def test_a_hashed_operator_key_is_accepted_and_names_its_operator(
    client: FlaskClient, adapters: Adapters, clock: FrozenClock
) -> None:
    job_id = seed(adapters, clock, "k")
    fail(adapters, clock, job_id)
    response = client.post(f"/admin/v1/jobs/{job_id}/replay", headers=auth(HASHED_KEY))
    assert response.status_code == 200
    assert response.get_json()["job"]["replays"][0]["by"] == "bob"
    assert_problem(
        client.get("/admin/v1/jobs", headers=auth(hashlib.sha256(HASHED_KEY.encode()).hexdigest())),
        403,
        "operator-credential-required",
    )


def test_the_client_api_refuses_an_operator_key(client: FlaskClient) -> None:
    response = client.get("/v1/grading-jobs/x", headers=auth())
    assert_problem(response, 401, "unauthenticated")


# --- listing -------------------------------------------------------------------------


def test_jobs_are_listed_across_clients_newest_first_with_a_cursor(
    client: FlaskClient, adapters: Adapters, clock: FrozenClock
) -> None:
    made = [seed(adapters, clock, f"k{n}", client=f"client-{n % 2}") for n in range(5)]
    first = client.get("/admin/v1/jobs?limit=2", headers=auth()).get_json()
    assert [j["id"] for j in first["jobs"]] == made[::-1][:2]
    assert {j["client_id"] for j in first["jobs"]} == {"client-0", "client-1"}
    second = client.get(
        f"/admin/v1/jobs?limit=2&cursor={first['next_cursor']}", headers=auth()
    ).get_json()
    assert [j["id"] for j in second["jobs"]] == made[::-1][2:4]
    third = client.get(
        f"/admin/v1/jobs?limit=2&cursor={second['next_cursor']}", headers=auth()
    ).get_json()
    assert [j["id"] for j in third["jobs"]] == [made[0]]
    assert third["next_cursor"] is None


def test_a_listing_row_shows_attempts_last_error_and_timings(
    client: FlaskClient, adapters: Adapters, clock: FrozenClock
) -> None:
    job_id = seed(adapters, clock, "k")
    fail(adapters, clock, job_id)
    row = client.get("/admin/v1/jobs", headers=auth()).get_json()["jobs"][0]
    assert row["id"] == job_id
    assert row["status"] == "FAILED"
    assert row["attempts"] == 1
    assert row["last_error"] == {"type": "grading-permanent", "message": "answer unreadable"}
    assert row["timings"] == {"queue_wait_ms": 1000, "processing_ms": 2000, "total_ms": 3000}
    assert row["client_id"] == "client-a"
    assert row["assignment_id"] == "hw-1"


def test_jobs_are_filtered_by_status_client_assignment_and_created_range(
    client: FlaskClient, adapters: Adapters, clock: FrozenClock
) -> None:
    start = clock.now()
    a = seed(adapters, clock, "a")
    b = seed(adapters, clock, "b", client="client-b")
    c = seed(adapters, clock, "c", assignment="hw-2")
    fail(adapters, clock, c)

    def listed(query: str) -> list[str]:
        response = client.get(f"/admin/v1/jobs?{query}", headers=auth())
        assert response.status_code == 200, response.get_json()
        return [j["id"] for j in response.get_json()["jobs"]]

    assert listed("status=FAILED") == [c]
    assert listed("status=PENDING") == [b, a]
    assert listed("client=client-b") == [b]
    assert listed("assignment=hw-2") == [c]
    after_a = (start + timedelta(seconds=1)).isoformat().replace("+00:00", "Z")
    before_c = (start + timedelta(seconds=2)).isoformat().replace("+00:00", "Z")
    assert listed(f"created_from={after_a}&created_to={before_c}") == [b]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("status=DONE", "status"),
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("limit=x", "limit"),
        ("created_from=yesterday", "created_from"),
        ("cursor=not-a-cursor", "cursor"),
    ],
)
def test_bad_listing_parameters_are_validation_errors(
    client: FlaskClient, query: str, field: str
) -> None:
    body = assert_problem(
        client.get(f"/admin/v1/jobs?{query}", headers=auth()), 400, "validation-error"
    )
    assert body["errors"][0]["field"] == field


def test_job_detail_shows_the_attempt_history(
    client: FlaskClient, adapters: Adapters, clock: FrozenClock
) -> None:
    job_id = seed(adapters, clock, "k")
    attempt_start = clock.now()
    fail(adapters, clock, job_id)
    detail = client.get(f"/admin/v1/jobs/{job_id}", headers=auth()).get_json()
    assert detail["history"] == [
        {
            "attempt": 1,
            "generation": 0,
            "owner": "w1",
            "started_at": attempt_start.isoformat().replace("+00:00", "Z"),
            "ended_at": (attempt_start + timedelta(seconds=2)).isoformat().replace("+00:00", "Z"),
            "outcome": "failed",
            "error": {"type": "grading-permanent", "message": "answer unreadable"},
        }
    ]
    assert detail["replays"] == []
    missing = assert_problem(
        client.get("/admin/v1/jobs/nope", headers=auth()), 404, "job-not-found"
    )
    assert missing["detail"] == "no grading job nope"


def test_dead_letters_are_the_failed_jobs_with_their_history(
    client: FlaskClient, adapters: Adapters, clock: FrozenClock
) -> None:
    seed(adapters, clock, "waiting")
    failed = seed(adapters, clock, "failed", client="client-b")
    fail(adapters, clock, failed)
    other = seed(adapters, clock, "other-failed")
    fail(adapters, clock, other)
    body = client.get("/admin/v1/dead-letters", headers=auth()).get_json()
    assert [j["id"] for j in body["jobs"]] == [other, failed]
    assert [len(j["history"]) for j in body["jobs"]] == [1, 1]
    only_b = client.get("/admin/v1/dead-letters?client=client-b", headers=auth()).get_json()
    assert [j["id"] for j in only_b["jobs"]] == [failed]


# --- replay and cancel ---------------------------------------------------------------


def test_replay_moves_a_failed_job_back_to_pending_under_a_new_task(
    client: FlaskClient, adapters: Adapters, clock: FrozenClock
) -> None:
    job_id = seed(adapters, clock, "k")
    fail(adapters, clock, job_id)
    replayed_at = clock.now()
    response = client.post(f"/admin/v1/jobs/{job_id}/replay", headers=auth())
    assert response.status_code == 200
    body = response.get_json()
    assert body["replayed"] is True
    assert body["job"]["status"] == "PENDING"
    assert body["job"]["generation"] == 1
    assert body["job"]["attempts"] == 0
    assert body["job"]["last_error"] is None
    assert len(body["job"]["history"]) == 1
    assert body["job"]["replays"] == [
        {
            "at": replayed_at.isoformat().replace("+00:00", "Z"),
            "by": "alice",
            "generation": 1,
            "error": {"type": "grading-permanent", "message": "answer unreadable"},
        }
    ]
    assert [t.name for t in queue_of(adapters).tasks] == [task_name_for(job_id, 1)]
    assert [t.job_id for t in queue_of(adapters).tasks] == [job_id]


def test_replaying_the_same_generation_twice_makes_one_new_generation(
    client: FlaskClient, adapters: Adapters, clock: FrozenClock
) -> None:
    job_id = seed(adapters, clock, "k")
    fail(adapters, clock, job_id)
    first = client.post(f"/admin/v1/jobs/{job_id}/replay", json={"generation": 0}, headers=auth())
    second = client.post(f"/admin/v1/jobs/{job_id}/replay", json={"generation": 0}, headers=auth())
    assert first.get_json()["replayed"] is True
    assert second.status_code == 200
    assert second.get_json()["replayed"] is False
    assert second.get_json()["job"]["generation"] == 1
    job = adapters.store.get(job_id)
    assert job is not None and job.generation == 1 and len(job.replays) == 1
    assert [t.name for t in queue_of(adapters).tasks] == [task_name_for(job_id, 1)]


def test_a_retried_replay_whose_enqueue_failed_creates_the_task(
    client: FlaskClient, adapters: Adapters, clock: FrozenClock
) -> None:
    job_id = seed(adapters, clock, "k")
    fail(adapters, clock, job_id)
    queue_of(adapters).available = False
    failed = client.post(f"/admin/v1/jobs/{job_id}/replay", json={"generation": 0}, headers=auth())
    assert_problem(failed, 503, "dependency-unavailable")
    queue_of(adapters).available = True
    retried = client.post(f"/admin/v1/jobs/{job_id}/replay", json={"generation": 0}, headers=auth())
    assert retried.get_json()["replayed"] is False
    assert [t.name for t in queue_of(adapters).tasks] == [task_name_for(job_id, 1)]


def test_replay_refuses_a_job_that_has_not_failed_and_an_unknown_generation(
    client: FlaskClient, adapters: Adapters, clock: FrozenClock
) -> None:
    job_id = seed(adapters, clock, "k")
    body = assert_problem(
        client.post(f"/admin/v1/jobs/{job_id}/replay", headers=auth()), 409, "illegal-transition"
    )
    assert body["detail"] == f"job {job_id} cannot go from PENDING to PENDING"
    fail(adapters, clock, job_id)
    mismatch = client.post(
        f"/admin/v1/jobs/{job_id}/replay", json={"generation": 3}, headers=auth()
    )
    problem = assert_problem(mismatch, 409, "generation-mismatch")
    assert problem["generation"] == 0
    assert problem["detail"] == f"job {job_id} is at generation 0, not 3"
    bad = client.post(f"/admin/v1/jobs/{job_id}/replay", json={"generation": "0"}, headers=auth())
    assert_problem(bad, 400, "validation-error")
    assert queue_of(adapters).tasks == []
    assert_problem(client.post("/admin/v1/jobs/nope/replay", headers=auth()), 404, "job-not-found")


def test_a_batch_replay_replays_the_filtered_dead_letters_once(
    client: FlaskClient, adapters: Adapters, clock: FrozenClock
) -> None:
    mine = [seed(adapters, clock, f"a{n}") for n in range(3)]
    theirs = seed(adapters, clock, "b", client="client-b")
    for job_id in [*mine, theirs]:
        fail(adapters, clock, job_id)
    body = client.post(
        "/admin/v1/dead-letters/replay", json={"client": "client-a", "limit": 2}, headers=auth()
    ).get_json()
    assert body == {"replayed": [mine[2], mine[1]], "skipped": {}}
    replayed = adapters.store.get(mine[2])
    assert replayed is not None and [r.by for r in replayed.replays] == ["alice"]
    again = client.post(
        "/admin/v1/dead-letters/replay", json={"client": "client-a"}, headers=auth()
    ).get_json()
    assert again == {"replayed": [mine[0]], "skipped": {}}
    theirs_job = adapters.store.get(theirs)
    assert theirs_job is not None and theirs_job.status is JobStatus.FAILED
    assert len(queue_of(adapters).tasks) == 3


def test_a_batch_replay_skips_a_failure_still_being_announced(
    client: FlaskClient, adapters: Adapters, clock: FrozenClock
) -> None:
    job_id = seed(adapters, clock, "k")
    adapters.store.update(job_id, lambda j: j.claim("w1", clock.now(), LEASE))
    adapters.store.update(job_id, lambda j: j.fail("w1", FATAL, clock.now()))
    body = client.post("/admin/v1/dead-letters/replay", headers=auth()).get_json()
    assert body == {"replayed": [], "skipped": {job_id: "job-locked"}}


def test_cancel_finishes_a_waiting_job_and_announces_it(
    client: FlaskClient, adapters: Adapters, clock: FrozenClock
) -> None:
    job_id = seed(adapters, clock, "k")
    response = client.post(f"/admin/v1/jobs/{job_id}/cancel", headers=auth())
    assert response.status_code == 200
    assert response.get_json()["status"] == "CANCELLED"
    assert isinstance(adapters.publisher, FakePublisher)
    assert [(e.job_id, e.outcome.value) for e in adapters.publisher.completions()] == [
        (job_id, "cancelled")
    ]
    again = client.post(f"/admin/v1/jobs/{job_id}/cancel", headers=auth())
    assert_problem(again, 409, "job-already-final")


# --- queue health --------------------------------------------------------------------


def test_queue_health_reports_counts_ages_percentiles_failures_and_throughput(
    client: FlaskClient, adapters: Adapters, clock: FrozenClock
) -> None:
    waiting = seed(adapters, clock, "waiting")
    done = [seed(adapters, clock, f"d{n}") for n in range(4)]
    for n, job_id in enumerate(done):
        succeed(adapters, clock, job_id, wait=n + 1, work=10 * (n + 1))
    broken = seed(adapters, clock, "broken")
    fail(adapters, clock, broken)
    clock.advance(timedelta(seconds=10))
    pending_since = adapters.store.get(waiting)
    assert pending_since is not None
    health = client.get("/admin/v1/queue-health?window_minutes=60", headers=auth()).get_json()
    assert health["counts"] == {
        "PENDING": 1,
        "RUNNING": 0,
        "RETRYING": 0,
        "SUCCEEDED": 4,
        "FAILED": 1,
        "CANCELLED": 0,
    }
    age = (clock.now() - pending_since.updated_at).total_seconds()
    assert health["oldest_waiting_age_s"] == {"PENDING": age, "RETRYING": None}
    assert health["completed"] == 5
    assert health["sample_truncated"] is False
    # processing of the successes: 10, 20, 30, 40 s; of the failure: 2 s
    assert health["timings_ms"]["processing_ms"] == {"p50": 20000, "p95": 40000, "p99": 40000}
    assert health["failure_rate"] == 0.2
    assert health["failures_by_type"] == {"grading-permanent": {"count": 1, "rate": 0.2}}
    assert health["throughput_per_minute"] == 5 / 60
    assert health["window_s"] == 3600
    assert health["at"] == clock.now().isoformat()
    since = clock.now() - timedelta(hours=1)
    assert [b["start"] for b in health["series"][:2]] == [
        since.isoformat(),
        (since + timedelta(minutes=5)).isoformat(),
    ]
    assert health["series"][-1]["processing_ms"] == {"p50": 20000, "p95": 40000, "p99": 40000}
    assert health["series"][-1]["queue_wait_ms"] == health["timings_ms"]["queue_wait_ms"]
    assert health["series"][0]["queue_wait_ms"] == {"p50": None, "p95": None, "p99": None}
    assert len(health["series"]) == 12
    assert sum(b["completed"] for b in health["series"]) == 5
    assert health["series"][-1]["completed"] == 5
    assert health["series"][-1]["failed"] == 1


def test_queue_health_window_is_bounded(client: FlaskClient) -> None:
    response = client.get("/admin/v1/queue-health?window_minutes=100000", headers=auth())
    assert_problem(response, 400, "validation-error")


def test_the_dashboard_page_and_its_script_are_served_without_data(client: FlaskClient) -> None:
    with client.get("/admin/") as page:
        assert page.status_code == 200
        assert page.mimetype == "text/html"
        assert b'src="../page-kit/static/kit.js"' in page.data
        assert b'src="static/dashboard.js"' in page.data
    with client.get("/admin/static/dashboard.js") as script:
        assert script.status_code == 200
        assert b"queue-health" in script.data
    with client.get("/page-kit/static/kit.js") as kit:
        assert kit.status_code == 200
        assert b"Bearer" in kit.data
    assert client.get("/admin").status_code == 308  # to /admin/
