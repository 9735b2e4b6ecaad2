"""One provider quota shared by the lanes, by priority.

The lanes' queues cannot share a model's requests per minute by their rate limits alone:
a static split wastes the exam lane's part whenever no exam runs. This limiter puts the
lanes in front of one `RollingLimiter` (the instance's share of the quota) and decides
which lane a free request slot goes to:

- A lane whose request finds no room *claims* the next free slot: the claim lasts until
  the job's deferred delivery is due again (plus a grace), and is keyed by job, so a job
  deferred twice holds one claim.
- A lower lane is admitted only into room left over after every higher lane's claims, so
  the slots that free up go to the higher lanes' waiting jobs first.
- A lane with a `min_quota_share` is always admitted (when the window has room) while its
  requests in the window are below that share, and the higher lanes leave room for it
  while it waits: the lowest lane never stops entirely.

Requests are also paced at the quota's rate: a bucket of a quarter of a minute's
requests, which earns no credit while the window is full. A rolling window alone admits
a minute's requests in one burst and frees them in one burst a minute later, so a higher
lane's job could wait most of a minute for a slot; paced, a slot frees every 60/rpm
seconds and the claims take it.

With no claims, any lane takes whatever room there is: bulk alone gets the whole quota.
The limiter never waits: a refusal is `ProviderQuotaExhausted` with the time until the
lane may expect room, which the worker turns into a deferral (no attempt spent).
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from shared.adapters.graders.limiter import WINDOW_S, QuotaShare, Reservation, RollingLimiter
from shared.config.queues import QueueConfig
from shared.domain.errors import ProviderQuotaExhausted
from shared.domain.lanes import lane_var
from shared.logs import job_id_var

#: How long a claim outlives the delivery time it was given (the task may come late).
CLAIM_GRACE_S = 5.0


@dataclass(frozen=True)
class LaneQuota:
    """A lane's rank for the quota and the share of it the lane is always granted."""

    name: str
    priority: int
    min_share: float = 0.0

    @classmethod
    def of(cls, queues: Iterable[QueueConfig]) -> list[LaneQuota]:
        return [LaneQuota(q.name, q.lane.priority, q.lane.min_quota_share) for q in queues]


class _Lane:
    __slots__ = ("claims", "guaranteed", "priority", "used")

    def __init__(self, quota: LaneQuota, rpm: int) -> None:
        self.priority = quota.priority
        self.guaranteed = math.floor(quota.min_share * rpm)
        self.used = 0  # requests admitted in the current window
        self.claims: dict[str, float] = {}  # job id -> when the claim lapses


class LaneQuotaLimiter:
    """The instance's quota share, handed out to the lanes by priority. Thread-safe.

    `default_lane` is the lane of a request made outside any lane (jobs made before
    lanes). The lane and job of a request are read from `lane_var` and `job_id_var`,
    which the worker sets around each grading.
    """

    def __init__(
        self,
        share: QuotaShare,
        lanes: Iterable[LaneQuota],
        default_lane: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.share = share
        self._clock = clock
        self._inner = RollingLimiter(share, clock)
        self._lanes = {q.name: _Lane(q, share.requests_per_minute) for q in lanes}
        if default_lane not in self._lanes:
            raise ValueError(f"default lane {default_lane!r} is not one of the lanes")
        self._default = default_lane
        self._admitted: deque[tuple[float, str]] = deque()
        rpm = share.requests_per_minute
        self._rate = rpm / WINDOW_S
        self._burst = float(max(1, rpm // 4))
        self._tokens = self._burst
        self._filled_at = clock()
        self._lock = threading.Lock()

    def acquire(
        self, tokens: int, lane: str | None = None, job_id: str | None = None
    ) -> Reservation:
        """Admit one request of `lane` (default: the current one); ProviderQuotaExhausted if not."""
        name = lane or lane_var.get() or self._default
        if name not in self._lanes:
            name = self._default
        job = job_id or job_id_var.get() or ""
        with self._lock:
            now = self._clock()
            self._expire(now)
            self._refill(now)
            reserve = self._reserve(name)
            free = self.share.requests_per_minute - len(self._admitted)
            paced = math.floor(self._tokens)
            if min(free, paced) - reserve < 1:
                wait = max(
                    self._wait_for(now, reserve + 1 - free),
                    (reserve + 1 - self._tokens) / self._rate,
                    0.001,
                )
                self._claim(name, job, now + wait)
                raise ProviderQuotaExhausted(
                    f"lane {name}: this instance's provider quota "
                    f"({self.share.requests_per_minute} requests a minute) is taken "
                    + ("by higher lanes" if reserve else "in full"),
                    retry_after_s=wait,
                )
            try:
                reservation = self._inner.acquire(tokens)
            except ProviderQuotaExhausted as exc:  # the token limit
                self._claim(name, job, now + (exc.retry_after_s or WINDOW_S))
                raise
            self._tokens -= 1
            state = self._lanes[name]
            state.used += 1
            state.claims.pop(job, None)
            self._admitted.append((now, name))
            return reservation

    def in_window(self) -> dict[str, int]:
        """Requests admitted in the current window, per lane."""
        with self._lock:
            self._expire(self._clock())
            return {name: lane.used for name, lane in self._lanes.items()}

    def claims(self) -> dict[str, int]:
        """Jobs waiting for a slot, per lane."""
        with self._lock:
            self._expire(self._clock())
            return {name: len(lane.claims) for name, lane in self._lanes.items()}

    def _reserve(self, name: str) -> int:
        """Slots this lane must leave free: higher lanes' waiting jobs and the guarantees
        of waiting lanes still below their share."""
        mine = self._lanes[name]
        if mine.used < mine.guaranteed:
            return 0  # within its guaranteed share: it goes first
        reserve = 0
        for other_name, other in self._lanes.items():
            if other_name == name or not other.claims:
                continue
            if other.used < other.guaranteed:
                reserve += min(len(other.claims), other.guaranteed - other.used)
            elif other.priority > mine.priority:
                reserve += len(other.claims)
        return reserve

    def _refill(self, now: float) -> None:
        elapsed = max(0.0, now - self._filled_at)
        # No credit builds up while the window is full: else the slots freeing up after
        # it would go out in one burst, and free up in one burst a minute later.
        free = self.share.requests_per_minute - len(self._admitted)
        self._tokens = min(self._burst, self._tokens + elapsed * self._rate, max(free, 0))
        self._filled_at = now

    def _claim(self, name: str, job: str, until: float) -> None:
        self._lanes[name].claims[job] = until + CLAIM_GRACE_S

    def _wait_for(self, now: float, slots: int) -> float:
        """Seconds until `slots` admitted requests have left the window."""
        if slots <= 0 or not self._admitted:
            return 0.0
        index = min(slots, len(self._admitted)) - 1
        return max(0.001, self._admitted[index][0] + WINDOW_S - now)

    def _expire(self, now: float) -> None:
        while self._admitted and self._admitted[0][0] <= now - WINDOW_S:
            _, name = self._admitted.popleft()
            self._lanes[name].used -= 1
        for lane in self._lanes.values():
            lapsed = [job for job, until in lane.claims.items() if until <= now]
            for job in lapsed:
                del lane.claims[job]
