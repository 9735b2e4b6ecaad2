"""The worker's write of a final outcome in one commit: a commit that fails once the block
has run is not retried by the worker, since the outcome may have been stored; the
delivery fails and the queue delivers it again."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from shared.adapters.embedded.unit_of_work import SqliteUnitOfWork
from shared.domain.errors import DependencyUnavailable
from shared.service_layer.worker import TaskDelivery
from tests.unit.test_worker_decisions import Harness, h  # noqa: F401


class CommitFailsAfterTheBlock:
    """A one-commit unit of work whose next commit(s) report failure once the block ran."""

    commits_together = True

    def __init__(self, inner: SqliteUnitOfWork, failures: int = 1) -> None:
        self._inner = inner
        self.failures = failures

    @contextmanager
    def atomic(self) -> Iterator[None]:
        with self._inner.atomic():
            yield
        if self.failures:
            self.failures -= 1
            raise DependencyUnavailable("the commit's outcome is unknown")


def test_a_failed_commit_of_a_stored_outcome_fails_the_delivery_without_a_retry(
    h: Harness,  # noqa: F811
) -> None:
    uow = CommitFailsAfterTheBlock(SqliteUnitOfWork(h.db))
    service = h.service(uow=uow)
    job_id = h.seed()
    h.beats.finish_on = 0
    with pytest.raises(DependencyUnavailable):
        service.handle(TaskDelivery(job_id, "t", 0))
    assert h.time.sleeps == [] and uow.failures == 0
