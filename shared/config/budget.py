"""One time budget: how grading, leases, the queue's retries and the sweep fit together.

Every duration that decides when a crashed attempt is rescued is derived here or checked
against the others, once, when the settings are made (and in a test over the shipped
queues file and terraform's variables). An inconsistent set refuses to start with a
message naming both numbers.

The life of a delivery, longest first: it may wait for a dead attempt's lease to expire
(at most one lease), grade (at most the grader timeout), then retry storing the result
for a short while. That must end before the queue's dispatch deadline, or the queue
would send the task again while the first delivery still runs. The lease is short and
renewed by a heartbeat while the grader runs, so a dead attempt is taken over by the
next delivery within one lease after its last renewal.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from shared.config.queues import QueueConfig

#: Cloud Tasks accepts dispatch deadlines in this range (seconds).
DISPATCH_DEADLINE_RANGE = (15.0, 1800.0)
#: Cloud Run sends SIGTERM and kills the container this many seconds later.
CLOUD_RUN_SIGTERM_GRACE_S = 10.0
#: Time a draining worker keeps, after its grace, to release leases and answer.
RELEASE_MARGIN_S = 2.0
#: Deliveries one crash must leave room for: the takeover, and the takeover of that.
TAKEOVERS_AFTER_A_CRASH = 2


class BudgetError(ValueError):
    """The configured durations contradict each other."""


@dataclass(frozen=True)
class Budget:
    """The checked durations, and what follows from them."""

    grader_timeout_s: float
    lease_s: float
    heartbeat_s: float
    result_write_retry_s: float
    drain_grace_s: float
    job_max_attempts: int
    queue: QueueConfig

    @property
    def lease(self) -> timedelta:
        return timedelta(seconds=self.lease_s)

    @property
    def takeover_wait_s(self) -> float:
        """How long a delivery that meets another attempt's lease waits for it to end."""
        return self.lease_s

    @property
    def last_delivery_wait_s(self) -> float:
        """How long the queue's last delivery waits for a live attempt to end the job.

        It must still be able to take over and grade before its dispatch deadline.
        """
        deadline = self.queue.dispatch_deadline.total_seconds()
        return deadline - self.grader_timeout_s - self.result_write_retry_s

    @property
    def longest_delivery_s(self) -> float:
        """Wait for a dead lease, grade, retry the result write."""
        return self.takeover_wait_s + self.grader_timeout_s + self.result_write_retry_s

    @property
    def sweep_stale(self) -> timedelta:
        """Age after which the sweep looks at a non-final job (it replays only taskless ones)."""
        return timedelta(seconds=2 * self.lease_s)

    @property
    def worst_case_grader_calls(self) -> int:
        """Grader calls one job can cost: every call follows a counted claim."""
        return self.job_max_attempts

    @property
    def renewals_per_minute(self) -> float:
        """Store writes the heartbeat costs per minute of grading (one per renewal)."""
        return 60.0 / self.heartbeat_s

    def rescue_bound_s(self, retry_count: int) -> float:
        """Longest crash-to-takeover time of a delivery with this retry count."""
        return self.lease_s + self.queue.retry_config.backoff(retry_count + 1).total_seconds()

    def check(self, cloud_run_timeout_s: float | None = None) -> Budget:
        """Raise `BudgetError` naming both numbers of the first contradiction found."""
        deadline = self.queue.dispatch_deadline.total_seconds()
        low, high = DISPATCH_DEADLINE_RANGE
        if not low <= deadline <= high:
            raise BudgetError(
                f"queue {self.queue.name!r}: dispatch_deadline ({deadline:g}s) must lie "
                f"between {low:g}s and {high:g}s"
            )
        if self.heartbeat_s * 2 > self.lease_s:
            raise BudgetError(
                f"GRADEQ_HEARTBEAT_S ({self.heartbeat_s:g}s) must be at most half of "
                f"GRADEQ_LEASE_S ({self.lease_s:g}s), so one late renewal does not lose it"
            )
        if self.longest_delivery_s > deadline:
            raise BudgetError(
                f"the longest delivery (lease wait {self.takeover_wait_s:g}s + "
                f"GRADEQ_GRADER_TIMEOUT_S {self.grader_timeout_s:g}s + result write retry "
                f"{self.result_write_retry_s:g}s = {self.longest_delivery_s:g}s) must end "
                f"before the queue's dispatch_deadline ({deadline:g}s)"
            )
        if cloud_run_timeout_s is not None and cloud_run_timeout_s < deadline:
            raise BudgetError(
                f"the worker's Cloud Run request timeout ({cloud_run_timeout_s:g}s) must not be "
                f"shorter than the queue's dispatch_deadline ({deadline:g}s)"
            )
        needed = 1 + TAKEOVERS_AFTER_A_CRASH
        attempts = self.queue.retry_config.max_attempts
        if 0 < attempts < needed:
            raise BudgetError(
                f"queue {self.queue.name!r}: max_attempts ({attempts}) must leave room for "
                f"{TAKEOVERS_AFTER_A_CRASH} takeovers after a crash ({needed} deliveries)"
            )
        if self.job_max_attempts < needed:
            raise BudgetError(
                f"GRADEQ_JOB_MAX_ATTEMPTS ({self.job_max_attempts}) must leave room for "
                f"{TAKEOVERS_AFTER_A_CRASH} takeovers after a crash ({needed} attempts)"
            )
        if 0 < attempts < self.job_max_attempts:
            raise BudgetError(
                f"GRADEQ_JOB_MAX_ATTEMPTS ({self.job_max_attempts}) must not exceed the queue's "
                f"max_attempts ({attempts}): the queue's last delivery would end the job early"
            )
        usable = CLOUD_RUN_SIGTERM_GRACE_S - RELEASE_MARGIN_S
        if self.drain_grace_s > usable:
            raise BudgetError(
                f"GRADEQ_DRAIN_GRACE_S ({self.drain_grace_s:g}s) must leave "
                f"{RELEASE_MARGIN_S:g}s of Cloud Run's {CLOUD_RUN_SIGTERM_GRACE_S:g}s shutdown "
                f"grace to release leases (at most {usable:g}s)"
            )
        return self
