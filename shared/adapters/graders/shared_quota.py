"""The quota limiter of one instance, drawing short slices from the pool every instance shares.

A request is admitted from the slice its lane holds; when the slice is spent or its
lease is over, one conditional write to the pool (`QuotaLedger`) gives back what the old
slice left and takes a new one, reporting this instance's waiting jobs per lane and the
outcomes of its requests (for the adaptive limit). A slice grows while it is used up
within its lease and shrinks by what it leaves, so a busy instance writes about once per
lease and an idle one not at all. The rules are in `quota_pool`.

The limiter never waits: no grant is `ProviderQuotaExhausted` with the time until room
may free up, and the worker defers the job (no attempt spent). The deferred job stays
counted as waiting in its lane until its delivery is due again, so that lanes below it
leave it the next slots in every instance.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from shared.adapters.graders.lane_quota import LaneQuota
from shared.adapters.graders.limiter import QuotaShare, Reservation
from shared.adapters.graders.quota_pool import (
    Giveback,
    Grant,
    LaneRank,
    Outcomes,
    PoolLimits,
    Take,
    status,
    take,
)
from shared.domain.errors import ProviderQuotaExhausted
from shared.domain.lanes import lane_var
from shared.logs import job_id_var
from shared.ports import QuotaLedger

log = logging.getLogger(__name__)


@dataclass
class _Slice:
    bucket: int
    requests: int
    tokens: int
    expires_at: float
    next_at: float  # the slice's next request goes out no earlier: spread over the lease
    spacing: float


class SharedReservation(Reservation):
    """One request admitted from a slice; `settle` and `throttled` report how it went."""

    def __init__(self, limiter: SharedQuotaLimiter, bucket: int, lane: str, tokens: int) -> None:
        self._owner = limiter
        self.bucket = bucket
        self._lane = lane
        self._tokens = tokens
        self._started = limiter.clock()

    def settle(self, tokens: int) -> None:
        self._owner.report(
            Giveback(self.bucket, self._lane, 0, tokens - self._tokens),
            Outcomes(ok=1, latency_sum_s=max(0.0, self._owner.clock() - self._started)),
        )

    def throttled(self) -> None:
        self._owner.report(None, Outcomes(throttled=1))


class SharedQuotaLimiter:
    """The pool's quota for one instance, by lane. Thread-safe.

    `clock` is wall time in seconds: the pool's buckets are compared across instances.
    """

    def __init__(
        self,
        ledger: QuotaLedger,
        key: str,
        limits: PoolLimits,
        lanes: Iterable[LaneQuota],
        default_lane: str,
        clock: Callable[[], float] = time.time,
        holder: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.share = QuotaShare(limits.rpm, limits.tpm)
        self.clock = clock
        self.limits = limits
        self._sleep = sleep
        # How long a refused job counts as waiting past the time it was told: its task
        # may come a little late (two leases: 4 s of a minute's window).
        self._grace = 2 * limits.lease_s
        self._margin = limits.counted_s - limits.lease_s
        self._closed_until: dict[str, float] = {}
        self._ledger = ledger
        self._key = key
        self._ranks = {q.name: LaneRank(q.priority, q.min_share) for q in lanes}
        if default_lane not in self._ranks:
            raise ValueError(f"default lane {default_lane!r} is not one of the lanes")
        self._default = default_lane
        self._holder = holder or uuid.uuid4().hex
        self._slices: dict[str, _Slice] = {}
        self._want: dict[str, int] = {}
        self._claims: dict[str, dict[str, float]] = {name: {} for name in self._ranks}
        self._givebacks: list[Giveback] = []
        self._outcomes = Outcomes()
        self._lock = threading.Lock()
        self.takes = 0  # writes to the pool, for the cost table and the bench

    def acquire(
        self, tokens: int, lane: str | None = None, job_id: str | None = None
    ) -> SharedReservation:
        """Admit one request of `lane` (default: the current one); ProviderQuotaExhausted if not."""
        name = lane or lane_var.get() or self._default
        if name not in self._ranks:
            name = self._default
        job = job_id or job_id_var.get() or ""
        with self._lock:
            now = self.clock()
            held = self._slices.get(name)
            # A request must go out within its slice's lease: the pool counts it until a
            # window after the lease ends, no longer.
            turn = now if held is None else max(held.next_at, now)
            usable = held is not None and held.requests >= 1 and turn < held.expires_at
            if held is not None and usable and (held.tokens >= tokens or not self.limits.tpm):
                reservation, wait = self._admit(name, held, tokens, job, now)
                deadline = held.expires_at + self._margin
            else:
                closed = self._closed_until.get(name, 0.0)
                if closed > now:
                    # The pool refused this lane a moment ago: no write to learn it again.
                    self._claims[name][job] = closed + self._grace
                    raise self._refused(name, closed - now)
                grant = self._take(name, held, tokens, job, now)
                if grant.requests < 1:
                    self._claims[name][job] = now + grant.retry_after_s + self._grace
                    self._close(name, now + min(grant.retry_after_s, self.limits.lease_s))
                    raise self._refused(name, grant.retry_after_s)
                spacing = self.limits.lease_s / grant.requests
                fresh = _Slice(
                    grant.bucket, grant.requests, grant.tokens, grant.expires_at, now, spacing
                )
                self._slices[name] = fresh
                reservation, wait = self._admit(name, fresh, tokens, job, now)
                deadline = fresh.expires_at + self._margin
        if wait > 0:
            self._sleep(wait)  # its turn within the slice: at most a lease away
            if self.clock() > deadline:
                # Woken too late (a starved process): the pool stops counting the grant
                # soon, so the request must not go out; the job waits as if refused.
                self.report(Giveback(reservation.bucket, name, 1, -tokens), Outcomes())
                raise self._refused(name, self.limits.lease_s)
        return reservation

    def _refused(self, lane: str, wait: float) -> ProviderQuotaExhausted:
        return ProviderQuotaExhausted(
            f"lane {lane}: the provider quota shared by the instances has no room now",
            retry_after_s=max(wait, 0.001),
        )

    def _close(self, lane: str, until: float) -> None:
        """No take for `lane`, nor the lanes below it, until `until`."""
        rank = self._ranks[lane].priority
        for name, other in self._ranks.items():
            if other.priority <= rank:
                self._closed_until[name] = max(self._closed_until.get(name, 0.0), until)

    def report(self, giveback: Giveback | None, outcomes: Outcomes) -> None:
        """Note a request's outcome; it reaches the pool with the next take."""
        with self._lock:
            if giveback is not None and (giveback.tokens or giveback.requests):
                self._givebacks.append(giveback)
            self._outcomes = self._outcomes + outcomes

    def status(self) -> dict[str, Any]:
        """The pool as the ledger holds it now."""
        return status(self._ledger.read(self._key), self.limits, self.clock())

    def _admit(
        self, lane: str, held: _Slice, tokens: int, job: str, now: float
    ) -> tuple[SharedReservation, float]:
        """One request from the slice, and how long it waits for its turn in it."""
        held.requests -= 1
        held.tokens = max(0, held.tokens - tokens)
        turn = max(held.next_at, now)
        held.next_at = turn + held.spacing
        self._claims[lane].pop(job, None)
        return SharedReservation(self, held.bucket, lane, tokens), turn - now

    def _take(self, lane: str, held: _Slice | None, tokens: int, job: str, now: float) -> Grant:
        """Give the old slice's rest back and take a new one (one write)."""
        parts = self.limits.parts
        most = max(1, -(-self.limits.rpm_now({}) // parts)) if not self.limits.adaptive else 1_000
        want = self._want.get(lane, 1)
        if held is not None:
            if held.requests > 0:
                self._givebacks.append(Giveback(held.bucket, lane, held.requests, -held.tokens))
                want = max(1, want - held.requests)
            else:
                want = min(want * 2, most)
            del self._slices[lane]
        self._want[lane] = want
        for claims in self._claims.values():
            for lapsed in [j for j, until in claims.items() if until <= now]:
                del claims[lapsed]
        self._claims[lane].pop(job, None)
        waiting = {name: len(claims) for name, claims in self._claims.items() if claims}
        until = max((u for c in self._claims.values() for u in c.values()), default=0.0)
        ask = Take(
            holder=self._holder,
            lane=lane,
            requests=want,
            tokens_each=tokens,
            waiting=waiting,
            waiting_until=until,
            givebacks=tuple(self._givebacks),
            outcomes=self._outcomes,
        )
        ranks: Mapping[str, LaneRank] = self._ranks
        grant = self._ledger.change(
            self._key, lambda state: take(state, ask, self.limits, ranks, now)
        )
        # Written: what was owed has reached the pool.
        self._givebacks = []
        self._outcomes = Outcomes()
        self.takes += 1
        return grant
