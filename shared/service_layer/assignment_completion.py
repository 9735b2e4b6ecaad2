"""Announce an assignment round's AssignmentGraded exactly once, when its last job is final.

Runs after a final job's GradingCompleted is published and before the job is marked
announced, so a crash in between leaves the job unannounced and the next delivery or the
recovery sweep runs it again. Every job's final write has committed its tally change
before this reads the tally, so of the last jobs finishing together at least one sees the
round done; the store's create-if-absent record of the event lets exactly one of them
publish it. The sweep publishes recorded events whose publisher died first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from shared.domain.errors import GradeqError
from shared.domain.events import AssignmentGraded
from shared.domain.job import Job
from shared.ports import AssignmentStore, Clock, EventPublisher

log = logging.getLogger(__name__)

_DONE, _BUSY, _WAITING = "done", "busy", "waiting"


class AssignmentCompletion:
    """Decides when an assignment round is graded, and publishes its one event."""

    def __init__(
        self,
        assignments: AssignmentStore,
        publisher: EventPublisher,
        clock: Clock,
        resume: Callable[[str], object] | None = None,
        on_graded: Callable[[str], object] | None = None,
    ) -> None:
        # Called with an assignment once a round of it is graded (its explicit context
        # caches are deleted); a failure there is logged, never the round's.
        self._on_graded = on_graded
        # Called with an assignment whose regrade waits for room under the ceilings, once
        # every submission moved into its round so far is final (`Regrader.resume`).
        self._resume = resume
        self._assignments = assignments
        self._publisher = publisher
        self._clock = clock

    def on_final(self, job: Job) -> None:
        """Check the job's assignment round after the job became final (a few reads)."""
        if job.request.tallied and job.status.is_final:
            assert job.request.assignment_id is not None
            assignment_id = job.request.assignment_id
            state = self._settle(assignment_id, job.client_id, job.request.assignment_round)
            if state == _WAITING and self._resume is not None:
                try:
                    self._resume(assignment_id)
                except GradeqError:
                    # The next job of the round to finish, or asking again, resumes it.
                    log.warning("regrade not resumed", extra={"assignment_id": assignment_id})

    def check(self, assignment_id: str, client_id: str, round_: int) -> bool:
        """Announce the round if every submission counted in it is final; True if done."""
        return self._settle(assignment_id, client_id, round_) == _DONE

    def _settle(self, assignment_id: str, client_id: str, round_: int) -> str:
        """Announce the round if it is done: done, busy (jobs not final) or waiting (every
        job moved so far is final, but a regrade has more to move into the round)."""
        tally = self._assignments.tally(assignment_id, round_)
        if not tally.done:
            return _BUSY
        assignment = self._assignments.get(assignment_id)
        if assignment is None:
            return _BUSY
        if assignment.round == round_ and tally.total < assignment.expected:
            return _WAITING  # a regrade still moving submissions into this round
        event = AssignmentGraded.of(assignment_id, client_id, round_, tally, self._clock.now())
        if self._assignments.record_graded(event):
            self._publish(event)
            if self._on_graded is not None:
                try:
                    self._on_graded(assignment_id)
                except Exception:
                    log.exception(
                        "after an assignment round", extra={"assignment_id": assignment_id}
                    )
        return _DONE

    def _publish(self, event: AssignmentGraded) -> None:
        message_id = self._publisher.publish(event)
        self._assignments.mark_graded_published(event.event_id)
        log.info(
            "assignment graded",
            extra={
                "event": "assignment_graded",
                "assignment_id": event.assignment_id,
                "round": event.round,
                "submissions": event.submissions,
                "event_id": event.event_id,
                "message_id": message_id,
            },
        )

    def sweep(self, limit: int = 100) -> list[str]:
        """Publish recorded events not marked published; their event ids."""
        published = []
        for event in self._assignments.unpublished_graded(limit):
            self._publish(event)
            published.append(event.event_id)
        return published
