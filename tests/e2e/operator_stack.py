"""The local stack set up for the operator tests: fast queue, small
leases, a client key and an operator key."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from localcloud.stack import EMBEDDED, LocalStack, StackConfig

OPERATOR_KEY = "e2e-operator-key"
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


@contextmanager
def operator_stack(root: Path, backend: str = EMBEDDED, **env: str) -> Iterator[LocalStack]:
    """Start the stack under `root`; stop it (and all it spawned) on the way out."""
    queues = root / "queues.json"
    queues.write_text(json.dumps(FAST_QUEUE))
    config = StackConfig.on_free_ports(
        root / "data",
        backend=backend,
        recover_every_s=0,
        env={
            "GRADEQ_QUEUES_FILE": str(queues),
            "GRADEQ_OPERATOR_KEYS": f"ops={OPERATOR_KEY}",
            "GRADEQ_GRADER_LATENCY_S": "0.1",
            "GRADEQ_GRADER_TIMEOUT_S": "8",
            "GRADEQ_LEASE_S": "2",
            "GRADEQ_HEARTBEAT_S": "0.5",
            "GRADEQ_RESULT_WRITE_RETRY_S": "2",
            "GRADEQ_DRAIN_GRACE_S": "0.5",
            "GRADEQ_RETRY_AFTER_S": "1",
            "GRADEQ_BUS_MIN_BACKOFF_S": "0.2",
            **env,
        },
    )
    with (root / "stack.log").open("w") as log:
        local = LocalStack(config, output=log)
        local.start()
        try:
            yield local
        finally:
            local.stop()
