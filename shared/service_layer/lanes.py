"""The operator's lanes: list them with their figures, pause, resume and purge them.

Pausing a lane pauses its Cloud Tasks queue: its tasks stay and nothing is dispatched
(new jobs are still accepted), and the recovery sweep leaves its jobs alone. Resuming
dispatches the backlog at the queue's rate. Purging deletes the queue's tasks and then
cancels every job of the lane not yet final, with the reason and its completion event:
a purged job is never silently forgotten.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from shared.config.queues import QueueConfig, lanes_by_priority
from shared.domain.errors import GradeqError, LaneNotFound
from shared.domain.job import Job, JobError
from shared.domain.status import JobStatus
from shared.logs import job_context
from shared.ports import Clock, EventPublisher, JobStore, TaskQueue
from shared.service_layer.completion import announce
from shared.service_layer.queue_health import percentile

log = logging.getLogger(__name__)

#: The error a job cancelled by a purge of its lane records.
LANE_PURGED = "lane-purged"
#: The statuses of a job that a purge cancels (every one not yet final).
NOT_FINAL = (JobStatus.PENDING, JobStatus.RETRYING, JobStatus.RUNNING)
#: The statuses of a job waiting in its lane's queue.
WAITING = (JobStatus.PENDING, JobStatus.RETRYING)


@dataclass
class PurgeReport:
    """What a purge did: the jobs it cancelled, and those it could not (they moved on)."""

    lane: str
    cancelled: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"lane": self.lane, "cancelled": self.cancelled, "skipped": self.skipped}


class LaneService:
    """Operator use cases over the lanes (the queues of shared/config/queues.json)."""

    def __init__(
        self,
        store: JobStore,
        queue: TaskQueue,
        publisher: EventPublisher,
        clock: Clock,
        lanes: Mapping[str, QueueConfig],
        default_lane: str,
        batch: int = 200,
        max_scan: int = 100_000,
        on_final: Callable[[Job], None] | None = None,
    ) -> None:
        # Told of each job a purge ends (an assignment counts it), as any cancel does.
        self._on_final = on_final
        self._store = store
        self._queue = queue
        self._publisher = publisher
        self._clock = clock
        self._lanes = dict(lanes)
        self._default = default_lane
        self._batch = batch
        self._max_scan = max_scan

    def config(self, lane: str) -> QueueConfig:
        """The lane's queue settings; LaneNotFound for an undeclared lane."""
        if lane not in self._lanes:
            raise LaneNotFound(f"no lane {lane!r}; lanes are {', '.join(sorted(self._lanes))}")
        return self._lanes[lane]

    def names(self) -> list[str]:
        """The lanes, the highest priority first."""
        return [q.name for q in lanes_by_priority(self._lanes)]

    def pause(self, lane: str, by: str) -> None:
        self.config(lane)
        self._queue.pause(lane)
        log.warning("lane paused", extra={"lane": lane, "operator": by})

    def resume(self, lane: str, by: str) -> None:
        self.config(lane)
        self._queue.resume(lane)
        log.warning("lane resumed", extra={"lane": lane, "operator": by})

    def is_paused(self, lane: str) -> bool:
        self.config(lane)
        return self._queue.is_paused(lane)

    def purge(self, lane: str, by: str, reason: str = "") -> PurgeReport:
        """Delete the lane's tasks, then cancel its jobs not yet final (with their events)."""
        self.config(lane)
        self._queue.purge(lane)
        why = f"lane {lane} purged by {by}" + (f": {reason}" if reason else "")
        log.warning("lane purged", extra={"lane": lane, "operator": by, "reason": reason})
        error = JobError(LANE_PURGED, why)
        report = PurgeReport(lane)
        now = self._clock.now()
        # Every job of the lane stored by now (updated at this very instant included).
        for job in self._jobs_of(lane, NOT_FINAL, now + timedelta(microseconds=1)):
            with job_context(job.id):
                try:
                    cancelled = self._store.update(job.id, lambda j: j.cancel(now, error))
                    announce(cancelled, self._store, self._publisher, self._clock, self._on_final)
                except GradeqError as exc:
                    # It ended meanwhile (or its event waits for the recovery sweep).
                    report.skipped[job.id] = exc.slug
                    continue
                report.cancelled.append(job.id)
        log.warning(
            "lane purge cancelled its jobs",
            extra={
                "lane": lane,
                "cancelled": len(report.cancelled),
                "skipped": len(report.skipped),
            },
        )
        return report

    def _in_lane(self, job: Job, lane: str) -> bool:
        return (job.lane or self._default) == lane

    def _jobs_of(
        self, lane: str, statuses: tuple[JobStatus, ...], before: datetime
    ) -> Iterator[Job]:
        """The lane's jobs in `statuses` not updated since `before`."""
        return (j for j in self._scan(statuses, before) if self._in_lane(j, lane))

    def _scan(self, statuses: tuple[JobStatus, ...], before: datetime) -> Iterator[Job]:
        """Every job in `statuses` not updated since `before`, oldest first per status.

        The store's status index pages the scan (at most `max_scan` jobs a status); the
        lane is read from each job.
        """
        for status in statuses:
            after: datetime | None = None
            after_id: str | None = None
            scanned = 0
            while scanned < self._max_scan:
                page = self._store.find(
                    status, before, self._batch, updated_after=after, after_id=after_id
                )
                yield from page
                scanned += len(page)
                if len(page) < self._batch:
                    break
                after, after_id = page[-1].updated_at, page[-1].id

    def report(self) -> list[dict[str, Any]]:
        """Log each lane's figures as one JSON line (event lane_figures) and return them.

        The recovery sweep calls this; a log-based metric reads `oldest_age_s` per lane
        and Cloud Monitoring alerts when it passes the lane's objective (monitoring.tf).
        """
        rows = self.figures()
        for row in rows:
            level = logging.WARNING if row["objective_breached"] else logging.INFO
            log.log(
                level,
                "lane figures",
                extra={
                    "event": "lane_figures",
                    "lane": row["lane"],
                    "paused": row["paused"],
                    "backlog": row["backlog"],
                    # 0 for an empty lane, so the metric has a point every sweep.
                    "oldest_age_s": row["oldest_age_s"] or 0.0,
                    "objective_s": row["oldest_age_objective_s"],
                },
            )
        return rows

    def figures(
        self, window: timedelta = timedelta(hours=1), sample: int = 1000
    ) -> list[dict[str, Any]]:
        """Per lane: state, backlog, the oldest waiting job's age against the objective, and
        the queue wait p50/p99 of the jobs completed in `window`."""
        now = self._clock.now()
        backlog: dict[str, int] = dict.fromkeys(self._lanes, 0)
        oldest: dict[str, datetime] = {}
        for job in self._scan(WAITING, now + timedelta(microseconds=1)):
            lane = job.lane or self._default
            if lane not in backlog:
                continue
            backlog[lane] += 1
            queued = job.queued_at or job.created_at
            if lane not in oldest or queued < oldest[lane]:
                oldest[lane] = queued
        waits: dict[str, list[int]] = {lane: [] for lane in self._lanes}
        for job in self._store.completed_between(now - window, now, sample):
            wait = job.timings()["queue_wait_ms"]
            lane = job.lane or self._default
            if wait is not None and lane in waits:
                waits[lane].append(wait)
        rows = []
        for config in lanes_by_priority(self._lanes):
            lane = config.name
            objective = config.lane.oldest_age_objective
            age = (now - oldest[lane]).total_seconds() if lane in oldest else None
            rows.append(
                {
                    "lane": lane,
                    "priority": config.lane.priority,
                    "paused": self._queue.is_paused(lane),
                    "backlog": backlog[lane],
                    "oldest_age_s": age,
                    "oldest_age_objective_s": objective.total_seconds() if objective else None,
                    "objective_breached": bool(
                        objective and age and age > objective.total_seconds()
                    ),
                    "queue_wait_ms": {
                        "p50": percentile(waits[lane], 50),
                        "p99": percentile(waits[lane], 99),
                        "completed": len(waits[lane]),
                    },
                    "max_dispatches_per_second": config.rate_limits.max_dispatches_per_second,
                    "grader_model": config.lane.grader_model or None,
                }
            )
        return rows
