"""A small `make soak`: the whole stack under SIGKILL/SIGSTOP faults keeps every invariant."""

from __future__ import annotations

from pathlib import Path

import pytest

from localcloud import emulators
from localcloud.soak import run_soak
from localcloud.stack import EMBEDDED, GOOGLE_EMULATORS

#: How long a soak waits for its jobs past its load: long enough for the slowest job (26 s
#: from accepted to final, the most seen in 71 runs of the batch soak), short enough that
#: a stall ends in the soak's own report, which says where each open job stands, within
#: the timeout.
SETTLE_S = 45.0
#: Start, load, then at most two settles (clients following, then the settle itself).
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


@pytest.mark.parametrize("backend", [EMBEDDED, GOOGLE_EMULATORS])
def test_a_short_seeded_soak_keeps_every_invariant(tmp_path: Path, backend: str) -> None:
    if backend == GOOGLE_EMULATORS and (reason := emulators.missing_reason()):
        pytest.skip(f"Google Cloud emulators unavailable: {reason}")
    figures = run_soak(
        seed=7,
        jobs=30,
        duration_s=20,
        data_dir=tmp_path,
        settle_s=SETTLE_S,
        fault_every_s=1.5,
        backend=backend,
    )
    assert figures["backend"] == backend
    assert figures["violations"] == 0, figures["violation_details"]
    assert figures["jobs"]["accepted"] == 30
    assert sum(figures["jobs"]["final_by_status"].values()) == 30
    assert sum(figures["faults"].values()) >= 3
    # Jobs with and without a callback URL, so the per-subscriber check covers both.
    assert 0 < figures["jobs"]["with_callback"] < 30
    assert figures["jobs"]["webhooks_received"] >= figures["jobs"]["with_callback"]
    assert figures["jobs"]["max_grader_calls_per_job"] <= figures["jobs"]["grader_call_budget"]


def test_a_short_soak_with_classes_loses_and_doubles_no_answer(tmp_path: Path) -> None:
    figures = run_soak(
        seed=11,
        jobs=10,
        duration_s=20,
        data_dir=tmp_path,
        settle_s=SETTLE_S,
        fault_every_s=1.5,
        classes=2,
        class_size=25,
    )
    assert figures["violations"] == 0, figures["violation_details"]
    classes = figures["classes"]
    assert (classes["classes"], classes["answers"]) == (2, 50)
    assert (classes["lost"], classes["doubled"]) == (0, 0)
    assert classes["assignment_graded_per_class"] == [1, 1]


def test_a_short_soak_in_batch_mode_loses_and_doubles_no_job(tmp_path: Path) -> None:
    figures = run_soak(
        seed=5,
        jobs=40,
        duration_s=25,
        data_dir=tmp_path,
        settle_s=SETTLE_S,
        fault_every_s=1.5,
        classes=1,
        class_size=10,
        batch=True,
    )
    assert figures["violations"] == 0, figures["violation_details"]
    assert sum(figures["jobs"]["final_by_status"].values()) == 40
    batches = figures["provider_batches"]
    assert batches["jobs_gathered"] > 0 and sum(batches["batches_by_status"].values()) > 0
    assert (figures["classes"]["lost"], figures["classes"]["doubled"]) == (0, 0)


def test_a_short_gradebook_soak_delivers_every_posted_grade_and_nothing_unposted(
    tmp_path: Path,
) -> None:
    figures = run_soak(
        seed=3,
        jobs=10,
        duration_s=22,
        data_dir=tmp_path,
        settle_s=SETTLE_S,
        fault_every_s=1.5,
        gradebook=True,
    )
    assert figures["violations"] == 0, figures["violation_details"]
    gradebook = figures["gradebook"]
    # Three classes of 10 posted (every grade), one graded and never posted.
    assert (gradebook["assignments_posted"], gradebook["assignments_unposted"]) == (3, 1)
    assert gradebook["grades_posted"] == 30
    assert gradebook["line_items"] == 3  # one column per posted assignment, none unposted
    # Overrides after posting made later versions, and those are what the LMS holds.
    assert gradebook["overrides_after_posting"] >= 3
    assert set(gradebook["latest_versions"]) - {"1"}
    # The LMS refused scores both ways, and the gradebook subscriber was killed.
    assert gradebook["lms_429"] > 0 and gradebook["lms_503"] > 0
    assert gradebook["gradebook_kills"] >= 1
    assert gradebook["outage_seen"]["after_s"] is not None
    assert gradebook["outage_seen"]["final_state"] == ["ok"]


@pytest.mark.timeout(300)  # the stack's start, then gradings paced by the quota
def test_a_short_soak_with_budget_holds_and_a_binding_quota(tmp_path: Path) -> None:
    """A client's budget runs out with jobs queued (held, then released by a raise) while a
    loopback provider enforces a declared quota that binds; the worker is killed as usual."""
    figures = run_soak(
        seed=50,  # its faults kill the worker twice and freeze it once
        jobs=30,
        duration_s=22,
        data_dir=tmp_path,
        fault_every_s=1.5,
        budgets=6,
        quota_rpm=20,
    )
    assert figures["violations"] == 0, figures["violation_details"]
    holds = figures["budget_holds"]
    assert holds["queued"] == 6 and holds["refused_while_spent"] == {"budget-exhausted": 3}
    assert holds["held"] == holds["released"] == 6
    assert (holds["lost"], holds["doubled"]) == (0, 0)
    assert holds["final_by_status"] == {"SUCCEEDED": 6}
    assert figures["jobs"]["by_kind"]["held"] == 6
    assert sum(figures["jobs"]["final_by_status"].values()) == figures["jobs"]["accepted"]
    assert figures["faults"].get("SIGKILL worker", 0) >= 1
    quota = figures["quota"]
    # The quota bound: the pool turned deliveries away, and the provider never saw more
    # than the declared quota in any rolling window.
    assert quota["deliveries_deferred_for_quota"] > 0
    assert quota["max_requests_in_any_window"] <= quota["declared_per_window"] == 20
