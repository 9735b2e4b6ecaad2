"""Queue settings, read from the one JSON file that terraform also reads.

`shared/config/queues.json` is the single source: the local dispatcher enforces it and
`terraform/tasks.tf` decodes it into `google_cloud_tasks_queue`, so they cannot drift.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

DEFAULT_QUEUES_FILE = Path(__file__).parent / "queues.json"

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)s$")


def parse_duration(value: str) -> timedelta:
    """Parse a protobuf Duration string such as "10s" or "0.5s"."""
    match = _DURATION.match(value)
    if not match:
        raise ValueError(f"not a duration like '10s': {value!r}")
    return timedelta(seconds=float(match.group(1)))


@dataclass(frozen=True)
class RetryConfig:
    max_attempts: int
    max_retry_duration: timedelta
    min_backoff: timedelta
    max_backoff: timedelta
    max_doublings: int

    def backoff(self, retry_count: int) -> timedelta:
        """Delay before retry number `retry_count` (1-based), as Cloud Tasks computes it.

        The interval starts at min_backoff, doubles `max_doublings` times, then grows
        linearly by min_backoff * 2**max_doublings, and is capped at max_backoff.
        """
        if retry_count < 1:
            return timedelta(0)
        minimum = self.min_backoff.total_seconds()
        n = retry_count - 1
        if n <= self.max_doublings:
            seconds = minimum * (2**n)
        else:
            step = minimum * (2**self.max_doublings)
            seconds = step * (n - self.max_doublings + 1)
        return timedelta(seconds=min(seconds, self.max_backoff.total_seconds()))

    def is_last_attempt(self, retry_count: int, elapsed: timedelta | None = None) -> bool:
        """Whether the attempt with this X-CloudTasks-TaskRetryCount is the final one.

        Cloud Tasks stops retrying only when both limits are reached: max_attempts (-1 is
        unlimited) and max_retry_duration since the first attempt (0 is unlimited).
        """
        if self.max_attempts < 0 or retry_count + 1 < self.max_attempts:
            return False
        limit = self.max_retry_duration
        return limit <= timedelta(0) or (elapsed is not None and elapsed >= limit)


@dataclass(frozen=True)
class RateLimits:
    max_dispatches_per_second: float
    max_concurrent_dispatches: int


@dataclass(frozen=True)
class LaneConfig:
    """How a queue ranks as a priority lane (the "lane" object of its entry).

    `priority`: a higher lane has first claim on the shared provider quota.
    `oldest_age_objective`: the age past which the lane's oldest queued job is alerted on.
    `min_quota_share`: the fraction of the provider quota the lane keeps whatever the
    higher lanes ask (so the lowest lane never stops). `grader_model`: the model the
    lane's jobs are graded with ("" is the worker's configured model).
    """

    priority: int = 0
    oldest_age_objective: timedelta | None = None
    min_quota_share: float = 0.0
    grader_model: str = ""


@dataclass(frozen=True)
class QueueConfig:
    name: str
    target_path: str
    dispatch_deadline: timedelta
    rate_limits: RateLimits
    retry_config: RetryConfig
    lane: LaneConfig = LaneConfig()


def _lane(raw: dict[str, object] | None) -> LaneConfig:
    if not raw:
        return LaneConfig()
    objective = raw.get("oldest_age_objective")
    share = float(str(raw.get("min_quota_share", 0.0)))
    if not 0.0 <= share < 1.0:
        raise ValueError(f"min_quota_share must be in [0, 1), got {share}")
    return LaneConfig(
        priority=int(str(raw.get("priority", 0))),
        oldest_age_objective=parse_duration(str(objective)) if objective else None,
        min_quota_share=share,
        grader_model=str(raw.get("grader_model", "")),
    )


def load_queues(path: Path | str = DEFAULT_QUEUES_FILE) -> dict[str, QueueConfig]:
    """Read every queue from the settings file."""
    raw = json.loads(Path(path).read_text())
    queues = {}
    for name, q in raw.items():
        rc = q["retry_config"]
        rl = q["rate_limits"]
        queues[name] = QueueConfig(
            name=name,
            target_path=q["target_path"],
            dispatch_deadline=parse_duration(q["dispatch_deadline"]),
            rate_limits=RateLimits(
                max_dispatches_per_second=float(rl["max_dispatches_per_second"]),
                max_concurrent_dispatches=int(rl["max_concurrent_dispatches"]),
            ),
            retry_config=RetryConfig(
                max_attempts=int(rc["max_attempts"]),
                max_retry_duration=parse_duration(rc["max_retry_duration"]),
                min_backoff=parse_duration(rc["min_backoff"]),
                max_backoff=parse_duration(rc["max_backoff"]),
                max_doublings=int(rc["max_doublings"]),
            ),
            lane=_lane(q.get("lane")),
        )
    return queues


def lanes_by_priority(queues: dict[str, QueueConfig]) -> list[QueueConfig]:
    """The queues as lanes, the highest priority first (ties by name)."""
    return sorted(queues.values(), key=lambda q: (-q.lane.priority, q.name))
