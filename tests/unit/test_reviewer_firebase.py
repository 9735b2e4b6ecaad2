"""Signed-in reviewers: a Firebase user whose role claim holds reviewer or teacher reviews the
held grades of the client the token names, and nobody else's; other users are refused."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from flask.testing import FlaskClient

from services.intake.app import create_app
from services.intake.auth.firebase import CachingRequest, FirebaseAuthenticator
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest, Job
from shared.domain.review import HoldReason, Release, ReviewState, ReviewStatus
from tests.unit.test_intake_firebase_auth import PROJECT, FakeCertEndpoint, bearer, token


@pytest.fixture
def client(settings: Settings, adapters: Adapters, clock: FrozenClock) -> FlaskClient:
    firebase = FirebaseAuthenticator(
        PROJECT, "gradeq_client", {}, CachingRequest(FakeCertEndpoint())
    )
    return create_app(settings, adapters, clock, firebase=firebase).test_client()


def held_job(adapters: Adapters, clock: FrozenClock, client_id: str = "client-a") -> str:
    now = clock.now()
    request = GradingRequest("s1", "an answer", "light", 10)
    job = Job.new(f"job-{client_id}", client_id, request, "fp", now).claim("w", now, timedelta(1))
    state = ReviewState(ReviewStatus.HELD, (HoldReason.SAMPLED,), Release.IMMEDIATELY, now, 0)
    adapters.store.create(job.succeed("w", GradeResult(4, 10, "ok"), now).hold(state))
    return job.id


@pytest.mark.parametrize("roles", ["reviewer", "teacher", "admin", ["student", "reviewer"]])
def test_a_reviewer_role_reviews_its_own_clients_grades(
    client: FlaskClient, adapters: Adapters, clock: FrozenClock, roles: Any
) -> None:
    mine, theirs = held_job(adapters, clock), held_job(adapters, clock, "client-b")
    user = token(gradeq_client="client-a", sub="ms-smith", gradeq_role=roles)
    listed = client.get("/v1/reviews", headers=bearer(user)).get_json()
    assert [r["job_id"] for r in listed["reviews"]] == [mine]
    assert client.get(f"/v1/reviews/{theirs}", headers=bearer(user)).status_code == 404
    body = {"decision": "override", "score": 6, "reason": "clearer than it looks"}
    done = client.post(f"/v1/reviews/{mine}", json=body, headers=bearer(user))
    assert done.status_code == 200, done.get_json()
    assert done.get_json()["reviews"][0]["by"] == "user:ms-smith"


@pytest.mark.parametrize("roles", [None, "student"])
def test_a_user_without_a_staff_or_reviewer_role_is_refused(
    client: FlaskClient, adapters: Adapters, clock: FrozenClock, roles: Any
) -> None:
    job_id = held_job(adapters, clock)
    user = token(gradeq_client="client-a", sub="s-1", gradeq_role=roles)
    listed = client.get("/v1/reviews", headers=bearer(user))
    assert listed.status_code == 403
    assert listed.get_json()["type"].endswith("/forbidden")
    # The school's job is not the student's: as unknown to them as a missing one.
    one = client.get(f"/v1/reviews/{job_id}", headers=bearer(user))
    assert one.status_code == 404
    assert one.get_json()["type"].endswith("job-not-found")
