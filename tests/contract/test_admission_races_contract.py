"""Every path that creates or revives work admits under the same hard ceilings: racing
batches and a regrade never pass a client's ceiling or the backlog, on either store, and
a regrade that waits for room completes as its round's jobs are graded."""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest

from shared.clock import FrozenClock
from shared.domain.admission import AdmissionLimits
from shared.domain.errors import BacklogFull, TooManyActiveJobs
from shared.domain.grade import GradeResult
from shared.domain.job import Job
from shared.ports import JobFilter
from shared.service_layer import regrade as regrade_module
from shared.service_layer.assignment_completion import AssignmentCompletion
from shared.service_layer.assignments import Answer, AssignmentService, ItemStatus
from shared.service_layer.regrade import Regrader
from tests.contract import test_assignment_store_contract as store_contract
from tests.contract.test_assignment_store_contract import Backend, assignment
from tests.contract.test_job_store_contract import T0
from tests.fakes import FakePublisher, FakeTaskQueue

LEASE = timedelta(seconds=30)
backend = store_contract.backend  # the fixture: each store with its tally and batch writer
LIMITS = AdmissionLimits(per_client=3, backlog=5, retry_after_s=7)
CLASS = 6


class World:
    """Two clients' assignments, the services over one backend, and what they made."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.clock = FrozenClock(T0)
        self.queue = FakeTaskQueue()
        self.publisher = FakePublisher()
        self.service = AssignmentService(
            backend.assignments, backend.jobs, backend.batch, self.queue, self.clock, LIMITS
        )
        self.regrader = Regrader(
            self.service,
            backend.assignments,
            backend.jobs,
            self.queue,
            self.clock,
            lambda a, c, r: self.completion.check(a, c, r),
            limits=LIMITS,
        )
        self.completion = AssignmentCompletion(
            backend.assignments, self.publisher, self.clock, self.regrader.resume
        )
        for assignment_id, client_id in (("a-1", "client-a"), ("b-1", "client-b")):
            backend.assignments.create(assignment(assignment_id, client_id))
        backend.assignments.create(assignment("a-class", "client-a"))

    def jobs_of(self, client_id: str) -> list[Job]:
        return self.backend.jobs.find_jobs(JobFilter(client_id=client_id), 200)

    def assert_within_ceilings(self) -> None:
        """The ceilings hold, in the counters and in the jobs themselves."""
        open_jobs = {c: [j for j in self.jobs_of(c) if not j.status.is_final] for c in CLIENTS}
        for client_id, jobs in open_jobs.items():
            counts = self.backend.jobs.active_counts(client_id)
            assert counts.client == len(jobs) <= LIMITS.per_client, client_id
        assert sum(len(j) for j in open_jobs.values()) <= LIMITS.backlog
        assert self.backend.jobs.active_counts("client-a").total <= LIMITS.backlog

    def grade(self, job_id: str) -> None:
        """Grade one job as the worker does: final, completion checked, then announced."""
        jobs = self.backend.jobs
        jobs.update(job_id, lambda j: j.claim("w", T0, LEASE))
        done = jobs.update(job_id, lambda j: j.succeed("w", GradeResult(7.0, 10.0, "ok"), T0))
        jobs.update(job_id, lambda j: j.mark_event_published(T0))
        self.completion.on_final(done)


CLIENTS = ("client-a", "client-b")


def graded_class(world: World) -> None:
    """Client A's class of CLASS answers, graded and announced: ready for a regrade."""
    answers = [Answer(f"c{i}", f"answer {i}") for i in range(CLASS)]
    for start in range(0, CLASS, LIMITS.per_client):
        results = world.service.submit_batch("client-a", "a-class", answers[start:][:3])
        for result in results:
            assert result.job is not None
            world.grade(result.job.id)


def test_racing_batches_and_a_regrade_never_pass_a_ceiling_and_the_regrade_completes(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(regrade_module, "ANNOUNCE_WAITS_S", ())
    world = World(backend)
    graded_class(world)
    world.assert_within_ceilings()

    def batch(n: int) -> int:
        client_id, assignment_id = (("client-a", "a-1"), ("client-b", "b-1"))[n % 2]
        answers = [Answer(f"r{n}-{i}", f"race {n} {i}") for i in range(2)]
        try:
            results = world.service.submit_batch(client_id, assignment_id, answers)
        except (TooManyActiveJobs, BacklogFull):
            return 0  # nothing of it fitted
        return sum(1 for r in results if r.status is ItemStatus.ACCEPTED)

    def regrade() -> int:
        with contextlib.suppress(TooManyActiveJobs, BacklogFull):  # nothing fitted yet
            world.regrader.regrade("client-a", "a-class", rubric="light, only")
        return 0

    with ThreadPoolExecutor(max_workers=6) as pool:
        racing = [pool.submit(batch, n) for n in range(20)]
        racing.append(pool.submit(regrade))
        accepted = sum(f.result() for f in racing)

    world.assert_within_ceilings()
    opened = sum(1 for c in CLIENTS for j in world.jobs_of(c) if not j.status.is_final)
    assert opened == LIMITS.backlog  # the demand passed the backlog: it is full, not past
    assert accepted <= LIMITS.backlog
    regraded = backend.assignments.get("a-class")
    assert regraded is not None and (regraded.round, regraded.expected) == (1, CLASS)

    # Room frees as jobs are graded; the regrade moves what fits each time its round's
    # jobs are all graded, and a client asks again when nothing of it fitted at first.
    for _ in range(4 * CLASS):
        waiting = [j for c in CLIENTS for j in world.jobs_of(c) if not j.status.is_final]
        tally = backend.assignments.tally("a-class", 1)
        if not waiting and tally.total == CLASS:
            break
        if not waiting or tally.total == 0:
            with contextlib.suppress(TooManyActiveJobs, BacklogFull):  # no room yet: 429 again
                world.regrader.regrade("client-a", "a-class")  # the client's retry of a 429
        for job in waiting[:2]:
            world.grade(job.id)
            world.assert_within_ceilings()
    tally = backend.assignments.tally("a-class", 1)
    assert tally.total == CLASS and tally.done  # every submission regraded
    assert backend.jobs.active_counts("client-a").total == 0


def test_a_regrade_whose_room_other_jobs_took_is_resumed_by_the_sweep(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(regrade_module, "ANNOUNCE_WAITS_S", ())
    world = World(backend)
    graded_class(world)
    jobs = backend.jobs
    started = world.regrader.regrade("client-a", "a-class", rubric="light, only")
    assert backend.assignments.tally("a-class", 1).total == LIMITS.per_client  # 3 of 6 moved
    assert [a.id for a in backend.assignments.waiting_regrades(10)] == [started.id]

    # The moved jobs become final, but before the worker's completion check the client's
    # other answers take the room they left: the check finds none to move into.
    moved = [j for j in world.jobs_of("client-a") if not j.status.is_final]
    finals = []
    for job in moved:
        jobs.update(job.id, lambda j: j.claim("w", T0, LEASE))
        finals.append(
            jobs.update(job.id, lambda j: j.succeed("w", GradeResult(7.0, 10.0, "ok"), T0))
        )
        jobs.update(job.id, lambda j: j.mark_event_published(T0))
    others = [Answer(f"o{i}", "other") for i in range(LIMITS.per_client)]
    assert all(r.job for r in world.service.submit_batch("client-a", "a-1", others))
    for done in finals:
        world.completion.on_final(done)
    world.assert_within_ceilings()
    assert backend.assignments.tally("a-class", 1).total == LIMITS.per_client  # stuck

    # The other answers are graded (no job of the regrade's round is left to resume it);
    # the sweep finds the regrade still waiting and moves the rest.
    for job in [j for j in world.jobs_of("client-a") if not j.status.is_final]:
        world.grade(job.id)
    assert world.regrader.resume_waiting() == [started.id]
    world.assert_within_ceilings()
    assert backend.assignments.tally("a-class", 1).total == CLASS
    assert backend.assignments.waiting_regrades(10) == []
