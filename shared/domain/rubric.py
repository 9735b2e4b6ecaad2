"""How a rubric splits into criteria: one rule for the intake's check and the graders."""

from __future__ import annotations

import re

_SEPARATORS = re.compile(r"[\n;]+")
_DECORATION = " -*\t"


def criteria_of(rubric: str | tuple[str, ...] | list[str]) -> list[str]:
    """Split a rubric into criteria: a list as given, a string by lines or semicolons.

    Blank items and list decoration (bullets, dashes) are dropped, so `" "`, `";;"` or
    `[" "]` have no criterion at all.
    """
    items = list(rubric) if not isinstance(rubric, str) else _SEPARATORS.split(rubric)
    return [item.strip(_DECORATION) for item in items if item.strip(_DECORATION)]
