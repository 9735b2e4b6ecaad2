"""The soak's binding quota: the loopback provider enforces a small declared quota.

With `--quota-rpm N` the loopback OpenAI-compatible provider answers 429 past `N`
requests in any rolling window (tests/support/provider_quota.py), and the worker runs in
`shared` quota mode with that quota declared (GRADEQ_GRADER_QUOTA_RPM = N, the default
headroom), so the pool in the job store, not the provider, is what paces the gradings.
There is no governor process to restart: the pool's state lives in the job store and
each worker instance takes leased slices of it, so the soak's SIGKILLs of the worker
(and its SIGSTOPs, which freeze a slice's requests mid-lease) are the restarts. Checked
at the end, besides the soak's own invariants: the provider never saw more requests in
any rolling window than the declared quota, whatever it answered them.

The window is a minute on the real providers; here it is `QUOTA_WINDOW_S` (6 s: a minute
ten times shorter, as `make bench-quota` runs it), and with it the pool's leases, paces
and epochs, which are fractions of the window.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.support.fake_openai import FakeOpenAIServer

#: The quota's rolling window in the soak (a "minute" ten times shorter).
QUOTA_WINDOW_S = 6.0


def quota_env(rpm: int, window_s: float = QUOTA_WINDOW_S) -> dict[str, str]:
    """The worker's settings for a declared quota of `rpm` requests per `window_s`."""
    return {
        "GRADEQ_GRADER_QUOTA_MODE": "shared",
        "GRADEQ_GRADER_QUOTA_RPM": str(rpm),
        "GRADEQ_GRADER_QUOTA_WINDOW_S": f"{window_s:g}",
    }


def enforce(provider: FakeOpenAIServer, rpm: int, window_s: float = QUOTA_WINDOW_S) -> None:
    """Make the loopback provider answer 429 past `rpm` requests in any rolling window."""
    from tests.support.provider_quota import RollingQuota

    provider.quota = RollingQuota(rpm, 0, window_s)


def max_in_window(times: Sequence[float], window_s: float) -> int:
    """The most of `times` (seconds) that fall in any half-open window of `window_s`."""
    ordered = sorted(times)
    most = start = 0
    for end, at in enumerate(ordered):
        while ordered[start] <= at - window_s:
            start += 1
        most = max(most, end - start + 1)
    return most


def check(
    provider: FakeOpenAIServer,
    rpm: int,
    violation: Callable[[str], None],
    window_s: float = QUOTA_WINDOW_S,
) -> dict[str, Any]:
    """Every request the provider saw (one by one, whatever it answered) against the
    declared quota; the figures."""
    served = list(provider.served)
    most = max_in_window([s.at for s in served], window_s)
    if most > rpm:
        violation(f"quota: the provider saw {most} requests in one {window_s:g} s window > {rpm}")
    quota = provider.quota
    return {
        "declared_per_window": rpm,
        "window_s": window_s,
        "requests": len(served),
        "by_status": dict(Counter(str(s.status) for s in served)),
        "refused_by_quota": len(quota.refused) if quota is not None else 0,
        "max_requests_in_any_window": most,
    }
