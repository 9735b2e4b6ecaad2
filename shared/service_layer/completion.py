"""Announce a final job exactly once: publish its GradingCompleted, then mark it published."""

from __future__ import annotations

import logging
from collections.abc import Callable

from shared.domain.events import GradePosted, GradingCompleted
from shared.domain.job import Job
from shared.ports import Clock, EventPublisher, JobStore

log = logging.getLogger(__name__)


def log_completion(job: Job, **announced: object) -> None:
    """The one completion line per final job that Cloud Logging turns into metrics.

    Log-based metrics (terraform/dashboard.tf) read `event`, `outcome`, `error_type` and
    the three timings from it; keep those names stable. `announced` adds the event's ids.
    """
    timings = job.timings()
    log.info(
        "job completed",
        extra={
            "event": "job_completed",
            "outcome": job.status.value.lower(),
            "error_type": job.error.type if job.error else None,
            "attempts": job.attempts,
            "generation": job.generation,
            "score": job.result.score if job.result is not None else None,
            **timings,
            **announced,
        },
    )


def announce(
    job: Job,
    store: JobStore,
    publisher: EventPublisher,
    clock: Clock,
    on_final: Callable[[Job], None] | None = None,
) -> Job:
    """Publish the completion event of a final job unless it is already marked published.

    A crash between publish and mark leads to one more publish with the same event id on
    the next delivery: subscribers dedupe on it, so the event is observed once. `on_final`
    runs between the two (an assignment's check whether it is graded), so it too runs
    again until the job is marked.
    """
    if job.event_published:
        return job
    announced = publish_completion(job, publisher, on_final)
    marked = store.update(job.id, lambda j: j.mark_event_published(clock.now()))
    # Logged once the job is marked announced: one line per job for the metrics.
    log_completion(job, **announced)
    return marked


def publish_completion(
    job: Job, publisher: EventPublisher, on_final: Callable[[Job], None] | None = None
) -> dict[str, object]:
    """Publish a final job's event, then run `on_final`; what its completion line adds.

    A job held for a teacher's review, or waiting for its teacher to post it, publishes
    nothing: the review or the post publishes this same event (same id). A grade the
    assignment posts automatically publishes its `GradePosted` too.
    """
    if job.withheld:
        if on_final is not None:
            on_final(job)
        return {"withheld_for_review": True}
    event = GradingCompleted.from_job(job)
    message_id = publisher.publish(event)
    posted: dict[str, object] = {}
    if job.posted is not None and not job.post_announced:
        posted_event = GradePosted.from_job(job)
        publisher.publish(posted_event)
        posted = {"posted_event_id": posted_event.event_id, "posted_version": job.posted.version}
    if on_final is not None:
        on_final(job)
    return {"event_id": event.event_id, "message_id": message_id, **posted}
