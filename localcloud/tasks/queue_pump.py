"""One queue's pump: claims due tasks within the rate limits and delivers them on a pool.

A fixed pool of dispatch threads sends the requests over kept-alive connections. An
attempt that ends hands its outcome back to the pump, which records every outcome gathered
since its last turn and claims the next due tasks in one transaction. An outcome waits
for that turn at most `record_delay_s` (a lease outlasts the dispatch deadline); only an
attempt that frees the last slot wakes the pump at once. An outcome is forgotten only once
the transaction that recorded it has committed: a turn that fails keeps it for the next.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from localcloud.cloudrun import ForwardedTokens
from localcloud.http_pool import pool
from localcloud.outcomes import RETRY_S, PendingOutcomes
from localcloud.tasks.attempt import AttemptResult, build_headers, send
from localcloud.tasks.rate_limit import TokenBucket, burst_size
from localcloud.tasks.retry import describe, exhausted, retry_delay
from shared.adapters.embedded.task_table import TaskRow, TaskTable
from shared.codecs.task_body import MalformedTaskBody, decode_task_body
from shared.config.queues import QueueConfig
from shared.logs import job_context

log = logging.getLogger(__name__)

_CLAIM_BATCH = 50
_PURGE_EVERY_S = 60.0


def _job_id(task: TaskRow) -> str | None:
    try:
        return decode_task_body(task.body)
    except MalformedTaskBody:
        return None


@dataclass(frozen=True)
class _Outcome:
    """An attempt that ended, waiting for the pump to record it."""

    task: TaskRow
    result: AttemptResult
    first_attempt_at: float
    job_id: str | None


class QueuePump:
    """Dispatches one queue's tasks: rate-limited, capped in flight, retried per its config."""

    def __init__(
        self,
        table: TaskTable,
        queue: QueueConfig,
        owner: str,
        *,
        push_token: str | None,
        oidc_account: str | None = None,
        target_base: str | None = None,
        poll_interval_s: float,
        lease_margin_s: float,
        name_reservation_s: float,
        record_delay_s: float = 0.05,
        tokens: ForwardedTokens | None = None,
    ) -> None:
        self.table = table
        self.queue = queue
        self.owner = owner
        self.push_token = push_token
        self.oidc_account = oidc_account
        #: The ID tokens this pump's dispatcher forwards (shared by its pumps).
        self.tokens = tokens or ForwardedTokens()
        # Tasks stored with a relative URL go to this base (the worker's current address).
        self.target_base = target_base
        self.poll_interval_s = poll_interval_s
        self.lease_margin_s = lease_margin_s
        self.name_reservation_s = name_reservation_s
        #: How long an ended attempt's outcome may wait for the next turn (its lease
        #: outlasts the dispatch deadline), unless it frees the last slot.
        self.record_delay_s = record_delay_s
        rate = queue.rate_limits.max_dispatches_per_second
        self.bucket = TokenBucket(rate, burst_size(rate))
        self._cap = queue.rate_limits.max_concurrent_dispatches
        self._in_flight = 0
        self._idle = threading.Condition()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"pump-{queue.name}", daemon=True)
        self._pool = ThreadPoolExecutor(self._cap, thread_name_prefix=f"dispatch-{queue.name}")
        self._outcomes = PendingOutcomes[_Outcome](
            table.db,
            lambda o: self._record(o.task, o.result, o.first_attempt_at),
            name=lambda o: f"task {o.task.name}",
            job_id=lambda o: o.job_id,
            log=log,
        )
        self._http = pool(self._cap)
        self._next_purge = 0.0

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        """Look for due tasks now (a task was just created in this process)."""
        self._wake.set()

    def stop_claiming(self) -> None:
        """Claim no more tasks; attempts in flight carry on."""
        self._stopping.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join()

    def wait_idle(self, until: float) -> int:
        """Wait until no attempt is in flight or `until` (monotonic); return those left.

        The outcomes of the attempts that ended are recorded before returning; a table
        that fails is tried again until `until` (once at least).
        """
        with self._idle:
            while self._in_flight and (left := until - time.monotonic()) > 0:
                self._idle.wait(left)
            left_in_flight = self._in_flight
        self._outcomes.record_until(until, f"queue {self.queue.name}")
        self._pool.shutdown(wait=False)
        self._http.close()
        return left_in_flight

    def _run(self) -> None:
        # A turn is taken when woken (a new task, a freed slot), when outcomes wait to be
        # recorded, or when the last turn said to look again; waking only to watch
        # attempts in flight costs none.
        signalled, look_at = True, 0.0
        while not self._stopping.is_set():
            now = time.monotonic()
            if signalled or self._outcomes or now >= look_at:
                try:
                    look_at = now + self.turn()
                except Exception:
                    # Keep pumping (a locked or briefly unavailable database heals itself),
                    # after a second: the outcomes stay queued until then.
                    log.exception("queue %s: dispatch loop error; retrying", self.queue.name)
                    signalled = self._wake.wait(RETRY_S)
                    if signalled:
                        self._wake.clear()
                    look_at = 0.0
                    continue
            wait = look_at - time.monotonic()
            with self._idle:
                busy = self._in_flight > 0
            if busy or self._outcomes:
                wait = min(wait, self.record_delay_s)
            signalled = self._wake.wait(max(wait, 0.0))
            if signalled:
                self._wake.clear()

    @property
    def in_flight(self) -> int:
        """How many attempts are under way."""
        with self._idle:
            return self._in_flight

    def turn(self) -> float:
        """Record ended attempts, start what may start now; return how long to sleep.

        The pump's thread takes the turns; a paused dispatcher's pumps take none, and can
        be turned by hand.
        """
        now = time.time()
        if now >= self._next_purge:
            self.table.purge_tombstones(self.queue.name, now - self.name_reservation_s)
            self._next_purge = now + _PURGE_EVERY_S
        with self._idle:
            free = self._cap - self._in_flight
        tokens = self.bucket.available()
        # Full: an attempt that ends wakes the pump. Out of tokens: the bucket says when.
        idle_wait = self.poll_interval_s if free <= 0 else self.bucket.wait_time()
        may_claim = free > 0 and tokens >= 1
        if not may_claim and not self._outcomes:
            return idle_wait
        with self.table.db.transaction():
            self._outcomes.record()
            if not may_claim:
                return idle_wait
            claimed = self.table.claim_due(
                self.queue.name,
                now,
                min(free, tokens, _CLAIM_BATCH),
                self.owner,
                self.queue.dispatch_deadline.total_seconds(),
                self.lease_margin_s,
            )
            if not claimed:
                due = self.table.next_due(self.queue.name)
                wait = self.poll_interval_s if due is None else due - time.time()
                return min(max(wait, 0.0), self.poll_interval_s)
            starting = [task for task in claimed if self._startable(task, now)]
        # Sent only once their leases are committed.
        for task in starting:
            self.bucket.take()
            self._start(task, task.first_attempt_at or now)
        return 0.0

    def _startable(self, task: TaskRow, claimed_at: float) -> bool:
        """False for a task with no attempt left, which is deleted instead."""
        first = task.first_attempt_at or claimed_at
        if task.lease_owner and exhausted(
            self.queue.retry_config, task.dispatch_count, first, claimed_at
        ):
            # Its last attempt was lost with a dispatcher that died: nothing left to try.
            reason = f"retries exhausted after {task.dispatch_count} attempts; last: lease expired"
            self.table.finish(task, self.owner, None, reason, claimed_at)
            log.warning("task %s deleted: %s", task.name, reason, extra={"job_id": _job_id(task)})
            return False
        return True

    def _start(self, task: TaskRow, first_attempt_at: float) -> None:
        with self._idle:
            self._in_flight += 1
        self._pool.submit(self._attempt, task, first_attempt_at)

    def _attempt(self, task: TaskRow, first_attempt_at: float) -> None:
        try:
            job_id = _job_id(task)
            with job_context(job_id):
                deadline = task.dispatch_deadline_s or self.queue.dispatch_deadline.total_seconds()
                headers = build_headers(
                    task, self.push_token, self.tokens, self.oidc_account, self.target_base
                )
                result = send(task, headers, deadline, self.target_base, self._http)
                self._outcomes.add(_Outcome(task, result, first_attempt_at, job_id))
        except Exception:
            # The lease expires and the task is claimed again: nothing is lost.
            log.exception("task %s: the attempt failed unexpectedly", task.name)
        finally:
            with self._idle:
                was_full = self._in_flight >= self._cap
                self._in_flight -= 1
                self._idle.notify_all()
            if was_full:
                self.wake()

    def _record(self, task: TaskRow, result: AttemptResult, first_attempt_at: float) -> None:
        now = time.time()
        attempts = task.dispatch_count + 1
        fields = {
            "queue": self.queue.name,
            "task": task.name,
            "attempt": attempts,
            "status": result.status,
        }
        if result.succeeded:
            if self.table.finish(task, self.owner, result.status, "succeeded", now):
                log.debug("task %s delivered", task.name, extra=fields)
            return
        config = self.queue.retry_config
        what = f"{result.reason} {result.status or ''} {result.detail}".strip()
        if exhausted(config, attempts, first_attempt_at, now):
            reason = f"retries exhausted after {attempts} attempts; last: {what}"
            if self.table.finish(task, self.owner, result.status, reason, now):
                log.warning("task %s deleted: %s", task.name, reason, extra=fields)
            return
        at = now + retry_delay(config, attempts, result, now)
        if self.table.retry_later(task, self.owner, result.status, result.reason, at):
            log.info(
                "task %s failed (%s); retry at %s", task.name, what, describe(at), extra=fields
            )
