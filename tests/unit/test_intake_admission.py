"""Backpressure at the intake: per-client ceiling (429), backlog ceiling (503), rate limit."""

from __future__ import annotations

from datetime import timedelta

from flask.testing import FlaskClient

from services.intake.app import create_app
from services.intake.auth.firebase import CachingRequest, FirebaseAuthenticator
from services.intake.limits.rate_limit import SubmissionRateLimiter
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from tests.unit.conftest import API_KEY, OTHER_KEY
from tests.unit.test_intake_api import assert_problem, post, queue_of
from tests.unit.test_intake_firebase_auth import PROJECT, FakeCertEndpoint, token


def client_with(
    settings: Settings, adapters: Adapters, clock: FrozenClock, **limits: object
) -> FlaskClient:
    tuned = settings.model_copy(update=limits)
    return create_app(tuned, adapters, clock).test_client()


def test_past_the_client_ceiling_is_429_naming_the_limit(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    client = client_with(
        settings, adapters, clock, max_active_jobs_per_client=2, admission_retry_after_s=9
    )
    assert post(client, key="k-1").status_code == 202
    assert post(client, key="k-2").status_code == 202
    refused = post(client, key="k-3")
    problem = assert_problem(refused, 429, "too-many-active-jobs")
    assert problem["limit"] == 2
    assert refused.headers["Retry-After"] == "9"
    assert len(queue_of(adapters).tasks) == 2
    # A retry of an accepted request is still answered; another client is not limited.
    assert post(client, key="k-2").status_code == 202
    assert post(client, key="k-1", api_key=OTHER_KEY).status_code == 202
    # Cancelling one makes room.
    location = post(client, key="k-1").headers["Location"]
    client.post(location + "/cancel", headers={"Authorization": f"Bearer {API_KEY}"})
    assert post(client, key="k-3").status_code == 202


def test_past_the_backlog_ceiling_is_503_with_retry_after(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    client = client_with(settings, adapters, clock, max_backlog=2, admission_retry_after_s=5)
    assert post(client, key="k-1").status_code == 202
    assert post(client, key="k-1", api_key=OTHER_KEY).status_code == 202
    refused = post(client, key="k-2")
    assert_problem(refused, 503, "backlog-full")
    assert refused.headers["Retry-After"] == "5"


def test_submissions_carry_ratelimit_headers_and_past_the_burst_get_429(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    client = client_with(settings, adapters, clock, submit_burst=3, submit_rate_per_s=0.5)
    remaining = []
    for i in range(3):
        response = post(client, key=f"k-{i}")
        assert response.status_code == 202
        assert response.headers["RateLimit-Limit"] == "3"
        assert response.headers["RateLimit-Policy"] == "3;w=6"
        remaining.append(int(response.headers["RateLimit-Remaining"]))
    assert remaining == [2, 1, 0]
    refused = post(client, key="k-3")
    assert_problem(refused, 429, "rate-limited")
    assert refused.headers["Retry-After"] == "2"  # one token at 0.5 a second
    assert refused.headers["RateLimit-Remaining"] == "0"
    assert int(refused.headers["RateLimit-Reset"]) == 6
    # Another client has its own bucket; time refills this one.
    assert post(client, key="k-3", api_key=OTHER_KEY).status_code == 202
    clock.advance(timedelta(seconds=2))
    assert post(client, key="k-3").status_code == 202


def firebase_client(
    settings: Settings, adapters: Adapters, clock: FrozenClock, **limits: object
) -> FlaskClient:
    firebase = FirebaseAuthenticator(
        PROJECT, "gradeq_client", {}, CachingRequest(FakeCertEndpoint())
    )
    tuned = settings.model_copy(update=limits)
    return create_app(tuned, adapters, clock, firebase=firebase).test_client()


def as_user(uid: str) -> dict[str, str]:
    """A signed-in teacher of client-a (who may send a job with its own rubric)."""
    signed_in = token(gradeq_client="client-a", sub=uid, gradeq_role="teacher")
    return {"Authorization": f"Bearer {signed_in}"}


def test_signed_in_users_draw_on_their_clients_rate_limit(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    client = firebase_client(settings, adapters, clock, submit_burst=2, submit_rate_per_s=0.01)
    assert post(client, key="k-1", headers=as_user("u1")).status_code == 202
    assert post(client, key="k-1", headers=as_user("u2")).status_code == 202
    # A third user of the same client has no bucket of their own; the client's is empty.
    assert_problem(post(client, key="k-1", headers=as_user("u3")), 429, "rate-limited")
    assert_problem(post(client, key="k-9"), 429, "rate-limited")  # the client's key too
    assert post(client, key="k-1", api_key=OTHER_KEY).status_code == 202


def test_signed_in_users_share_their_clients_active_job_ceiling(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    client = firebase_client(settings, adapters, clock, max_active_jobs_per_client=2)
    assert post(client, key="k-1").status_code == 202  # the client's server
    # Staff share the school's keys: each sends a key of its own.
    assert post(client, key="k-2", headers=as_user("u1")).status_code == 202
    problem = assert_problem(
        post(client, key="k-3", headers=as_user("u2")), 429, "too-many-active-jobs"
    )
    assert problem["limit"] == 2
    assert post(client, key="k-1", api_key=OTHER_KEY).status_code == 202


def test_refilled_buckets_are_dropped(clock: FrozenClock) -> None:
    limiter = SubmissionRateLimiter(burst=5, rate_per_s=1.0, clock=clock)
    for n in range(1000):
        limiter.take(f"client-{n}")
    assert len(limiter) == 1000
    clock.advance(timedelta(seconds=4))  # not yet refilled: kept
    limiter.take("client-0")
    assert len(limiter) == 1000
    clock.advance(timedelta(seconds=4.5))  # every bucket but client-0's has refilled
    limiter.take("client-1")
    assert len(limiter) == 2
    # A dropped bucket starts full again, as it would have been.
    assert limiter.take("client-2").remaining == 4
