"""The shared provider quota as operators see it: the admin API and `gradeq stats`,
reading the pool the worker instances write."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import cast

import pytest
from pydantic import SecretStr
from werkzeug.serving import make_server

from services.intake.app import create_app
from shared.adapters.graders.shared_quota import SharedQuotaLimiter
from shared.bootstrap import Adapters
from shared.bootstrap.graders import quota_limiter
from shared.clock import FrozenClock
from shared.config.settings import GraderKind, QuotaMode, Settings
from shared.domain.errors import ProviderQuotaExhausted
from tests.unit.test_cli import OPERATOR_KEY, as_json, gradeq


@pytest.fixture
def graded(settings: Settings) -> Settings:
    """Settings of an adaptive deployment whose pool a worker instance has used."""
    adaptive = settings.model_copy(
        update={
            "grader": GraderKind.OPENAI,
            "grader_base_url": "http://127.0.0.1:9/v1",
            "grader_model": "m-1",
            "grader_quota_mode": QuotaMode.ADAPTIVE,
            "grader_adaptive_start_rpm": 600,
            "operator_keys": SecretStr(f"ops={OPERATOR_KEY}"),
        }
    )
    # An adaptive deployment's limiter is the shared one, which takes the lane and the job.
    worker = cast(SharedQuotaLimiter, quota_limiter(adaptive, time.time, sleep=lambda _: None))
    worker.acquire(100, lane="exam", job_id="e1")
    worker.acquire(100, lane="grading", job_id="g1")
    return adaptive


@pytest.fixture
def url(graded: Settings, adapters: Adapters, clock: FrozenClock) -> Iterator[str]:
    server = make_server("127.0.0.1", 0, create_app(graded, adapters, clock), threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    thread.join()


def test_the_admin_api_shows_each_models_pool(
    graded: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    client = create_app(graded, adapters, clock).test_client()
    assert client.get("/admin/v1/quota").status_code == 401
    reply = client.get("/admin/v1/quota", headers={"Authorization": f"Bearer {OPERATOR_KEY}"})
    assert reply.status_code == 200, reply.get_data(as_text=True)
    [pool] = reply.get_json()["pools"]
    assert pool["provider"] == "openai" and pool["model"] == "m-1"
    assert pool["mode"] == "adaptive" and pool["limit_rpm"] == 600
    assert pool["requests_by_lane"] == {"exam": 1, "grading": 1}
    assert pool["adaptive"]["limit_rpm"] == 600.0


def test_gradeq_stats_shows_the_quota(url: str) -> None:
    body = as_json(gradeq(url, "stats", "--json"))
    [pool] = body["quota"]
    assert pool["model"] == "m-1" and pool["requests_in_window"] == 2
    human = gradeq(url, "stats")
    assert human.exit_code == 0, human.output
    assert "provider quota" in human.stdout and "adaptive" in human.stdout
    assert "exam 1" in human.stdout


def test_a_refusal_shows_as_a_waiting_job(graded: Settings) -> None:
    limited = graded.model_copy(
        update={"grader_model": "m-2", "grader_quota_mode": QuotaMode.SHARED, "grader_quota_rpm": 1}
    )
    worker = cast(SharedQuotaLimiter, quota_limiter(limited, time.time, sleep=lambda _: None))
    worker.acquire(100, lane="grading", job_id="g2")
    with pytest.raises(ProviderQuotaExhausted):
        worker.acquire(100, lane="exam", job_id="e2")
    report = quota_limiter(limited, time.time)
    assert report.status()["waiting_by_lane"] == {"exam": 1}  # type: ignore[attr-defined]
