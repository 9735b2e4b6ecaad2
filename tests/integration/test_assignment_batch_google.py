"""A class's answers in one batch on the Google adapters: Firestore (emulator) for the jobs
and their tally, Cloud Tasks (the local API over gRPC) for the tasks, made concurrently."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from shared.adapters.google.assignment_store import FirestoreAssignmentStore, FirestoreTally
from shared.adapters.google.job_batch import FirestoreJobBatch
from shared.adapters.google.job_store import FirestoreJobStore
from shared.clock import SystemClock
from shared.domain.status import JobStatus
from shared.service_layer.assignments import Answer, AssignmentService, ItemStatus
from tests.google_fixtures import GoogleTaskQueueHarness


def test_a_batch_stores_each_job_once_and_delivers_one_task_each(
    firestore_clean: Any, google_task_queue_harness: GoogleTaskQueueHarness
) -> None:
    ttl = timedelta(days=1)
    tally = FirestoreTally(firestore_clean, "assignment_tallies")
    jobs = FirestoreJobStore(firestore_clean, "grading_jobs", ttl, on_write=tally.record)
    assignments = FirestoreAssignmentStore(firestore_clean)
    batch = FirestoreJobBatch(
        firestore_clean, jobs, tally, "grading_jobs", "grading_jobs_counters", ttl
    )
    service = AssignmentService(
        assignments,
        jobs,
        batch,
        google_task_queue_harness.queue,
        SystemClock(),
        enqueue_parallelism=16,
    )
    assignment, _ = service.create("c", "k", "Essay", "light", 10.0, "v1")
    answers = [Answer(f"s{i}", f"answer {i}") for i in range(120)]
    first = service.submit_batch("c", assignment.id, answers[:60])
    assert {r.status for r in first} == {ItemStatus.ACCEPTED}
    whole = service.submit_batch("c", assignment.id, answers)  # the cut-off batch again
    assert [r.status for r in whole] == [ItemStatus.EXISTING] * 60 + [ItemStatus.ACCEPTED] * 60
    delivered = google_task_queue_harness.target.received_exactly(120, timeout=60, settle_s=1.0)
    job_ids = sorted(json.loads(r.body)["job_id"] for r in delivered)
    assert job_ids == sorted(r.job.id for r in whole if r.job is not None)
    progress = service.progress("c", assignment.id)
    assert progress.tally.counts == {JobStatus.PENDING: 120}
