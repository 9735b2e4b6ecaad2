"""The soak's budget holds: a client's budget runs out while its jobs are queued.

A second client (`BUDGET_CLIENT`, its own API key) submits `count` jobs scheduled a few
seconds ahead (`not_before`), so they wait in the queue. An operator then sets the
client's monthly budget to 0 micro-dollars (`PUT /admin/v1/budgets/client/...`): spent.
Once the services have read it again (GRADEQ_BUDGET_REFRESH_S), the client's new
submissions must be refused (`429 budget-exhausted`, counted as refused, never as
accepted) and each queued job, when its task comes, must be held: `RETRYING`, no attempt
counted, `waiting.kind` `budget-hold` in its status. When every one is seen held (or
after `HOLD_WAIT_S`), the operator raises the budget; each held job is released at its
next look (GRADEQ_BUDGET_HOLD_RECHECK_S) and must reach exactly one final state with one
completion event, under the same SIGKILL/SIGSTOP faults as the rest of the soak.

The soak registers the accepted jobs as its own (kind `held`), so its invariants (final,
one event id per subscriber, nothing left behind, no job never accepted) cover them;
`check` adds the holds' own (each seen held, released, 0 lost, 0 doubled) and figures.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import requests

#: The client whose budget runs out.
BUDGET_CLIENT = "soak-budget-client"
#: The soak's scaled-down budget durations (the services' env).
BUDGET_ENV = {"GRADEQ_BUDGET_REFRESH_S": "1", "GRADEQ_BUDGET_HOLD_RECHECK_S": "2"}
REFRESH_S = float(BUDGET_ENV["GRADEQ_BUDGET_REFRESH_S"])
#: How far ahead the client's jobs are scheduled: long after the budget is spent and read.
QUEUED_FOR_S = 4 * REFRESH_S + 2
#: Submissions tried while the budget is spent (each must be refused).
REFUSED_TRIES = 3
#: The longest the operator waits for every job to be seen held before raising the budget.
HOLD_WAIT_S = 30.0
#: A budget no soak job can spend (micro-dollars: a thousand dollars).
RAISED_MICRO_USD = 10**9
FINAL = ("SUCCEEDED", "FAILED", "CANCELLED")


@dataclass
class BudgetHolds:
    """The held client's run; `call` is the soak's patient client, `operator` the admin's
    Authorization header, `accept` registers a job with the soak, `follow` polls a job to
    its final state (with the held client's Authorization) as the soak's clients do."""

    count: int
    at_s: float
    call: Callable[..., requests.Response]
    operator: dict[str, str]
    violation: Callable[[str], None]
    accept: Callable[[str, str, dict[str, Any]], None]
    follow: Callable[[str, dict[str, str]], None]
    answer: Callable[[int], str] = lambda i: "The mitochondria produce ATP."
    api_key: str = ""
    #: By job id, the submission's Idempotency-Key.
    accepted: dict[str, str] = field(default_factory=dict)
    refused: Counter[str] = field(default_factory=Counter)
    held: set[str] = field(default_factory=set)
    #: Monotonic times: the budget spent, the budget raised.
    spent_at: float | None = None
    raised_at: float | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}

    def _body(self, i: int, not_before: str | None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "submission_id": f"held-{i}",
            "answer": self.answer(i),
            "rubric": ["mentions mitochondria", "names ATP"],
            "max_score": 9,
        }
        if not_before is not None:
            body["not_before"] = not_before
        return body

    def _submit(self, i: int, not_before: str | None) -> requests.Response:
        headers = {**self._auth(), "Idempotency-Key": f"held-{i}"}
        return self.call(
            "POST", "/v1/grading-jobs", json=self._body(i, not_before), headers=headers
        )

    def _set_budget(self, micro_usd: int) -> None:
        path = f"/admin/v1/budgets/client/{BUDGET_CLIENT}"
        answer = self.call("PUT", path, json={"hard_micro_usd": micro_usd}, headers=self.operator)
        if answer.status_code != 200:
            self.violation(f"budgets: PUT {micro_usd} answered {answer.status_code}")

    def run(self, started: float) -> None:
        """Queue, spend, try to submit, watch the holds, raise, follow (a client thread)."""
        time.sleep(max(0.0, started + self.at_s - time.monotonic()))
        due = datetime.now(UTC) + timedelta(seconds=QUEUED_FOR_S)
        not_before = due.isoformat().replace("+00:00", "Z")
        for i in range(self.count):
            response = self._submit(i, not_before)
            if response.status_code != 202:
                self.violation(f"budgets: held-{i} answered {response.status_code}")
                continue
            job_id = response.json()["id"]
            with self._lock:
                self.accepted[job_id] = f"held-{i}"
            self.accept(job_id, f"held-{i}", self._body(i, not_before))
        self._set_budget(0)
        self.spent_at = time.monotonic()
        time.sleep(2 * REFRESH_S + 0.5)  # every service has read the spent budget
        for n in range(REFUSED_TRIES):
            self._refused_try(self.count + n)
        self._watch_holds()
        self._set_budget(RAISED_MICRO_USD)
        self.raised_at = time.monotonic()
        for job_id in list(self.accepted):
            self.follow(job_id, self._auth())

    def _refused_try(self, i: int) -> None:
        response = self._submit(i, None)
        problem = (
            response.json()
            if response.headers.get("Content-Type", "").startswith("application/problem+json")
            else {}
        )
        if response.status_code == 429 and str(problem.get("type", "")).endswith(
            "budget-exhausted"
        ):
            self.refused["budget-exhausted"] += 1
            if (problem.get("budget") or {}).get("key") != BUDGET_CLIENT:
                self.violation(f"budgets: held-{i} refused without its budget: {problem}")
            return
        self.refused[str(response.status_code)] += 1
        self.violation(f"budgets: held-{i} past the spent budget answered {response.status_code}")
        if response.status_code in (200, 202):
            job_id = response.json()["id"]
            with self._lock:
                self.accepted[job_id] = f"held-{i}"
            self.accept(job_id, f"held-{i}", self._body(i, None))

    def _watch_holds(self) -> None:
        """Poll each job's status until every one has been seen held (or HOLD_WAIT_S)."""
        deadline = time.monotonic() + QUEUED_FOR_S + HOLD_WAIT_S
        final: set[str] = set()  # seen final while the budget was spent: not watched again
        while time.monotonic() < deadline and self.held | final < set(self.accepted):
            for job_id in set(self.accepted) - self.held - final:
                view = self.call("GET", f"/v1/grading-jobs/{job_id}", headers=self._auth()).json()
                if (view.get("waiting") or {}).get("kind") != "budget-hold":
                    if view.get("status") in FINAL:
                        self.violation(f"budgets: {job_id} {view['status']} while spent")
                        final.add(job_id)
                    continue
                if view["status"] != "RETRYING" or view["attempts"] != 0 or view.get("error"):
                    self.violation(f"budgets: {job_id} held as {view['status']}: {view}")
                with self._lock:
                    self.held.add(job_id)
            time.sleep(0.3)

    def check(self, jobs: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """The holds' invariants against the stored jobs; their figures."""
        of_client = [j for j in jobs.values() if j["client_id"] == BUDGET_CLIENT]
        by_key = Counter(j["request"]["submission_id"] for j in of_client)
        doubled = sum(n - 1 for n in by_key.values())
        mine = [j for j in of_client if j["id"] in self.accepted]
        final = Counter(j["status"] for j in mine if j["status"] in FINAL)
        lost = len(self.accepted) - sum(final.values())  # missing, or never final
        never_held = set(self.accepted) - self.held
        if never_held:
            self.violation(f"budgets: {len(never_held)} jobs never seen held")
        if lost or doubled:
            self.violation(f"budgets: {lost} held jobs lost, {doubled} doubled")
        released = sum(1 for j in mine if j["id"] in self.held and j["status"] == "SUCCEEDED")
        if released != len(self.accepted):
            self.violation(
                f"budgets: {released} of {len(self.accepted)} held jobs graded after the raise"
            )
        return {
            "client": BUDGET_CLIENT,
            "queued": len(self.accepted),
            "refused_while_spent": dict(self.refused),
            "held": len(self.held & set(self.accepted)),
            "released": released,
            "final_by_status": dict(final),
            "lost": lost,
            "doubled": doubled,
            "held_for_s": round(self.raised_at - self.spent_at, 1)
            if self.raised_at is not None and self.spent_at is not None
            else None,
        }
