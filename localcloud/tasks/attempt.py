"""One delivery attempt: the request Cloud Tasks would send, and what came back."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from localcloud.cloudrun import ForwardedTokens, base_url
from localcloud.http_pool import TIMED_OUT, Pool
from localcloud.http_pool import send as send_request
from shared.adapters.embedded.task_table import USER_AGENT, TaskRow

#: X-CloudTasks-TaskPreviousResponse after an attempt that ran past its dispatch deadline.
GATEWAY_TIMEOUT = 504

# Why an attempt failed, kept in the table and the log lines (the next attempt's
# X-CloudTasks-TaskRetryReason is empty, as Cloud Tasks sends it to HTTP targets).
HTTP_ERROR = "HTTP_ERROR"
DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"
UNREACHABLE = "UNREACHABLE"
DISPATCHER_STOPPED = "DISPATCHER_STOPPED"


@dataclass(frozen=True)
class AttemptResult:
    """The target's HTTP status (None: no response) and why a retry is needed."""

    status: int | None
    reason: str
    retry_after: str | None = None
    detail: str = ""

    @property
    def succeeded(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


def authorization(
    task: TaskRow,
    push_token: str | None,
    oidc_account: str | None,
    target_base: str | None,
    tokens: ForwardedTokens,
) -> dict[str, str]:
    """The Authorization header the target receives for `task`.

    With `oidc_account` set, an ID token as Cloud Run forwards it to the container: for
    the task's own OIDC account and audience (set through the Cloud Tasks API), else for
    `oidc_account` and the target's base URL, from the sender's `tokens`. Otherwise
    `push_token` as a shared secret.
    """
    if oidc_account is not None:
        account = task.oidc_service_account or oidc_account
        audience = task.oidc_audience or base_url(resolve(task.url, target_base) or task.url)
        return tokens.authorization(audience, account)
    if push_token:
        return {"Authorization": f"Bearer {push_token}"}
    return {}


def build_headers(
    task: TaskRow,
    push_token: str | None,
    tokens: ForwardedTokens,
    oidc_account: str | None = None,
    target_base: str | None = None,
) -> dict[str, str]:
    """The task's own headers plus those Cloud Tasks adds, for the attempt after `task`."""
    added = {
        "User-Agent": USER_AGENT,
        "X-CloudTasks-QueueName": task.queue,
        "X-CloudTasks-TaskName": task.name,
        "X-CloudTasks-TaskRetryCount": str(task.dispatch_count),
        "X-CloudTasks-TaskExecutionCount": str(task.execution_count),
        "X-CloudTasks-TaskETA": f"{task.schedule_time:.6f}",
    }
    if task.dispatch_count > 0:
        added["X-CloudTasks-TaskPreviousResponse"] = str(previous_response(task))
        added["X-CloudTasks-TaskRetryReason"] = ""
    added.update(authorization(task, push_token, oidc_account, target_base, tokens))
    overridden = {name.lower() for name in added}
    own = {k: v for k, v in task.headers.items() if k.lower() not in overridden}
    return own | added


def previous_response(task: TaskRow) -> int:
    """The status the last attempt got: 504 past its deadline, 0 with no response at all.

    0 stands for a connection that failed and for an attempt whose outcome was never
    recorded (its dispatcher stopped or died).
    """
    if task.last_response_code is not None:
        return task.last_response_code
    return GATEWAY_TIMEOUT if task.last_retry_reason == DEADLINE_EXCEEDED else 0


def resolve(url: str, target_base: str | None) -> str | None:
    """The URL to send to: a task stored relative to the worker goes to its current base."""
    if urlsplit(url).scheme:
        return url
    if target_base is None:
        return None
    return target_base.rstrip("/") + "/" + url.lstrip("/")


def send(
    task: TaskRow,
    headers: dict[str, str],
    timeout_s: float,
    target_base: str | None,
    http: Pool,
) -> AttemptResult:
    """Send the task's request; redirects are not followed (a 3xx is a failed attempt)."""
    url = resolve(task.url, target_base)
    if url is None:
        return AttemptResult(None, UNREACHABLE, detail=f"no worker base URL for {task.url!r}")
    reply = send_request(http, task.http_method, url, task.body, headers, timeout_s)
    if reply.status is None:
        reason = DEADLINE_EXCEEDED if reply.failure == TIMED_OUT else UNREACHABLE
        return AttemptResult(None, reason, detail=reply.detail)
    return AttemptResult(reply.status, HTTP_ERROR, retry_after=reply.headers.get("Retry-After"))
