"""CloudTasksQueue through the official client against the local dispatcher's Cloud Tasks API."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from google.api_core import exceptions as gexc
from google.api_core import retry as gretry
from google.cloud import tasks_v2

from localcloud.emulators import free_port
from shared.adapters.google import metering
from shared.adapters.google.clients import cloud_tasks_client
from shared.adapters.google.task_queue import CloudTasksQueue
from shared.config.queues import load_queues
from shared.domain.errors import DependencyUnavailable
from shared.domain.ids import task_name_for
from shared.ports import TaskSpec
from tests.google_fixtures import (
    GRADING_QUEUE_PATH,
    LOCATION,
    PROJECT,
    GoogleTaskQueueHarness,
    PubSubClients,
    cloud_tasks_queue,
    create_topic,
    local_dispatcher,
)
from tests.support.http_target import RecordingTarget


def spec(
    job_id: str = "j-1", generation: int = 0, schedule_time: datetime | None = None
) -> TaskSpec:
    return TaskSpec(
        name=task_name_for(job_id, generation), job_id=job_id, schedule_time=schedule_time
    )


def test_task_posts_the_job_id_as_json_to_the_worker(
    google_task_queue_harness: GoogleTaskQueueHarness,
) -> None:
    assert google_task_queue_harness.queue.enqueue(spec()) is True
    [request] = google_task_queue_harness.wait_for_deliveries(1, timeout=10)
    assert request.path == "/tasks/grade"
    assert request.headers["Content-Type"] == "application/json"
    assert request.json == {"job_id": "j-1"}
    assert request.headers["X-CloudTasks-TaskName"] == task_name_for("j-1", 0)
    assert request.headers["X-CloudTasks-QueueName"] == "grading"


def test_task_carries_name_deadline_and_schedule_time(
    google_task_queue_harness: GoogleTaskQueueHarness,
) -> None:
    later = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1)
    google_task_queue_harness.queue.enqueue(spec(schedule_time=later))
    task = google_task_queue_harness.client.get_task(
        request={
            "name": f"{GRADING_QUEUE_PATH}/tasks/{task_name_for('j-1', 0)}",
            "response_view": tasks_v2.Task.View.FULL,
        }
    )
    assert task.dispatch_deadline == timedelta(seconds=600)  # from queues.json
    assert task.schedule_time == later
    assert task.http_request.http_method == tasks_v2.HttpMethod.POST
    assert task.http_request.url.endswith("/tasks/grade")
    assert json.loads(task.http_request.body) == {"job_id": "j-1"}
    assert "oidc_token" not in task.http_request  # no service account configured locally


def test_oidc_token_names_the_service_account_and_the_base_url_audience(
    google_task_queue_harness: GoogleTaskQueueHarness,
) -> None:
    target = "https://worker-abc.a.run.app"
    queue = cloud_tasks_queue(
        google_task_queue_harness.client, target, "tasks@p.iam.gserviceaccount.com"
    )
    message = queue.build_task(spec())
    assert message.http_request.url == target + "/tasks/grade"
    assert (
        message.http_request.oidc_token.service_account_email == "tasks@p.iam.gserviceaccount.com"
    )
    assert message.http_request.oidc_token.audience == target
    queue.enqueue(spec("j-2"))
    stored = google_task_queue_harness.client.get_task(
        name=f"{GRADING_QUEUE_PATH}/tasks/{task_name_for('j-2', 0)}"
    )
    assert stored.http_request.oidc_token.audience == target


def test_already_exists_is_success_and_delivers_once(
    google_task_queue_harness: GoogleTaskQueueHarness,
) -> None:
    queue = google_task_queue_harness.queue
    assert queue.enqueue(spec()) is True
    assert queue.enqueue(spec()) is False
    assert queue.enqueue(spec(generation=1)) is True  # a replay gets a fresh name
    requests = google_task_queue_harness.target.received_exactly(2, timeout=10, settle_s=0.3)
    assert sorted(r.headers["X-CloudTasks-TaskName"] for r in requests) == sorted(
        [task_name_for("j-1", 0), task_name_for("j-1", 1)]
    )
    assert queue.meter.snapshot() == {
        metering.TASKS_CREATE_CALLS: 3,
        metering.TASKS_CREATED: 2,
    }


def test_create_is_retried_while_the_api_is_unavailable(
    tmp_path: Path, http_receiver: RecordingTarget
) -> None:
    port = free_port()
    queue = cloud_tasks_queue(cloud_tasks_client(f"127.0.0.1:{port}"), http_receiver.url)
    started = threading.Event()

    def start_late() -> None:
        time.sleep(1.0)  # the first create attempts meet a closed port: UNAVAILABLE
        with local_dispatcher(tmp_path / "tasks.sqlite3", grpc_port=port):
            started.set()
            http_receiver.wait_for(1, timeout=15)

    server = threading.Thread(target=start_late)
    server.start()
    try:
        begun = time.monotonic()
        assert queue.enqueue(spec()) is True
        assert started.is_set() and time.monotonic() - begun >= 1.0
    finally:
        server.join(timeout=30)


def test_retries_are_bounded_then_dependency_unavailable(http_receiver: RecordingTarget) -> None:
    queue = CloudTasksQueue(
        cloud_tasks_client(f"127.0.0.1:{free_port()}"),
        GRADING_QUEUE_PATH,
        target_url=http_receiver.url + "/tasks/grade",
        queue=load_queues()["grading"],
        service_account="",
        audience=http_receiver.url,
        retry=gretry.Retry(predicate=gretry.if_exception_type(Exception), initial=0.1, timeout=1.0),
        timeout_s=0.5,
    )
    begun = time.monotonic()
    with pytest.raises(DependencyUnavailable):
        queue.enqueue(spec())
    assert time.monotonic() - begun < 5
    with pytest.raises(DependencyUnavailable):
        queue.ping()
    assert time.monotonic() - begun < 5


def test_ping_reads_the_queue(google_task_queue_harness: GoogleTaskQueueHarness) -> None:
    google_task_queue_harness.queue.ping()


@pytest.mark.emulator
def test_factory_builds_every_adapter_on_the_emulator_hosts(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    http_receiver: RecordingTarget,
    firestore_emulator: str,
    pubsub_emulator: str,
    pubsub_clients: PubSubClients,
) -> None:
    from shared.bootstrap import build_adapters
    from shared.config.settings import Backend, PushAuth, Settings

    with local_dispatcher(tmp_path / "tasks.sqlite3") as dispatcher:
        monkeypatch.setenv("CLOUD_TASKS_EMULATOR_HOST", f"127.0.0.1:{dispatcher.grpc_port}")
        monkeypatch.setenv("FIRESTORE_EMULATOR_HOST", firestore_emulator)
        monkeypatch.setenv("PUBSUB_EMULATOR_HOST", pubsub_emulator)
        settings = Settings(
            backend=Backend.GOOGLE,
            project_id=PROJECT,
            location=LOCATION,
            push_auth=PushAuth.OIDC,
            worker_url=http_receiver.url + "/",
            tasks_service_account="tasks@demo-gradeq.iam.gserviceaccount.com",
        )
        adapters = build_adapters(settings)
        adapters.store.ping()
        adapters.queue.ping()
        assert adapters.queue.enqueue(spec("factory-job")) is True
        [request] = http_receiver.wait_for(1, timeout=10)
        assert request.path == "/tasks/grade" and request.json == {"job_id": "factory-job"}
        assert isinstance(adapters.queue, CloudTasksQueue)
        oidc = adapters.queue.build_task(spec()).http_request.oidc_token
        assert oidc.audience == http_receiver.url  # the worker's base URL, no trailing "/"
        assert oidc.service_account_email == "tasks@demo-gradeq.iam.gserviceaccount.com"
        create_topic(pubsub_clients, settings.topic)
        adapters.publisher.ping()


# google-api-core's exceptions take unannotated arguments; the constructor as used here.
permission_denied: Callable[[str], gexc.PermissionDenied] = gexc.PermissionDenied


class _DeniedClient:
    """A Cloud Tasks client whose caller may create tasks but not read the queue."""

    def get_queue(self, **kwargs: object) -> None:
        raise permission_denied("enqueuer role only")


def test_ping_counts_permission_denied_as_reachable() -> None:
    queue = CloudTasksQueue(
        cast(Any, _DeniedClient()),
        GRADING_QUEUE_PATH,
        target_url="https://worker.example/tasks/grade",
        queue=load_queues()["grading"],
        service_account="",
        audience="https://worker.example",
    )
    queue.ping()
