"""BudgetStore on Firestore: budgets, one document per charged job, sharded spend counters.

A charge is one atomic batched write: it creates the job's charge document (which fails
the whole batch if the job was charged before, so a redelivered grading counts once) and
adds the cost with `Increment` to the month's counter of the client and of the
assignment, and to the client's day counter. Each counter is split in `SHARDS` documents
(the job id picks one), so a client grading many answers a second stays within what one
Firestore document sustains; a read sums the shards (`SHARDS` reads, one `get_all`).
Charge documents carry `expire_at` for a TTL policy: they only guard against double
counting while a job can still be redelivered.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

from google.api_core import exceptions as gexc
from google.cloud import firestore
from google.cloud.firestore_v1.base_query import FieldFilter

from shared.domain.budgets import Budget, BudgetScope, Charge
from shared.domain.errors import DependencyUnavailable

#: Documents each spend counter is split into.
SHARDS = 4
#: How long a charge document guards its job against being counted twice.
CHARGE_KEPT = timedelta(days=62)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class FirestoreBudgetStore:
    """BudgetStore in three Firestore collections named after `prefix`."""

    def __init__(self, client: firestore.Client, prefix: str, deadline_s: float = 10.0) -> None:
        self._client = client
        self._budgets = client.collection(f"{prefix}_budgets")
        self._charges = client.collection(f"{prefix}_charges")
        self._months = client.collection(f"{prefix}_spend_months")
        self._days = client.collection(f"{prefix}_spend_days")
        self._deadline_s = deadline_s

    def _budget_ref(self, scope: BudgetScope, key: str) -> Any:
        return self._budgets.document(f"{scope.value}-{_digest(key)}")

    def _month_ref(self, scope: BudgetScope, key: str, month: str, shard: int) -> Any:
        return self._months.document(f"{scope.value}-{_digest(key)}-{month}-{shard}")

    def set_budget(self, budget: Budget) -> None:
        with _unavailable("set a budget"):
            self._budget_ref(budget.scope, budget.key).set(
                budget.to_dict(), timeout=self._deadline_s
            )

    def remove_budget(self, scope: BudgetScope, key: str) -> bool:
        ref = self._budget_ref(scope, key)
        with _unavailable("remove a budget"):
            snapshot = ref.get(timeout=self._deadline_s)
            if not snapshot.exists:
                return False
            ref.delete(timeout=self._deadline_s)
            return True

    def budgets(self) -> list[Budget]:
        with _unavailable("list budgets"):
            found = [
                Budget.from_dict(s.to_dict() or {})
                for s in self._budgets.stream(timeout=self._deadline_s)
            ]
        return sorted(found, key=lambda b: (b.scope.value, b.key))

    def charge(self, charge: Charge) -> bool:
        shard = int(_digest(charge.job_id), 16) % SHARDS
        batch = self._client.batch()
        batch.create(
            self._charges.document(_digest(charge.job_id)),
            {
                "job_id": charge.job_id,
                "client_id": charge.client_id,
                "assignment_id": charge.assignment_id,
                "month": charge.month,
                "micro_usd": charge.micro_usd,
                "expire_at": charge.at + CHARGE_KEPT,
            },
        )
        scopes = [(BudgetScope.CLIENT, charge.client_id)]
        if charge.assignment_id:
            scopes.append((BudgetScope.ASSIGNMENT, charge.assignment_id))
        for scope, key in scopes:
            batch.set(
                self._month_ref(scope, key, charge.month, shard),
                {
                    "scope": scope.value,
                    "key": key,
                    "month": charge.month,
                    "micro_usd": firestore.Increment(charge.micro_usd),
                },
                merge=True,
            )
        batch.set(
            self._days.document(f"{_digest(charge.client_id)}-{charge.day}-{shard}"),
            {
                "client_id": charge.client_id,
                "month": charge.month,
                "day": charge.day,
                "micro_usd": firestore.Increment(charge.micro_usd),
            },
            merge=True,
        )
        try:
            batch.commit(timeout=self._deadline_s)
        except (gexc.AlreadyExists, gexc.Conflict):
            return False  # charged before: the batch wrote nothing
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore budget store: charge failed: {exc}") from exc
        return True

    def spent(self, scope: BudgetScope, key: str, month: str) -> int:
        refs = [self._month_ref(scope, key, month, shard) for shard in range(SHARDS)]
        with _unavailable("read a spend"):
            snapshots = self._client.get_all(refs, timeout=self._deadline_s)
            return sum(int((s.to_dict() or {}).get("micro_usd", 0)) for s in snapshots if s.exists)

    def daily_spend(self, month: str) -> dict[str, dict[str, int]]:
        query = self._days.where(filter=FieldFilter("month", "==", month))
        out: dict[str, dict[str, int]] = {}
        with _unavailable("read the daily spend"):
            for snapshot in query.stream(timeout=self._deadline_s):
                row = snapshot.to_dict() or {}
                days = out.setdefault(row["client_id"], {})
                days[row["day"]] = days.get(row["day"], 0) + int(row["micro_usd"])
        return {client: dict(sorted(days.items())) for client, days in sorted(out.items())}


class _unavailable:  # noqa: N801 - used as a context manager, like contextlib's
    """Turn a Firestore error into DependencyUnavailable (503)."""

    def __init__(self, what: str) -> None:
        self._what = what

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> None:
        if isinstance(exc, gexc.GoogleAPIError):
            raise DependencyUnavailable(
                f"Firestore budget store: {self._what} failed: {exc}"
            ) from exc
