"""The statistics of `make bench`: spreads over runs, percentiles, rate windows, CPU."""

from __future__ import annotations

import pytest

from bench import stats
from bench.runs import Results


def test_spread_is_median_min_max_of_the_values_present() -> None:
    found = stats.spread([3.0, None, 1.0, 2.0])
    assert found == stats.Spread(median=2.0, low=1.0, high=3.0, n=3)
    assert found.as_dict() == {"median": 2.0, "min": 1.0, "max": 3.0, "n": 3}


def test_spread_of_an_even_count_is_the_mean_of_the_middle_two() -> None:
    assert stats.spread([1.0, 2.0, 4.0, 10.0]) == stats.Spread(3.0, 1.0, 10.0, 4)


def test_spread_of_nothing_is_none() -> None:
    assert stats.spread([]) is None
    assert stats.spread([None, None]) is None


@pytest.mark.parametrize(
    ("pct", "expected"),
    [(0, 10.0), (50, 30.0), (100, 50.0), (25, 20.0), (99, 49.6), (90, 46.0)],
)
def test_percentile_interpolates_between_ranks(pct: float, expected: float) -> None:
    assert stats.percentile([50.0, 10.0, 40.0, 20.0, 30.0], pct) == pytest.approx(expected)


def test_percentile_of_one_value_is_that_value() -> None:
    assert stats.percentile([7.5], 99) == 7.5


@pytest.mark.parametrize("pct", [-1, 100.5])
def test_percentile_refuses_a_percentage_out_of_range(pct: float) -> None:
    with pytest.raises(ValueError, match=r"within 0\.\.100"):
        stats.percentile([1.0], pct)


def test_percentile_of_no_values_is_an_error() -> None:
    with pytest.raises(ValueError, match="no values"):
        stats.percentile([], 50)


def test_max_in_window_counts_the_busiest_second() -> None:
    # 3 events in [0.0, 1.0), then 4 in [2.0, 3.0) - unsorted input.
    times = [2.9, 0.0, 2.0, 0.5, 2.5, 0.99, 2.1]
    assert stats.max_in_window(times, 1.0) == 4


def test_max_in_window_is_half_open() -> None:
    # An event exactly one window later falls into the next window.
    assert stats.max_in_window([0.0, 1.0, 2.0, 3.0], 1.0) == 1
    assert stats.max_in_window([0.0, 0.999, 2.0], 1.0) == 2


def test_max_in_window_slides_rather_than_using_fixed_buckets() -> None:
    # Fixed one-second buckets would see 2 and 2; the window from 0.6 holds all 4.
    assert stats.max_in_window([0.6, 0.9, 1.1, 1.5], 1.0) == 4


def test_max_in_window_of_nothing_is_zero() -> None:
    assert stats.max_in_window([], 1.0) == 0


def test_a_token_bucket_schedule_shows_rate_plus_burst() -> None:
    # 2 at once (the burst), then one every 50 ms: 20/s.
    times = [0.0, 0.0] + [0.05 * i for i in range(1, 200)]
    assert stats.max_in_window(times, 1.0) == 21
    assert stats.sustained_rate(times) == pytest.approx(200 / 9.95)


def test_sustained_rate_spans_first_to_last_event() -> None:
    assert stats.sustained_rate([10.0, 11.0, 12.0, 14.0, 15.0]) == pytest.approx(4 / 5)


@pytest.mark.parametrize("times", [[], [1.0], [2.0, 2.0]])
def test_sustained_rate_needs_two_distinct_times(times: list[float]) -> None:
    assert stats.sustained_rate(times) is None


def test_efficiency_is_ideal_over_makespan() -> None:
    assert stats.efficiency(4.0, 5.0) == pytest.approx(0.8)
    with pytest.raises(ValueError, match="positive"):
        stats.efficiency(4.0, 0.0)


def test_cpu_per_job_sums_the_roles_between_snapshots() -> None:
    before = {"worker": 1.0, "queue": 2.0, "front": 5.0}
    after = {"worker": 3.0, "queue": 2.5, "front": 9.0}
    assert stats.cpu_ms_per_job(before, after, ["worker", "queue"], 1000) == pytest.approx(2.5)
    assert stats.cpu_ms_per_job(before, after, ["front"], 500) == pytest.approx(8.0)
    with pytest.raises(ValueError, match="jobs"):
        stats.cpu_ms_per_job(before, after, ["front"], 0)


def test_ratios_pair_each_run_with_the_same_rounds_reference() -> None:
    assert stats.ratios([50.0, None, 30.0], [100.0, 100.0, 0.0]) == [0.5, None, None]
    with pytest.raises(ValueError, match="one reference value per run"):
        stats.ratios([1.0], [1.0, 2.0])


def test_summarize_spreads_every_numeric_metric_and_skips_the_rest() -> None:
    runs = [
        {"rps": 100.0, "errors": 0, "ok": True, "times": [1.0], "lag_s": None},
        {"rps": 300.0, "errors": 2, "ok": True, "times": [2.0], "lag_s": 1.5},
        {"rps": 200.0, "errors": 1, "ok": False, "times": [3.0]},
    ]
    assert stats.summarize(runs) == {
        "rps": {"median": 200.0, "min": 100.0, "max": 300.0, "n": 3},
        "errors": {"median": 1.0, "min": 0.0, "max": 2.0, "n": 3},
        "lag_s": {"median": 1.5, "min": 1.5, "max": 1.5, "n": 1},
    }


def test_results_summarize_each_system_per_scenario_with_ratios_to_flask() -> None:
    results = Results()
    for rps in (100.0, 120.0, 90.0):
        results.add("acceptance", "gradeq", {"rps": rps})
    for rps in (1000.0, 1000.0, 900.0):
        results.add("acceptance", "flask", {"rps": rps})
    results.add_ratios()
    ratios = [run["ratio"] for run in results.runs["acceptance"]["gradeq"]]
    assert ratios == pytest.approx([0.1, 0.12, 0.1])
    summary = results.summary()
    assert summary["acceptance"]["gradeq"]["ratio"] == pytest.approx(
        {"median": 0.1, "min": 0.1, "max": 0.12, "n": 3}
    )
    assert summary["acceptance"]["flask"]["ratio"]["median"] == 1.0
    assert summary["burst"] == {}


def test_results_without_a_full_reference_leave_ratios_out() -> None:
    results = Results()
    results.add("acceptance", "gradeq", {"rps": 100.0})
    results.add("acceptance", "gradeq", {"rps": 110.0})
    results.add("acceptance", "flask", {"rps": 1000.0})
    results.add_ratios()
    assert all("ratio" not in run for run in results.runs["acceptance"]["gradeq"])
    results.note("rate", "rq", "RQ has no rate limit")
    assert results.notes["rate"] == {"rq": "RQ has no rate limit"}
