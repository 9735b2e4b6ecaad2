"""Erase a submission, or everything of one student within a client, on request.

Removed: the job documents (answer, grade, reviews, and the idempotency record, which is
the job itself), their uploaded files (and, for a student, every upload made for them,
named by a job or not), the subscribers' records of their events (left as tombstones, so
a late delivery records nothing), and their place in the assignment tallies. What stays
elsewhere, and until when, is part of the answer: never an answer text, but event rows in
BigQuery until the statement given is run, and log lines (job ids, scores, timings) until
the log retention ends.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import timedelta

from shared.domain.authorization import Action, Principal, as_principal, authorize, require
from shared.domain.erasure import ErasureReport, event_ids_of, tally_removal
from shared.domain.errors import GradeqError, JobAlreadyFinal, JobNotFound
from shared.domain.job import Job
from shared.domain.uploads import student_prefix
from shared.logs import job_context
from shared.ports import BlobStore, Clock, JobEraser, JobStore

log = logging.getLogger(__name__)

#: A student's jobs are found and erased this many at a time.
PAGE = 100
_JOB_ID = re.compile(r"^[a-z0-9-]{1,128}$")
_TABLE = re.compile(r"^[A-Za-z0-9_.:-]{1,1024}$")
#: How long BigQuery keeps streamed rows in its buffer, where DML cannot reach them.
STREAMING_BUFFER = timedelta(minutes=90)


class ErasureConflict(GradeqError):
    slug = "erasure-conflict"
    title = "The job kept changing while it was erased; try again"
    status = 409


@dataclass(frozen=True)
class Retention:
    """Where copies outside the stores live: the analytics table and the log retention."""

    analytics_table: str = ""
    log_retention_days: int = 30


def bigquery_statement(table: str, job_ids: list[str]) -> str:
    """The DML that deletes the jobs' event rows from the analytics table."""
    if not job_ids:
        return ""
    if not _TABLE.match(table) or not all(_JOB_ID.match(j) for j in job_ids):
        raise ValueError("not a table name or not job ids")
    quoted = ", ".join(f"'{j}'" for j in job_ids)
    # Both parts are checked above to hold no quote or backtick.
    return f"DELETE FROM `{table}` WHERE JSON_VALUE(data, '$.job_id') IN ({quoted})"  # noqa: S608


class ErasureService:
    """Erases a client's jobs and what refers to them; answers what was removed."""

    def __init__(
        self,
        store: JobStore,
        eraser: JobEraser,
        blobs: BlobStore | None,
        clock: Clock,
        retention: Retention | None = None,
    ) -> None:
        self._store = store
        self._eraser = eraser
        self._blobs = blobs
        self._clock = clock
        self._retention = retention or Retention()

    def erase_job(self, caller: Principal | str, job_id: str) -> ErasureReport:
        """Erase one submission the policy lets the caller erase (the school's staff: any of
        the school's, a student's included); one it may not read is as unknown as missing."""
        principal = as_principal(caller)
        job = self._store.get(job_id)
        authorize(
            principal,
            Action.JOB_ERASE,
            job.owner if job else None,
            lambda _: JobNotFound(f"no grading job {job_id}"),
            Action.JOB_READ,
        )
        assert job is not None
        report = ErasureReport(principal.owner)
        self._erase(job, report)
        return self._finish(report)

    def erase_student(self, caller: Principal | str, student_id: str) -> ErasureReport:
        """Erase every submission of the school's student `student_id`, whoever sent it."""
        principal = as_principal(caller)
        require(principal, Action.STUDENT_ERASE)
        report = ErasureReport(principal.owner)
        while True:
            found = self._eraser.jobs_of_student(principal.school, student_id, PAGE)
            if not found:
                break
            for job in found:
                self._erase(job, report)
        if self._blobs is not None:
            # The student's uploads, named by a job or never: all live under one prefix.
            removed = self._blobs.delete_under(student_prefix(principal.school, student_id))
            report.uploads += [name for name in removed if name not in report.uploads]
        return self._finish(report)

    def _erase(self, job: Job, report: ErasureReport) -> None:
        for _ in range(5):
            if not job.status.is_final:
                try:
                    job = self._store.update(job.id, lambda j: j.cancel(self._clock.now()))
                except JobAlreadyFinal:
                    pass
                except JobNotFound:
                    return
            if self._eraser.delete(job):
                break
            current = self._store.get(job.id)
            if current is None:
                return  # erased meanwhile by another request
            job = current
        else:
            raise ErasureConflict(f"grading job {job.id} kept changing; nothing more was erased")
        objects = [f.object for f in job.request.files if f.object]
        if objects and self._blobs is not None:
            self._blobs.delete(objects)
        report.jobs.append(job.id)
        report.results += 1 if job.result is not None else 0
        report.reviews += len(job.review.reviews) if job.review is not None else 0
        report.uploads += objects
        report.event_records += self._eraser.forget_events(event_ids_of(job))
        change = tally_removal(job)
        if change is not None:
            report.assignment_tallies.append(f"{change.assignment_id} round {change.round}")
        with job_context(job.id):
            log.info("job erased", extra={"event": "job_erased"})

    def _finish(self, report: ErasureReport) -> ErasureReport:
        now = self._clock.now()
        logs_until = now + timedelta(days=self._retention.log_retention_days)
        report.remains.append(
            {
                "where": "logs",
                "what": "job ids, status, scores and timings (never the answer, feedback, "
                "rubric or student id)",
                "until": logs_until.isoformat(),
            }
        )
        report.remains.append(
            {
                "where": "webhooks",
                "what": "what the client's own endpoint received (scores, never the answer)",
                "until": "as the client keeps it",
            }
        )
        table = self._retention.analytics_table
        if table and report.jobs:
            report.remains.append(
                {
                    "where": "bigquery",
                    "what": "event rows (job and submission ids, scores; never the answer)",
                    "until": "the statement is run; rows streamed in the last 90 minutes "
                    f"are in the streaming buffer, where DML cannot delete them: run it "
                    f"after {(now + STREAMING_BUFFER).isoformat()}",
                    "statement": bigquery_statement(table, report.jobs),
                }
            )
        return report
