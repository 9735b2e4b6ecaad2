"""Gemini models' retirement dates on Vertex AI, minded while the worker grades.

Google retires each stable Gemini model on a published date; a month before it, new
access is blocked, and a retired model id answers 404 (every job would be refused).
`RetirementWatch` wraps the grader of a model with a known date and reads the worker's
clock at start and on every call, so a long-lived instance crosses the date too:

- within `WARN_BEFORE` of the date, the first call of each day (and the start) logs a
  warning with `event` = `grader_model_retiring`, the line terraform alerts on;
- past it, the default model refuses every call and every probe with `ModelRetired`, a
  configuration fault: the worker suspends grading as it does when the provider refuses
  the configuration (jobs wait in the queue, untouched, and `grader_suspended` alerts)
  until GRADEQ_GRADER_MODEL names a current model. It never refuses to start, which on
  Cloud Run would be a crash loop;
- a configured model past its date is logged as an error once a day, and still called:
  Google may extend a date, and a model that really is gone answers 404, which suspends
  grading the same way.

Source: "Model versions and lifecycle", Google Cloud documentation
(https://docs.cloud.google.com/vertex-ai/generative-ai/docs/learn/model-versions), as
read on 2026-12-01. A date marked there "or later" is the earliest one. Add a model's
date here when the page announces it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta

from shared.domain.errors import GraderMisconfigured
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest
from shared.ports import Grader

log = logging.getLogger(__name__)

LIFECYCLE_URL = "https://docs.cloud.google.com/vertex-ai/generative-ai/docs/learn/model-versions"
#: New access to a model is blocked this long before its retirement.
WARN_BEFORE = timedelta(days=30)
#: The log event of a model retiring within `WARN_BEFORE` (terraform/monitoring.tf).
RETIRING_EVENT = "grader_model_retiring"
#: The log event of a configured model past its date, still called.
RETIRED_EVENT = "grader_model_retired"

#: Model id -> the last day Vertex AI serves it.
RETIREMENTS: dict[str, date] = {
    "gemini-2.0-flash-001": date(2026, 2, 5),
    "gemini-2.0-flash-lite-001": date(2026, 2, 25),
    "gemini-2.5-pro": date(2026, 10, 16),
    "gemini-2.5-flash": date(2026, 10, 16),
    "gemini-2.5-flash-lite": date(2026, 10, 16),
    "gemini-3.1-flash-lite": date(2027, 5, 7),
    "gemini-3.5-flash": date(2027, 5, 19),
    "gemini-3.5-flash-lite": date(2027, 7, 21),
}


class ModelRetired(GraderMisconfigured):
    """The grader's default model is past its retirement date: grading is suspended."""

    slug = "model-retired"
    title = "The grader's model is past its retirement date"


@dataclass(frozen=True)
class ModelLifecycle:
    """Where a model stands on `today`."""

    model: str
    retires_on: date | None
    today: date

    @classmethod
    def of(cls, model: str, today: date) -> ModelLifecycle:
        return cls(model, RETIREMENTS.get(model.removeprefix("models/")), today)

    @property
    def retired(self) -> bool:
        return self.retires_on is not None and self.today > self.retires_on

    @property
    def retiring_soon(self) -> bool:
        return (
            self.retires_on is not None
            and not self.retired
            and self.today >= self.retires_on - WARN_BEFORE
        )


class RetirementWatch:
    """A model's grader that warns ahead of the model's retirement and suspends past it.

    `default`: the model is Gradeq's default, not one the operator chose (only that one
    is refused past its date). `today` reads the worker's clock.
    """

    def __init__(
        self, inner: Grader, model: str, *, default: bool, today: Callable[[], date]
    ) -> None:
        self.name = inner.name
        self._inner = inner
        self._model = model
        self._default = default
        self._today = today
        self._lock = threading.Lock()
        self._logged_on: date | None = None

    def check(self) -> ModelLifecycle:
        """Log where the model stands (once a day); raise ModelRetired past a default's date."""
        lifecycle = ModelLifecycle.of(self._model, self._today())
        if lifecycle.retired and self._default:
            raise ModelRetired(
                f"the default Gemini model {self._model} was retired on Vertex AI on "
                f"{lifecycle.retires_on}: set GRADEQ_GRADER_MODEL to a current model "
                f"(see {LIFECYCLE_URL})"
            )
        if lifecycle.retired or lifecycle.retiring_soon:
            with self._lock:
                first_today = self._logged_on != lifecycle.today
                self._logged_on = lifecycle.today
            if first_today:
                self._log(lifecycle)
        return lifecycle

    def _log(self, lifecycle: ModelLifecycle) -> None:
        assert lifecycle.retires_on is not None
        fields = {
            "model": self._model,
            "retires_on": str(lifecycle.retires_on),
            "see": LIFECYCLE_URL,
        }
        if lifecycle.retired:
            log.error(
                "the configured Gemini model is past its retirement date",
                extra={"event": RETIRED_EVENT, **fields},
            )
            return
        days_left = (lifecycle.retires_on - lifecycle.today).days
        then = (
            "grading is suspended from then on: set GRADEQ_GRADER_MODEL to a current model"
            if self._default
            else "the provider will refuse it then"
        )
        log.warning(
            "the Gemini model retires soon; new access to it is already blocked, and %s",
            then,
            extra={"event": RETIRING_EVENT, "days_left": days_left, **fields},
        )

    def grade(self, request: GradingRequest, *, attempt: int, timeout_s: float) -> GradeResult:
        self.check()
        return self._inner.grade(request, attempt=attempt, timeout_s=timeout_s)

    def probe(self) -> None:
        """Refuse while the default model is retired; else the inner grader's probe."""
        self.check()
        probe = getattr(self._inner, "probe", None)
        if probe is not None:
            probe()
