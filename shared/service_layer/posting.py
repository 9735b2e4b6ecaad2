"""Posting an assignment's grades to students and downstream systems, as Canvas does it.

An assignment posts automatically (each grade once it is final, and every change after)
or manually: its grades reach students, the webhook and the gradebook only when the
teacher posts the assignment, or chosen submissions of it. A post is one job write (the
`PostedGrade` version beside the grade, unannounced) and then its events: the
`GradePosted` of the version (id from job and version) and, for a generation never posted
before, the job's own withheld `GradingCompleted` with its usual id; then a write marking
them announced. Posting again publishes the same ids of a post a crash cut short, which
subscribers dedupe; a grade that has not changed since its last post is not posted again.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass

from shared.domain.authorization import Action, Principal, as_principal
from shared.domain.events import GradePosted, GradingCompleted
from shared.domain.job import Job
from shared.logs import job_context
from shared.ports import Clock, EventPublisher, JobStore
from shared.service_layer.assignments import AssignmentService
from shared.service_layer.review import reviewer_name

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PostReport:
    """What a post did: new versions posted, grades already posted as they are, and the
    submissions with no grade to post yet (not graded, or waiting for a first review)."""

    posted: list[str]
    unchanged: list[str]
    not_ready: list[str]


class PostingService:
    """Posts the final grades of an assignment (all, or chosen submissions)."""

    def __init__(
        self,
        service: AssignmentService,
        jobs: JobStore,
        publisher: EventPublisher,
        clock: Clock,
    ) -> None:
        self._service = service
        self._jobs = jobs
        self._publisher = publisher
        self._clock = clock

    def post(
        self,
        caller: Principal | str,
        assignment_id: str,
        submission_ids: Collection[str] | None = None,
    ) -> PostReport:
        principal = as_principal(caller)
        assignment = self._service.get(principal, assignment_id, Action.ASSIGNMENT_POST)
        by = reviewer_name(principal)
        chosen = None if submission_ids is None else set(submission_ids)
        report = PostReport([], [], [])
        for job in self._service.all_grades(assignment):
            submission = job.request.submission_id
            if chosen is not None and submission not in chosen:
                continue
            if not job.postable:
                report.not_ready.append(submission)
                continue
            if job.post_announced and job.post(self._clock.now(), by) is job:
                report.unchanged.append(submission)  # posted as it is: nothing to write
                continue
            previous, after = self._post_one(job.id, by)
            if after.posted == previous.posted and after.post_announced:
                report.unchanged.append(submission)
                continue
            self.announce(previous, after)
            report.posted.append(submission)
        return report

    def _post_one(self, job_id: str, by: str) -> tuple[Job, Job]:
        """Post one job's grade in one write: the job before and after."""
        before: list[Job] = []

        def post(current: Job) -> Job:
            before.append(current)
            return current.post(self._clock.now(), by)

        after = self._jobs.update(job_id, post)
        return before[-1], after

    def announce(self, previous: Job, job: Job) -> Job:
        """Publish the posted version's events, then mark them announced."""
        posted = job.posted
        if posted is None:
            return job
        before = previous.posted
        if before is None or before.generation != job.generation or not previous.post_announced:
            # This generation's completion was withheld for the post: it goes out now.
            self._publisher.publish(GradingCompleted.from_job(job))
        event = GradePosted.from_job(job)
        self._publisher.publish(event)
        marked = self._jobs.update(job.id, lambda j: j.mark_post_announced(posted.version))
        with job_context(job.id):
            log.info(
                "grade posted",
                extra={
                    "event": "grade_posted",
                    "event_id": event.event_id,
                    "version": posted.version,
                    "source": posted.source,
                },
            )
        return marked
