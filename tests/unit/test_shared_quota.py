"""One instance's limiter on the shared quota pool, on a fake clock: slices spare the
ledger a write per request, refusals defer with a wait, waiting exam jobs hold lower
lanes back in other instances, and outcomes reach the adaptive limit."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import pytest

from shared.adapters.graders.lane_quota import LaneQuota
from shared.adapters.graders.quota_pool import Adaptive, PoolLimits
from shared.adapters.graders.shared_quota import SharedQuotaLimiter
from shared.bootstrap.graders import quota_limiter
from shared.config.settings import GraderKind, QuotaMode, Settings
from shared.domain.errors import ProviderQuotaExhausted

T = TypeVar("T")

LANES = [LaneQuota("exam", 2), LaneQuota("standard", 1), LaneQuota("bulk", 0)]


class MemoryLedger:
    """QuotaLedger in a dict, counting its writes."""

    def __init__(self) -> None:
        self.states: dict[str, dict[str, Any]] = {}
        self.writes = 0

    def change(
        self, key: str, change: Callable[[dict[str, Any] | None], tuple[dict[str, Any], T]]
    ) -> T:
        stored = self.states.get(key)
        state, answer = change(copy.deepcopy(stored))
        self.states[key] = json.loads(json.dumps(state))  # only what a store can hold
        self.writes += 1
        return answer

    def read(self, key: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.states.get(key))


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def limiter(
    ledger: MemoryLedger, clock: FakeClock, limits: PoolLimits, holder: str
) -> SharedQuotaLimiter:
    return SharedQuotaLimiter(
        ledger, "openai/m", limits, LANES, "standard", clock, holder, sleep=clock.sleep
    )


def test_a_slice_serves_several_requests_with_one_write() -> None:
    ledger, clock = MemoryLedger(), FakeClock()
    quota = limiter(ledger, clock, PoolLimits(rpm=600), "a")
    admitted = 0
    for _ in range(40):  # five requests a second (half the quota) for 8 s
        quota.acquire(100, lane="standard", job_id="j")
        admitted += 1
        clock.now += 0.2
    assert admitted == 40
    assert ledger.writes <= 10  # slices grow from 1 as they are used up


def test_no_room_defers_with_the_wait_and_the_pool_never_passes_the_quota() -> None:
    ledger, clock = MemoryLedger(), FakeClock()
    a = limiter(ledger, clock, PoolLimits(rpm=60), "a")
    b = limiter(ledger, clock, PoolLimits(rpm=60), "b")
    admitted = 0
    refused = 0
    end = clock.now + 60
    step = 0
    while clock.now < end:  # a minute (a slice's turns sleep on the clock too)
        step += 1
        for quota in (a, b):
            try:
                quota.acquire(10, lane="standard", job_id=f"j{step}")
                admitted += 1
            except ProviderQuotaExhausted as exc:
                assert exc.retry_after_s is not None and 0 < exc.retry_after_s <= 60
                refused += 1
        clock.now += 0.1
    assert 0.9 * 60 <= admitted <= 60
    assert refused > 0


def test_two_of_twenty_instances_use_the_whole_quota_together(tmp_path: Path) -> None:
    """The settings of a deployment of up to 20 instances, two running: together they are
    admitted at least 90 % of the quota, not 2 x 1/20 of it."""
    settings = Settings(
        data_dir=tmp_path,
        grader=GraderKind.OPENAI,
        grader_model="m",
        grader_base_url="http://127.0.0.1:9/v1",
        grader_quota_rpm=100,
        grader_quota_headroom=1.0,
        worker_max_instances=20,
    )
    clock = FakeClock()
    instances = [
        cast(SharedQuotaLimiter, quota_limiter(settings, clock, clock.sleep)) for _ in range(2)
    ]
    admitted = 0
    end = clock.now + 60
    step = 0
    while clock.now < end:  # a minute, both always asking
        step += 1
        for quota in instances:
            try:
                quota.acquire(10, job_id=f"j{step}")
                admitted += 1
            except ProviderQuotaExhausted:
                pass
        clock.now += 0.1
    assert 90 <= admitted <= 100
    assert isinstance(instances[0], SharedQuotaLimiter)
    assert instances[0].status()["limit_rpm"] == 100


def test_the_instance_mode_keeps_the_fixed_share(tmp_path: Path) -> None:
    settings = Settings(
        data_dir=tmp_path,
        grader_quota_mode=QuotaMode.INSTANCE,
        grader_quota_rpm=100,
        grader_quota_headroom=1.0,
        worker_max_instances=20,
    )
    assert quota_limiter(settings).share.requests_per_minute == 5


def test_an_exam_job_waiting_in_one_instance_holds_standard_back_in_another() -> None:
    ledger, clock = MemoryLedger(), FakeClock()
    limits = PoolLimits(rpm=20)  # two requests per 6-second pacing part
    a = limiter(ledger, clock, limits, "a")
    b = limiter(ledger, clock, limits, "b")
    b.acquire(10, lane="standard", job_id="s1")
    b.acquire(10, lane="standard", job_id="s2")
    with pytest.raises(ProviderQuotaExhausted) as refused:
        a.acquire(10, lane="exam", job_id="exam-1")  # the part is spent: it waits
    clock.now += refused.value.retry_after_s or 0
    # The next part's two slots: instance b gets one, the other is left for the exam job.
    b.acquire(10, lane="standard", job_id="s3")
    with pytest.raises(ProviderQuotaExhausted):
        b.acquire(10, lane="standard", job_id="s4")
    a.acquire(10, lane="exam", job_id="exam-1")
    assert b.status()["requests_by_lane"]["exam"] == 1


def test_what_a_slice_left_and_the_real_tokens_reach_the_pool_with_the_next_take() -> None:
    ledger, clock = MemoryLedger(), FakeClock()
    quota = limiter(ledger, clock, PoolLimits(rpm=600, tpm=100_000), "a")
    first = quota.acquire(1000, lane="standard", job_id="j1")
    first.settle(400)  # the estimate was 1000
    assert quota.status()["tokens_in_window"] == 1000  # not yet written
    clock.now += 1.0
    quota.acquire(1000, lane="standard", job_id="j2")
    # 400 for the first request, and the new slice's estimate for two.
    assert quota.status()["tokens_in_window"] == 400 + 2 * 1000


def test_429s_reach_the_adaptive_limit_and_cut_it() -> None:
    ledger, clock = MemoryLedger(), FakeClock()
    limits = PoolLimits(rpm=0, adaptive=Adaptive(start_rpm=300))
    quota = limiter(ledger, clock, limits, "a")
    for step in range(200):  # 20 s of demand; half the requests answered 429
        try:
            reservation = quota.acquire(10, lane="standard", job_id=f"j{step}")
        except ProviderQuotaExhausted:
            pass
        else:
            if step % 2:
                reservation.throttled()
            else:
                reservation.settle(10)
        clock.now += 0.1
    report = quota.status()
    assert report["mode"] == "adaptive"
    assert report["adaptive"]["limit_rpm"] < 300
    assert report["adaptive"]["last_epoch"]["decision"] in {"throttled", "settle"}


def test_a_request_woken_past_its_lease_is_not_sent_and_given_back() -> None:
    ledger, clock = MemoryLedger(), FakeClock()

    def starved(seconds: float) -> None:
        clock.now += seconds + 2.0  # the process got the CPU back two seconds late

    quota = SharedQuotaLimiter(
        ledger, "openai/m", PoolLimits(rpm=600), LANES, "standard", clock, "a", sleep=starved
    )
    quota.acquire(10, lane="standard", job_id="j1")  # a slice of 1
    quota.acquire(10, lane="standard", job_id="j2")  # a slice of 2, its first turn now
    with pytest.raises(ProviderQuotaExhausted):
        quota.acquire(10, lane="standard", job_id="j3")  # its turn, but woken too late
    quota.acquire(10, lane="standard", job_id="j4")  # a slice of 4; j3's grant goes back
    assert quota.status()["requests_in_window"] == 1 + 2 + 4 - 1
