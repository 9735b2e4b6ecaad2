"""The subset of the Cloud Tasks v2 gRPC API Gradeq uses, served from the `tasks` table.

CreateTask, GetTask, DeleteTask, ListTasks, GetQueue, PauseQueue, ResumeQueue and
PurgeQueue, so the official
`tasks_v2.CloudTasksClient` works against the local dispatcher. Any project and location
are accepted; the queue id selects the queue config. Tasks need an `http_request`.

Refusals carry the status code, message and error details real Cloud Tasks answers, as
recorded (tests/contract/recordings/cloud_tasks/realcloud.json).
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, NoReturn

import grpc
from google.cloud import tasks_v2
from google.protobuf import any_pb2, empty_pb2
from google.rpc import error_details_pb2, status_pb2

from localcloud.tasks.rate_limit import burst_size
from shared.adapters.embedded.task_table import (
    PAUSED,
    RUNNING,
    TASK_ID,
    NewTask,
    TaskRow,
    TaskTable,
    stored_headers,
)
from shared.config.queues import QueueConfig

SERVICE = "google.cloud.tasks.v2.CloudTasks"
_QUEUE_NAME = re.compile(r"^projects/[^/]+/locations/[^/]+/queues/([A-Za-z0-9-]{1,100})$")
_MAX_PAGE = 1000

# What real Cloud Tasks answers, word for word.
QUEUE_NOT_FOUND = (
    "Queue does not exist. If you just created the queue, wait at least a minute for the"
    " queue to initialize."
)
QUEUE_NAME_INVALID = (
    'Queue name must be formatted: "projects/<PROJECT_ID>/locations/<LOCATION_ID>'
    '/queues/<QUEUE_ID>".'
)
TASK_NOT_FOUND = "Requested entity was not found."
TASK_EXISTS = "Requested entity already exists"
TASK_GONE = (
    "The task no longer exists, though a task with this name existed recently. The task"
    " either successfully completed or was deleted."
)
TASK_ID_INVALID = (
    'Task ID "{task_id}" can contain only letters ([A-Za-z]), numbers ([0-9]), hyphens (-),'
    " or underscores (_). Task ID must between 1 and 500 characters."
)
QUEUE_MISMATCH = (
    "The queue name from request ('{parent}') must be the same as the queue name in the"
    " named task ('{named}')."
)
URL_REQUIRED = "HttpRequest.url is required."
URL_SCHEME = "HttpTarget.url must start with 'http://' or 'https://'."
# Not recorded: a task name that is not "<queue name>/tasks/<id>", a target type other
# than HttpRequest (App Engine targets are not served here).
TASK_NAME_INVALID = (
    'Task name must be formatted: "projects/<PROJECT_ID>/locations/<LOCATION_ID>'
    '/queues/<QUEUE_ID>/tasks/<TASK_ID>".'
)
HTTP_TARGETS_ONLY = "The local Cloud Tasks serves HTTP targets only (Task.http_request)."
HTTP_REQUEST_REQUIRED = "Task.http_request is required."

_DOCS = "https://cloud.google.com/tasks/docs/reference/rest/v2/"
QUEUE_NAME_HELP = error_details_pb2.Help(
    links=[
        error_details_pb2.Help.Link(
            description="Definition of queue name",
            url=_DOCS + "projects.locations.queues#Queue.FIELDS.name",
        )
    ]
)
TASK_ID_HELP = error_details_pb2.Help(
    links=[
        error_details_pb2.Help.Link(
            description="Definition of task ID",
            url=_DOCS + "projects.locations.queues.tasks#Task.FIELDS.name",
        )
    ]
)


def _split_task_name(name: str, context: grpc.ServicerContext) -> tuple[str, str, str]:
    """Split `<queue name>/tasks/<id>` into (queue name, queue id, task id), or refuse it."""
    parent, sep, task_id = name.rpartition("/tasks/")
    match = _QUEUE_NAME.match(parent)
    if not sep or not match:
        _abort(context, grpc.StatusCode.INVALID_ARGUMENT, TASK_NAME_INVALID)
    if not TASK_ID.match(task_id):
        message = TASK_ID_INVALID.format(task_id=task_id)
        _abort(context, grpc.StatusCode.INVALID_ARGUMENT, message, TASK_ID_HELP)
    return parent, match.group(1), task_id


def _check_url(url: str, context: grpc.ServicerContext) -> None:
    """Refuse what real CreateTask refuses: no URL, or one not starting with http(s)://."""
    if not url:
        _abort(context, grpc.StatusCode.INVALID_ARGUMENT, URL_REQUIRED)
    if not url.startswith(("http://", "https://")):
        _abort(context, grpc.StatusCode.INVALID_ARGUMENT, URL_SCHEME)


def _when(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


class CloudTasksApi:
    """Request handlers for the Cloud Tasks service, backed by a `TaskTable`."""

    def __init__(
        self,
        table: TaskTable,
        queues: Mapping[str, QueueConfig],
        name_reservation_s: float,
        on_created: Callable[[str], None],
    ) -> None:
        self.table = table
        self.queues = queues
        self.name_reservation_s = name_reservation_s
        self.on_created = on_created

    def handler(self) -> grpc.GenericRpcHandler:
        """The generic handler to register on a `grpc.Server`."""

        def unary(
            fn: Callable[[Any, grpc.ServicerContext], Any], request: Any, response: Any
        ) -> grpc.RpcMethodHandler:
            return grpc.unary_unary_rpc_method_handler(
                fn, request_deserializer=request.deserialize, response_serializer=response
            )

        return grpc.method_handlers_generic_handler(
            SERVICE,
            {
                "CreateTask": unary(
                    self.create_task, tasks_v2.CreateTaskRequest, tasks_v2.Task.serialize
                ),
                "GetTask": unary(self.get_task, tasks_v2.GetTaskRequest, tasks_v2.Task.serialize),
                "DeleteTask": unary(
                    self.delete_task, tasks_v2.DeleteTaskRequest, empty_pb2.Empty.SerializeToString
                ),
                "ListTasks": unary(
                    self.list_tasks, tasks_v2.ListTasksRequest, tasks_v2.ListTasksResponse.serialize
                ),
                "GetQueue": unary(
                    self.get_queue, tasks_v2.GetQueueRequest, tasks_v2.Queue.serialize
                ),
                "PauseQueue": unary(
                    self.pause_queue, tasks_v2.PauseQueueRequest, tasks_v2.Queue.serialize
                ),
                "ResumeQueue": unary(
                    self.resume_queue, tasks_v2.ResumeQueueRequest, tasks_v2.Queue.serialize
                ),
                "PurgeQueue": unary(
                    self.purge_queue, tasks_v2.PurgeQueueRequest, tasks_v2.Queue.serialize
                ),
            },
        )

    def create_task(
        self, request: tasks_v2.CreateTaskRequest, context: grpc.ServicerContext
    ) -> tasks_v2.Task:
        queue_id = self._queue_id(request.parent, context)
        task = request.task
        if task.name:
            named, _, task_id = _split_task_name(task.name, context)
            if named != request.parent:
                message = QUEUE_MISMATCH.format(parent=request.parent, named=named)
                _abort(context, grpc.StatusCode.INVALID_ARGUMENT, message)
        else:
            task_id = str(secrets.randbits(63))
        if "app_engine_http_request" in task:
            _abort(context, grpc.StatusCode.UNIMPLEMENTED, HTTP_TARGETS_ONLY)
        if "http_request" not in task:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, HTTP_REQUEST_REQUIRED)
        http = task.http_request
        _check_url(http.url, context)
        method = tasks_v2.HttpMethod(http.http_method or tasks_v2.HttpMethod.POST).name
        oidc = http.oidc_token if "oidc_token" in http else None
        deadline = task.dispatch_deadline if "dispatch_deadline" in task else None
        new = NewTask(
            queue=queue_id,
            name=task_id,
            url=http.url,
            http_method=method,
            headers=stored_headers(dict(http.headers)),
            body=http.body,
            schedule_time=task.schedule_time.timestamp()
            if "schedule_time" in task
            else time.time(),
            dispatch_deadline_s=deadline.total_seconds() if deadline else None,
            oidc_service_account=oidc.service_account_email if oidc else None,
            oidc_audience=(oidc.audience or http.url) if oidc else None,
        )
        if not self.table.create(new, self.name_reservation_s):
            _abort(context, grpc.StatusCode.ALREADY_EXISTS, TASK_EXISTS)
        # Read back before waking the dispatcher: a task it delivers at once is gone.
        created = self._get(request.parent, queue_id, task_id, request.response_view, context)
        self.on_created(queue_id)
        return created

    def get_task(
        self, request: tasks_v2.GetTaskRequest, context: grpc.ServicerContext
    ) -> tasks_v2.Task:
        parent, queue_id, task_id = self._task_name(request.name, context)
        return self._get(parent, queue_id, task_id, request.response_view, context)

    def delete_task(
        self, request: tasks_v2.DeleteTaskRequest, context: grpc.ServicerContext
    ) -> empty_pb2.Empty:
        _, queue_id, task_id = self._task_name(request.name, context)
        if not self.table.delete(queue_id, task_id, "deleted through the API"):
            _abort(context, grpc.StatusCode.NOT_FOUND, TASK_NOT_FOUND)
        return empty_pb2.Empty()

    def list_tasks(
        self, request: tasks_v2.ListTasksRequest, context: grpc.ServicerContext
    ) -> tasks_v2.ListTasksResponse:
        queue_id = self._queue_id(request.parent, context)
        size = min(request.page_size or _MAX_PAGE, _MAX_PAGE)
        # The page token is the last task id of the previous page (ids sort as strings).
        rows = self.table.list_pending(queue_id, request.page_token, size + 1)
        page = rows[:size]
        return tasks_v2.ListTasksResponse(
            tasks=[self._to_task(request.parent, row, request.response_view) for row in page],
            next_page_token=page[-1].name if len(rows) > size else "",
        )

    def pause_queue(
        self, request: tasks_v2.PauseQueueRequest, context: grpc.ServicerContext
    ) -> tasks_v2.Queue:
        """Stop dispatching; the queue keeps accepting tasks (Cloud Tasks' PAUSED)."""
        self.table.set_state(self._queue_id(request.name, context), PAUSED)
        return self._queue(request.name, context)

    def resume_queue(
        self, request: tasks_v2.ResumeQueueRequest, context: grpc.ServicerContext
    ) -> tasks_v2.Queue:
        """Dispatch again: the backlog goes out at the queue's rate limit."""
        queue_id = self._queue_id(request.name, context)
        self.table.set_state(queue_id, RUNNING)
        self.on_created(queue_id)  # wakes the queue's pump
        return self._queue(request.name, context)

    def purge_queue(
        self, request: tasks_v2.PurgeQueueRequest, context: grpc.ServicerContext
    ) -> tasks_v2.Queue:
        """Delete every task of the queue; attempts in flight cannot record an outcome."""
        self.table.purge(self._queue_id(request.name, context), "purged through the API")
        return self._queue(request.name, context)

    def get_queue(
        self, request: tasks_v2.GetQueueRequest, context: grpc.ServicerContext
    ) -> tasks_v2.Queue:
        return self._queue(request.name, context)

    def _queue(self, name: str, context: grpc.ServicerContext) -> tasks_v2.Queue:
        queue_id = self._queue_id(name, context)
        queue = self.queues[queue_id]
        paused = self.table.state(queue_id) == PAUSED
        rate, retry = queue.rate_limits, queue.retry_config
        return tasks_v2.Queue(
            name=name,
            rate_limits=tasks_v2.RateLimits(
                max_dispatches_per_second=rate.max_dispatches_per_second,
                max_burst_size=int(burst_size(rate.max_dispatches_per_second)),
                max_concurrent_dispatches=rate.max_concurrent_dispatches,
            ),
            retry_config=tasks_v2.RetryConfig(
                max_attempts=retry.max_attempts,
                max_retry_duration=retry.max_retry_duration,
                min_backoff=retry.min_backoff,
                max_backoff=retry.max_backoff,
                max_doublings=retry.max_doublings,
            ),
            state=tasks_v2.Queue.State.PAUSED if paused else tasks_v2.Queue.State.RUNNING,
        )

    def _get(
        self, parent: str, queue_id: str, task_id: str, view: int, context: grpc.ServicerContext
    ) -> tasks_v2.Task:
        row = self.table.get(queue_id, task_id)
        if row is None:
            gone = self.table.tombstoned(queue_id, task_id)
            _abort(context, grpc.StatusCode.NOT_FOUND, TASK_GONE if gone else TASK_NOT_FOUND)
        return self._to_task(parent, row, view)

    def _to_task(self, parent: str, row: TaskRow, view: int) -> tasks_v2.Task:
        full = view == tasks_v2.Task.View.FULL
        http = tasks_v2.HttpRequest(
            url=row.url,
            http_method=tasks_v2.HttpMethod.__members__[row.http_method],
            headers=row.headers,
            body=row.body if full else b"",  # BASIC omits the payload, as Cloud Tasks does
        )
        if row.oidc_service_account is not None or row.oidc_audience is not None:
            http.oidc_token = tasks_v2.OidcToken(
                service_account_email=row.oidc_service_account or "",
                audience=row.oidc_audience or "",
            )
        deadline = (
            row.dispatch_deadline_s or self.queues[row.queue].dispatch_deadline.total_seconds()
        )
        return tasks_v2.Task(
            name=f"{parent}/tasks/{row.name}",
            http_request=http,
            schedule_time=_when(row.schedule_time),
            create_time=_when(row.created_at),
            dispatch_deadline=timedelta(seconds=deadline),
            dispatch_count=row.dispatch_count,
            response_count=row.response_count,
            view=tasks_v2.Task.View.FULL if full else tasks_v2.Task.View.BASIC,
        )

    def _queue_id(self, name: str, context: grpc.ServicerContext) -> str:
        match = _QUEUE_NAME.match(name)
        if not match:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, QUEUE_NAME_INVALID, QUEUE_NAME_HELP)
        if match.group(1) not in self.queues:
            _abort(context, grpc.StatusCode.NOT_FOUND, QUEUE_NOT_FOUND)
        return match.group(1)

    def _task_name(self, name: str, context: grpc.ServicerContext) -> tuple[str, str, str]:
        split = _split_task_name(name, context)
        self._queue_id(split[0], context)
        return split


def _abort(
    context: grpc.ServicerContext,
    code: grpc.StatusCode,
    message: str,
    *details: error_details_pb2.Help,
) -> NoReturn:
    """End the call with `code` and `message`, and `details` as google.rpc.Status details."""
    if details:
        packed = []
        for detail in details:
            wrapper = any_pb2.Any()
            wrapper.Pack(detail)
            packed.append(wrapper)
        status = status_pb2.Status(code=code.value[0], message=message, details=packed)
        context.set_trailing_metadata((("grpc-status-details-bin", status.SerializeToString()),))
    context.abort(code, message)
    raise AssertionError("context.abort returns only by raising")  # pragma: no cover
