"""An offline, deterministic grader: a criterion is met when the answer mentions its key terms.

It needs no account or network, so `make run` and the tests grade real answers. It can
also act out the failures a real provider shows (slow answers, 429s, refusals, hangs):
set `metadata.simulate` on a job, e.g. `{"failure": "transient", "times": 2}`. That is
honoured only when the grader is built with `simulate=True` (GRADEQ_GRADER_SIMULATE).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from shared.adapters.graders.parts import FileReader
from shared.domain.errors import GradingTimeout, PermanentGradingError, TransientGradingError
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest
from shared.domain.rubric import criteria_of
from shared.domain.uploads import FileKind, FileUnusable

_WORD = re.compile(r"[a-z0-9]+")
_STOPWORDS = frozenset(
    {
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "has",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "to",
        "was",
        "were",
        "with",
        "mentions",
        "mention",
        "explains",
        "explain",
        "describes",
        "describe",
        "states",
        "state",
        "uses",
        "use",
    }
)
_FAILURES = ("transient", "permanent", "hang")


def _terms(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS and len(w) > 2}


@dataclass(frozen=True)
class Simulation:
    """Failure and latency a job asks the offline grader to act out."""

    failure: str | None = None
    times: int = 1_000_000
    latency_s: float | None = None

    @classmethod
    def from_metadata(cls, metadata: dict[str, Any]) -> Simulation:
        raw = metadata.get("simulate")
        if not isinstance(raw, dict):
            return cls()
        failure = raw.get("failure")
        times = raw.get("times", 1_000_000)
        latency = raw.get("latency_s")
        return cls(
            failure=failure if failure in _FAILURES else None,
            times=int(times) if isinstance(times, int | float) else 1_000_000,
            latency_s=float(latency) if isinstance(latency, int | float) else None,
        )


class RubricGrader:
    """Score = max_score x (criteria met / criteria), with per-criterion feedback."""

    name = "rubric-offline-v1"

    def __init__(
        self, latency_s: float = 0.0, simulate: bool = True, files: FileReader | None = None
    ) -> None:
        self._latency_s = latency_s
        self._simulate = simulate
        self._files = files

    def grade(self, request: GradingRequest, *, attempt: int, timeout_s: float) -> GradeResult:
        sim = Simulation.from_metadata(request.metadata) if self._simulate else Simulation()
        latency = self._latency_s if sim.latency_s is None else sim.latency_s
        failing = sim.failure is not None and attempt <= sim.times
        if failing and sim.failure == "hang":
            latency = float("inf")
        if latency >= timeout_s:
            time.sleep(timeout_s)
            raise GradingTimeout(f"grader gave no answer within {timeout_s:g}s")
        time.sleep(latency)
        if failing and sim.failure == "transient":
            raise TransientGradingError("grading provider is rate limiting (simulated 429)")
        if failing and sim.failure == "permanent":
            raise PermanentGradingError("the answer cannot be graded (simulated refusal)")
        return self._score(request)

    def _read_files(self, request: GradingRequest) -> tuple[str, list[str]]:
        """The text of the job's text and source files, and the files it cannot read."""
        readable = tuple(f for f in request.files if f.kind in (FileKind.TEXT, FileKind.ARCHIVE))
        unread = [f"{f.name or f.upload_id} ({f.content_type})" for f in request.files]
        if not readable or self._files is None:
            return "", unread
        unread = [u for f, u in zip(request.files, unread, strict=True) if f not in readable]
        texts = [a.text for a in self._files.read(readable)]
        return "\n".join(texts), unread

    def _score(self, request: GradingRequest) -> GradeResult:
        file_text, unread = self._read_files(request)
        if not request.answer and not file_text:
            raise FileUnusable(
                "the offline grader reads text only and cannot read " + ", ".join(unread)
            )
        answer_terms = _terms(request.answer + "\n" + file_text)
        criteria = criteria_of(request.rubric)
        checked = []
        # How clear-cut each verdict is: a criterion whose key terms are all, or none,
        # in the answer is certain (1); one with about half of them is a coin toss (0).
        clearness = []
        for criterion in criteria:
            terms = _terms(criterion)
            hits = terms & answer_terms
            met = bool(terms) and len(hits) * 2 >= len(terms)
            checked.append({"criterion": criterion, "met": met, "matched": sorted(hits)})
            clearness.append(abs(2 * len(hits) / len(terms) - 1) if terms else 0.0)
        met_count = sum(1 for c in checked if c["met"])
        confidence = round(sum(clearness) / len(clearness), 3) if clearness else 0.0
        score = round(request.max_score * met_count / len(checked), 2) if checked else 0.0
        missing = [c["criterion"] for c in checked if not c["met"]]
        feedback = f"{met_count} of {len(checked)} criteria met."
        if missing:
            feedback += " Missing: " + "; ".join(str(m) for m in missing) + "."
        if unread:
            feedback += " Not read (the offline grader reads text only): " + ", ".join(unread) + "."
        return GradeResult(
            score=score,
            max_score=request.max_score,
            feedback=feedback,
            criteria=tuple(checked),
            grader=self.name,
            confidence=confidence,
        )
