"""The lane quota's decisions, request by request on a clock the test sets: the pacing
bucket (its burst, its rate, no credit while the window is full), which lane a free slot
goes to (claims of higher lanes, guarantees of waiting lanes), how long a refused
request waits and what the refusal says, and when claims and admissions lapse."""

from __future__ import annotations

import pytest

from shared.adapters.graders.lane_quota import CLAIM_GRACE_S, LaneQuota, LaneQuotaLimiter
from shared.adapters.graders.limiter import QuotaShare
from shared.config.queues import load_queues
from shared.domain.errors import ProviderQuotaExhausted
from shared.domain.lanes import lane_context
from shared.logs import job_context

EXAM, GRADING = LaneQuota("exam", 300), LaneQuota("grading", 200)


class Ticks:
    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def limiter(
    rpm: int = 60, lanes: list[LaneQuota] | None = None, ticks: Ticks | None = None, tpm: int = 0
) -> LaneQuotaLimiter:
    return LaneQuotaLimiter(
        QuotaShare(rpm, tpm), lanes or [EXAM, GRADING], "grading", clock=ticks or Ticks()
    )


def admit(quota: LaneQuotaLimiter, count: int, lane: str = "grading", job: str = "j") -> None:
    for n in range(count):
        quota.acquire(1, lane=lane, job_id=f"{job}{n}")


def refusal(
    quota: LaneQuotaLimiter, lane: str, job: str, tokens: int = 1
) -> ProviderQuotaExhausted:
    with pytest.raises(ProviderQuotaExhausted) as caught:
        quota.acquire(tokens, lane=lane, job_id=job)
    return caught.value


# --- lanes -----------------------------------------------------------------------------


def test_the_lanes_of_the_queues_file_keep_their_priority_and_guarantee() -> None:
    queues = list(load_queues().values())
    assert LaneQuota.of(queues) == [
        LaneQuota(q.name, q.lane.priority, q.lane.min_quota_share) for q in queues
    ]
    assert LaneQuota("x", 1).min_share == 0.0
    assert CLAIM_GRACE_S == 5.0


def test_the_default_lane_must_be_one_of_the_lanes() -> None:
    with pytest.raises(ValueError) as raised:
        LaneQuotaLimiter(QuotaShare(60), [EXAM, GRADING], "bulk")
    assert str(raised.value) == "default lane 'bulk' is not one of the lanes"


def test_a_request_counts_in_its_lane_the_current_one_or_the_default() -> None:
    quota = limiter()
    assert quota.share == QuotaShare(60, 0)
    assert quota.in_window() == {"exam": 0, "grading": 0}
    quota.acquire(1, lane="exam")
    quota.acquire(1, lane="nope")
    quota.acquire(1)
    with lane_context("exam"):
        quota.acquire(1)
        quota.acquire(1, lane="grading")
    assert quota.in_window() == {"exam": 2, "grading": 3}


def test_a_refused_request_claims_for_its_job_the_current_one_or_none() -> None:
    quota = limiter(rpm=4)  # a burst of one
    admit(quota, 1)
    refusal(quota, "exam", "e1")
    with job_context("e2"):
        with pytest.raises(ProviderQuotaExhausted):
            quota.acquire(1, lane="exam")
        with pytest.raises(ProviderQuotaExhausted):
            quota.acquire(1, lane="exam", job_id="e3")
    with job_context("e4"), pytest.raises(ProviderQuotaExhausted):
        quota.acquire(1, lane="exam")
    for _ in range(2):
        with pytest.raises(ProviderQuotaExhausted):
            quota.acquire(1, lane="exam")
    # A request of no job holds one claim, apart from any job's (even one named XXXX).
    refusal(quota, "exam", "XXXX")
    assert quota.claims() == {"exam": 6, "grading": 0}


# --- pacing ----------------------------------------------------------------------------


@pytest.mark.parametrize(("rpm", "burst"), [(3, 1), (7, 1), (8, 2), (60, 15)])
def test_a_burst_of_a_quarter_of_a_minutes_requests_at_least_one(rpm: int, burst: int) -> None:
    quota = limiter(rpm=rpm)
    admit(quota, burst)
    refused = refusal(quota, "grading", "x")
    assert refused.retry_after_s == pytest.approx(60 / rpm)
    assert refused.detail == (
        f"lane grading: this instance's provider quota ({rpm} requests a minute) is taken in full"
    )


def test_the_bucket_earns_the_quota_rate_up_to_the_burst() -> None:
    ticks = Ticks()
    quota = limiter(ticks=ticks)  # one a second, a burst of 15
    admit(quota, 15)
    ticks.now = 2.5
    admit(quota, 2, job="a")
    assert refusal(quota, "grading", "x").retry_after_s == pytest.approx(0.5)
    ticks.now = 100.0  # far more than a burst earned
    admit(quota, 15, job="b")
    refusal(quota, "grading", "y")


def test_a_clock_read_earlier_takes_no_credit_back() -> None:
    ticks = Ticks(10.0)
    quota = limiter(ticks=ticks)
    ticks.now = 5.0
    admit(quota, 15)
    refusal(quota, "grading", "x")


def test_a_full_window_earns_no_credit_and_waits_for_its_oldest_request() -> None:
    ticks = Ticks()
    quota = limiter(ticks=ticks)
    admit(quota, 1, job="a")
    ticks.now = 1.0
    admit(quota, 1, job="b")
    ticks.now = 2.0
    admit(quota, 14, job="c")
    for second in range(3, 47):
        ticks.now = float(second)
        admit(quota, 1, job=f"d{second}-")
    assert quota.in_window() == {"exam": 0, "grading": 60}
    ticks.now = 46.5
    refused = refusal(quota, "exam", "e1")
    assert refused.retry_after_s == pytest.approx(13.5)  # the request of 0 s leaves at 60
    assert refused.detail.endswith("(60 requests a minute) is taken in full")
    # Behind the exam's claim: the second oldest must leave too (at 61 s).
    behind = refusal(quota, "grading", "g1")
    assert behind.retry_after_s == pytest.approx(14.5)
    assert behind.detail == (
        "lane grading: this instance's provider quota (60 requests a minute) "
        "is taken by higher lanes"
    )
    ticks.now = 59.5  # still full: the bucket earned nothing, the pace decides
    assert refusal(quota, "exam", "e1").retry_after_s == pytest.approx(1.0)
    ticks.now = 60.0  # the oldest left: half a second of credit since the last refusal
    assert quota.in_window() == {"exam": 0, "grading": 59}
    assert refusal(quota, "exam", "e1").retry_after_s == pytest.approx(0.5)
    ticks.now = 60.5
    quota.acquire(1, lane="exam", job_id="e1")
    assert quota.in_window() == {"exam": 1, "grading": 59}
    assert quota.claims() == {"exam": 0, "grading": 1}
    ticks.now = 62.0  # fifteen left the window at once, but the bucket holds only 1.5
    quota.acquire(1, lane="grading", job_id="g1")
    assert quota.in_window() == {"exam": 1, "grading": 45}
    assert refusal(quota, "grading", "g2").retry_after_s == pytest.approx(0.5)


# --- priority --------------------------------------------------------------------------


def test_a_higher_lanes_claim_takes_the_next_slot() -> None:
    ticks = Ticks()
    quota = limiter(ticks=ticks)
    admit(quota, 15)
    refused = refusal(quota, "exam", "e1")
    assert refused.retry_after_s == pytest.approx(1.0)
    assert refused.detail.endswith("is taken in full")
    ticks.now = 1.0
    held = refusal(quota, "grading", "g1")
    assert held.retry_after_s == pytest.approx(1.0)  # one more slot than the claim
    assert held.detail.endswith("is taken by higher lanes")
    quota.acquire(1, lane="exam", job_id="e1")
    assert quota.claims() == {"exam": 0, "grading": 1}
    ticks.now = 2.0
    quota.acquire(1, lane="grading", job_id="g1")
    assert quota.claims() == {"exam": 0, "grading": 0}
    assert quota.in_window() == {"exam": 1, "grading": 16}


def test_a_lower_lanes_claim_leaves_the_higher_lane_alone() -> None:
    ticks = Ticks()
    quota = limiter(ticks=ticks)
    admit(quota, 15, lane="exam")
    refusal(quota, "grading", "g1")
    ticks.now = 1.0
    quota.acquire(1, lane="exam", job_id="e1")


def test_lanes_of_one_priority_leave_each_other_no_room() -> None:
    ticks = Ticks()
    quota = limiter(lanes=[LaneQuota("grading", 200), LaneQuota("other", 200)], ticks=ticks)
    admit(quota, 15)
    refusal(quota, "other", "o1")
    ticks.now = 1.0
    quota.acquire(1, lane="grading", job_id="g1")


def test_a_claim_lapses_a_grace_after_its_wait() -> None:
    ticks = Ticks()
    quota = limiter(ticks=ticks)
    admit(quota, 15)
    refusal(quota, "exam", "e1")  # waits 1 s: claimed until 6 s
    ticks.now = 5.999
    assert quota.claims() == {"exam": 1, "grading": 0}
    ticks.now = 6.0
    assert quota.claims() == {"exam": 0, "grading": 0}
    quota.acquire(1, lane="grading", job_id="g1")


def test_claims_of_several_jobs_add_up() -> None:
    ticks = Ticks()
    quota = limiter(ticks=ticks)
    admit(quota, 15)
    refusal(quota, "exam", "e1")
    refusal(quota, "exam", "e2")
    ticks.now = 1.5  # 1.5 tokens: both are the exam's
    assert refusal(quota, "grading", "g1").retry_after_s == pytest.approx(1.5)
    quota.acquire(1, lane="exam", job_id="e1")
    assert quota.claims()["exam"] == 1


# --- guarantees ------------------------------------------------------------------------


def test_a_lane_below_its_guarantee_goes_first_and_the_others_leave_it_room() -> None:
    ticks = Ticks()
    bulk = LaneQuota("bulk", 100, 0.05)  # 3 of 60 requests a minute
    quota = limiter(lanes=[EXAM, GRADING, bulk], ticks=ticks)
    admit(quota, 15)
    for job in ("b1", "b2", "b3", "b4"):
        refusal(quota, "bulk", job)
    refusal(quota, "exam", "e1")
    ticks.now = 5.0  # 5 tokens, 3 of them bulk's (its guarantee, not its 4 claims)
    admit(quota, 2, lane="exam", job="e")
    refused = refusal(quota, "exam", "e9")
    assert refused.retry_after_s == pytest.approx(1.0)
    assert refused.detail.endswith("by higher lanes")
    # Bulk below its guarantee goes first even under the exam's claim.
    quota.acquire(1, lane="bulk", job_id="b1")
    quota.acquire(1, lane="bulk", job_id="b2")
    quota.acquire(1, lane="bulk", job_id="b3")
    assert quota.in_window() == {"exam": 2, "grading": 15, "bulk": 3}
    assert quota.claims() == {"exam": 1, "grading": 0, "bulk": 1}


def test_a_lane_at_its_guarantee_waits_behind_higher_claims() -> None:
    ticks = Ticks()
    bulk = LaneQuota("bulk", 100, 0.05)
    quota = limiter(lanes=[EXAM, GRADING, bulk], ticks=ticks)
    admit(quota, 3, lane="bulk", job="b")
    admit(quota, 12)
    refusal(quota, "exam", "e1")
    ticks.now = 1.0
    refused = refusal(quota, "bulk", "b9")
    assert refused.detail.endswith("by higher lanes")
    # Once at its guarantee, its claims take no room from the higher lanes.
    quota.acquire(1, lane="exam", job_id="e1")
    ticks.now = 2.0
    quota.acquire(1, lane="grading", job_id="g9")


def test_a_guarantee_is_the_floor_of_its_share() -> None:
    ticks = Ticks()
    bulk = LaneQuota("bulk", 100, 0.049)  # 2.94 of 60: 2
    quota = limiter(lanes=[EXAM, GRADING, bulk], ticks=ticks)
    admit(quota, 2, lane="bulk", job="b")
    admit(quota, 13, lane="exam", job="e")
    refusal(quota, "exam", "e1")
    ticks.now = 1.0
    refusal(quota, "bulk", "b3")  # at its guarantee: behind the exam's claim


# --- the token limit -------------------------------------------------------------------


def test_a_request_over_the_token_limit_claims_until_the_tokens_free() -> None:
    ticks = Ticks()
    quota = limiter(ticks=ticks, tpm=100)
    quota.acquire(80, lane="grading", job_id="g1")
    ticks.now = 10.0
    refused = refusal(quota, "exam", "e1", tokens=30)
    assert refused.retry_after_s == pytest.approx(50.0)
    refusal(quota, "exam", "e2", tokens=30)
    assert quota.in_window() == {"exam": 0, "grading": 1}
    ticks.now = 64.999  # claimed until 50 s + the grace after the refusal
    assert quota.claims() == {"exam": 2, "grading": 0}
    quota.acquire(10, lane="exam", job_id="e1")  # the refusal took no slot
    assert quota.in_window() == {"exam": 1, "grading": 0}
    assert quota.claims() == {"exam": 1, "grading": 0}
    ticks.now = 65.0
    assert quota.claims() == {"exam": 0, "grading": 0}


# --- the window ------------------------------------------------------------------------


def test_an_admission_leaves_the_window_exactly_a_minute_later() -> None:
    ticks = Ticks()
    quota = limiter(ticks=ticks)
    admit(quota, 2, lane="exam")
    ticks.now = 30.0
    admit(quota, 1)
    ticks.now = 59.999
    assert quota.in_window() == {"exam": 2, "grading": 1}
    ticks.now = 60.0
    assert quota.in_window() == {"exam": 0, "grading": 1}
    ticks.now = 90.0
    assert quota.in_window() == {"exam": 0, "grading": 0}


def test_the_room_left_for_a_waiting_guarantee_adds_to_the_higher_lanes_claims() -> None:
    ticks = Ticks()
    bulk = LaneQuota("bulk", 100, 0.05)
    quota = limiter(lanes=[EXAM, GRADING, bulk], ticks=ticks)
    admit(quota, 15)
    refusal(quota, "exam", "e1")
    refusal(quota, "bulk", "b1")
    ticks.now = 2.0  # two tokens: one for the exam's claim, one for bulk's guarantee
    refused = refusal(quota, "grading", "g1")
    assert refused.retry_after_s == pytest.approx(1.0)
    assert refused.detail.endswith("by higher lanes")
    quota.acquire(1, lane="exam", job_id="e1")
    quota.acquire(1, lane="bulk", job_id="b1")


def test_the_claims_of_every_higher_lane_add_up() -> None:
    ticks = Ticks()
    bulk = LaneQuota("bulk", 100, 0.05)
    quota = limiter(lanes=[EXAM, GRADING, bulk], ticks=ticks)
    admit(quota, 3, lane="bulk", job="b")
    admit(quota, 12)
    refusal(quota, "exam", "e1")
    refusal(quota, "grading", "g1")
    ticks.now = 2.0  # two tokens, one for each higher lane's claim
    refused = refusal(quota, "bulk", "b9")
    assert refused.retry_after_s == pytest.approx(1.0)
    quota.acquire(1, lane="exam", job_id="e1")
    quota.acquire(1, lane="grading", job_id="g1")


def test_a_waiting_guarantee_keeps_only_what_is_left_of_it() -> None:
    ticks = Ticks()
    bulk = LaneQuota("bulk", 100, 0.05)  # 3 a minute, 1 of them used
    quota = limiter(lanes=[EXAM, GRADING, bulk], ticks=ticks)
    admit(quota, 1, lane="bulk", job="b")
    admit(quota, 14)
    for job in ("b1", "b2", "b3", "b4"):
        refusal(quota, "bulk", job)
    ticks.now = 4.0  # four tokens, two kept for bulk
    admit(quota, 2, lane="exam", job="e")
    assert refusal(quota, "exam", "e9").retry_after_s == pytest.approx(1.0)


def test_a_refusal_waits_a_millisecond_at_least() -> None:
    ticks = Ticks()
    quota = limiter(ticks=ticks)
    admit(quota, 15)
    ticks.now = 0.9999  # a token all but earned
    assert refusal(quota, "grading", "x").retry_after_s == pytest.approx(0.001)


def test_the_bucket_earns_two_tokens_a_second_at_120_a_minute() -> None:
    ticks = Ticks()
    quota = limiter(rpm=120, ticks=ticks)  # a burst of 30
    admit(quota, 30)
    ticks.now = 1.5
    admit(quota, 3, job="a")
    assert refusal(quota, "grading", "x").retry_after_s == pytest.approx(0.5)
