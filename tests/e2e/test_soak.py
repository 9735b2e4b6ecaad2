"""A small `make soak`: the whole stack under SIGKILL/SIGSTOP faults keeps every invariant."""

from __future__ import annotations

from pathlib import Path

import pytest

from localcloud import emulators
from localcloud.soak import run_soak
from localcloud.stack import EMBEDDED, GOOGLE_EMULATORS

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("backend", [EMBEDDED, GOOGLE_EMULATORS])
def test_a_short_seeded_soak_keeps_every_invariant(tmp_path: Path, backend: str) -> None:
    if backend == GOOGLE_EMULATORS and (reason := emulators.missing_reason()):
        pytest.skip(f"Google Cloud emulators unavailable: {reason}")
    figures = run_soak(
        seed=7, jobs=30, duration_s=20, data_dir=tmp_path, fault_every_s=1.5, backend=backend
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
