"""The RQ peer's job function: holds a worker for the grading time.

Kept free of imports beyond the standard library: RQ runs each job in a process forked
from its worker, which imports the function's module when the worker has not.
"""

from __future__ import annotations

import time
from typing import Any


def grade(body: dict[str, Any], seconds: float) -> dict[str, Any]:
    """Stand in for a grading: hold the worker for `seconds`."""
    time.sleep(seconds)
    return {"submission_id": body.get("submission_id"), "score": 1.0}
