"""The shared quota pool's rules on a fake clock: never past the quota in any rolling window,
at least 90 % of it used while there is a backlog, higher lanes first, a dead holder's
share back within a lease, and the adaptive limit (AIMD) converging on a hidden capacity."""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from typing import Any

from shared.adapters.graders.quota_pool import (
    ADAPTIVE_PARTS,
    Adaptive,
    Giveback,
    Grant,
    LaneRank,
    Outcomes,
    PoolLimits,
    Take,
    adaptive_state,
    status,
    take,
)

LANES = {
    "exam": LaneRank(priority=2),
    "standard": LaneRank(priority=1),
    "bulk": LaneRank(priority=0),
}


class Pool:
    """The pool's state between takes, as the ledger would hold it."""

    def __init__(self, limits: PoolLimits, lanes: dict[str, LaneRank] = LANES) -> None:
        self.limits = limits
        self.lanes = lanes
        self.state: dict[str, Any] | None = None

    def take(self, ask: Take, now: float) -> Grant:
        self.state, grant = take(self.state, ask, self.limits, self.lanes, now)
        return grant


def ask(holder: str, lane: str = "standard", requests: int = 100, **kw: Any) -> Take:
    return Take(holder=holder, lane=lane, requests=requests, tokens_each=kw.pop("tokens", 10), **kw)


class RollingProvider:
    """What a provider enforcing a rolling window counts: the most sends in any window."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self.sent: deque[tuple[float, int]] = deque()
        self.most_requests = 0
        self.most_tokens = 0

    def send(self, at: float, tokens: int) -> None:
        self.sent.append((at, tokens))

    def worst_window(self) -> tuple[int, int]:
        ordered = sorted(self.sent)
        start = 0
        tokens = 0
        worst = (0, 0)
        for end, (at, t) in enumerate(ordered):
            tokens += t
            while ordered[start][0] <= at - self.window_s:
                tokens -= ordered[start][1]
                start += 1
            worst = max(worst, (end - start + 1, tokens))
        return worst


def run_holders(
    pool: Pool, holders: int, seconds: float, step: float, seed: int = 7
) -> tuple[RollingProvider, int]:
    """Holders with a backlog take slices and send each request at a random moment
    within the slice's lease; what the provider saw, and the requests sent."""
    rng = random.Random(seed)
    provider = RollingProvider(pool.limits.window_s)
    now = 0.0
    sent = 0
    while now < seconds:
        for h in range(holders):
            grant = pool.take(ask(f"h{h}", requests=5), now + rng.random() * step)
            for _ in range(grant.requests):
                provider.send(now + rng.random() * pool.limits.lease_s, 10)
                sent += 1
        now += step
    return provider, sent


def test_holders_never_pass_the_quota_in_any_rolling_window() -> None:
    pool = Pool(PoolLimits(rpm=600, tpm=0, window_s=60.0))
    provider, _ = run_holders(pool, holders=16, seconds=300, step=0.5)
    requests, _ = provider.worst_window()
    assert requests <= 600


def test_holders_together_use_at_least_90_percent_whatever_their_number() -> None:
    for holders in (1, 4, 16):
        pool = Pool(PoolLimits(rpm=600, window_s=60.0))
        _, sent = run_holders(pool, holders=holders, seconds=300, step=0.25)
        # Five windows' worth of quota, the first window's ramp included.
        assert sent >= 0.9 * 600 * 5, (holders, sent)


def test_the_token_quota_is_never_passed_and_corrections_free_room() -> None:
    pool = Pool(PoolLimits(rpm=1000, tpm=1000, window_s=60.0))
    first = pool.take(ask("a", requests=50, tokens=100), 0.0)
    assert first.requests == 10 and first.tokens == 1000  # the token quota binds first
    assert pool.take(ask("b", tokens=100), 1.0).requests == 0
    # "a" sent 10 requests of 40 tokens each, not 100: its next take says so.
    back = Giveback(first.bucket, "standard", 0, -600)
    again = pool.take(ask("a", requests=50, tokens=100, givebacks=[back]), 2.0)
    assert again.requests == 6


def test_a_request_larger_than_the_token_quota_runs_alone_in_an_empty_window() -> None:
    pool = Pool(PoolLimits(rpm=100, tpm=500, window_s=60.0))
    assert pool.take(ask("a", requests=1, tokens=800), 0.0).requests == 1
    assert pool.take(ask("a", requests=1, tokens=800), 5.0).requests == 0


def test_unused_requests_given_back_are_granted_again() -> None:
    pool = Pool(PoolLimits(rpm=60, window_s=60.0))
    grant = pool.take(ask("a", requests=6), 0.0)
    assert grant.requests == 6  # the pacing part: 60 / 10
    assert pool.take(ask("b", requests=2), 0.5).requests == 0
    back = Giveback(grant.bucket, "standard", requests=2, tokens=-20)
    assert pool.take(ask("a", requests=6, givebacks=[back]), 0.6).requests == 2


def test_a_refusal_says_when_room_frees_up() -> None:
    pool = Pool(PoolLimits(rpm=60, window_s=60.0))
    pool.take(ask("a", requests=6), 0.0)
    refused = pool.take(ask("b", requests=1), 0.5)
    assert refused.requests == 0
    assert 5.0 <= refused.retry_after_s <= 6.0  # the grant leaves the pacing part (6 s)
    assert pool.take(ask("b", requests=1), 0.5 + refused.retry_after_s).requests == 1


def test_a_dead_holder_gives_its_share_back_within_a_lease() -> None:
    limits = PoolLimits(rpm=600, window_s=60.0)
    pool = Pool(limits)
    for t in range(10):
        pool.take(ask("dying", requests=20), float(t) * 2)
        pool.take(ask("alive", requests=20), float(t) * 2 + 1)
    # "dying" takes nothing more from t=18 on; once its last grant leaves the pacing part,
    # "alive" gets the whole pace: 60 per 6 s.
    died = 18.0
    later = died + limits.part_s
    grants = [pool.take(ask("alive", requests=20), later + i * limits.lease_s) for i in range(6)]
    assert [g.requests for g in grants] == [20] * 6


def test_a_lower_lane_leaves_room_for_exam_jobs_waiting_elsewhere() -> None:
    pool = Pool(PoolLimits(rpm=60, window_s=60.0))
    # An exam job waits in instance "x" (refused earlier, due again at t=30).
    pool.take(ask("x", lane="exam", requests=0, waiting={"exam": 1}, waiting_until=30.0), 0.0)
    standard = pool.take(ask("y", lane="standard", requests=6), 0.1)
    assert standard.requests == 5  # of the part's 6, one is left for the exam job
    exam = pool.take(ask("x", lane="exam", requests=1, waiting={}, waiting_until=0.0), 0.2)
    assert exam.requests == 1


def test_a_waiting_report_lapses_when_the_job_is_not_back() -> None:
    pool = Pool(PoolLimits(rpm=60, window_s=60.0))
    pool.take(ask("x", lane="exam", requests=0, waiting={"exam": 2}, waiting_until=5.0), 0.0)
    assert pool.take(ask("y", requests=6), 1.0).requests == 4  # two left for the exam jobs
    assert pool.take(ask("y", requests=6), 8.0).requests == 6


def test_a_lane_below_its_guaranteed_share_goes_before_higher_lanes() -> None:
    lanes = dict(LANES, bulk=LaneRank(priority=0, min_share=0.1))
    pool = Pool(PoolLimits(rpm=600, window_s=60.0), lanes)
    pool.take(ask("x", lane="exam", requests=0, waiting={"exam": 60}, waiting_until=60.0), 0.0)
    assert pool.take(ask("y", lane="bulk", requests=5), 0.1).requests == 5
    assert pool.take(ask("y", lane="standard", requests=5), 0.2).requests == 0


def test_status_reports_the_window_by_lane_and_the_waiting_jobs() -> None:
    limits = PoolLimits(rpm=600, tpm=10_000, window_s=60.0)
    pool = Pool(limits)
    pool.take(ask("a", lane="exam", requests=3, tokens=100), 0.0)
    pool.take(ask("b", requests=2, tokens=100, waiting={"bulk": 4}, waiting_until=50.0), 1.0)
    report = status(pool.state, limits, 2.0)
    assert report["requests_in_window"] == 5
    assert report["tokens_in_window"] == 500
    assert report["requests_by_lane"] == {"exam": 3, "standard": 2}
    assert report["waiting_by_lane"] == {"bulk": 4}
    assert report["mode"] == "declared" and report["limit_rpm"] == 600
    assert status(pool.state, limits, 200.0)["requests_in_window"] == 0


# --- the adaptive limit -------------------------------------------------------------


def adaptive(**kw: Any) -> PoolLimits:
    """The controller with epochs of 10 s and steps of 3 %, as the tests below count."""
    kw = {"epochs_per_window": 6, "increase": 0.03, **kw}
    return PoolLimits(rpm=0, window_s=60.0, adaptive=Adaptive(**kw), parts=ADAPTIVE_PARTS)


def busy(pool: Pool, start: float, end: float, extra: Outcomes | None = None) -> None:
    """A demand past the limit from `start` to `end`: a take every lease, each slice sent
    (and answered) by the next, and a second take right after it that the pool refuses;
    the take at `end` also reports `extra`."""
    at = start
    sent = pool.take(ask("a", requests=1000), at).requests
    while at + pool.limits.lease_s < end:
        at += pool.limits.lease_s
        sent = pool.take(ask("a", requests=1000, outcomes=Outcomes(ok=sent)), at).requests
        assert pool.take(ask("a", requests=1000), at).requests == 0
    pool.take(ask("a", requests=1000, outcomes=Outcomes(ok=sent) + (extra or Outcomes())), end)


def past_slow_start(limits: PoolLimits, ssthresh: float) -> Pool:
    """A pool whose last cut left the limit at `ssthresh`, some epochs ago."""
    pool = Pool(limits)
    pool.state = {
        "adaptive": {**adaptive_state({}, limits), "limit": ssthresh, "ssthresh": ssthresh}
    }
    return pool


def decision(pool: Pool, now: float) -> str:
    return str(status(pool.state, pool.limits, now)["adaptive"]["last_epoch"]["decision"])


def test_the_limit_grows_by_half_each_full_epoch_until_the_first_429() -> None:
    limits = adaptive(start_rpm=60)
    pool = Pool(limits)
    busy(pool, 0.0, 10.0)
    assert status(pool.state, limits, 10.0)["limit_rpm"] == 90
    busy(pool, 10.0, 20.0)
    assert status(pool.state, limits, 20.0)["limit_rpm"] == 135


def test_a_429_cuts_to_the_share_admitted_less_a_margin_then_steps_grow_it() -> None:
    limits = adaptive()
    pool = past_slow_start(limits, 1000.0)
    pool.take(ask("a", requests=1000), 0.0)
    pool.take(ask("a", requests=1000, outcomes=Outcomes(ok=80, throttled=20)), 10.0)
    report = status(pool.state, limits, 10.0)
    assert report["limit_rpm"] == 760  # 80 % admitted, x 0.95
    assert report["adaptive"]["last_epoch"]["decision"] == "throttled"
    # The next epoch's 429s may answer requests granted before the cut: no second cut.
    busy(pool, 10.0, 20.0, Outcomes(ok=100, throttled=30))
    assert decision(pool, 20.0) == "settle"
    busy(pool, 20.0, 30.0)
    # Additive: 3 % of where the cut left it (760), at least one request a minute.
    assert status(pool.state, limits, 30.0)["adaptive"]["limit_rpm"] == 782.8


def test_a_cut_is_at_most_by_half_and_out_of_the_slow_start_back_to_its_last_step() -> None:
    limits = adaptive(start_rpm=1000)
    pool = Pool(limits)
    pool.take(ask("a", requests=1000), 0.0)
    pool.take(ask("a", requests=1000, outcomes=Outcomes(ok=90, throttled=10)), 10.0)
    # 90 % admitted x 0.95 would leave 855: the slow start's last step was from 667.
    assert status(pool.state, limits, 10.0)["limit_rpm"] == 666
    pool.take(ask("a", requests=1000), 20.0)  # the epoch after a cut settles
    pool.take(ask("a", requests=1000, outcomes=Outcomes(ok=10, throttled=90)), 30.0)
    assert status(pool.state, limits, 30.0)["limit_rpm"] == 333  # at most by half


def test_one_429_or_a_few_hold_the_limit_at_the_capacity_the_last_cut_measured() -> None:
    limits = adaptive()
    # The last cut left 95: the capacity it measured is 100.
    pool = past_slow_start(limits, 95.0)
    pool.state["adaptive"]["limit"] = 100.0  # type: ignore[index]
    busy(pool, 0.0, 10.0, Outcomes(ok=200, throttled=2))  # 1 % of the epoch's requests
    assert decision(pool, 10.0) == "hold"
    assert status(pool.state, limits, 10.0)["limit_rpm"] == 100
    busy(pool, 10.0, 20.0, Outcomes(throttled=1))
    assert decision(pool, 20.0) == "hold"
    busy(pool, 20.0, 30.0, Outcomes(throttled=3))  # more than 1 %, more than one
    assert decision(pool, 30.0) == "throttled"


def test_a_single_429_below_the_measured_capacity_does_not_stop_the_growth() -> None:
    limits = adaptive()
    pool = past_slow_start(limits, 95.0)  # the capacity measured: 100
    decisions = []
    for epoch in range(3):
        start = 10.0 * epoch
        busy(pool, start, start + 10.0, Outcomes(throttled=1))  # every epoch one 429
        decisions.append(decision(pool, start + 10.0))
    # 95 -> 97.85 -> 100.7, in steps of 3 % of 95; there, at the capacity, it holds.
    assert decisions == ["increase", "increase", "hold"]
    assert status(pool.state, limits, 30.0)["adaptive"]["limit_rpm"] == 100.7


def test_a_few_429s_in_the_slow_start_end_it() -> None:
    limits = adaptive(start_rpm=100)
    pool = Pool(limits)
    busy(pool, 0.0, 10.0, Outcomes(throttled=1))
    assert decision(pool, 10.0) == "hold"
    busy(pool, 10.0, 20.0)
    # Steps of 3 % from there, no longer by half.
    assert status(pool.state, limits, 20.0)["adaptive"]["limit_rpm"] == 103.0


def test_after_three_epochs_past_the_measured_capacity_the_steps_grow() -> None:
    limits = adaptive()
    pool = past_slow_start(limits, 95.0)
    limits_seen = []
    for epoch in range(8):
        start = 10.0 * epoch
        busy(pool, start, start + 10.0)
        limits_seen.append(status(pool.state, limits, start + 10.0)["adaptive"]["limit_rpm"])
    before = [95.0, *limits_seen[:-1]]
    steps = [round((b - a) / 2.85) for a, b in zip(before, limits_seen, strict=True)]
    # 95 -> 97.85 -> 100.7 (past 100), three more single steps, then 2, 3, 4.
    assert steps == [1, 1, 1, 1, 1, 2, 3, 4]


def test_an_epoch_whose_latency_doubles_cuts_the_limit() -> None:
    limits = adaptive()
    pool = past_slow_start(limits, 100.0)
    busy(pool, 0.0, 10.0, Outcomes(ok=10, latency_sum_s=10.0))
    assert status(pool.state, limits, 10.0)["limit_rpm"] == 103  # 1 s: the base
    pool.take(ask("a", requests=1000, outcomes=Outcomes(ok=10, latency_sum_s=30.0)), 20.0)
    report = status(pool.state, limits, 20.0)
    assert report["adaptive"]["last_epoch"]["decision"] == "latency"
    assert report["limit_rpm"] == 92  # 103 x 0.9


def test_the_limit_holds_when_the_demand_is_below_it() -> None:
    limits = adaptive(start_rpm=600)
    pool = Pool(limits)
    pool.take(ask("a", requests=1), 0.0)
    pool.take(ask("a", requests=1), 10.0)
    assert status(pool.state, limits, 10.0)["limit_rpm"] == 600


def test_the_limit_holds_when_what_is_sent_stays_under_half_of_it() -> None:
    limits = adaptive(start_rpm=600)
    pool = Pool(limits)
    pool.take(ask("a", requests=1000), 0.0)
    assert pool.take(ask("a", requests=1000), 0.1).requests == 0  # refused
    # 600 a minute is 100 an epoch: 40 answered is under half of it.
    pool.take(ask("a", requests=1, outcomes=Outcomes(ok=40)), 10.0)
    assert decision(pool, 10.0) == "hold"
    assert status(pool.state, limits, 10.0)["limit_rpm"] == 600


def test_a_cut_takes_effect_at_once_without_a_quiet_epoch() -> None:
    """After a cut the pool grants the new rate at once: it does not wait for the
    window's grants at the old limit to leave."""
    limits = adaptive()
    pool = past_slow_start(limits, 600.0)
    busy(pool, 0.0, 60.0)  # a window at about 600 a minute
    pool.take(ask("a", requests=1000, outcomes=Outcomes(ok=50, throttled=50)), 70.0)
    assert status(pool.state, limits, 70.0)["limit_rpm"] < 450
    granted = sum(pool.take(ask("a", requests=1000), 80.0 + t).requests for t in range(10))
    # The new limit's 10 s, within a pace of the epoch's share.
    limit = status(pool.state, limits, 80.0)["limit_rpm"]
    assert limit / 6 * 0.9 <= granted <= limit / 6


class HiddenCapacity:
    """A provider admitting `capacity` requests a minute (a bucket of two seconds' worth)."""

    def __init__(self, capacity: float) -> None:
        self.capacity = capacity
        self.tokens = capacity / 30
        self.at = 0.0

    def admits(self, at: float) -> bool:
        self.tokens = min(self.capacity / 30, self.tokens + (at - self.at) * self.capacity / 60)
        self.at = at
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False


def against_hidden_capacity(
    capacity_at: Callable[[int], float], windows: int
) -> list[tuple[int, int, float]]:
    """Four holders with a backlog (twice the capacity), each sending a slice's requests
    evenly over its lease, against a provider whose capacity is hidden (window `w`'s is
    `capacity_at(w)`); per window: requests admitted, answered 429, the highest limit."""
    limits = adaptive(start_rpm=30)
    pool = Pool(limits)
    provider = HiddenCapacity(capacity_at(0))
    rng = random.Random(3)
    step = 0.25
    sends: list[tuple[float, str]] = []  # (when, holder), in the order they go out
    outcomes = {f"h{h}": Outcomes() for h in range(4)}
    by_window: list[tuple[int, int, float]] = []
    admitted = throttled = 0
    highest = 0.0
    now = 0.0
    while now < 60 * windows:
        if now and now % 60 == 0:
            by_window.append((admitted, throttled, highest))
            admitted = throttled = 0
            highest = 0.0
            provider.capacity = capacity_at(len(by_window))
        due = sorted(s for s in sends if s[0] < now + step)
        sends = [s for s in sends if s[0] >= now + step]
        for at, holder in due:
            if provider.admits(at):
                admitted += 1
                outcomes[holder] += Outcomes(ok=1, latency_sum_s=1.0)
            else:
                throttled += 1
                outcomes[holder] += Outcomes(throttled=1)
        for holder in outcomes:
            if any(h == holder for _, h in sends):
                continue  # still sending its slice
            report, outcomes[holder] = outcomes[holder], Outcomes()
            at = now + rng.random() * step
            grant = pool.take(ask(holder, requests=10, outcomes=report), at)
            spacing = limits.lease_s / max(1, grant.requests)
            sends += [(at + i * spacing, holder) for i in range(grant.requests)]
        highest = max(highest, float(adaptive_state(pool.state or {}, limits)["limit"]))
        now += step
    by_window.append((admitted, throttled, highest))
    return by_window


def assert_settled(
    by_window: list[tuple[int, int, float]], windows: range, capacity: float
) -> None:
    """Within 10 % of the capacity, under 2 % answered 429, the limit never far past it."""
    admitted = sum(by_window[w][0] for w in windows)
    throttled = sum(by_window[w][1] for w in windows)
    assert 0.9 * capacity * len(windows) <= admitted <= 1.02 * capacity * len(windows), by_window
    assert throttled < 0.02 * (admitted + throttled), by_window
    assert all(by_window[w][2] < 1.25 * capacity for w in windows), by_window


def test_the_adaptive_limit_converges_on_a_constant_hidden_capacity() -> None:
    by_window = against_hidden_capacity(lambda w: 600.0, windows=8)
    assert_settled(by_window, range(2, 8), 600.0)
    # The slow start's overshoot is cut back within the first window.
    assert by_window[0][2] < 2 * 600, by_window


def test_the_adaptive_limit_follows_a_capacity_that_halves() -> None:
    by_window = against_hidden_capacity(lambda w: 600.0 if w < 6 else 300.0, windows=11)
    assert_settled(by_window, range(2, 6), 600.0)
    assert_settled(by_window, range(8, 11), 300.0)


def test_the_adaptive_limit_follows_a_capacity_that_doubles() -> None:
    by_window = against_hidden_capacity(lambda w: 300.0 if w < 6 else 600.0, windows=13)
    assert_settled(by_window, range(2, 6), 300.0)
    # Found within two windows (the steps grow past the old capacity), settled from
    # the third on.
    assert by_window[7][0] > 1.3 * 300, by_window
    assert_settled(by_window, range(9, 13), 600.0)
