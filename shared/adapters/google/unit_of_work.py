"""UnitOfWork on Google Cloud: Firestore, Cloud Tasks and Pub/Sub cannot share a commit.

Each write commits on its own; the callers are written to be correct that way (task names
derived from the job, so a retried request creates no second task; events published before
the job is marked announced, so a crash leads to a duplicate with the same event id).
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext


class SeparateCommits:
    """A UnitOfWork whose `atomic()` groups nothing."""

    commits_together = False

    def atomic(self) -> AbstractContextManager[None]:
        return nullcontext()
