"""Deterministic identifiers: one Idempotency-Key -> one job id -> one task name -> one event id.

Ids are hashes, never sequential, so Firestore and Cloud Tasks do not hot-spot on them.
"""

from __future__ import annotations

import base64
import hashlib


def _b32(digest: bytes) -> str:
    return base64.b32encode(digest).decode("ascii").rstrip("=").lower()


def job_id_for(client_id: str, idempotency_key: str) -> str:
    """Derive the job id: 160 bits of SHA-256 over the client scope and the key, base32."""
    digest = hashlib.sha256(f"gradeq/job\0{client_id}\0{idempotency_key}".encode()).digest()
    return _b32(digest[:20])


def task_name_for(job_id: str, generation: int) -> str:
    """Name the Cloud Task of one job generation; a replay gets a fresh name."""
    digest = hashlib.sha256(f"gradeq/task\0{job_id}\0{generation}".encode()).digest()
    return "t-" + _b32(digest[:20])


def completion_event_id(job_id: str) -> str:
    """The stable id of the job's one GradingCompleted event: subscribers dedupe on it."""
    digest = hashlib.sha256(f"gradeq/event/completed\0{job_id}".encode()).digest()
    return "e-" + _b32(digest[:20])
