"""`make bench-lanes` in miniature: on lanes the exam jobs pass the bulk backlog, on one
lane they wait behind it; bulk keeps going either way."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench import lanes


def test_exam_jobs_pass_the_bulk_backlog_only_on_their_own_lane(tmp_path: Path) -> None:
    args = argparse.Namespace(
        bulk=150, exam=5, rate=50.0, exam_every_s=0.05, latency_s=0.0, warmup_s=0.5, timeout_s=60.0
    )
    own = lanes.run(args, lanes=True, directory=tmp_path)
    single = lanes.run(args, lanes=False, directory=tmp_path)
    assert own["exam_delivered"] == single["exam_delivered"] == 5
    # Behind the backlog (100 jobs left at 50/s) every exam job waits about two seconds;
    # on its own lane, none waits for the backlog (compared, not timed: the machine is shared).
    assert own["exam_wait_p99_ms"] < single["exam_wait_p50_ms"] / 4
    assert own["bulk_per_s_min"] > 0
    table = lanes.table([own, single], args.rate)
    assert "single lane" in table and "exam p99" in table
