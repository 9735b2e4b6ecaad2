"""Count the billable operations an adapter performs, for the cost-per-job benchmark."""

from __future__ import annotations

import threading
from collections import Counter


class Meter:
    """Thread-safe named counters; each Google adapter owns one (`adapter.meter`)."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def add(self, name: str, amount: int = 1) -> None:
        with self._lock:
            self._counts[name] += amount

    def snapshot(self) -> dict[str, int]:
        """A copy of the counts so far."""
        with self._lock:
            return dict(self._counts)

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()


# Counter names shared by the adapters and the benchmark.
FIRESTORE_READS = "firestore.document_reads"
FIRESTORE_WRITES = "firestore.document_writes"
FIRESTORE_QUERIES = "firestore.queries"
TASKS_CREATE_CALLS = "cloudtasks.create_task_calls"
TASKS_CREATED = "cloudtasks.tasks_created"
PUBSUB_PUBLISHES = "pubsub.publishes"
PUBSUB_BYTES = "pubsub.publish_bytes"
