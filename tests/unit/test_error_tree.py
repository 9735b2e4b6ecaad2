"""The error tree: problem types are public API, and each error carries its facts."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from shared.domain import errors as domain
from shared.domain.status import JobStatus
from shared.http import errors as http

WHEN = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("error", "slug", "status"),
    [
        (domain.ValidationFailed, "validation-error", 400),
        (domain.IdempotencyConflict, "idempotency-key-reused", 422),
        (domain.JobNotFound, "job-not-found", 404),
        (domain.IllegalTransition, "illegal-transition", 409),
        (domain.JobAlreadyFinal, "job-already-final", 409),
        (domain.JobLocked, "job-locked", 409),
        (domain.LeaseLost, "lease-lost", 409),
        (domain.DependencyUnavailable, "dependency-unavailable", 503),
        (domain.GradingError, "grading-error", 502),
        (domain.TransientGradingError, "grading-transient", 502),
        (domain.GradingTimeout, "grading-timeout", 502),
        (domain.PermanentGradingError, "grading-permanent", 502),
        (http.Unauthenticated, "unauthenticated", 401),
        (http.UnsupportedMediaType, "unsupported-media-type", 415),
        (http.PayloadTooLarge, "payload-too-large", 413),
        (http.IdempotencyKeyInvalid, "idempotency-key-invalid", 400),
    ],
)
def test_problem_types_and_statuses_are_stable(
    error: type[domain.GradeqError], slug: str, status: int
) -> None:
    assert error.slug == slug
    assert error.status == status


def test_an_illegal_transition_names_both_states() -> None:
    error = domain.IllegalTransition("j1", JobStatus.PENDING, JobStatus.SUCCEEDED)
    assert error.detail == "job j1 cannot go from PENDING to SUCCEEDED"
    assert (error.current, error.target) == (JobStatus.PENDING, JobStatus.SUCCEEDED)
    assert error.type_uri == "https://gradeq.dev/problems/illegal-transition"


def test_job_state_errors_keep_what_they_report() -> None:
    final = domain.JobAlreadyFinal("j1", JobStatus.FAILED)
    assert final.detail == "job j1 is already FAILED"
    assert final.job_status is JobStatus.FAILED
    locked = domain.JobLocked("j1", WHEN)
    assert locked.detail == "job j1 is leased until 2026-03-01T12:00:00+00:00"
    assert locked.until == WHEN
    lost = domain.LeaseLost("j1", "owner-7")
    assert lost.detail == "attempt owner-7 no longer owns job j1"


def test_a_transient_error_carries_the_providers_retry_after() -> None:
    error = domain.TransientGradingError("slow down", retry_after_s=12.5)
    assert error.detail == "slow down"
    assert str(error) == "slow down"
    assert error.retry_after_s == 12.5
    assert domain.TransientGradingError("x").retry_after_s is None
