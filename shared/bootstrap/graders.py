"""Choose the grader named in the settings."""

from __future__ import annotations

from shared.adapters.graders.rubric import RubricGrader
from shared.config.settings import Settings
from shared.ports import Grader


def grader_for(settings: Settings) -> Grader:
    """Build the configured grader; only the offline rubric grader ships so far."""
    if settings.grader == "rubric":
        return RubricGrader(latency_s=settings.grader_latency_s)
    raise ValueError(f"unknown GRADEQ_GRADER {settings.grader!r}; known: rubric")
