"""Erasure of a student's work: what one job's removal takes away, and what it leaves.

A job document holds the answer, the grade, its reviews and (being named by a hash of the
client's Idempotency-Key) the idempotency record itself, so removing it removes all four.
Around it: its assignment round's counters (moved back as if it had never been counted),
its uploaded files, and the subscribers' records of its events, which become tombstones:
a record that keeps only the event id (a hash, naming no job), so that a delivery of the
event after the erasure is a duplicate and recorded nowhere again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shared.domain.assignment import SCORE_SUM, SCORED, TallyChange, histogram_bucket
from shared.domain.authorization import Owner
from shared.domain.ids import completion_event_id, grade_reviewed_event_id
from shared.domain.job import Job
from shared.domain.status import JobStatus


def tally_removal(job: Job) -> TallyChange | None:
    """The counter deltas that take `job` out of its assignment round's tally."""
    assignment_id = job.request.assignment_id
    if assignment_id is None or not job.request.tallied:
        return None
    deltas: dict[str, float] = {job.status.value: -1}
    if job.status is JobStatus.SUCCEEDED and job.result is not None:
        deltas[SCORE_SUM] = -job.result.score
        deltas[SCORED] = -1
        deltas[f"h{histogram_bucket(job.result.score, job.request.max_score)}"] = -1
    return TallyChange(assignment_id, job.request.assignment_round, deltas)


#: The subscribers that keep a record per event they handled (services/analytics and
#: services/notification); an erasure leaves each a tombstone of every event of the job.
RECORDING_SUBSCRIBERS = ("analytics", "notification")
#: What an erased event's record holds from then on.
TOMBSTONE: dict[str, Any] = {"erased": True}


def is_tombstone(record: Mapping[str, Any]) -> bool:
    """Whether a subscriber's record is what an erasure left of one."""
    return dict(record) == TOMBSTONE


def event_ids_of(job: Job) -> list[str]:
    """The ids of every event the job may have published (its dedup records' keys).

    Every generation's GradingCompleted: an operator's replay and a regrade each publish
    one of their own, and the replay records are bounded, so every generation up to the
    job's is named (a generation that published nothing costs a tombstone, no more).
    """
    ids = [completion_event_id(job.id, g) for g in range(job.generation + 1)]
    if job.review is not None:
        ids += [
            grade_reviewed_event_id(job.id, job.review.generation, r.number)
            for r in job.review.reviews
        ]
    return ids


@dataclass
class ErasureReport:
    """What an erasure removed, and what remains where and until when; `owner`: the school
    it was done in and the author who asked for it (like every object of the school)."""

    owner: Owner | None = None
    jobs: list[str] = field(default_factory=list)
    results: int = 0
    reviews: int = 0
    uploads: list[str] = field(default_factory=list)
    event_records: int = 0
    assignment_tallies: list[str] = field(default_factory=list)
    remains: list[dict[str, str]] = field(default_factory=list)
