"""The Celery peer: one task that holds a slot for the grading time, results in Redis.

    celery -A bench.celery_tasks worker --pool threads --concurrency 50

The broker and the result backend are the Redis the benchmark started
(BENCH_REDIS_URL). The result backend is on, as a client polling for its result needs.
BENCH_RATE_LIMIT (e.g. "20/s") sets the task's rate limit, which Celery enforces per
worker; BENCH_COUNT_STARTS=1 counts started tasks in Redis (the in-flight scenario).
"""

from __future__ import annotations

import os
import time
from typing import Any

from celery import Celery
from redis import Redis

REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
#: The Redis counter of started tasks, when BENCH_COUNT_STARTS is set.
STARTED_KEY = "bench:started"

app = Celery("bench", broker=REDIS_URL, backend=REDIS_URL)
app.conf.update(
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    broker_connection_retry_on_startup=True,
)
_STARTS = Redis.from_url(REDIS_URL) if os.environ.get("BENCH_COUNT_STARTS") == "1" else None


@app.task(  # type: ignore[untyped-decorator]
    name="grade", rate_limit=os.environ.get("BENCH_RATE_LIMIT") or None
)
def grade(body: dict[str, Any], seconds: float) -> dict[str, Any]:
    """Stand in for a grading: hold the slot for `seconds`."""
    if _STARTS is not None:
        _STARTS.incr(STARTED_KEY)
    time.sleep(seconds)
    return {"submission_id": body.get("submission_id"), "score": 1.0}
