"""Gemini models' retirement dates on Vertex AI, checked when the worker starts.

Google retires each stable Gemini model on a published date; a month before it, new
access is blocked, and a retired model id answers 404 (every job would be refused). The
worker refuses to start on a default model past its retirement, and logs a warning
within `WARN_BEFORE` of it and an error for a configured model already retired.

Source: "Model versions and lifecycle", Google Cloud documentation
(https://docs.cloud.google.com/vertex-ai/generative-ai/docs/learn/model-versions), as
read on 2026-12-01. A date marked there "or later" is the earliest one. Add a model's
date here when the page announces it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import date, timedelta

log = logging.getLogger(__name__)

LIFECYCLE_URL = "https://docs.cloud.google.com/vertex-ai/generative-ai/docs/learn/model-versions"
#: New access to a model is blocked this long before its retirement.
WARN_BEFORE = timedelta(days=30)

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


class ModelRetired(ValueError):
    """The grader's default model is past its retirement date: the worker must not start."""


@dataclass(frozen=True)
class ModelLifecycle:
    """Where a model stands on `today`."""

    model: str
    retires_on: date | None
    today: date

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


def check_model(model: str, *, default: bool, today: date) -> ModelLifecycle:
    """Refuse a retired default model; warn about one retiring soon or configured retired.

    A configured model past its known date is logged, not refused: Google may extend a
    date, and a model that really is gone makes the worker suspend grading (404) and
    alert, without failing jobs.
    """
    lifecycle = ModelLifecycle(model, RETIREMENTS.get(model.removeprefix("models/")), today)
    where = f"see {LIFECYCLE_URL}"
    if lifecycle.retired and default:
        raise ModelRetired(
            f"the default Gemini model {model} was retired on Vertex AI on "
            f"{lifecycle.retires_on}: set GRADEQ_GRADER_MODEL to a current model ({where})"
        )
    if lifecycle.retired:
        log.error(
            "the configured Gemini model is past its retirement date",
            extra={"model": model, "retires_on": str(lifecycle.retires_on), "see": where},
        )
    elif lifecycle.retiring_soon:
        log.warning(
            "the Gemini model retires soon; new access to it is already blocked",
            extra={"model": model, "retires_on": str(lifecycle.retires_on), "see": where},
        )
    return lifecycle
