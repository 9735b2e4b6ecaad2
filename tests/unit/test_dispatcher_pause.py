"""The local dispatcher pauses a lane mid-backlog: nothing new is sent within a second,
other lanes carry on, and a resumed lane sends the rest of its backlog at its rate."""

from __future__ import annotations

import time
from pathlib import Path

from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.adapters.embedded.task_queue import SqliteTaskQueue
from shared.ports import TaskSpec
from tests.contract.harness import fast_queue, running_dispatcher
from tests.support.http_target import RecordingTarget


def test_pause_stops_a_lanes_dispatches_within_a_second_and_resume_sends_the_rest(
    tmp_path: Path,
) -> None:
    db = SqliteDatabase(tmp_path / "tasks.sqlite3")
    bulk, exam = fast_queue("bulk", rate=20.0), fast_queue("exam", rate=20.0)
    lanes = {"bulk": bulk, "exam": exam}
    with RecordingTarget() as target, running_dispatcher(db, bulk, exam):
        queue = SqliteTaskQueue(db, bulk, target.url + bulk.target_path, lanes=lanes)
        for i in range(60):
            queue.enqueue(TaskSpec(f"b-{i}", f"bulk-{i}", queue="bulk"))
        target.wait_for(10, timeout=10)  # the backlog is going out at 20 a second
        queue.pause("bulk")
        paused_at = time.monotonic()
        queue.enqueue(TaskSpec("e-1", "exam-1", queue="exam"))  # another lane goes on
        time.sleep(2.0)
        sent = [r for r in target.requests if r.json["job_id"].startswith("bulk-")]
        late = [r.received_at - paused_at for r in sent if r.received_at > paused_at + 1.0]
        assert late == [], f"sent after the pause: {late}"
        assert len(sent) < 60
        assert any(r.json["job_id"] == "exam-1" for r in target.requests)
        queue.resume("bulk")
        target.wait_for(61, timeout=20)
        resumed = sorted(r.received_at for r in target.requests if r.received_at > paused_at + 2.0)
        # At the lane's rate: the rest of the backlog is not sent in one burst.
        left = 60 - len(sent)
        assert len(resumed) == left
        if left > 10:
            assert resumed[-1] - resumed[0] >= (left - 10) / 20.0
