"""TaskQueue on Cloud Tasks: one named HTTP task per job generation, POSTed to the worker."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from google.api_core import exceptions as gexc
from google.api_core import retry as gretry
from google.cloud import tasks_v2

from shared.adapters.google import metering
from shared.codecs.task_body import CONTENT_TYPE, encode_task_body
from shared.config.queues import QueueConfig
from shared.domain.errors import DependencyUnavailable, LaneNotFound
from shared.ports import TaskSpec

#: Bounded retry of the create call itself. Retrying after DEADLINE_EXCEEDED is safe
#: because the task is named: a create that did land answers ALREADY_EXISTS next time.
CREATE_RETRY = gretry.Retry(
    predicate=gretry.if_exception_type(gexc.ServiceUnavailable, gexc.DeadlineExceeded),
    initial=0.2,
    maximum=2.0,
    multiplier=2.0,
    timeout=15.0,
)
#: The meter's counter of get_task calls (billed as API calls, like create_task).
TASKS_GET_CALLS = "cloudtasks.get_task_calls"
#: Per-attempt timeout of create_task, in seconds.
CREATE_TIMEOUT_S = 5.0


class CloudTasksQueue:
    """Creates the worker's tasks; ALREADY_EXISTS means the job is already enqueued."""

    def __init__(
        self,
        client: tasks_v2.CloudTasksClient,
        queue_path: str,
        target_url: str,
        queue: QueueConfig,
        service_account: str,
        audience: str,
        retry: gretry.Retry = CREATE_RETRY,
        timeout_s: float = CREATE_TIMEOUT_S,
        lanes: Mapping[str, QueueConfig] | None = None,
    ) -> None:
        self._client = client
        self._queue_path = queue_path
        # The lanes are sibling queues of the default one (same project and location).
        self._lanes = {**(lanes or {}), queue.name: queue}
        self._parent = queue_path.rpartition("/queues/")[0]
        self._target_url = target_url
        self._queue = queue
        self._service_account = service_account
        self._audience = audience
        self._retry = retry
        self._timeout_s = timeout_s
        self.meter = metering.Meter()

    def path_of(self, lane: str | None) -> str:
        """The full queue name of a lane (None: the default queue)."""
        if lane is None:
            return self._queue_path
        if lane not in self._lanes:
            raise LaneNotFound(f"no lane {lane!r}")
        return f"{self._parent}/queues/{lane}"

    def build_task(self, spec: TaskSpec) -> tasks_v2.Task:
        """The Task message for `spec` (exposed for tests and logs)."""
        path = self.path_of(spec.queue)  # LaneNotFound for an undeclared lane
        config = self._lanes[spec.queue] if spec.queue is not None else self._queue
        http_request = tasks_v2.HttpRequest(
            url=self._target_url,
            http_method=tasks_v2.HttpMethod.POST,
            # Cloud Tasks sends no Content-Type of its own.
            headers={"Content-Type": CONTENT_TYPE},
            body=encode_task_body(spec.job_id),
        )
        if self._service_account:
            # The audience is set explicitly: the default (the full URL) breaks on query
            # strings and would differ per target path.
            http_request.oidc_token = tasks_v2.OidcToken(
                service_account_email=self._service_account, audience=self._audience
            )
        task = tasks_v2.Task(
            name=f"{path}/tasks/{spec.name}",
            http_request=http_request,
            dispatch_deadline=config.dispatch_deadline,
        )
        if spec.schedule_time is not None:
            task.schedule_time = spec.schedule_time
        return task

    def enqueue(self, task: TaskSpec) -> bool:
        message = self.build_task(task)
        self.meter.add(metering.TASKS_CREATE_CALLS)
        try:
            self._client.create_task(
                parent=self.path_of(task.queue),
                task=message,
                retry=self._retry,
                timeout=self._timeout_s,
            )
        except gexc.AlreadyExists:
            return False
        except (gexc.GoogleAPICallError, gexc.RetryError) as exc:
            raise DependencyUnavailable(f"Cloud Tasks create_task failed: {exc}") from exc
        self.meter.add(metering.TASKS_CREATED)
        return True

    def exists(self, task_name: str, queue: str | None = None) -> bool:
        self.meter.add(TASKS_GET_CALLS)
        try:
            self._client.get_task(
                name=f"{self.path_of(queue)}/tasks/{task_name}",
                retry=self._retry,
                timeout=self._timeout_s,
            )
        except gexc.NotFound:
            return False
        except (gexc.GoogleAPICallError, gexc.RetryError) as exc:
            raise DependencyUnavailable(f"Cloud Tasks get_task failed: {exc}") from exc
        return True

    def pause(self, queue: str | None) -> None:
        self._call("PauseQueue", self._client.pause_queue, queue)

    def resume(self, queue: str | None) -> None:
        self._call("ResumeQueue", self._client.resume_queue, queue)

    def purge(self, queue: str | None) -> None:
        self._call("PurgeQueue", self._client.purge_queue, queue)

    def is_paused(self, queue: str | None) -> bool:
        state = self._call("GetQueue", self._client.get_queue, queue).state
        return bool(state == tasks_v2.Queue.State.PAUSED)

    def _call(
        self, what: str, method: Callable[..., tasks_v2.Queue], lane: str | None
    ) -> tasks_v2.Queue:
        """One queue-level call; these need cloudtasks.queues.* (the operator's rights)."""
        try:
            return method(name=self.path_of(lane), retry=self._retry, timeout=self._timeout_s)
        except (gexc.GoogleAPICallError, gexc.RetryError) as exc:
            raise DependencyUnavailable(f"Cloud Tasks {what} failed: {exc}") from exc

    def ping(self) -> None:
        try:
            # No retry: a health check answers within its own timeout.
            self._client.get_queue(name=self._queue_path, retry=None, timeout=self._timeout_s)
        except gexc.PermissionDenied:
            # Reachable: the enqueuer role lacks cloudtasks.queues.get, and a probe must
            # not need more rights than the work itself.
            return
        except (gexc.GoogleAPICallError, gexc.RetryError) as exc:
            raise DependencyUnavailable(f"Cloud Tasks queue unreachable: {exc}") from exc
