"""The soak's binding-quota check: the most requests the provider saw in any rolling window."""

from __future__ import annotations

from localcloud.soak_quota import max_in_window, quota_env


def test_the_busiest_window_is_found_wherever_it_starts() -> None:
    assert max_in_window([], 6.0) == 0
    assert max_in_window([0.0], 6.0) == 1
    # (0.9, 6.9] holds four (1.0, 2.5, 6.5, 6.9), as does (1.0, 7.0]; no window holds five.
    assert max_in_window([7.0, 0.0, 1.0, 2.5, 6.9, 6.5], 6.0) == 4
    assert max_in_window([0.0, 1.0, 2.0, 13.0, 14.0], 6.0) == 3


def test_a_request_a_whole_window_later_is_in_the_next_window() -> None:
    # A window is (t - 6 s, t], as the provider's quota counts it: a request at t and one
    # at t + 6 are never counted together.
    assert max_in_window([0.0, 6.0, 12.0], 6.0) == 1
    assert max_in_window([0.0, 5.99, 6.0], 6.0) == 2


def test_the_worker_declares_the_quota_in_shared_mode() -> None:
    assert quota_env(20) == {
        "GRADEQ_GRADER_QUOTA_MODE": "shared",
        "GRADEQ_GRADER_QUOTA_RPM": "20",
        "GRADEQ_GRADER_QUOTA_WINDOW_S": "6",
    }
