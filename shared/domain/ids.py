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


def task_name_for(job_id: str, generation: int, deferral: int = 0) -> str:
    """Name the Cloud Task of one job generation; a replay gets a fresh name.

    A delivery deferred for lack of provider quota hands the job to a new task named by
    its deferral count (`Job.defer`); deferral 0 is the generation's first task.
    """
    scope = f"gradeq/task\0{job_id}\0{generation}"
    if deferral:
        scope += f"\0deferral\0{deferral}"
    digest = hashlib.sha256(scope.encode()).digest()
    return "t-" + _b32(digest[:20])


def completion_event_id(job_id: str, replayed_generation: int = 0) -> str:
    """The stable id of the job's GradingCompleted event: subscribers dedupe on it.

    An operator's replay of a failed job (`replayed_generation` > 0) ends in an event of
    its own, so subscribers told of the failure hear of the new outcome too.
    """
    scope = f"gradeq/event/completed\0{job_id}"
    if replayed_generation:
        scope += f"\0replay\0{replayed_generation}"
    digest = hashlib.sha256(scope.encode()).digest()
    return "e-" + _b32(digest[:20])


def assignment_id_for(client_id: str, idempotency_key: str) -> str:
    """Derive an assignment id from the client's Idempotency-Key (as for jobs)."""
    digest = hashlib.sha256(f"gradeq/assignment\0{client_id}\0{idempotency_key}".encode()).digest()
    return "a-" + _b32(digest[:20])


def submission_job_id(client_id: str, assignment_id: str, submission_id: str) -> str:
    """The job of one submission of an assignment: its submission id is the key."""
    return job_id_for(client_id, f"assignment\0{assignment_id}\0{submission_id}")


def assignment_graded_event_id(assignment_id: str, round_: int, submissions: int) -> str:
    """The id of a round's AssignmentGraded event, for the number of submissions it counted."""
    scope = f"gradeq/event/assignment-graded\0{assignment_id}\0{round_}\0{submissions}"
    return "e-" + _b32(hashlib.sha256(scope.encode()).digest()[:20])


def grade_reviewed_event_id(job_id: str, generation: int, review: int) -> str:
    """The id of a GradeReviewed event: one per review of one generation's grade."""
    scope = f"gradeq/event/grade-reviewed\0{job_id}\0{generation}\0{review}"
    return "e-" + _b32(hashlib.sha256(scope.encode()).digest()[:20])


def grade_posted_event_id(job_id: str, version: int) -> str:
    """The id of the GradePosted event of one version of a submission's posted grade."""
    scope = f"gradeq/grade-posted\0{job_id}\0{version}"
    return "e-" + _b32(hashlib.sha256(scope.encode()).digest()[:20])
