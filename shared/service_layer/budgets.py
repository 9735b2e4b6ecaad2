"""Budgets in service: refuse new submissions and hold queued work past a hard limit, count
each grading's cost, alert past a soft limit.

The budgets themselves are few and change rarely: a gate reads them all at most once a
`refresh` (default a minute, GRADEQ_BUDGET_REFRESH_S) and reads a spend only for a client
or assignment that has a budget, so deployments without budgets pay no read per job. A
raised budget takes effect within one refresh; a held job is looked at again every
`hold_recheck` (default `HOLD_RECHECK`, GRADEQ_BUDGET_HOLD_RECHECK_S), or at the next
month if that is sooner.
"""

from __future__ import annotations

import logging
import math
import threading
from datetime import datetime, timedelta

from shared.domain.budgets import (
    COST_KEY,
    Budget,
    BudgetScope,
    BudgetStanding,
    Charge,
    month_of,
    next_month_start,
)
from shared.domain.errors import BudgetExhausted, BudgetHeld, DependencyUnavailable
from shared.domain.grade import GradeResult
from shared.domain.job import Job
from shared.ports import BudgetStore, Clock

log = logging.getLogger(__name__)

#: How often a held job is delivered again to see whether its budget allows it now (the
#: default of GRADEQ_BUDGET_HOLD_RECHECK_S).
HOLD_RECHECK = timedelta(minutes=15)
#: How often the budgets are read again (the default of GRADEQ_BUDGET_REFRESH_S).
REFRESH = timedelta(minutes=1)
#: The message of the soft-limit alert: terraform/monitoring.tf counts these lines.
SOFT_LIMIT_MESSAGE = "budget soft limit passed"


class BudgetGate:
    """Budgets as the intake and the worker apply them."""

    def __init__(
        self,
        store: BudgetStore,
        clock: Clock,
        refresh: timedelta = REFRESH,
        hold_recheck: timedelta = HOLD_RECHECK,
    ) -> None:
        if refresh <= timedelta(0) or hold_recheck <= timedelta(0):
            raise ValueError("a budget gate's refresh and hold recheck are positive")
        self._store = store
        self._clock = clock
        self._refresh = refresh
        self._hold_recheck = hold_recheck
        self._lock = threading.Lock()
        self._budgets: dict[tuple[BudgetScope, str], Budget] = {}
        self._read_at: datetime | None = None

    def _budget(self, scope: BudgetScope, key: str | None) -> Budget | None:
        if not key:
            return None
        now = self._clock.now()
        with self._lock:
            if self._read_at is None or now - self._read_at >= self._refresh:
                self._budgets = {(b.scope, b.key): b for b in self._store.budgets()}
                self._read_at = now
            return self._budgets.get((scope, key))

    def standings(self, client_id: str, assignment_id: str | None) -> list[BudgetStanding]:
        """This month's standing of each budget that applies (client first)."""
        month = month_of(self._clock.now())
        found = []
        for scope, key in (
            (BudgetScope.CLIENT, client_id),
            (BudgetScope.ASSIGNMENT, assignment_id),
        ):
            budget = self._budget(scope, key)
            if budget is not None:
                found.append(
                    BudgetStanding(budget, month, self._store.spent(scope, budget.key, month))
                )
        return found

    def exhausted(self, client_id: str, assignment_id: str | None) -> BudgetStanding | None:
        """The first applying budget spent to its hard limit, if any."""
        return next((s for s in self.standings(client_id, assignment_id) if s.exhausted), None)

    def admit(self, client_id: str, assignment_id: str | None) -> None:
        """Raise BudgetExhausted when a budget of the client or assignment is spent."""
        standing = self.exhausted(client_id, assignment_id)
        if standing is None:
            return
        wait = next_month_start(self._clock.now()) - self._clock.now()
        raise BudgetExhausted(
            f"the {standing.budget.scope.value} budget of {standing.month} is spent "
            f"({standing.spent_micro_usd} of {standing.budget.hard_micro_usd} micro-USD)",
            retry_after_s=max(1, math.ceil(wait.total_seconds())),
            budget=standing.to_dict(),
        )

    def hold(self, job: Job) -> BudgetHeld | None:
        """Why the job waits (its budget is spent) and for how long; None: grade it."""
        standing = self.exhausted(job.client_id, job.request.assignment_id)
        if standing is None:
            return None
        now = self._clock.now()
        wait = min(self._hold_recheck, next_month_start(now) - now)
        return BudgetHeld(
            f"the {standing.budget.scope.value} budget of {standing.month} is spent",
            retry_after_s=max(1.0, wait.total_seconds()),
        )

    def charge(self, job: Job, result: GradeResult) -> None:
        """Count the grading's cost against the job's budgets once (per job generation);
        log the soft-limit alert when it takes a budget past its soft limit."""
        cost = result.usage.get(COST_KEY)
        if not cost:
            return
        now = self._clock.now()
        charge = Charge(
            f"{job.id}/{job.generation}", job.client_id, job.request.assignment_id, now, cost
        )
        try:
            if not self._store.charge(charge):
                return
        except DependencyUnavailable as exc:
            # The grade is worth more than the count: it is stored, the spend undercounted.
            log.warning("a grading's cost could not be counted", extra={"reason": exc.detail})
            return
        for standing in self.standings(job.client_id, job.request.assignment_id):
            soft = standing.budget.soft_micro_usd
            if (
                soft is not None
                and standing.spent_micro_usd - cost < soft <= standing.spent_micro_usd
            ):
                log.warning(
                    SOFT_LIMIT_MESSAGE,
                    extra={"event": "budget_soft_limit", **standing.to_dict()},
                )
