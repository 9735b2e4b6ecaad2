"""A finished grading: the model's score, feedback and what it cost."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class GradeResult:
    """A finished grading."""

    score: float
    max_score: float
    feedback: str
    criteria: tuple[dict[str, Any], ...] = ()
    grader: str = ""
    # Which model and prompt version produced it, and the tokens it took (all
    # provider requests of the attempt): input_tokens, output_tokens, total_tokens,
    # requests. Empty for the offline grader.
    model: str = ""
    prompt_version: str = ""
    usage: dict[str, int] = field(default_factory=dict)
    #: The grader's own confidence in the grade (0..1); None when it reports none.
    confidence: float | None = None
    #: Answers in a wrong format the model gave before the usable one.
    format_retries: int = 0

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "score": self.score,
            "max_score": self.max_score,
            "feedback": self.feedback,
            "criteria": [dict(c) for c in self.criteria],
            "grader": self.grader,
            "model": self.model,
            "prompt_version": self.prompt_version,
            "usage": dict(self.usage),
        }
        if self.confidence is not None:
            data["confidence"] = self.confidence
        if self.format_retries:
            data["format_retries"] = self.format_retries
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GradeResult:
        return cls(
            score=float(data["score"]),
            max_score=float(data["max_score"]),
            feedback=data["feedback"],
            criteria=tuple(data.get("criteria") or ()),
            grader=data.get("grader", ""),
            model=data.get("model") or "",
            prompt_version=data.get("prompt_version") or "",
            usage={k: int(v) for k, v in (data.get("usage") or {}).items()},
            confidence=None if data.get("confidence") is None else float(data["confidence"]),
            format_retries=int(data.get("format_retries") or 0),
        )
