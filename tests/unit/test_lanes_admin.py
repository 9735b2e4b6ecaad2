"""The admin API's lanes: figures per lane, pause, resume and purge (operator only)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from flask.testing import FlaskClient

from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.domain.grade import GradeResult
from shared.domain.ids import job_id_for
from shared.domain.job import GradingRequest, Job
from shared.domain.status import JobStatus
from shared.service_layer.lanes import LANE_PURGED
from tests.fakes import FakePublisher, FakeTaskQueue
from tests.unit.conftest import API_KEY
from tests.unit.test_admin_api import admin_settings, assert_problem, auth, client  # noqa: F401

LANE_ROUTES = [
    ("get", "/admin/v1/lanes"),
    ("post", "/admin/v1/lanes/bulk/pause"),
    ("post", "/admin/v1/lanes/bulk/resume"),
    ("post", "/admin/v1/lanes/bulk/purge"),
]


def seed(adapters: Adapters, clock: FrozenClock, key: str, lane: str | None) -> str:
    job_id = job_id_for("client-a", key)
    request = GradingRequest(submission_id=key, answer="a", rubric="r")
    adapters.store.create(Job.new(job_id, "client-a", request, "fp", clock.now(), lane=lane))
    clock.advance(timedelta(seconds=1))
    return job_id


def fake(adapters: Adapters) -> FakeTaskQueue:
    assert isinstance(adapters.queue, FakeTaskQueue)
    return adapters.queue


@pytest.mark.parametrize(("method", "path"), LANE_ROUTES)
def test_lane_routes_need_an_operator(client: FlaskClient, method: str, path: str) -> None:  # noqa: F811
    call = getattr(client, method)
    assert_problem(call(path, headers=auth(API_KEY)), 403, "operator-credential-required")
    assert_problem(call(path), 401, "unauthenticated")
    assert call(path, headers=auth()).status_code == 200


def test_pause_and_resume_a_lane(client: FlaskClient, adapters: Adapters) -> None:  # noqa: F811
    response = client.post("/admin/v1/lanes/bulk/pause", headers=auth())
    assert response.get_json() == {"lane": "bulk", "paused": True}
    assert fake(adapters).paused == {"bulk"}
    listed = {
        row["lane"]: row
        for row in client.get("/admin/v1/lanes", headers=auth()).get_json()["lanes"]
    }
    assert listed["bulk"]["paused"] is True and listed["exam"]["paused"] is False
    response = client.post("/admin/v1/lanes/bulk/resume", headers=auth())
    assert response.get_json() == {"lane": "bulk", "paused": False}
    assert fake(adapters).paused == set()


def test_an_unknown_lane_is_a_404_problem(client: FlaskClient) -> None:  # noqa: F811
    assert_problem(client.post("/admin/v1/lanes/nope/pause", headers=auth()), 404, "lane-not-found")


def test_purge_cancels_the_lanes_jobs_with_a_reason_and_their_events(
    client: FlaskClient,  # noqa: F811
    adapters: Adapters,
    clock: FrozenClock,
) -> None:
    bulk = [seed(adapters, clock, f"b{i}", "bulk") for i in range(3)]
    exam = seed(adapters, clock, "e", "exam")
    legacy = seed(adapters, clock, "old", None)  # a job made before lanes: the default lane
    running = bulk[0]
    adapters.store.update(running, lambda j: j.claim("w", clock.now(), timedelta(seconds=30)))
    done = seed(adapters, clock, "done", "bulk")
    adapters.store.update(done, lambda j: j.claim("w", clock.now(), timedelta(seconds=30)))
    adapters.store.update(done, lambda j: j.succeed("w", GradeResult(1, 1, "ok"), clock.now()))
    clock.advance(timedelta(seconds=5))

    response = client.post(
        "/admin/v1/lanes/bulk/purge", json={"reason": "bad rubric"}, headers=auth()
    )
    assert response.status_code == 200
    report = response.get_json()
    assert sorted(report["cancelled"]) == sorted(bulk)
    assert fake(adapters).purged == ["bulk"]
    for job_id in bulk:
        job = adapters.store.get(job_id)
        assert job is not None and job.status is JobStatus.CANCELLED
        assert job.error is not None and job.error.type == LANE_PURGED
        assert "purged by alice: bad rubric" in job.error.message
    publisher = adapters.publisher
    assert isinstance(publisher, FakePublisher)
    assert sorted(e.job_id for e in publisher.completions()) == sorted(bulk)
    assert all(
        e.lane == "bulk" and e.error and e.error["type"] == LANE_PURGED
        for e in publisher.completions()
    )
    for untouched in (exam, legacy):
        job = adapters.store.get(untouched)
        assert job is not None and job.status is JobStatus.PENDING
    done_job = adapters.store.get(done)
    assert done_job is not None and done_job.status is JobStatus.SUCCEEDED


def test_purging_the_default_lane_takes_the_jobs_made_before_lanes(
    client: FlaskClient,  # noqa: F811
    adapters: Adapters,
    clock: FrozenClock,
) -> None:
    legacy = seed(adapters, clock, "old", None)
    clock.advance(timedelta(seconds=5))
    report = client.post("/admin/v1/lanes/grading/purge", headers=auth()).get_json()
    assert report["cancelled"] == [legacy]


def test_lane_figures_show_backlog_oldest_age_objective_and_queue_wait(
    client: FlaskClient,  # noqa: F811
    adapters: Adapters,
    clock: FrozenClock,
) -> None:
    for i in range(3):
        seed(adapters, clock, f"b{i}", "bulk")
    exam = seed(adapters, clock, "e", "exam")
    clock.advance(timedelta(seconds=2))
    adapters.store.update(exam, lambda j: j.claim("w", clock.now(), timedelta(seconds=30)))
    adapters.store.update(exam, lambda j: j.succeed("w", GradeResult(1, 1, "ok"), clock.now()))
    clock.advance(timedelta(minutes=10))
    rows = client.get("/admin/v1/lanes", headers=auth()).get_json()["lanes"]
    assert [r["lane"] for r in rows] == ["exam", "grading", "bulk"]  # by priority
    figures = {r["lane"]: r for r in rows}
    assert figures["bulk"]["backlog"] == 3
    assert figures["bulk"]["oldest_age_s"] == pytest.approx(600 + 2 + 4)
    assert figures["bulk"]["objective_breached"] is False
    assert figures["exam"]["backlog"] == 0 and figures["exam"]["oldest_age_s"] is None
    # Created, then 1 s (seed) and 2 s later claimed.
    assert figures["exam"]["queue_wait_ms"] == {"p50": 3000, "p99": 3000, "completed": 1}
    assert figures["exam"]["oldest_age_objective_s"] == 60.0
    clock.advance(timedelta(days=1))
    rows = client.get("/admin/v1/lanes", headers=auth()).get_json()["lanes"]
    assert {r["lane"]: r["objective_breached"] for r in rows}["bulk"] is True
