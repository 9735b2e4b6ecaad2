"""`gradeq doctor`'s verdicts on what a deployment answers (the HTTP answers recorded)."""

from __future__ import annotations

from typing import Any

import pytest
import requests_mock as rm

from gradeq.cli.doctor import Doctor, Report
from gradeq.client import GradeqClient

INTAKE = "http://127.0.0.1:9"
ANALYTICS = "http://127.0.0.1:10"
JOB_ID = "job-1"


def job(status: str, **fields: Any) -> dict[str, Any]:
    return {
        "id": JOB_ID,
        "status": status,
        "attempts": 1,
        "timings": {"queue_wait_ms": 5, "processing_ms": 20, "total_ms": 30},
        **fields,
    }


SUCCEEDED = job("SUCCEEDED", result={"score": 2.0, "max_score": 2.0, "grader": "rubric-offline-v1"})
RECORD = {"job_id": JOB_ID, "outcome": "succeeded", "score": 2.0, "event_id": "e-abc"}


def run(mock: rm.Mocker, final: dict[str, Any], records: list[dict[str, Any]] | None) -> Report:
    time = FakeTime()
    mock.get(f"{INTAKE}/health/ready", json={"status": "ok"})
    mock.post(f"{INTAKE}/v1/grading-jobs", status_code=202, json=job("PENDING"))
    mock.get(f"{INTAKE}/v1/grading-jobs/{JOB_ID}", [{"json": job("RUNNING")}, {"json": final}])
    client = GradeqClient(INTAKE, "gq_key", sleep=time.sleep)
    analytics = None
    if records is not None:
        mock.get(f"{ANALYTICS}/v1/events/{JOB_ID}", json={"job_id": JOB_ID, "events": records})
        analytics = client.at(ANALYTICS)
    return Doctor(client, analytics, timeout_s=5, clock=time.monotonic, sleep=time.sleep).run()


class FakeTime:
    """Time that moves only when slept: a wait for a record ends after `timeout_s`."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def verdicts(report: Report) -> list[tuple[str, bool | None]]:
    return [(c.name, c.ok) for c in report.checks]


@pytest.fixture
def mock() -> Any:
    with rm.Mocker() as mocker:
        yield mocker


def test_a_job_recorded_once_as_it_ended_passes(mock: rm.Mocker) -> None:
    report = run(mock, SUCCEEDED, [RECORD])
    assert report.ok
    assert verdicts(report) == [
        ("intake ready", True),
        ("submit", True),
        ("status", True),  # RUNNING
        ("status", True),  # SUCCEEDED
        ("final state", True),
        ("event recorded", True),
    ]
    assert report.checks[-1].seen["event_id"] == "e-abc"
    assert "queue wait 5 ms, grading 20 ms, total 30 ms" in report.checks[-2].detail
    # The key went with every call, the analytics service's included.
    assert all(r.headers["Authorization"] == "Bearer gq_key" for r in mock.request_history[1:])


def test_a_failed_job_fails_the_check_and_nothing_after_it_runs(mock: rm.Mocker) -> None:
    failed = job("FAILED", error={"type": "grading-refused", "message": "no"})
    report = run(mock, failed, [RECORD])
    assert not report.ok
    assert verdicts(report)[-1] == ("final state", False)
    assert "grading-refused" in report.checks[-1].detail


@pytest.mark.parametrize(
    ("records", "why"),
    [
        ([], "0 records"),
        ([RECORD, RECORD], "2 records"),
        ([{**RECORD, "outcome": "failed"}], "outcome"),
        ([{**RECORD, "score": 1.0}], "score"),
        ([{**RECORD, "event_id": None}], "differs"),
    ],
)
def test_an_event_missing_duplicated_or_unlike_the_job_fails(
    mock: rm.Mocker, records: list[dict[str, Any]], why: str
) -> None:
    report = run(mock, SUCCEEDED, records)
    assert not report.ok
    assert verdicts(report)[-1] == ("event recorded", False)
    assert why in report.checks[-1].detail


def test_without_an_analytics_service_the_event_is_reported_unchecked(mock: rm.Mocker) -> None:
    report = run(mock, SUCCEEDED, None)
    assert report.ok
    assert verdicts(report)[-1] == ("event recorded", None)
    assert "grading_completed_v1" in report.checks[-1].detail


def test_an_intake_not_ready_stops_before_submitting(mock: rm.Mocker) -> None:
    mock.get(f"{INTAKE}/health/ready", status_code=503, json={"status": "unavailable"})
    report = Doctor(GradeqClient(INTAKE, "gq_key", sleep=lambda _: None)).run()
    assert verdicts(report) == [("intake ready", False)]
    assert not any(r.method == "POST" for r in mock.request_history)
