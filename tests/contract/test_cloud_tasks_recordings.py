"""The local Cloud Tasks answers as real Cloud Tasks was recorded answering.

The recordings (`recordings/cloud_tasks/`, see its README) hold what the real service
answered to a battery of requests: malformed RPCs, created tasks read back, and the
headers of every dispatch of a task whose target fails in several ways. Each request is
made again here, through the official Python client, against the local dispatcher's
Cloud Tasks API (`localcloud/tasks`), and each answer is compared with the recording.

Any difference fails, except those in `LEDGER`, each with its reason; a ledger entry whose
difference has gone (or changed) fails too, so the ledger stays true.

Queues: the stand-in serves the queues its config declares (`queues.json`, which
terraform creates), so a recorded "create the queue" step is a declared queue here.
"""

from __future__ import annotations

import base64
import fnmatch
import json
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.api_core import exceptions
from google.cloud import tasks_v2
from google.cloud.tasks_v2.services.cloud_tasks.transports import CloudTasksGrpcTransport
from google.protobuf import text_format
from google.protobuf.message import Message
from google.rpc import error_details_pb2

from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.config.queues import QueueConfig
from tests.contract.harness import fast_queue, running_dispatcher
from tests.support.http_target import ReceivedRequest, RecordingTarget, Reply

RECORDINGS = Path(__file__).parent / "recordings" / "cloud_tasks"
PARENT = "projects/conformance-project/locations/europe-west1"
DECLARED = "conformance"  # in the stand-in's queue config
UNDECLARED = "conformance-missing"  # in no config: a queue that does not exist


@dataclass(frozen=True)
class Known:
    """A known difference: the cases it covers, what the stand-in answers, and why."""

    cases: tuple[str, ...]
    answer: str
    reason: str


LEDGER = (
    Known(
        cases=(
            "queue/create/already-exists",
            "queue/create/invalid-name",
            "queue/create/invalid-parent",
            "queue/delete/not-found",
        ),
        answer="Unimplemented",
        reason="CreateQueue and DeleteQueue are not served: the stand-in's queues are the "
        "ones queues.json declares, which terraform creates on Google Cloud",
    ),
    Known(
        cases=(
            "queue/create/recently-deleted",
            "queue/get/recently-deleted",
            "task/create/queue-recently-deleted",
        ),
        answer="setup: Unimplemented",
        reason="the case deletes a queue first, and DeleteQueue is not served (above)",
    ),
    Known(
        cases=("task/run/not-found",),
        answer="Unimplemented",
        reason="RunTask is not served: Gradeq never forces a task to run",
    ),
    Known(
        cases=(
            "headers/appengine",
            "headers/appengine-no-content-type",
            "happypath/appengine",
            "happypath/appengine-no-content-type",
            "dispatch/appengine",
            "dispatch/appengine-timeout",
        ),
        answer="CreateTask: Unimplemented",
        reason="App Engine targets are not served: Gradeq's tasks are HTTP tasks",
    ),
)
KNOWN = {case: known for known in LEDGER for case in known.cases}


def load(name: str) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = json.loads((RECORDINGS / name).read_text())
    return entries


def code_name(code: grpc.StatusCode) -> str:
    """The code as the recordings name it (Go's codes.Code.String())."""
    special = {grpc.StatusCode.OK: "OK", grpc.StatusCode.CANCELLED: "Canceled"}
    return special.get(code) or "".join(w.capitalize() for w in code.name.split("_"))


def task_id_for(case: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "-", case)


@pytest.fixture
def db(tmp_path: Path) -> SqliteDatabase:
    return SqliteDatabase(tmp_path / "gradeq.sqlite3")


def declared_queue() -> QueueConfig:
    # The recorded queues retry after 1 s to 5 s; shorter here, the headers are the same.
    return fast_queue(DECLARED, max_attempts=10, min_backoff_s=0.01, max_backoff_s=0.05)


@contextmanager
def api(db: SqliteDatabase, *, paused: bool) -> Iterator[tasks_v2.CloudTasksClient]:
    """The official client on a dispatcher serving the declared queue.

    Paused, it serves the API and sends nothing: the error and stored-task batteries name
    targets off this machine, as recorded, and are never dispatched.
    """
    with running_dispatcher(
        db, declared_queue(), grpc_address="127.0.0.1:0", paused=paused
    ) as dispatcher:
        channel = grpc.insecure_channel(f"127.0.0.1:{dispatcher.grpc_port}")
        try:
            yield tasks_v2.CloudTasksClient(transport=CloudTasksGrpcTransport(channel=channel))
        finally:
            channel.close()


def check(case: str, recorded: Any, observed: Any, answer: str) -> None:
    """`observed` is `recorded`, or differs from it as the ledger says."""
    known = KNOWN.get(case)
    if known is None:
        assert observed == recorded, f"{case}: the stand-in differs from real Cloud Tasks"
        return
    assert observed != recorded, f"{case}: matches the recording now; drop it from LEDGER"
    assert answer == known.answer, f"{case}: the stand-in answers {answer!r}, not as LEDGER says"


def test_the_ledger_names_only_recorded_cases() -> None:
    recorded = {
        entry["name"]
        for name in ("realcloud.json", "headers.json", "happypath.json", "dispatch.json")
        for entry in load(name)
    }
    assert set(KNOWN) <= recorded
    assert all(known.reason for known in LEDGER)


def test_the_docs_list_every_ledger_entry() -> None:
    docs = (Path(__file__).parents[2] / "docs" / "local.md").read_text()
    section = docs.split("The ledger of known differences", 1)[1].split("\n\n", 2)[1]
    listed = re.findall(r"`([^`]+)`", section)
    for case in KNOWN:
        assert any(fnmatch.fnmatch(case, name) for name in listed), case


# --- errors: realcloud.json ----------------------------------------------------------


@dataclass(frozen=True)
class Params:
    """The names one case's requests use (as the recorder's Params)."""

    queue_id: str
    task_id: str

    @property
    def queue_path(self) -> str:
        return f"{PARENT}/queues/{self.queue_id}"

    @property
    def task_path(self) -> str:
        return f"{self.queue_path}/tasks/{self.task_id}"

    def fill(self, template: str) -> str:
        """A recorded template with this case's request values put back."""
        values = {
            "{queue_path}": self.queue_path,
            "{task_path}": self.task_path,
            "{queue_id}": self.queue_id,
            "{task_id}": self.task_id,
            "{parent}": PARENT,
        }
        for placeholder, value in values.items():
            template = template.replace(placeholder, value)
        return template


Step = Callable[[tasks_v2.CloudTasksClient, Params], object]


def http_task(name: str, url: str = "https://example.com/") -> tasks_v2.Task:
    return tasks_v2.Task(name=name, http_request=tasks_v2.HttpRequest(url=url))


def create_task(c: tasks_v2.CloudTasksClient, p: Params) -> object:
    return c.create_task(parent=p.queue_path, task=http_task(p.task_path))


def create_task_url(url: str) -> Step:
    return lambda c, p: c.create_task(parent=p.queue_path, task=http_task(p.task_path, url))


def create_queue(c: tasks_v2.CloudTasksClient, p: Params) -> object:
    return c.create_queue(parent=PARENT, queue=tasks_v2.Queue(name=p.queue_path))


def delete_queue(c: tasks_v2.CloudTasksClient, p: Params) -> object:
    c.delete_queue(name=p.queue_path)
    return None


def delete_task(c: tasks_v2.CloudTasksClient, p: Params) -> object:
    c.delete_task(name=p.task_path)
    return None


def other_queue_task(c: tasks_v2.CloudTasksClient, p: Params) -> object:
    other = Params(p.queue_id + "-other", p.task_id)
    return c.create_task(parent=p.queue_path, task=http_task(other.task_path))


@dataclass(frozen=True)
class Replay:
    """One recorded case: does its queue exist first, the setup steps, the call."""

    declared: bool
    setup: tuple[Step, ...]
    invoke: Step


# The requests of each case, as the recorder made them. "The queue exists" is a declared
# queue; a step that deletes one calls DeleteQueue.
REPLAYS: dict[str, Replay] = {
    "queue/get/not-found": Replay(False, (), lambda c, p: c.get_queue(name=p.queue_path)),
    "queue/delete/not-found": Replay(False, (), delete_queue),
    "queue/pause/not-found": Replay(False, (), lambda c, p: c.pause_queue(name=p.queue_path)),
    "queue/resume/not-found": Replay(False, (), lambda c, p: c.resume_queue(name=p.queue_path)),
    "queue/purge/not-found": Replay(False, (), lambda c, p: c.purge_queue(name=p.queue_path)),
    "queue/get/recently-deleted": Replay(
        True, (delete_queue,), lambda c, p: c.get_queue(name=p.queue_path)
    ),
    "queue/create/recently-deleted": Replay(True, (delete_queue,), create_queue),
    "queue/create/already-exists": Replay(True, (), create_queue),
    "queue/create/invalid-name": Replay(
        False,
        (),
        lambda c, p: c.create_queue(
            parent=PARENT, queue=tasks_v2.Queue(name="not-a-valid-queue-name")
        ),
    ),
    "queue/create/invalid-parent": Replay(
        False,
        (),
        lambda c, p: c.create_queue(
            parent="not-a-valid-parent", queue=tasks_v2.Queue(name=p.queue_path)
        ),
    ),
    "task/create/queue-not-found": Replay(False, (), create_task),
    "task/create/queue-recently-deleted": Replay(True, (delete_queue,), create_task),
    "task/create/already-exists": Replay(True, (create_task,), create_task),
    "task/create/queue-mismatch": Replay(True, (), other_queue_task),
    "task/create/invalid-name": Replay(
        True,
        (),
        lambda c, p: c.create_task(
            parent=p.queue_path, task=http_task(p.queue_path + "/tasks/not a valid id")
        ),
    ),
    "task/create/invalid-url-empty": Replay(True, (), create_task_url("")),
    "task/create/invalid-url-no-scheme": Replay(True, (), create_task_url("example.com/path")),
    "task/create/invalid-url-non-http-scheme": Replay(
        True, (), create_task_url("ftp://example.com/")
    ),
    "task/create/invalid-url-bad-escape": Replay(
        True, (), create_task_url("http://example.com/%zz")
    ),
    "task/get/not-found": Replay(True, (), lambda c, p: c.get_task(name=p.task_path)),
    "task/delete/not-found": Replay(True, (), delete_task),
    "task/run/not-found": Replay(True, (), lambda c, p: c.run_task(name=p.task_path)),
    "task/get/recently-deleted": Replay(
        True, (create_task, delete_task), lambda c, p: c.get_task(name=p.task_path)
    ),
}

ERRORS = load("realcloud.json")


def detail_record(detail: Message) -> tuple[str, Message]:
    return f"*errdetails.{detail.DESCRIPTOR.name}", detail


def recorded_detail(record: dict[str, str]) -> tuple[str, Message]:
    """A recorded detail (Go's type name, its prototext) as a message to compare."""
    kind = record["type"].removeprefix("*errdetails.")
    message: Message = getattr(error_details_pb2, kind)()
    text_format.Parse(record["template"], message)
    return record["type"], message


def run_case(client: tasks_v2.CloudTasksClient, replay: Replay, p: Params) -> dict[str, Any]:
    """What the stand-in answers to the case: its code, message and details."""
    stage = "setup: "
    try:
        for step in replay.setup:
            step(client, p)
        stage = ""
        replay.invoke(client, p)
    except exceptions.GoogleAPICallError as exc:
        assert exc.grpc_status_code is not None
        return {
            "code": stage + code_name(exc.grpc_status_code),
            "message": exc.message,
            "details": [detail_record(d) for d in exc.details],
        }
    return {"code": "OK", "message": "", "details": []}


def test_every_recorded_error_case_has_a_replay() -> None:
    assert {entry["name"] for entry in ERRORS} == set(REPLAYS)


@pytest.mark.parametrize("recording", ERRORS, ids=[e["name"] for e in ERRORS])
def test_errors_as_recorded(db: SqliteDatabase, recording: dict[str, Any]) -> None:
    case = recording["name"]
    replay = REPLAYS[case]
    p = Params(DECLARED if replay.declared else UNDECLARED, task_id_for(case))
    with api(db, paused=True) as client:
        observed = run_case(client, replay, p)
    recorded = {
        "code": recording["code"],
        "message": p.fill(recording["template"]),
        "details": [recorded_detail(d) for d in recording.get("details", [])],
    }
    check(case, recorded, observed, observed["code"])


# --- stored tasks: headers.json and happypath.json ----------------------------------

BODY = b'{"hello":"world"}'
STORED = [("headers.json", e) for e in load("headers.json")] + [
    ("happypath.json", e) for e in load("happypath.json")
]


def stored(task: tasks_v2.Task, with_body: bool) -> dict[str, Any]:
    """A task read back as the recording keeps it: its headers, and its body if any."""
    kept: dict[str, Any] = {"headers": dict(task.http_request.headers)}
    if with_body and task.http_request.body:
        kept["body"] = base64.b64encode(task.http_request.body).decode()
    return kept


def new_task(case: str, kind: str, headers: dict[str, str]) -> tasks_v2.Task:
    name = f"{PARENT}/queues/{DECLARED}/tasks/{task_id_for(case)}"
    later = datetime.now(UTC) + timedelta(hours=1)
    if kind == "appengine":
        return tasks_v2.Task(
            name=name,
            schedule_time=later,
            app_engine_http_request=tasks_v2.AppEngineHttpRequest(
                http_method=tasks_v2.HttpMethod.POST,
                relative_uri="/task-handler",
                headers=headers,
                body=BODY,
            ),
        )
    return tasks_v2.Task(
        name=name,
        schedule_time=later,
        http_request=tasks_v2.HttpRequest(url="https://example.com/", headers=headers, body=BODY),
    )


@pytest.mark.parametrize(("file", "recording"), STORED, ids=[f"{f}:{e['name']}" for f, e in STORED])
def test_stored_tasks_as_recorded(db: SqliteDatabase, file: str, recording: dict[str, Any]) -> None:
    case, kind = recording["name"], recording["requestType"]
    with_body = file == "happypath.json"  # the earlier layout recorded no body
    queue_path = f"{PARENT}/queues/{DECLARED}"
    view = tasks_v2.Task.View
    with api(db, paused=True) as client:
        try:
            created = client.create_task(
                request={
                    "parent": queue_path,
                    "task": new_task(case, kind, recording["sent"]),
                    "response_view": view.FULL,
                }
            )
        except exceptions.GoogleAPICallError as exc:
            assert exc.grpc_status_code is not None
            answer = "CreateTask: " + code_name(exc.grpc_status_code)
            check(case, recording, {"error": answer}, answer)
            return
        reads = {
            stage: client.get_task(request={"name": created.name, "response_view": v})
            for stage, v in (("getBasic", view.BASIC), ("getFull", view.FULL))
        }
    observed = {
        "name": case,
        "requestType": kind,
        "sent": recording["sent"],
        "createFull": stored(created, with_body),
        **{stage: stored(task, with_body) for stage, task in reads.items()},
    }
    check(case, recording, observed, "")


# --- dispatches: dispatch.json -------------------------------------------------------

DISPATCHES = load("dispatch.json")
#: What the recording keeps of a dispatch: the User-Agent and the per-task headers.
DISPATCH_HEADERS = {"user-agent"} | {
    f"x-cloudtasks-{suffix}"
    for suffix in (
        "queuename",
        "taskname",
        "taskexecutioncount",
        "taskretrycount",
        "tasketa",
        "taskpreviousresponse",
        "taskretryreason",
    )
}


def retry_count(request: ReceivedRequest) -> int:
    return int(request.header("X-CloudTasks-TaskRetryCount") or -1)


def dispatch_headers(request: ReceivedRequest, task_id: str) -> dict[str, str]:
    """The recorded headers of one dispatch, its run-scoped values as placeholders.

    A value is replaced only when it is the expected one (the queue id, the task id, a
    time as seconds since the epoch); anything else stays, and shows as a difference.
    """
    placeholders = {
        "x-cloudtasks-queuename": (DECLARED, "{queue}"),
        "x-cloudtasks-taskname": (task_id, "{task}"),
    }
    kept = {}
    for name, value in request.headers.items():
        key = name.lower()
        if key not in DISPATCH_HEADERS:
            continue
        if key in placeholders and value == placeholders[key][0]:
            value = placeholders[key][1]
        elif key == "x-cloudtasks-tasketa" and re.fullmatch(r"\d+(\.\d+)?", value):
            value = "{eta}"
        kept[key] = value
    return kept


def recorded_attempts(recording: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "attempt": a["attempt"],
            "status": a["status"],
            "headers": {k.lower(): v for k, v in a["headers"].items()},
        }
        for a in recording["attempts"]
    ]


def dispatch_task(case: str, kind: str, base_url: str) -> tasks_v2.Task:
    """The recorded case's task, sent to the local target."""
    name = f"{PARENT}/queues/{DECLARED}/tasks/{task_id_for(case)}"
    if kind.startswith("appengine"):
        return tasks_v2.Task(
            name=name,
            app_engine_http_request=tasks_v2.AppEngineHttpRequest(
                http_method=tasks_v2.HttpMethod.POST, relative_uri="/recv/appengine", body=b"{}"
            ),
        )
    timeout = kind == "http-timeout"
    return tasks_v2.Task(
        name=name,
        # The recording's deadline was 15 s (the least Cloud Tasks accepts); the stalled
        # attempt below never answers, so a short one gives the same outcome.
        dispatch_deadline=timedelta(seconds=1) if timeout else None,
        http_request=tasks_v2.HttpRequest(
            url=base_url + ("/recv/http-timeout" if timeout else "/recv/http"),
            http_method=tasks_v2.HttpMethod.POST,
            body=b"{}",
        ),
    )


@pytest.mark.parametrize("recording", DISPATCHES, ids=[d["name"] for d in DISPATCHES])
def test_dispatches_as_recorded(db: SqliteDatabase, recording: dict[str, Any]) -> None:
    case, kind = recording["name"], recording["requestType"]
    expected = recorded_attempts(recording)
    # The target answers each attempt what the recorded target answered; status 0 is an
    # attempt that never answered: it stalls until the next attempt arrives.
    statuses = [a["status"] for a in expected]
    released = threading.Event()

    def respond(request: ReceivedRequest) -> Reply:
        attempt = retry_count(request)
        if attempt > 0:
            released.set()
        status = statuses[min(max(attempt, 0), len(statuses) - 1)]
        if status == 0:
            released.wait(10)
            return Reply(200)
        return Reply(status)

    task_id = task_id_for(case)
    with RecordingTarget(respond) as target:
        try:
            with api(db, paused=False) as client:
                try:
                    client.create_task(
                        parent=f"{PARENT}/queues/{DECLARED}",
                        task=dispatch_task(case, kind, target.url),
                    )
                except exceptions.GoogleAPICallError as exc:
                    assert exc.grpc_status_code is not None
                    answer = "CreateTask: " + code_name(exc.grpc_status_code)
                    check(case, expected, [], answer)
                    return
                received = target.wait_for(len(expected), timeout=10)
        finally:
            released.set()
    observed = [
        {
            "attempt": retry_count(r),
            "status": statuses[min(retry_count(r), len(statuses) - 1)],
            "headers": dispatch_headers(r, task_id),
        }
        for r in sorted(received, key=retry_count)
    ]
    check(case, expected, observed, "")
