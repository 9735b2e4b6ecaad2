"""Batch mode's decisions, on the batch service itself: which jobs a tick finds, when a
gathered set is sent and how it is split, what a running, ended or unreachable batch
leaves behind, which jobs are answered and which go back to their queue (with which
error, on which task), and a job that moved on meanwhile."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.adapters.embedded.unit_of_work import SqliteUnitOfWork
from shared.adapters.graders.provider_batch import BatchState, BatchStatus
from shared.clock import FrozenClock
from shared.domain.errors import (
    GradingError,
    PermanentGradingError,
    PromptTooLarge,
    ProviderUnavailable,
)
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest, Job, JobError
from shared.domain.status import JobStatus
from shared.ports import TaskSpec
from shared.service_layer.provider_batches import (
    COMPLETION_WINDOW,
    LEASE_MARGIN,
    RESERVED,
    BatchPolicy,
    BatchReport,
    BatchService,
)
from tests.fakes import FakeTaskQueue
from tests.unit.test_provider_batches import ScriptedBatches

OWNER = "worker-1"
CLAIM = timedelta(minutes=5)
WINDOW = timedelta(minutes=10)


@dataclass
class Batches(ScriptedBatches):
    """ScriptedBatches that can leave jobs unanswered, refuse their answers or their
    requests (by submission id), and that remembers each batch's name."""

    unanswered: set[str] = field(default_factory=set)
    refused: dict[str, GradingError] = field(default_factory=dict)
    unrenderable: set[str] = field(default_factory=set)
    names: list[str] = field(default_factory=list)
    payloads: dict[str, object] = field(default_factory=dict)
    rendered: list[str] = field(default_factory=list)

    def render(self, request: GradingRequest) -> object:
        if request.submission_id in self.unrenderable:
            raise PromptTooLarge(f"{request.submission_id} is too large")
        self.rendered.append(request.submission_id)
        return super().render(request)

    def submit(self, requests: dict[str, object], name: str) -> str:
        self.names.append(name)
        self.payloads.update(requests)
        return super().submit(requests, name)

    def status(self, batch_id: str) -> BatchStatus:
        status = super().status(batch_id)
        answers = {
            key: answer
            for key, answer in status.answers.items()
            if key.removeprefix("job-") not in self.unanswered
        }
        return BatchStatus(status.state, answers)

    def result(self, request: GradingRequest, answer: object) -> GradeResult:
        refusal = self.refused.get(request.submission_id)
        if refusal is not None:
            raise refusal
        return super().result(request, answer)


@dataclass
class Stage:
    store: SqliteJobStore
    queue: FakeTaskQueue
    clock: FrozenClock
    batches: Batches
    service: BatchService
    recorded: list[tuple[str, str]] = field(default_factory=list)

    def job(self, job_id: str) -> Job:
        found = self.store.get(job_id)
        assert found is not None
        return found

    def claimed(self, key: str, lane: str | None = "bulk") -> Job:
        request = GradingRequest(key, f"answer {key}", "r", 10)
        job = Job.new(f"job-{key}", "client-a", request, "fp", self.clock.now(), lane=lane)
        self.store.create(job)
        return self.store.update(job.id, lambda j: j.claim(OWNER, self.clock.now(), CLAIM))

    def gathered(self, key: str, lane: str | None = "bulk") -> Job:
        return self.service.gather(self.claimed(key, lane), OWNER)

    def batch_of(self, job_id: str) -> str | None:
        wait = self.job(job_id).provider_batch
        return None if wait is None else wait.batch_id


def stage(
    tmp_path: Path,
    batches: Batches | None = None,
    *,
    max_size: int = 1000,
    max_scan: int = 5000,
    page: int = 200,
    uow: bool = True,
    record: Callable[[Job, str, GradeResult], Job] | None = None,
) -> Stage:
    db = SqliteDatabase(tmp_path / "gradeq.db")
    store = SqliteJobStore(db)
    queue = FakeTaskQueue()
    clock = FrozenClock()
    batches = batches or Batches()
    recorded: list[tuple[str, str]] = []

    def record_answer(job: Job, batch_id: str, result: GradeResult) -> Job:
        recorded.append((job.id, batch_id))
        return store.update(job.id, lambda j: j.batch_succeeded(batch_id, result, clock.now()))

    policy = BatchPolicy(lanes=frozenset({"bulk"}), max_size=max_size, window=WINDOW)
    service = BatchService(
        store,
        queue,
        clock,
        batches,
        policy,
        record or record_answer,
        uow=SqliteUnitOfWork(db) if uow else None,
        max_scan=max_scan,
        page=page,
    )
    return Stage(store, queue, clock, batches, service, recorded)


def submitted(st: Stage, *keys: str) -> BatchReport:
    """Gather `keys` a second apart, let the window pass and tick once."""
    for key in keys:
        st.gathered(key)
        st.clock.advance(timedelta(seconds=1))
    st.clock.advance(WINDOW)
    return st.service.tick()


# --- the policy and gathering ----------------------------------------------------------


def test_a_gathered_job_waits_for_the_window_and_three_ticks() -> None:
    policy = BatchPolicy(lanes=frozenset({"bulk"}))
    assert (policy.regrades, policy.max_size) == (True, 1000)
    assert policy.window == timedelta(minutes=10)
    assert policy.tick == timedelta(minutes=5)
    assert policy.gather_lease == timedelta(minutes=25)
    custom = BatchPolicy(frozenset(), window=timedelta(minutes=2), tick=timedelta(minutes=1))
    assert custom.gather_lease == timedelta(minutes=5)


def test_a_regrade_waits_only_once_tallied_and_past_the_first_round() -> None:
    policy = BatchPolicy(lanes=frozenset())
    base = Job.new("j", "c", GradingRequest("s", "a", "r"), "fp", FrozenClock().now())
    first = GradingRequest("s", "a", "r", assignment_id="a1", rubric_version=2, prompt_version="p")
    assert first.tallied and first.assignment_round == 0
    assert not policy.accepts(Job.new("j", "c", first, "fp", base.created_at))
    untallied = GradingRequest("s", "a", "r", assignment_round=1)
    assert not untallied.tallied
    assert not policy.accepts(Job.new("j", "c", untallied, "fp", base.created_at))
    assert not policy.accepts(
        Job.new("j", "c", GradingRequest("s", "a", "r"), "fp", base.created_at, lane="x")
    )


def test_gathering_hands_the_claimed_job_to_the_next_batch(tmp_path: Path) -> None:
    st = stage(tmp_path)
    job = st.claimed("a")
    assert st.service.accepts(job)
    st.clock.advance(timedelta(seconds=3))
    gathered = st.service.gather(job, OWNER)
    now = st.clock.now()
    assert gathered == st.job(job.id)
    assert gathered.status is JobStatus.RUNNING and gathered.waits_in_batch
    assert gathered.provider_batch is not None
    assert (gathered.provider_batch.provider, gathered.provider_batch.since) == ("scripted", now)
    assert gathered.provider_batch.batch_id is None
    assert gathered.lease_expires_at == now + timedelta(minutes=10) + 3 * timedelta(minutes=5)
    assert not st.service.accepts(st.claimed("b", lane="grading"))


# --- when a batch is sent --------------------------------------------------------------


def test_a_young_gathering_waits_and_is_sent_once_the_window_has_passed(tmp_path: Path) -> None:
    st = stage(tmp_path)
    st.gathered("a")
    st.clock.advance(WINDOW - timedelta(seconds=1))
    assert st.service.tick() == BatchReport()
    assert st.batches.submitted == {}
    assert st.batch_of("job-a") is None
    st.clock.advance(timedelta(seconds=1))  # exactly the window
    report = st.service.tick()
    assert report == BatchReport(submitted=["batch-1"])
    assert st.batches.submitted == {"batch-1": ["job-a"]}
    assert st.batch_of("job-a") == "batch-1"


def test_a_full_gathering_is_sent_at_once_and_the_young_rest_waits(tmp_path: Path) -> None:
    st = stage(tmp_path, max_size=2)
    for key in ("a", "b", "c"):
        st.gathered(key)
        st.clock.advance(timedelta(seconds=1))
    report = st.service.tick()
    assert report.submitted == ["batch-1"]
    assert st.batches.submitted == {"batch-1": ["job-a", "job-b"]}
    assert st.batch_of("job-c") is None


def test_an_old_gathering_is_sent_in_batches_of_the_max_size(tmp_path: Path) -> None:
    st = stage(tmp_path, max_size=2)
    report = submitted(st, "a", "b", "c", "d", "e")
    assert report.submitted == ["batch-1", "batch-2", "batch-3"]
    assert st.batches.submitted == {
        "batch-1": ["job-a", "job-b"],
        "batch-2": ["job-c", "job-d"],
        "batch-3": ["job-e"],
    }


def test_the_longest_waiting_go_first_and_ties_by_job_id(tmp_path: Path) -> None:
    st = stage(tmp_path, max_size=2)
    st.gathered("c")
    st.clock.advance(timedelta(seconds=1))
    st.gathered("b")
    st.gathered("a")
    st.clock.advance(timedelta(seconds=1))
    st.service.tick()
    assert st.batches.submitted == {"batch-1": ["job-c", "job-a"]}
    assert st.batch_of("job-b") is None


def test_a_submitted_job_is_marked_with_the_batch_and_a_lease_past_the_provider_window(
    tmp_path: Path,
) -> None:
    st = stage(tmp_path)
    report = submitted(st, "a", "b")
    now = st.clock.now()
    assert report == BatchReport(submitted=["batch-1"])
    for job_id in ("job-a", "job-b"):
        job = st.job(job_id)
        assert job.provider_batch is not None
        assert (job.provider_batch.batch_id, job.provider_batch.since) == ("batch-1", now)
        assert job.lease_expires_at == now + COMPLETION_WINDOW + LEASE_MARGIN
        assert job.status is JobStatus.RUNNING
    [name] = st.batches.names
    assert len(name) == 32 and not name.startswith(RESERVED)
    assert int(name, 16) >= 0
    assert timedelta(hours=24) == COMPLETION_WINDOW and timedelta(hours=2) == LEASE_MARGIN


def test_each_batch_gets_a_name_of_its_own(tmp_path: Path) -> None:
    st = stage(tmp_path, max_size=1)
    submitted(st, "a", "b")
    assert len(set(st.batches.names)) == 2


def test_a_job_reserved_by_another_tick_is_left_to_it(tmp_path: Path) -> None:
    st = stage(tmp_path)
    st.gathered("a")
    st.gathered("b")
    st.store.update(
        "job-b",
        lambda j: j.submit_batch(None, RESERVED + "other", st.clock.now(), timedelta(hours=1)),
    )
    st.clock.advance(WINDOW)
    report = st.service.tick()
    assert report == BatchReport(submitted=["batch-1"])
    assert st.batches.submitted == {"batch-1": ["job-a"]}
    assert st.batch_of("job-b") == RESERVED + "other"


def test_a_request_that_cannot_go_is_graded_alone_and_the_rest_is_sent(
    tmp_path: Path,
) -> None:
    st = stage(tmp_path, Batches(unrenderable={"b"}))
    report = submitted(st, "a", "b", "c")
    now = st.clock.now()
    assert report == BatchReport(submitted=["batch-1"], returned=["job-b"])
    assert st.batches.submitted == {"batch-1": ["job-a", "job-c"]}
    assert st.batches.payloads == {"job-a": "answer a", "job-c": "answer c"}
    back = st.job("job-b")
    assert back.status is JobStatus.RETRYING and back.batch_returned
    assert back.provider_batch is None
    assert back.error == JobError("grading-prompt-too-large", "b is too large")
    assert st.queue.tasks == [TaskSpec(back.task_name, "job-b", now, "bulk")]


def test_a_gathering_of_requests_that_all_cannot_go_sends_no_batch(tmp_path: Path) -> None:
    st = stage(tmp_path, Batches(unrenderable={"a"}))
    report = submitted(st, "a")
    assert report == BatchReport(returned=["job-a"])
    assert st.batches.submitted == {} and st.batches.names == []


def test_a_batch_that_cannot_be_created_returns_only_the_jobs_it_would_have_held(
    tmp_path: Path,
) -> None:
    st = stage(tmp_path, Batches(fail_submit=True, unrenderable={"b"}))
    report = submitted(st, "a", "b")
    now = st.clock.now()
    assert report == BatchReport(returned=["job-b", "job-a"])
    back = st.job("job-a")
    assert back.error == JobError("grading-provider-unavailable", "scripted: batches unavailable")
    assert st.queue.tasks == [
        TaskSpec(st.job("job-b").task_name, "job-b", now, "bulk"),
        TaskSpec(back.task_name, "job-a", now, "bulk"),
    ]


# --- which jobs a tick finds -----------------------------------------------------------


def test_the_tick_reads_every_page_of_running_jobs(tmp_path: Path) -> None:
    st = stage(tmp_path, page=2)
    st.claimed("busy")  # running, but not in a batch
    report = submitted(st, "a", "b", "c", "d")
    assert report == BatchReport(submitted=["batch-1"])
    assert sorted(st.batches.submitted["batch-1"]) == ["job-a", "job-b", "job-c", "job-d"]


def test_each_page_starts_after_the_last_job_of_the_one_before(tmp_path: Path) -> None:
    st = stage(tmp_path, page=3)
    keys = ["a", "b", "c", "d", "e", "f", "g"]
    report = submitted(st, *keys)
    assert report == BatchReport(submitted=["batch-1"])
    assert st.batches.submitted == {"batch-1": [f"job-{key}" for key in keys]}


def test_a_job_taken_over_while_its_batch_was_created_is_left_out(tmp_path: Path) -> None:
    st = stage(tmp_path)
    st.gathered("a")
    st.gathered("b")
    st.clock.advance(WINDOW)
    later = st.clock.now() + timedelta(hours=1)  # past the reservation's lease
    st.batches.during_submit = lambda: st.store.update(
        "job-b", lambda j: j.claim("worker-2", later, CLAIM)
    )
    report = st.service.tick()
    assert report == BatchReport(submitted=["batch-1"], errors=["job-b"])
    assert st.batches.submitted == {"batch-1": ["job-a", "job-b"]}
    assert st.batch_of("job-a") == "batch-1"
    taken = st.job("job-b")
    assert taken.provider_batch is None and taken.lease_owner == "worker-2"


def test_the_tick_stops_at_the_scan_limit(tmp_path: Path) -> None:
    st = stage(tmp_path, page=2, max_scan=4)
    report = submitted(st, "a", "b", "c", "d", "e")
    assert report.submitted == ["batch-1"]
    assert st.batches.submitted == {"batch-1": ["job-a", "job-b", "job-c", "job-d"]}
    assert st.batch_of("job-e") is None


def test_a_scan_limit_below_a_page_still_reads_one_page(tmp_path: Path) -> None:
    st = stage(tmp_path, page=3, max_scan=1)
    submitted(st, "a", "b", "c", "d")
    assert st.batches.submitted == {"batch-1": ["job-a", "job-b", "job-c"]}


def test_a_job_stamped_a_second_ahead_of_the_tick_waits_for_the_next(tmp_path: Path) -> None:
    # Another instance's clock ran ahead: the tick sees what changed before now + 1 s.
    st = stage(tmp_path)
    submitted(st, "a")  # marked with its batch at this moment
    st.clock.advance(-timedelta(seconds=1))
    assert st.service.tick() == BatchReport()
    assert st.batches.reads == {}
    st.clock.advance(timedelta(microseconds=1))
    assert st.service.tick() == BatchReport(ended=["batch-1"], answered=["job-a"])


# --- polling ---------------------------------------------------------------------------


def test_a_running_batch_is_asked_again_at_the_next_tick(tmp_path: Path) -> None:
    st = stage(tmp_path, Batches(polls=2))
    submitted(st, "a")
    report = st.service.tick()
    assert report == BatchReport()
    assert st.batches.reads == {"batch-1": 1}
    assert st.batch_of("job-a") == "batch-1"
    assert st.job("job-a").status is JobStatus.RUNNING
    report = st.service.tick()
    assert report == BatchReport(ended=["batch-1"], answered=["job-a"])


def test_an_ended_batch_answers_its_jobs_once(tmp_path: Path) -> None:
    st = stage(tmp_path)
    submitted(st, "a", "b")
    report = st.service.tick()
    assert report.ended == ["batch-1"]
    assert sorted(report.answered) == ["job-a", "job-b"]
    assert (report.returned, report.errors, report.submitted) == ([], [], [])
    assert sorted(st.recorded) == [("job-a", "batch-1"), ("job-b", "batch-1")]
    for job_id in ("job-a", "job-b"):
        done = st.job(job_id)
        assert done.status is JobStatus.SUCCEEDED and done.result is not None
        assert done.result.feedback == "batched"
    assert st.service.tick() == BatchReport()
    assert st.batches.reads == {"batch-1": 1}


@pytest.mark.parametrize("missing", ["a", "b"])
def test_a_job_the_batch_did_not_answer_goes_back_and_the_others_are_answered(
    tmp_path: Path, missing: str
) -> None:
    st = stage(tmp_path, Batches(unanswered={missing}))
    submitted(st, "a", "b")
    report = st.service.tick()
    now = st.clock.now()
    other = "job-b" if missing == "a" else "job-a"
    assert report == BatchReport(ended=["batch-1"], answered=[other], returned=[f"job-{missing}"])
    back = st.job(f"job-{missing}")
    assert back.status is JobStatus.RETRYING and back.batch_returned
    assert back.error == JobError(
        "provider-batch-completed", "the provider's batch completed without answering this job"
    )
    assert st.queue.tasks == [TaskSpec(back.task_name, back.id, now, "bulk")]
    assert st.job(other).status is JobStatus.SUCCEEDED


def test_a_failed_batch_returns_every_job_with_its_state(tmp_path: Path) -> None:
    st = stage(tmp_path, Batches(state=BatchState.FAILED))
    submitted(st, "a")
    report = st.service.tick()
    assert report == BatchReport(ended=["batch-1"], returned=["job-a"])
    assert st.job("job-a").error == JobError(
        "provider-batch-failed", "the provider's batch failed without answering this job"
    )


@pytest.mark.parametrize("refused", ["a", "b"])
def test_an_answer_the_grader_refuses_sends_the_job_back_with_that_error(
    tmp_path: Path, refused: str
) -> None:
    error = PermanentGradingError("the model refused to grade")
    st = stage(tmp_path, Batches(refused={refused: error}))
    submitted(st, "a", "b")
    report = st.service.tick()
    now = st.clock.now()
    other = "job-b" if refused == "a" else "job-a"
    assert report == BatchReport(ended=["batch-1"], answered=[other], returned=[f"job-{refused}"])
    back = st.job(f"job-{refused}")
    assert back.status is JobStatus.RETRYING and back.provider_batch is None
    assert back.error == JobError("grading-permanent", "the model refused to grade")
    assert st.queue.tasks == [TaskSpec(back.task_name, back.id, now, "bulk")]
    assert st.job(other).status is JobStatus.SUCCEEDED


def test_a_returned_job_without_a_lane_goes_to_the_default_queue(tmp_path: Path) -> None:
    st = stage(tmp_path, Batches(state=BatchState.EXPIRED))
    job = st.claimed("a", lane=None)
    hours = st.store.update(job.id, lambda j: j)
    st.service.gather(hours, OWNER)
    st.clock.advance(WINDOW)
    st.service.tick()
    st.service.tick()
    back = st.job("job-a")
    assert st.queue.tasks == [TaskSpec(back.task_name, "job-a", st.clock.now(), None)]


def test_a_batch_that_cannot_be_asked_is_reported_and_the_others_still_polled(
    tmp_path: Path,
) -> None:
    st = stage(tmp_path, max_size=1)
    submitted(st, "a", "b")
    asked = st.batches.status

    def status(batch_id: str) -> BatchStatus:
        if batch_id == "batch-1":
            raise ProviderUnavailable("unreachable")
        return asked(batch_id)

    st.batches.status = status  # type: ignore[method-assign]
    report = st.service.tick()
    assert report == BatchReport(ended=["batch-2"], answered=["job-b"], errors=["batch-1"])
    assert st.batch_of("job-a") == "batch-1"


# --- a job that moved on meanwhile -----------------------------------------------------


def test_an_answer_for_a_job_that_moved_on_is_skipped(tmp_path: Path) -> None:
    st = stage(tmp_path)
    submitted(st, "a", "b")
    st.batches.during_status = lambda: st.store.update(
        "job-a", lambda j: j.batch_succeeded("batch-1", GradeResult(1, 10, "x"), st.clock.now())
    )
    report = st.service.tick()
    assert report == BatchReport(ended=["batch-1"], answered=["job-b"], errors=["job-a"])
    assert st.job("job-a").result == GradeResult(1, 10, "x")


def test_a_return_for_a_job_that_moved_on_is_skipped(tmp_path: Path) -> None:
    st = stage(tmp_path, Batches(state=BatchState.CANCELLED))
    submitted(st, "a", "b")
    st.batches.during_status = lambda: st.store.update(
        "job-a", lambda j: j.batch_succeeded("batch-1", GradeResult(1, 10, "x"), st.clock.now())
    )
    report = st.service.tick()
    assert report == BatchReport(ended=["batch-1"], returned=["job-b"], errors=["job-a"])
    assert [t.job_id for t in st.queue.tasks] == ["job-b"]
    assert st.job("job-a").status is JobStatus.SUCCEEDED


def test_a_return_whose_task_cannot_be_queued_leaves_the_job_in_its_batch(
    tmp_path: Path,
) -> None:
    st = stage(tmp_path, Batches(state=BatchState.EXPIRED))
    submitted(st, "a")
    st.queue.available = False
    report = st.service.tick()
    assert report == BatchReport(ended=["batch-1"], errors=["job-a"])
    assert st.job("job-a").waits_in_batch and st.batch_of("job-a") == "batch-1"
    st.queue.available = True
    report = st.service.tick()
    assert report == BatchReport(ended=["batch-1"], returned=["job-a"])
    assert st.job("job-a").status is JobStatus.RETRYING


def test_without_a_unit_of_work_each_write_commits_on_its_own(tmp_path: Path) -> None:
    st = stage(tmp_path, Batches(state=BatchState.EXPIRED), uow=False)
    submitted(st, "a")
    st.queue.available = False
    report = st.service.tick()
    assert report == BatchReport(ended=["batch-1"], errors=["job-a"])
    assert st.job("job-a").status is JobStatus.RETRYING
    assert st.queue.tasks == []


def test_a_job_reserved_meanwhile_is_skipped_by_the_gatherer(tmp_path: Path) -> None:
    st = stage(tmp_path)
    st.gathered("a")
    st.gathered("b")
    st.clock.advance(WINDOW)
    found = st.store.find

    def racing_find(
        status: JobStatus,
        updated_before: datetime,
        limit: int,
        updated_after: datetime | None = None,
        after_id: str | None = None,
    ) -> list[Job]:
        page = found(status, updated_before, limit, updated_after=updated_after, after_id=after_id)
        st.store.update(
            "job-b",
            lambda j: j.submit_batch(None, RESERVED + "other", st.clock.now(), CLAIM),
        )
        return page

    st.store.find = racing_find  # type: ignore[method-assign]
    report = st.service.tick()
    assert report == BatchReport(submitted=["batch-1"], errors=["job-b"])
    assert st.batches.submitted == {"batch-1": ["job-a"]}
    assert st.batches.rendered == ["a"]


def test_by_default_a_tick_reads_pages_of_200_up_to_5000_jobs(tmp_path: Path) -> None:
    st = stage(tmp_path)
    service = BatchService(
        st.store, st.queue, st.clock, st.batches, st.service.policy, st.service._record_answer
    )
    busy = st.claimed("busy")  # running, not in a batch: scanned, never taken
    asked: list[tuple[int, datetime | None, str | None]] = []

    def full_pages(
        status: JobStatus,
        updated_before: datetime,
        limit: int,
        updated_after: datetime | None = None,
        after_id: str | None = None,
    ) -> list[Job]:
        assert status is JobStatus.RUNNING
        assert updated_before == st.clock.now() + timedelta(seconds=1)
        asked.append((limit, updated_after, after_id))
        return [busy] * limit

    st.store.find = full_pages  # type: ignore[method-assign]
    assert service.tick() == BatchReport()
    assert len(asked) == 25
    assert asked[0] == (200, None, None)
    assert set(asked[1:]) == {(200, busy.updated_at, busy.id)}


def test_which_jobs_may_wait_for_a_batch() -> None:
    policy = BatchPolicy(lanes=frozenset({"bulk"}))
    now = FrozenClock().now()
    plain = GradingRequest("s", "a", "r")
    bulk = Job.new("j", "c", plain, "fp", now, lane="bulk")
    assert policy.accepts(bulk)
    assert not policy.accepts(dataclasses.replace(bulk, batch_returned=True))
    hours = dataclasses.replace(plain, deadline="hours")
    assert policy.accepts(Job.new("j", "c", hours, "fp", now, lane="exam"))
    assert policy.accepts(Job.new("j", "c", hours, "fp", now))
    regrade = GradingRequest(
        "s",
        "a",
        "r",
        assignment_id="a1",
        rubric_version=2,
        prompt_version="p",
        assignment_round=1,
    )
    assert policy.accepts(Job.new("j", "c", regrade, "fp", now, lane="grading"))
    second = dataclasses.replace(regrade, assignment_round=2)
    assert policy.accepts(Job.new("j", "c", second, "fp", now))
    no_regrades = BatchPolicy(lanes=frozenset({"bulk"}), regrades=False)
    assert not no_regrades.accepts(Job.new("j", "c", regrade, "fp", now, lane="grading"))
    assert no_regrades.accepts(Job.new("j", "c", regrade, "fp", now, lane="bulk"))


def test_one_tick_fans_out_every_job_of_an_ended_batch_across_pages(tmp_path: Path) -> None:
    st = stage(tmp_path, page=2)
    submitted(st, "a", "b", "c", "d")  # all four marked with batch-1 at the same moment
    report = st.service.tick()
    assert sorted(report.answered) == ["job-a", "job-b", "job-c", "job-d"]
