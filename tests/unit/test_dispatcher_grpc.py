"""The official Cloud Tasks client works against the dispatcher's gRPC API."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
import pytest
from google.api_core import exceptions
from google.cloud import tasks_v2
from google.cloud.tasks_v2.services.cloud_tasks.transports import CloudTasksGrpcTransport

from localcloud.tasks.dispatcher import Dispatcher
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.adapters.embedded.task_queue import SqliteTaskQueue
from shared.ports import TaskSpec
from tests.contract.harness import fast_queue, running_dispatcher
from tests.support.http_target import RecordingTarget

QUEUE = "projects/demo/locations/europe-west1/queues/grading"
TOKEN = "local-push-secret"


@pytest.fixture
def dispatcher(tmp_path: Path) -> Iterator[Dispatcher]:
    db = SqliteDatabase(tmp_path / "gradeq.sqlite3")
    queue = fast_queue(rate=50, concurrency=7, max_attempts=4)
    with running_dispatcher(db, queue, grpc_address="127.0.0.1:0", push_token=TOKEN) as d:
        yield d


@pytest.fixture
def client(dispatcher: Dispatcher) -> Iterator[tasks_v2.CloudTasksClient]:
    channel = grpc.insecure_channel(f"127.0.0.1:{dispatcher.grpc_port}")
    yield tasks_v2.CloudTasksClient(transport=CloudTasksGrpcTransport(channel=channel))
    channel.close()


def http_task(url: str, task_id: str = "", **kwargs: object) -> tasks_v2.Task:
    return tasks_v2.Task(
        name=f"{QUEUE}/tasks/{task_id}" if task_id else "",
        http_request=tasks_v2.HttpRequest(
            url=url,
            http_method=tasks_v2.HttpMethod.POST,
            headers={"Content-Type": "application/json"},
            body=json.dumps({"job_id": task_id or "anon"}).encode(),
            oidc_token=tasks_v2.OidcToken(
                service_account_email="tasks@demo.iam.gserviceaccount.com",
                audience="http://worker",
            ),
        ),
        **kwargs,
    )


def later() -> datetime:
    return datetime.now(UTC) + timedelta(hours=1)


def test_created_task_is_dispatched_with_the_bearer_token(
    client: tasks_v2.CloudTasksClient, target: RecordingTarget
) -> None:
    created = client.create_task(parent=QUEUE, task=http_task(target.url + "/tasks/grade", "a1"))
    assert created.name == f"{QUEUE}/tasks/a1"
    (request,) = target.wait_for(1, timeout=3)
    assert request.path == "/tasks/grade"
    assert request.json == {"job_id": "a1"}
    assert request.header("Authorization") == f"Bearer {TOKEN}"
    assert request.header("X-CloudTasks-TaskName") == "a1"
    assert request.header("X-CloudTasks-QueueName") == "grading"
    with pytest.raises(exceptions.AlreadyExists):  # done, but the name stays reserved
        client.create_task(parent=QUEUE, task=http_task(target.url, "a1"))


def test_create_get_delete(client: tasks_v2.CloudTasksClient) -> None:
    task = http_task("http://127.0.0.1:9/x", "b1", schedule_time=later())
    client.create_task(parent=QUEUE, task=task)
    with pytest.raises(exceptions.AlreadyExists):
        client.create_task(parent=QUEUE, task=task)
    full = client.get_task(request={"name": f"{QUEUE}/tasks/b1", "response_view": "FULL"})
    assert json.loads(full.http_request.body) == {"job_id": "b1"}
    assert full.http_request.oidc_token.audience == "http://worker"
    assert full.schedule_time.timestamp() == pytest.approx(task.schedule_time.timestamp())
    assert full.dispatch_count == 0
    basic = client.get_task(name=f"{QUEUE}/tasks/b1")
    assert basic.http_request.body == b""
    client.delete_task(name=f"{QUEUE}/tasks/b1")
    with pytest.raises(exceptions.NotFound):
        client.get_task(name=f"{QUEUE}/tasks/b1")
    with pytest.raises(exceptions.NotFound):
        client.delete_task(name=f"{QUEUE}/tasks/b1")
    with pytest.raises(exceptions.AlreadyExists):
        client.create_task(parent=QUEUE, task=task)


def test_list_tasks_pages(client: tasks_v2.CloudTasksClient) -> None:
    for i in range(5):
        client.create_task(parent=QUEUE, task=http_task("http://x", f"c{i}", schedule_time=later()))
    pager = client.list_tasks(request={"parent": QUEUE, "page_size": 2})
    pages = list(pager.pages)
    assert [len(p.tasks) for p in pages] == [2, 2, 1]
    assert [t.name.rsplit("/", 1)[1] for p in pages for t in p.tasks] == [f"c{i}" for i in range(5)]


def test_unnamed_task_gets_an_id(client: tasks_v2.CloudTasksClient) -> None:
    created = client.create_task(parent=QUEUE, task=http_task("http://x", schedule_time=later()))
    assert created.name.startswith(f"{QUEUE}/tasks/")
    assert client.get_task(name=created.name).name == created.name


def test_get_queue_reports_the_config(client: tasks_v2.CloudTasksClient) -> None:
    queue = client.get_queue(name=QUEUE)
    assert queue.rate_limits.max_dispatches_per_second == 50
    assert queue.rate_limits.max_concurrent_dispatches == 7
    assert queue.retry_config.max_attempts == 4
    assert queue.retry_config.min_backoff == timedelta(seconds=0.1)
    assert queue.state == tasks_v2.Queue.State.RUNNING


def test_bad_requests_are_refused(client: tasks_v2.CloudTasksClient) -> None:
    other = QUEUE.replace("grading", "nope")
    with pytest.raises(exceptions.NotFound):
        client.get_queue(name=other)
    with pytest.raises(exceptions.NotFound):
        client.create_task(parent=other, task=http_task("http://x"))
    with pytest.raises(exceptions.InvalidArgument):
        client.create_task(parent=QUEUE, task=http_task("http://x", "bad.id"))
    with pytest.raises(exceptions.InvalidArgument):
        client.create_task(parent=QUEUE, task=tasks_v2.Task())


def test_a_task_is_stored_with_the_cloud_tasks_user_agent(
    client: tasks_v2.CloudTasksClient, dispatcher: Dispatcher
) -> None:
    task = http_task("http://127.0.0.1:9/x", "ua1", schedule_time=later())
    task.http_request.headers = {"user-agent": "mine/1.0", "X-Own": "kept"}
    created = client.create_task(parent=QUEUE, task=task)
    assert dict(created.http_request.headers) == {
        "User-Agent": "Google-Cloud-Tasks",
        "X-Own": "kept",
    }
    # A task the embedded queue wrote into the table reads back the same way.
    queue = dispatcher.queues["grading"]
    SqliteTaskQueue(dispatcher.table.db, queue, "http://127.0.0.1:9/x").enqueue(
        TaskSpec(name="ua2", job_id="job-ua2", schedule_time=later())
    )
    stored = client.get_task(name=f"{QUEUE}/tasks/ua2").http_request.headers
    assert stored["User-Agent"] == "Google-Cloud-Tasks"


@pytest.mark.parametrize("url", ["", "example.com/path", "ftp://example.com/", "/tasks/grade"])
def test_a_url_that_is_not_http_is_refused(client: tasks_v2.CloudTasksClient, url: str) -> None:
    with pytest.raises(exceptions.InvalidArgument):
        client.create_task(parent=QUEUE, task=http_task(url, "u1", schedule_time=later()))
