"""One timer per worker process renews the lease of every attempt in flight.

A grader call blocks its thread and cannot renew its own lease. The heartbeat's one
daemon thread does it for all of them: each attempt is renewed one `Budget.heartbeat_s`
after its last renewal, and the attempts due within the same short window are renewed
together, in one store write where the store can batch (`BatchJobUpdates`).

What the timer learns is left on the attempt, and settles it (`Attempt.settled`), so its
delivery answers at once instead of when the grader returns (`Heartbeat.end`):

- LOST: the lease is another attempt's, or could not be renewed before it may have
  expired. The delivery must not store its outcome (the store's fenced writes would
  refuse it anyway) and answers LOCKED.
  The same once the grading outlived the queue's dispatch deadline: the queue has given
  up on that delivery, and the lease is left to expire for the next one to take over.
- RELEASED: the worker is draining and the grace ran out. The timer already handed the
  job back (RETRYING, `worker-shutdown`), so a grader that never returns cannot hold the
  job, and its delivery answers the queue (retry) right then: the process may be stopped
  at any time after that.

The thread is a daemon: it never keeps a stopping process alive. It ends after one idle
heartbeat with nothing in flight, and the next attempt starts it again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, runtime_checkable

from shared.config.budget import Budget
from shared.domain.errors import DependencyUnavailable, GradeqError, LeaseLost
from shared.domain.job import Job, JobError
from shared.logs import job_context
from shared.ports import Clock, JobStore

log = logging.getLogger(__name__)

#: The error a job records when a shutting-down worker hands its attempt back.
WORKER_SHUTDOWN = "worker-shutdown"
#: The coalescing window: renewals due within this share of a heartbeat are written
#: together, and the timer makes at most one pass per window.
COALESCE_SHARE = 0.25
#: ... but the window is never longer than this many seconds.
COALESCE_MAX_S = 1.0


@runtime_checkable
class BatchJobUpdates(Protocol):
    """A job store that applies several jobs' updates in one atomic write."""

    def update_each(
        self, mutations: Mapping[str, Callable[[Job], Job]]
    ) -> dict[str, Job | GradeqError]:
        """Apply each job's `mutate` (as `JobStore.update`) in one write.

        A mutation raising a domain error leaves that job as it was and answers the
        error in its place; the others are written. DependencyUnavailable fails all.
        """
        ...


class AttemptState(StrEnum):
    LIVE = "live"
    LOST = "lost"
    RELEASED = "released"


@dataclass(eq=False)
class Attempt:
    """One grading in flight, as the heartbeat tracks it."""

    job_id: str
    owner: str
    #: Monotonic time the grading began.
    began: float
    #: Monotonic time of the claim or of the last renewal that was stored.
    renewed_at: float
    #: Monotonic time the next renewal is due.
    due: float
    state: AttemptState = AttemptState.LIVE
    #: Why the attempt was lost (LOST).
    lost: LeaseLost | None = None
    #: The job as the drain handed it back (RELEASED; None if that write failed).
    released: Job | None = None
    #: A renewal of this attempt is being written right now.
    renewing: bool = field(default=False, repr=False)
    #: Set once the delivery may answer: the grader returned, or the attempt was lost or
    #: handed back (the grader may still be running then; its outcome no longer counts).
    settled: threading.Event = field(default_factory=threading.Event, repr=False)


class Heartbeat:
    """Renews the leases of the attempts in flight; hands them back when drained."""

    def __init__(
        self,
        store: JobStore,
        clock: Clock,
        budget: Budget,
        *,
        background: bool = True,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._clock = clock
        self._budget = budget
        self._lease = budget.lease
        self._monotonic = monotonic
        # Without the background thread, `tick` is called by whoever drives time.
        self._background = background
        self._changed = threading.Condition()
        self._attempts: dict[int, Attempt] = {}
        self._drain_until = float("inf")
        self._draining = False
        self._thread: threading.Thread | None = None
        # When the last pass ran, and when the timer thread wakes next (monotonic).
        self._last_pass = float("-inf")
        self._wake_at = float("-inf")
        self._window = min(COALESCE_MAX_S, COALESCE_SHARE * budget.heartbeat_s)
        self._dispatch_deadline_s = budget.queue.dispatch_deadline.total_seconds()

    # --- the deliveries' side ------------------------------------------------------------

    def begin(self, job_id: str, owner: str) -> Attempt:
        """Track a claimed attempt: its lease is renewed until `end`."""
        now = self._monotonic()
        attempt = Attempt(job_id, owner, now, renewed_at=now, due=now + self._budget.heartbeat_s)
        with self._changed:
            self._attempts[id(attempt)] = attempt
            if self._draining and now >= self._drain_until:
                # Claimed after the grace ran out: handed back at the next tick.
                attempt.due = now
            self._start()
            # The timer is woken only when this attempt is due before its next pass: a
            # delivery costs the timer nothing while other attempts keep it busy.
            if attempt.due < self._wake_at:
                self._changed.notify_all()
        return attempt

    def end(self, attempt: Attempt) -> AttemptState:
        """Stop renewing `attempt` (after a renewal being written); say how it stands."""
        with self._changed:
            while attempt.renewing:
                self._changed.wait()
            self._attempts.pop(id(attempt), None)
            return attempt.state

    def in_flight(self) -> list[Attempt]:
        """The attempts not yet ended, oldest first."""
        with self._changed:
            return list(self._attempts.values())

    # --- draining ------------------------------------------------------------------------

    def drain(self, grace_s: float) -> bool:
        """Hand every attempt still in flight back `grace_s` from now; False if draining."""
        with self._changed:
            if self._draining:
                return False
            self._draining = True
            self._drain_until = self._monotonic() + grace_s
            self._changed.notify_all()
        return True

    @property
    def draining(self) -> bool:
        return self._draining

    # --- the timer -----------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether the timer thread is alive."""
        with self._changed:
            return self._thread is not None

    def _start(self) -> None:
        if self._background and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                self.tick()
            except Exception:  # the timer must outlive any one failed pass
                log.exception("heartbeat pass failed")
            with self._changed:
                # Decided under the lock the wait releases: an attempt begun after this
                # sees when the timer wakes, and wakes it if it is due sooner.
                now = self._monotonic()
                wait = self._wait_s(now)
                self._wake_at = now + wait
                if wait == float("inf"):
                    # Nothing in flight: after one idle heartbeat the thread ends; the
                    # next attempt starts another.
                    self._changed.wait(self._budget.heartbeat_s)
                    if self._wait_s(self._monotonic()) == float("inf"):
                        self._thread = None
                        self._wake_at = float("-inf")
                        return
                elif wait > 0:
                    self._changed.wait(wait)

    def wait_s(self) -> float:
        """Seconds until the next pass has work (inf: none in flight, not draining)."""
        with self._changed:
            return self._wait_s(self._monotonic())

    def _wait_s(self, now: float) -> float:
        live = [a.due for a in self._attempts.values() if a.state is AttemptState.LIVE]
        # At most one pass per coalescing window, however many attempts come and go:
        # what falls due meanwhile is renewed together, a little late at most.
        wake = max(min(live, default=float("inf")), self._last_pass + self._window)
        if self._draining and live:
            wake = min(wake, self._drain_until)
        return max(0.0, wake - now)

    def tick(self) -> float:
        """Renew (or, past the drain grace, hand back) what is due; the wait to the next."""
        with self._changed:
            now = self._monotonic()
            self._last_pass = now
            live = [a for a in self._attempts.values() if a.state is AttemptState.LIVE]
            if self._draining and now >= self._drain_until:
                batch = live
                release = True
            else:
                batch = [a for a in live if a.due <= now + self._window]
                # Nothing is written early unless one renewal is really due.
                if not any(a.due <= now for a in batch):
                    batch = []
                batch = [a for a in batch if not self._overran(a, now)]
                release = False
            for attempt in batch:
                attempt.renewing = True
        try:
            if release and batch:
                self._release(batch)
            elif batch:
                self._renew(batch, now)
        finally:
            with self._changed:
                for attempt in batch:
                    attempt.renewing = False
                self._changed.notify_all()
        with self._changed:
            return self._wait_s(self._monotonic())

    def _overran(self, attempt: Attempt, now: float) -> bool:
        """Lose an attempt older than the queue's dispatch deadline (True if it is).

        The queue gave up on its delivery by then and delivers the task again: renewing
        the lease of a grader that never returns would keep every later delivery out.
        Left to expire, the lease is taken over by the next delivery.
        """
        if now - attempt.began < self._dispatch_deadline_s:
            return False
        with job_context(attempt.job_id):
            log.warning("the grading outlived the queue's dispatch deadline; its lease is let go")
        self._lose(attempt, LeaseLost(attempt.job_id, attempt.owner))
        return True

    def _mutations(
        self, attempts: Iterable[Attempt], mutate: Callable[[Attempt], Callable[[Job], Job]]
    ) -> dict[str, Job | GradeqError]:
        """One write for them all where the store batches, else one write each."""
        mutations = {a.job_id: mutate(a) for a in attempts}
        if isinstance(self._store, BatchJobUpdates):
            return self._store.update_each(mutations)
        outcomes: dict[str, Job | GradeqError] = {}
        for job_id, change in mutations.items():
            try:
                outcomes[job_id] = self._store.update(job_id, change)
            except DependencyUnavailable:
                raise
            except GradeqError as exc:
                outcomes[job_id] = exc
        return outcomes

    def _renew(self, batch: list[Attempt], now: float) -> None:
        at = self._clock.now()

        def renewal(attempt: Attempt) -> Callable[[Job], Job]:
            return lambda job: job.renew(attempt.owner, at, self._lease)

        try:
            outcomes = self._mutations(batch, renewal)
        except DependencyUnavailable as exc:
            soon = now + min(1.0, self._budget.heartbeat_s / 3)
            for attempt in batch:
                with job_context(attempt.job_id):
                    # The lease may still be ours; once it can have expired, it is not.
                    if now - attempt.renewed_at >= self._budget.lease_s:
                        log.warning("lease could not be renewed before it expired; stopping")
                        self._lose(attempt, LeaseLost(attempt.job_id, attempt.owner))
                    else:
                        log.warning(
                            "lease renewal failed; trying again", extra={"reason": exc.detail}
                        )
                        attempt.due = soon
            return
        renewed_at = self._monotonic()
        for attempt in batch:
            outcome = outcomes[attempt.job_id]
            if isinstance(outcome, Job):
                attempt.renewed_at = renewed_at
                attempt.due = renewed_at + self._budget.heartbeat_s
                continue
            with job_context(attempt.job_id):
                log.warning("lease renewal found the lease lost; stopping the attempt")
            lost = outcome if isinstance(outcome, LeaseLost) else None
            self._lose(attempt, lost or LeaseLost(attempt.job_id, attempt.owner))

    @staticmethod
    def _lose(attempt: Attempt, reason: LeaseLost) -> None:
        attempt.state = AttemptState.LOST
        attempt.lost = reason
        attempt.settled.set()

    def _release(self, batch: list[Attempt]) -> None:
        """Hand each attempt's job back to the queue: RETRYING, its attempt closed."""
        at = self._clock.now()
        error = JobError(WORKER_SHUTDOWN, "the worker shut down during the attempt")

        def release(attempt: Attempt) -> Callable[[Job], Job]:
            return lambda job: job.retry_later(attempt.owner, error, at)

        try:
            outcomes: Mapping[str, Job | GradeqError] = self._mutations(batch, release)
        except DependencyUnavailable as exc:
            # The leases run out on their own; the next deliveries take the jobs over.
            log.warning("leases could not be released", extra={"reason": exc.detail})
            outcomes = {}
        for attempt in batch:
            outcome = outcomes.get(attempt.job_id)
            if isinstance(outcome, LeaseLost):
                self._lose(attempt, outcome)  # another attempt holds the job by now
                continue
            attempt.state = AttemptState.RELEASED
            if isinstance(outcome, Job):
                attempt.released = outcome
                with job_context(attempt.job_id):
                    log.warning(
                        "worker shutting down; lease released",
                        extra={"attempt": outcome.attempts},
                    )
            attempt.settled.set()
