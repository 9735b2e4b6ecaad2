"""One provider quota shared by the lanes by priority, proved on a fake clock.

A fake provider holds a strict requests-per-minute quota (a request past it is a 429).
Each lane's queue delivers its ready jobs at its rate; a delivery the limiter refuses is
deferred to its Retry-After (at least a second, as the worker does), spending nothing.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import pytest

from shared.adapters.graders.lane_quota import LaneQuota, LaneQuotaLimiter
from shared.adapters.graders.limiter import WINDOW_S, QuotaShare
from shared.config.queues import load_queues
from shared.domain.errors import ProviderQuotaExhausted
from shared.domain.lanes import lane_context
from shared.logs import job_context

RPM = 120
LANES = [LaneQuota("exam", 300), LaneQuota("grading", 200), LaneQuota("bulk", 100, 0.1)]
STEP_S = 0.05
DISPATCH_PER_STEP = 1  # each lane's queue: 20 deliveries a second


class StrictProvider:
    """Answers 429 to a request that would make more than `rpm` in the last 60 s."""

    def __init__(self, rpm: int) -> None:
        self.rpm = rpm
        self.window: deque[float] = deque()
        self.served: list[tuple[float, str]] = []
        self.refused = 0

    def request(self, now: float, lane: str) -> None:
        while self.window and self.window[0] <= now - WINDOW_S:
            self.window.popleft()
        if len(self.window) >= self.rpm:
            self.refused += 1
            return
        self.window.append(now)
        self.served.append((now, lane))


@dataclass
class Job:
    id: str
    lane: str
    arrived: float
    ready_at: float
    served_at: float | None = None


class Clock:
    """Seconds on the simulation's clock."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Simulation:
    limiter: LaneQuotaLimiter
    clock: Clock
    provider: StrictProvider = field(default_factory=lambda: StrictProvider(RPM))
    jobs: list[Job] = field(default_factory=list)

    @property
    def now(self) -> float:
        return self.clock.now

    def add(self, lane: str, count: int) -> None:
        for _ in range(count):
            n = len(self.jobs)
            self.jobs.append(Job(f"{lane}-{n}", lane, self.now, self.now))

    def run_until(self, end: float, arrivals: dict[str, float] | None = None) -> None:
        """Step the clock to `end`; `arrivals`: new jobs per second per lane."""
        due: dict[str, float] = dict.fromkeys(arrivals or {}, 0.0)
        while self.now < end:
            for lane, rate in (arrivals or {}).items():
                due[lane] += rate * STEP_S
                while due[lane] >= 1:
                    due[lane] -= 1
                    self.add(lane, 1)
            for lane in ("exam", "grading", "bulk"):
                ready = [
                    j
                    for j in self.jobs
                    if j.lane == lane and j.served_at is None and j.ready_at <= self.now
                ]
                for job in ready[:DISPATCH_PER_STEP]:
                    self.deliver(job)
            self.clock.now = round(self.now + STEP_S, 6)

    def deliver(self, job: Job) -> None:
        try:
            with lane_context(job.lane), job_context(job.id):
                self.limiter.acquire(500)
        except ProviderQuotaExhausted as exc:
            job.ready_at = self.now + max(1.0, exc.retry_after_s or 60.0)
            return
        self.provider.request(self.now, job.lane)
        job.served_at = self.now


def simulation() -> Simulation:
    """A simulation whose limiter reads the simulation's clock."""
    clock = Clock()
    sim = Simulation(LaneQuotaLimiter(QuotaShare(RPM), LANES, "grading", clock=clock), clock)
    return sim


def served(sim: Simulation, start: float, end: float, lane: str | None = None) -> int:
    return sum(1 for at, name in sim.provider.served if start <= at < end and lane in (None, name))


def test_bulk_alone_gets_the_whole_quota_and_never_more() -> None:
    sim = simulation()
    sim.add("bulk", 3000)
    sim.run_until(10 * 60)
    assert sim.provider.refused == 0  # never a 429
    for minute in range(10):
        used = served(sim, minute * 60, (minute + 1) * 60)
        assert 0.9 * RPM <= used <= RPM, (minute, used)


def test_exam_gets_its_share_first_and_bulk_never_stops() -> None:
    sim = simulation()
    sim.add("bulk", 3000)
    sim.run_until(2 * 60)  # bulk alone fills the quota
    exam_rate = RPM / 2 / 60  # exam asks half the quota
    sim.run_until(8 * 60, arrivals={"exam": exam_rate})
    sim.run_until(10 * 60)
    assert sim.provider.refused == 0
    for minute in range(3, 8):  # exam running, past its first minute
        start, end = minute * 60, (minute + 1) * 60
        exam, bulk = served(sim, start, end, "exam"), served(sim, start, end, "bulk")
        total = served(sim, start, end)
        assert exam >= 0.95 * exam_rate * 60, (minute, exam)  # its whole demand
        assert bulk >= int(0.1 * RPM), (minute, bulk)  # bulk never stops
        assert 0.9 * RPM <= total <= RPM, (minute, total)
    exam_jobs = [j for j in sim.jobs if j.lane == "exam" and j.arrived >= 3 * 60]
    waits = sorted(j.served_at - j.arrived for j in exam_jobs if j.served_at is not None)
    assert len(waits) == len(exam_jobs)
    # Served as slots free: an exam job waits for the next slot, not behind the bulk backlog.
    assert waits[int(0.99 * (len(waits) - 1))] <= 2 * WINDOW_S / RPM + 2.0, waits[-5:]


def test_exam_asking_more_than_the_quota_still_leaves_bulk_its_guaranteed_share() -> None:
    sim = simulation()
    sim.add("bulk", 3000)
    sim.run_until(4 * 60, arrivals={"exam": 2 * RPM / 60})
    assert sim.provider.refused == 0
    for minute in range(1, 4):
        start, end = minute * 60, (minute + 1) * 60
        assert served(sim, start, end, "bulk") >= int(0.1 * RPM)
        assert served(sim, start, end) >= 0.9 * RPM


def test_the_lanes_of_the_queues_file_rank_exam_over_bulk_with_a_guarantee_for_bulk() -> None:
    lanes = {q.name: q for q in LaneQuota.of(load_queues().values())}
    assert lanes["exam"].priority > lanes["grading"].priority > lanes["bulk"].priority
    assert lanes["bulk"].min_share > 0


def test_an_unknown_lane_or_none_counts_as_the_default_lane() -> None:
    limiter = LaneQuotaLimiter(QuotaShare(40), LANES, "grading", clock=lambda: 0.0)
    limiter.acquire(1)
    limiter.acquire(1, lane="nope")
    assert limiter.in_window()["grading"] == 2
    with pytest.raises(ValueError):
        LaneQuotaLimiter(QuotaShare(10), LANES, "nope")


def test_a_job_refused_again_holds_one_claim() -> None:
    clock = Clock()
    # 8 requests a minute: a burst of 2, then one every 7.5 s.
    limiter = LaneQuotaLimiter(QuotaShare(8), LANES, "grading", clock=clock)
    for _ in range(2):
        limiter.acquire(1, lane="grading", job_id="g")
    for _ in range(3):
        with pytest.raises(ProviderQuotaExhausted):
            limiter.acquire(1, lane="exam", job_id="e1")
    assert limiter.claims()["exam"] == 1
    # The next paced slot goes to the waiting exam job, not to the lane below.
    clock.now = 8.0
    with pytest.raises(ProviderQuotaExhausted) as refused:
        limiter.acquire(1, lane="grading", job_id="g2")
    assert "higher lanes" in refused.value.detail
    limiter.acquire(1, lane="exam", job_id="e1")
    assert limiter.claims()["exam"] == 0
