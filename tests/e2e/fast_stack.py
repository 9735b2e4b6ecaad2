"""The local stack's settings scaled down for end-to-end tests: seconds, not minutes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: The attempt's lease in the tests; a crashed attempt is taken over this long after it.
LEASE_S = 2.0

#: The grading queue with test-sized backoffs (the budget check accepts it with FAST_ENV).
FAST_QUEUE: dict[str, Any] = {
    "grading": {
        "target_path": "/tasks/grade",
        "dispatch_deadline": "20s",
        "rate_limits": {"max_dispatches_per_second": 50, "max_concurrent_dispatches": 50},
        "retry_config": {
            "max_attempts": 30,
            "max_retry_duration": "0s",
            "min_backoff": "0.2s",
            "max_backoff": "1s",
            "max_doublings": 2,
        },
    }
}

#: Durations that fit FAST_QUEUE's 20 s dispatch deadline.
FAST_ENV: dict[str, str] = {
    "GRADEQ_GRADER_LATENCY_S": "0.1",
    "GRADEQ_GRADER_TIMEOUT_S": "8",
    "GRADEQ_LEASE_S": str(LEASE_S),
    "GRADEQ_HEARTBEAT_S": "0.5",
    "GRADEQ_RESULT_WRITE_RETRY_S": "2",
    "GRADEQ_DRAIN_GRACE_S": "0.5",
    "GRADEQ_RETRY_AFTER_S": "1",
    "GRADEQ_BUS_MIN_BACKOFF_S": "0.2",
}


def fast_env(root: Path, **overrides: str) -> dict[str, str]:
    """FAST_ENV with FAST_QUEUE written under `root`, and the given settings on top."""
    queues = root / "queues.json"
    queues.write_text(json.dumps(FAST_QUEUE))
    return {**FAST_ENV, "GRADEQ_QUEUES_FILE": str(queues), **overrides}
