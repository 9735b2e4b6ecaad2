"""Parse and check a model's answer against the rubric it was asked to grade.

Anything the model got wrong (not JSON, a missing or extra criterion, a score out of
range, a score that contradicts the verdicts) raises `UnusableAnswer` with a reason
that names the fault but never quotes the answer or the submission.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shared.adapters.graders.prompt import RenderedPrompt

Verdict = Literal["met", "partially_met", "not_met"]


class UnusableAnswer(ValueError):
    """The model's answer cannot be used; the message says why, without its content."""


class _CriterionVerdict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    verdict: Verdict
    justification: str = Field(min_length=1, max_length=2000)


class _ModelAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    criteria: list[_CriterionVerdict]
    score: float
    feedback: str = Field(min_length=1, max_length=8000)
    #: The model's own confidence in its grade, 0 (a guess) to 1 (certain).
    confidence: float = Field(ge=0, le=1, allow_inf_nan=False)


@dataclass(frozen=True)
class ParsedGrade:
    score: float
    feedback: str
    criteria: tuple[dict[str, Any], ...]
    confidence: float


def parse_answer(text: str, prompt: RenderedPrompt) -> ParsedGrade:
    """The model's JSON answer as a grade, or `UnusableAnswer`."""
    try:
        answer = _ModelAnswer.model_validate_json(text.strip() or "null")
    except ValidationError as exc:
        fields = sorted({".".join(str(p) for p in e["loc"]) or "(root)" for e in exc.errors()})
        where = ", ".join(fields)
        raise UnusableAnswer(f"the answer does not match the schema at {where}") from None

    expected = [c.id for c in prompt.criteria]
    given = Counter(v.id for v in answer.criteria)
    missing = [i for i in expected if i not in given]
    unknown = sorted(set(given) - set(expected))
    repeated = sorted(i for i, n in given.items() if n > 1)
    if missing or unknown or repeated:
        raise UnusableAnswer(
            "the verdicts do not match the rubric"
            f" (missing: {missing or '-'}, unknown: {unknown or '-'}, repeated: {repeated or '-'})"
        )
    if not math.isfinite(answer.score) or not 0 <= answer.score <= prompt.max_score:
        raise UnusableAnswer(f"the score is outside 0..{prompt.max_score:g}")
    verdicts = {v.verdict for v in answer.criteria}
    if verdicts == {"not_met"} and answer.score > 0:
        raise UnusableAnswer("the score is above 0 although no criterion is met")
    if verdicts == {"met"} and answer.score == 0:
        raise UnusableAnswer("the score is 0 although every criterion is met")

    by_id = {v.id: v for v in answer.criteria}
    criteria = tuple(
        {
            "id": c.id,
            "criterion": c.text,
            "verdict": by_id[c.id].verdict,
            "met": by_id[c.id].verdict == "met",
            "justification": by_id[c.id].justification,
        }
        for c in prompt.criteria
    )
    return ParsedGrade(
        round(answer.score, 2), answer.feedback, criteria, round(answer.confidence, 3)
    )
