"""What the intake decides, pinned value by value: due times, refusals, pages, cursors.

The task each submission enqueues (name, job id, schedule time: the client's fair share
of the queue, or its not_before), the admission refusals and what they tell the client,
the query a page asks the store, and the exact cursor it hands out.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest

from shared.adapters.embedded.job_store import SqliteJobStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.clock import FrozenClock
from shared.domain.admission import ActiveCounts, AdmissionLimits
from shared.domain.authorization import Action, Principal, authorize
from shared.domain.errors import BacklogFull, TooManyActiveJobs, ValidationFailed
from shared.domain.ids import job_id_for, task_name_for
from shared.domain.job import GradingRequest, Job
from shared.domain.status import JobStatus
from shared.ports import Admission, JobQuery, JobStore, TaskSpec
from shared.service_layer.intake import (
    MAX_SCHEDULE_AHEAD,
    IntakeService,
    decode_cursor,
    encode_cursor,
)
from tests.fakes import FakePublisher, FakeTaskQueue

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SPACING = timedelta(milliseconds=50)
REQUEST = GradingRequest(submission_id="s", answer="a", rubric="r")


class RecordingStore:
    """The SQLite store, recording the queries and counter reads the intake makes."""

    def __init__(self, inner: JobStore) -> None:
        self.inner = inner
        self.queries: list[JobQuery] = []
        self.counter_reads: list[str] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def list_jobs(self, query: JobQuery) -> list[Job]:
        self.queries.append(query)
        return self.inner.list_jobs(query)

    def admit(self, job: Job, limits: AdmissionLimits | None = None) -> Admission:
        self.counter_reads.append(job.client_id)
        return self.inner.admit(job, limits)


class Intake:
    def __init__(self, tmp_path: Path) -> None:
        self.clock = FrozenClock(T0)
        self.store = RecordingStore(SqliteJobStore(SqliteDatabase(tmp_path / "jobs.sqlite3")))
        self.queue = FakeTaskQueue()
        self.publisher = FakePublisher()

    def service(
        self, limits: AdmissionLimits | None = None, spacing: timedelta = timedelta(0)
    ) -> IntakeService:
        return IntakeService(
            cast(JobStore, self.store),
            self.queue,
            self.publisher,
            self.clock,
            limits=limits,
            fair_spacing=spacing,
        )


@pytest.fixture
def i(tmp_path: Path) -> Intake:
    return Intake(tmp_path)


def task_for(client: str, key: str, due: datetime) -> TaskSpec:
    job_id = job_id_for(client, key)
    return TaskSpec(task_name_for(job_id, 0), job_id, due)


# --- fairness ------------------------------------------------------------------------------


def test_a_clients_nth_open_job_is_due_n_spacings_from_now(i: Intake) -> None:
    service = i.service(spacing=SPACING)
    for n in range(3):
        service.submit("a", f"k{n}", REQUEST)
    service.submit("b", "k0", REQUEST)
    assert i.queue.tasks == [
        task_for("a", "k0", T0),
        task_for("a", "k1", T0 + SPACING),
        task_for("a", "k2", T0 + 2 * SPACING),
        task_for("b", "k0", T0),
    ]
    assert i.store.counter_reads == ["a", "a", "a", "b"]


def test_a_finished_job_no_longer_pushes_the_clients_next_one_back(i: Intake) -> None:
    service = i.service(spacing=SPACING)
    first = service.submit("a", "k0", REQUEST).job
    service.submit("a", "k1", REQUEST)
    service.cancel("a", first.id)
    service.submit("a", "k2", REQUEST)
    assert i.queue.tasks[-1] == task_for("a", "k2", T0 + SPACING)


def test_without_spacing_every_job_is_due_now_and_no_counter_is_read(i: Intake) -> None:
    service = i.service()
    for n in range(3):
        service.submit("a", f"k{n}", REQUEST)
    assert [t.schedule_time for t in i.queue.tasks] == [T0, T0, T0]
    assert i.store.counter_reads == []


def test_a_scheduled_job_is_due_at_its_not_before_unless_its_fair_turn_is_later(
    i: Intake,
) -> None:
    service = i.service(spacing=SPACING)
    soon = T0 + timedelta(milliseconds=10)
    later = T0 + timedelta(hours=1)
    service.submit("a", "k0", REQUEST)
    service.submit("a", "soon", GradingRequest("s", "a", "r", not_before=soon.isoformat()))
    service.submit("a", "later", GradingRequest("s", "a", "r", not_before=later.isoformat()))
    assert [t.schedule_time for t in i.queue.tasks] == [T0, T0 + SPACING, later]


def test_a_replayed_request_re_enqueues_the_same_task_at_its_turn(i: Intake) -> None:
    service = i.service(spacing=SPACING)
    service.submit("a", "k0", REQUEST)
    again = service.submit("a", "k0", REQUEST)
    assert not again.created
    # The queue dedupes the name: still one task, due when first asked.
    assert i.queue.tasks == [task_for("a", "k0", T0)]


# --- admission ---------------------------------------------------------------------------


def test_past_the_clients_ceiling_a_new_job_is_refused_naming_the_limit(i: Intake) -> None:
    service = i.service(AdmissionLimits(per_client=2, backlog=10, retry_after_s=45))
    service.submit("a", "k0", REQUEST)
    service.submit("a", "k1", REQUEST)
    with pytest.raises(TooManyActiveJobs) as refused:
        service.submit("a", "k2", REQUEST)
    assert refused.value.detail == ("this client already has 2 jobs not yet final (the limit is 2)")
    assert refused.value.retry_after_s == 45 and refused.value.extensions == {"limit": 2}
    assert len(i.queue.tasks) == 2 and i.store.inner.get(job_id_for("a", "k2")) is None
    # A retried request for a job it already made is never refused.
    assert service.submit("a", "k1", REQUEST).created is False


def test_past_the_backlog_ceiling_any_new_job_is_refused(i: Intake) -> None:
    service = i.service(AdmissionLimits(per_client=5, backlog=2, retry_after_s=20))
    service.submit("a", "k0", REQUEST)
    service.submit("b", "k0", REQUEST)
    with pytest.raises(BacklogFull) as refused:
        service.submit("c", "k0", REQUEST)
    assert refused.value.detail == "the service has too many jobs waiting; try again later"
    assert refused.value.retry_after_s == 20 and refused.value.extensions == {}


@pytest.mark.parametrize(
    ("client", "total", "refusal"),
    [
        (2, 9, TooManyActiveJobs),
        (1, 9, None),
        (1, 10, BacklogFull),
        (2, 10, TooManyActiveJobs),  # the client's ceiling is checked first
    ],
)
def test_the_ceilings_refuse_from_the_limit_on(
    client: int, total: int, refusal: type[Exception] | None
) -> None:
    limits = AdmissionLimits(per_client=2, backlog=10)
    assert limits.retry_after_s == 30
    if refusal is None:
        limits.check(ActiveCounts(client, total))
    else:
        with pytest.raises(refusal):
            limits.check(ActiveCounts(client, total))


# --- scheduling bounds -------------------------------------------------------------------


def test_not_before_further_than_thirty_days_is_refused_naming_the_field(i: Intake) -> None:
    service = i.service()
    edge = T0 + MAX_SCHEDULE_AHEAD
    service.submit("a", "edge", GradingRequest("s", "a", "r", not_before=edge.isoformat()))
    beyond = (edge + timedelta(microseconds=1)).isoformat()
    with pytest.raises(ValidationFailed) as refused:
        service.submit("a", "beyond", GradingRequest("s", "a", "r", not_before=beyond))
    assert refused.value.detail == "not_before may be at most 30 days ahead"
    assert refused.value.extensions == {
        "errors": [{"field": "not_before", "message": "too far ahead"}]
    }
    assert [t.schedule_time for t in i.queue.tasks] == [edge]


# --- pages and cursors -------------------------------------------------------------------


def test_a_cursor_is_the_unpadded_base64url_of_created_at_and_id() -> None:
    job = Job.new("abc", "a", REQUEST, "fp", T0)
    raw = b'["2026-03-01T12:00:00+00:00","abc"]'
    padded_form = base64.urlsafe_b64encode(raw).decode()
    assert padded_form.endswith("=")  # this one has padding to strip
    assert encode_cursor(job) == padded_form.rstrip("=")
    unpadded = Job.new("abcd", "a", REQUEST, "fp", T0)
    cursor = encode_cursor(unpadded)
    assert "=" not in cursor
    assert json.loads(base64.urlsafe_b64decode(cursor + "==")) == [T0.isoformat(), "abcd"]
    assert decode_cursor(cursor) == (T0, "abcd")


@pytest.mark.parametrize("job_id", ["x" * n for n in range(1, 21)])
def test_every_cursor_length_decodes_back(job_id: str) -> None:
    cursor = encode_cursor(Job.new(job_id, "a", REQUEST, "fp", T0))
    assert decode_cursor(cursor) == (T0, job_id)


@pytest.mark.parametrize(
    "raw",
    [
        b'["2026-03-01T12:00:00","abc"]',  # no time zone
        b'["2026-03-01T12:00:00+00:00",5]',  # not an id
        b'["not a time","abc"]',
        b"not json",
    ],
)
def test_a_cursor_not_of_ours_is_refused_naming_the_field(raw: bytes) -> None:
    cursor = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    with pytest.raises(ValidationFailed) as refused:
        decode_cursor(cursor)
    assert refused.value.detail == "the cursor is not one this API returned"
    assert refused.value.extensions == {
        "errors": [{"field": "cursor", "message": "invalid cursor"}]
    }


def test_a_page_asks_for_one_more_job_than_it_shows(i: Intake) -> None:
    service = i.service()
    for n in range(3):
        service.submit("a", f"k{n}", REQUEST)
        i.clock.advance(timedelta(seconds=1))
    first = service.list("a", 2, JobStatus.PENDING, "s")
    assert i.store.queries == [JobQuery("a", 3, JobStatus.PENDING, "s", None)]
    newest = [job_id_for("a", "k2"), job_id_for("a", "k1")]
    assert [j.id for j in first.jobs] == newest
    assert first.next_cursor == encode_cursor(first.jobs[-1])
    second = service.list("a", 2, cursor=first.next_cursor)
    assert i.store.queries[-1] == JobQuery(
        "a", 3, None, None, (first.jobs[-1].created_at, newest[-1])
    )
    assert [j.id for j in second.jobs] == [job_id_for("a", "k0")]
    assert second.next_cursor is None


def test_the_next_cursor_names_the_last_job_shown(i: Intake) -> None:
    service = i.service()
    for n in range(4):
        service.submit("a", f"k{n}", REQUEST)
        i.clock.advance(timedelta(seconds=1))
    page = service.list("a", 3)
    assert [j.id for j in page.jobs] == [job_id_for("a", f"k{n}") for n in (3, 2, 1)]
    assert page.next_cursor is not None
    assert decode_cursor(page.next_cursor) == (T0 + timedelta(seconds=1), job_id_for("a", "k1"))


def test_a_page_that_holds_exactly_the_rest_has_no_next_cursor(i: Intake) -> None:
    service = i.service()
    for n in range(2):
        service.submit("a", f"k{n}", REQUEST)
        i.clock.advance(timedelta(seconds=1))
    page = service.list("a", 2)
    assert len(page.jobs) == 2 and page.next_cursor is None


def test_a_cancel_is_authorized_as_a_cancel_not_as_a_read(
    i: Intake, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Today every role that may read a job may cancel it; the cancel still asks the
    # policy for its own action, so a role that may only read is refused.
    asked: list[Action] = []

    def recording(principal: Principal, action: Action, *args: Any, **kwargs: Any) -> None:
        asked.append(action)
        authorize(principal, action, *args, **kwargs)

    service = i.service()
    job = service.submit("a", "k", REQUEST).job
    monkeypatch.setattr("shared.service_layer.intake.authorize", recording)
    service.cancel("a", job.id)
    assert asked == [Action.JOB_CANCEL]
