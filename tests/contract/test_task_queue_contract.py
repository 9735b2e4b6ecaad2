"""What every TaskQueue adapter must do: create once per name, deliver the job id as JSON."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta

from shared.ports import TaskSpec
from tests.contract.harness import TaskQueueHarness


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def test_ping(task_queue_harness: TaskQueueHarness) -> None:
    task_queue_harness.queue.ping()


def test_create_then_same_name_is_refused(task_queue_harness: TaskQueueHarness) -> None:
    spec = TaskSpec(name=unique("t"), job_id=unique("job"))
    assert task_queue_harness.queue.enqueue(spec) is True
    assert task_queue_harness.queue.enqueue(spec) is False
    (delivered,) = task_queue_harness.wait_for_deliveries(1, timeout=10)
    assert delivered.json == {"job_id": spec.job_id}
    time.sleep(0.3)  # a second delivery of a refused duplicate would arrive by now
    assert len(task_queue_harness.wait_for_deliveries(1, timeout=1)) == 1


def test_different_names_are_both_created(task_queue_harness: TaskQueueHarness) -> None:
    a = TaskSpec(name=unique("t"), job_id=unique("job"))
    b = TaskSpec(name=unique("t"), job_id=a.job_id)
    assert task_queue_harness.queue.enqueue(a) is True
    assert task_queue_harness.queue.enqueue(b) is True
    assert len(task_queue_harness.wait_for_deliveries(2, timeout=10)) == 2


def test_task_is_delivered_as_json_post(task_queue_harness: TaskQueueHarness) -> None:
    spec = TaskSpec(name=unique("t"), job_id=unique("job"))
    task_queue_harness.queue.enqueue(spec)
    (request,) = task_queue_harness.wait_for_deliveries(1, timeout=10)
    assert request.method == "POST"
    assert request.path == "/tasks/grade"
    assert request.header("Content-Type") == "application/json"
    assert request.json == {"job_id": spec.job_id}
    assert request.header("X-CloudTasks-TaskName") == spec.name
    assert request.header("X-CloudTasks-TaskRetryCount") == "0"


def test_exists_while_the_queue_holds_the_task_and_not_after(
    task_queue_harness: TaskQueueHarness,
) -> None:
    queue = task_queue_harness.queue
    later = TaskSpec(unique("t"), unique("job"), datetime.now(UTC) + timedelta(hours=1))
    assert queue.enqueue(later) is True
    assert queue.exists(later.name) is True
    assert queue.exists(unique("never-created")) is False
    now = TaskSpec(name=unique("t"), job_id=unique("job"))
    queue.enqueue(now)
    task_queue_harness.wait_for_deliveries(1, timeout=10)
    deadline = time.monotonic() + 5
    while queue.exists(now.name):  # a delivered task leaves the queue (once recorded)
        assert time.monotonic() < deadline, "a delivered task is still in the queue"
        time.sleep(0.05)
    assert queue.exists(later.name) is True
