"""A grader per lane: a lane of shared/config/queues.json may name its own model.

The design this project follows splits queues by provider or model where needed; here a
lane's `grader_model` picks the model its jobs are graded with (each model has its own
quota, so each has its own limiter). The lane comes from the grading's context.
"""

from __future__ import annotations

from collections.abc import Mapping

from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest
from shared.domain.lanes import lane_var
from shared.ports import Grader


class LaneGraders:
    """Grades with the current lane's grader, or the default one."""

    def __init__(self, default: Grader, by_lane: Mapping[str, Grader]) -> None:
        self.name = default.name
        self._default = default
        self._by_lane = dict(by_lane)

    def for_lane(self, lane: str | None) -> Grader:
        return self._by_lane.get(lane or "", self._default)

    def grade(self, request: GradingRequest, *, attempt: int, timeout_s: float) -> GradeResult:
        return self.for_lane(lane_var.get()).grade(request, attempt=attempt, timeout_s=timeout_s)

    def probe(self) -> None:
        """Check every model the lanes use (see `ModelGrader.probe`)."""
        seen: set[int] = set()
        for grader in (self._default, *self._by_lane.values()):
            probe = getattr(grader, "probe", None)
            if probe is not None and id(grader) not in seen:
                seen.add(id(grader))
                probe()
