"""What every TaskQueue adapter must do with lanes: route by lane, pause, resume, purge.

Cloud Tasks' semantics: a paused queue accepts new tasks and dispatches none; a resumed
queue dispatches its backlog; a purge deletes every task the queue holds.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from shared.domain.errors import LaneNotFound
from shared.ports import TaskSpec
from tests.contract.harness import TaskQueueHarness

LANE = "grading"  # the queue both harnesses deliver from


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def test_a_paused_lane_accepts_tasks_and_dispatches_none_until_resumed(
    task_queue_harness: TaskQueueHarness,
) -> None:
    queue = task_queue_harness.queue
    queue.pause(LANE)
    assert queue.is_paused(LANE) is True
    spec = TaskSpec(unique("t"), unique("job"), queue=LANE)
    assert queue.enqueue(spec) is True
    assert queue.exists(spec.name, LANE) is True
    # Nothing is dispatched within a second (the local bound on stopping a lane).
    with pytest.raises(AssertionError):
        task_queue_harness.wait_for_deliveries(1, timeout=1.5)
    queue.resume(LANE)
    assert queue.is_paused(LANE) is False
    (delivered,) = task_queue_harness.wait_for_deliveries(1, timeout=10)
    assert delivered.json == {"job_id": spec.job_id}


def test_a_resumed_lane_dispatches_its_whole_backlog(task_queue_harness: TaskQueueHarness) -> None:
    queue = task_queue_harness.queue
    queue.pause(LANE)
    specs = [TaskSpec(unique("t"), unique("job"), queue=LANE) for _ in range(5)]
    for spec in specs:
        queue.enqueue(spec)
    queue.resume(LANE)
    delivered = task_queue_harness.wait_for_deliveries(5, timeout=10)
    assert sorted(r.json["job_id"] for r in delivered) == sorted(s.job_id for s in specs)


def test_purge_deletes_every_task_of_the_lane(task_queue_harness: TaskQueueHarness) -> None:
    queue = task_queue_harness.queue
    later = datetime.now(UTC) + timedelta(hours=1)
    specs = [TaskSpec(unique("t"), unique("job"), later, queue=LANE) for _ in range(3)]
    for spec in specs:
        assert queue.enqueue(spec) is True
    other = TaskSpec(unique("t"), unique("job"), later, queue="bulk")
    queue.enqueue(other)
    queue.purge(LANE)
    deadline = time.monotonic() + 5  # Cloud Tasks may take a moment to purge
    while any(queue.exists(s.name, LANE) for s in specs):
        assert time.monotonic() < deadline, "a purged task is still in the queue"
        time.sleep(0.05)
    assert queue.exists(other.name, "bulk") is True  # only the named lane is purged
    assert queue.is_paused(LANE) is False  # a purge does not pause


def test_tasks_go_to_the_lane_they_name(task_queue_harness: TaskQueueHarness) -> None:
    queue = task_queue_harness.queue
    later = datetime.now(UTC) + timedelta(hours=1)
    exam = TaskSpec(unique("t"), unique("job"), later, queue="exam")
    assert queue.enqueue(exam) is True
    assert queue.exists(exam.name, "exam") is True
    assert queue.exists(exam.name, "bulk") is False
    assert queue.exists(exam.name) is False  # the default queue is another one
    # A lane is its own queue: the same task name is free in another lane.
    assert queue.enqueue(TaskSpec(exam.name, exam.job_id, later, queue="bulk")) is True


def test_an_undeclared_lane_is_refused(task_queue_harness: TaskQueueHarness) -> None:
    with pytest.raises(LaneNotFound):
        task_queue_harness.queue.enqueue(TaskSpec(unique("t"), unique("job"), queue="nope"))
