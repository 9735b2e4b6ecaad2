"""The local callers send ID tokens shaped as Cloud Run forwards them, as production would.

Each token a stand-in sends is checked by the verifier the services run in production.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
import requests
from flask import Flask
from werkzeug.serving import make_server

from localcloud.cloudrun import CloudRunFront, ForwardedTokens, forwarded_id_token
from localcloud.pubsub.push_bus import Bus, Endpoint
from services.worker.app import create_app as worker_app
from shared.adapters.embedded.event_publisher import SqliteEventPublisher
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.adapters.embedded.task_queue import SqliteTaskQueue
from shared.adapters.embedded.task_table import NewTask, TaskTable
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.codecs.task_body import encode_task_body
from shared.config.settings import PushAuth, Settings
from shared.config.subscriptions import SubscriptionConfig, TopicConfig
from shared.http.push_auth import FORWARDED_SIGNATURE, ForwardedTokenVerifier
from shared.ports import TaskSpec
from tests.contract.harness import fast_queue, running_dispatcher
from tests.contract.harness_events import sample_event
from tests.fakes import ScriptedGrader
from tests.support.http_target import ReceivedRequest, RecordingTarget, Reply

TASKS_SA = "tasks-invoker@demo-gradeq.iam.gserviceaccount.com"
PUSH_SA = "pubsub-push@demo-gradeq.iam.gserviceaccount.com"


def bearer(request: ReceivedRequest) -> str:
    scheme, _, token = (request.header("Authorization") or "").partition(" ")
    assert scheme == "Bearer"
    return token


def claims(token: str) -> dict[str, Any]:
    decoded: dict[str, Any] = jwt.decode(token, options={"verify_signature": False})
    return decoded


def assert_forwarded(token: str, audience: str, email: str) -> None:
    """Shaped as Cloud Run forwards it, and accepted by the production verifier."""
    assert token.split(".")[2] == FORWARDED_SIGNATURE
    ForwardedTokenVerifier(audience, frozenset({email})).verify(token)
    got = claims(token)
    assert got["iss"] == "https://accounts.google.com"
    assert got["email_verified"] is True and got["sub"]
    assert got["exp"] - got["iat"] == 3600
    assert abs(got["iat"] - time.time()) < 60


def test_the_dispatcher_sends_the_default_account_to_the_target_base_url(
    db: SqliteDatabase, target: RecordingTarget
) -> None:
    queue = fast_queue()
    SqliteTaskQueue(db, queue, target.url + queue.target_path).enqueue(
        TaskSpec(name="t-1", job_id="job-1")
    )
    with running_dispatcher(db, queue, push_token="ignored", oidc_account=TASKS_SA):
        [request] = target.wait_for(1, timeout=5)
    assert request.path == "/tasks/grade"
    assert_forwarded(bearer(request), target.url, TASKS_SA)


def test_the_dispatcher_uses_the_oidc_token_a_task_names(
    db: SqliteDatabase, target: RecordingTarget
) -> None:
    queue = fast_queue()
    task = NewTask(
        queue=queue.name,
        name="t-own",
        url=target.url + "/tasks/grade",
        body=encode_task_body("job-2"),
        schedule_time=time.time(),
        oidc_service_account="other@demo-gradeq.iam.gserviceaccount.com",
        oidc_audience="https://worker-abc-ew.a.run.app",
    )
    assert TaskTable(db).create(task, 60)
    with running_dispatcher(db, queue, oidc_account=TASKS_SA):
        [request] = target.wait_for(1, timeout=5)
    token = bearer(request)
    assert_forwarded(
        token, "https://worker-abc-ew.a.run.app", "other@demo-gradeq.iam.gserviceaccount.com"
    )


def test_a_dispatcher_reuses_its_own_tokens_and_never_an_earlier_dispatchers(
    db: SqliteDatabase, target: RecordingTarget
) -> None:
    # A token lives with the sender that issued it: a dispatcher started later (in the
    # same process) issues its own instead of one an earlier dispatcher kept.
    queue = fast_queue()
    tasks = SqliteTaskQueue(db, queue, target.url + queue.target_path)
    sent: list[list[str]] = []
    for run in range(2):
        for n in range(2):
            tasks.enqueue(TaskSpec(name=f"t-run{run}-{n}", job_id=f"job-{run}-{n}"))
        with running_dispatcher(db, queue, oidc_account=TASKS_SA):
            requests_of_run = target.wait_for(2 * (run + 1), timeout=5)[2 * run :]
        sent.append([bearer(request) for request in requests_of_run])
    first, second = sent
    assert first[0] == first[1]  # reused while the dispatcher runs
    assert second[0] == second[1]
    assert first[0] != second[0]
    for token in (*first, *second):
        assert_forwarded(token, target.url, TASKS_SA)


def test_forwarded_tokens_are_reused_for_five_minutes_on_the_senders_clock() -> None:
    now = [1_000_000.0]
    tokens = ForwardedTokens(clock=lambda: now[0])
    worker, other = "https://worker-abc-ew.a.run.app", "https://x-abc-ew.a.run.app"

    def token(audience: str = worker, email: str = TASKS_SA) -> str:
        return tokens.authorization(audience, email)["Authorization"].removeprefix("Bearer ")

    first = token()
    assert claims(first)["iat"] == 1_000_000
    now[0] += 299.0
    assert token() == first
    assert token(other) != first and token(email=PUSH_SA) != first  # one per pair
    now[0] += 1.0
    renewed = token()
    assert renewed != first and claims(renewed)["iat"] == 1_000_300
    now[0] -= 10.0  # a clock set back: the token would be from the future
    assert token() != renewed


def test_the_bus_sends_the_push_account_to_the_subscriber_base_url(
    db: SqliteDatabase, target: RecordingTarget
) -> None:
    config = SubscriptionConfig(
        name="notification",
        push_path="/pubsub/push",
        ack_deadline=timedelta(seconds=2),
        minimum_backoff=timedelta(seconds=0.01),
        maximum_backoff=timedelta(seconds=0.02),
        max_delivery_attempts=5,
    )
    SqliteEventPublisher(db, TopicConfig("grading-completed", {"notification": config})).publish(
        sample_event()
    )
    bus = Bus(
        db,
        {"notification": Endpoint(config, target.url)},
        push_token="ignored",
        oidc_account=PUSH_SA,
        poll_interval_s=0.01,
    )
    bus.start()
    try:
        [request] = target.wait_for(1, timeout=5)
    finally:
        bus.stop(timeout_s=5)
    assert request.path == "/pubsub/push"
    assert_forwarded(bearer(request), target.url, PUSH_SA)


def test_the_cloud_run_front_adds_the_token_and_passes_the_rest_through() -> None:
    audience = "https://notification-abc-ew.a.run.app"
    reply = Reply(202, {"X-Answer": "yes"}, body=b'{"ok": true}')
    with RecordingTarget(lambda _request: reply) as service:
        front = CloudRunFront(service.url, audience, PUSH_SA).start()
        try:
            response = requests.post(
                front.url + "/pubsub/push?x=1",
                json={"message": {"data": "e30="}},
                headers={"Authorization": "Bearer caller-token", "X-Extra": "kept"},
                timeout=5,
            )
        finally:
            front.stop()
    assert response.status_code == 202
    assert response.headers["X-Answer"] == "yes"
    assert response.json() == {"ok": True}
    [request] = service.requests
    assert (request.method, request.path) == ("POST", "/pubsub/push?x=1")
    assert request.json == {"message": {"data": "e30="}}
    assert request.header("X-Extra") == "kept"
    assert_forwarded(bearer(request), audience, PUSH_SA)


def test_the_cloud_run_front_answers_429_when_no_instance_comes_up() -> None:
    """As Cloud Run: a request with no instance to take it waits, then is refused with 429."""
    with RecordingTarget() as gone:
        url = gone.url
    front = CloudRunFront(
        url, "https://x-abc-ew.a.run.app", PUSH_SA, timeout_s=2, pending_s=0.3
    ).start()
    try:
        started = time.monotonic()
        response = requests.post(front.url + "/pubsub/push", json={}, timeout=5)
    finally:
        front.stop()
    assert response.status_code == 429
    assert time.monotonic() - started >= 0.3


def test_the_cloud_run_front_validates_x_serverless_authorization_and_passes_the_rest() -> None:
    # Cloud Run's own precedence: that header is validated, Authorization passes unread.
    audience = "https://worker-abc-ew.a.run.app"
    with RecordingTarget(lambda _request: Reply(200)) as service:
        front = CloudRunFront(service.url, audience, TASKS_SA).start()
        try:
            requests.post(
                front.url + "/tasks/grade",
                json={},
                headers={
                    "X-Serverless-Authorization": "Bearer caller-token",
                    "Authorization": "Bearer hand-written",
                },
                timeout=5,
            )
        finally:
            front.stop()
    [request] = service.requests
    assert request.header("Authorization") == "Bearer hand-written"
    validated = request.header("X-Serverless-Authorization") or ""
    assert validated.startswith("Bearer ")
    assert_forwarded(validated.removeprefix("Bearer "), audience, TASKS_SA)


@contextmanager
def served(app: Flask) -> Iterator[str]:
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(timeout=5)


def test_a_token_forged_behind_the_front_does_not_pass_for_the_tasks_account(
    tmp_path: Path, adapters: Adapters
) -> None:
    # Someone allowed to invoke the worker (not the tasks account) sends their own token
    # where Cloud Run validates it, and a hand-written one for the tasks account beside it.
    audience = "https://worker-abc-ew.a.run.app"
    settings = Settings(
        data_dir=tmp_path,
        push_auth=PushAuth.OIDC,
        push_allow_claims_outside_cloud_run=True,
        push_audience=audience,
        push_service_accounts=TASKS_SA,
    )
    worker = worker_app(settings, adapters, ScriptedGrader(), FrozenClock())
    forged = forwarded_id_token(audience, TASKS_SA)
    with served(worker) as url:
        front = CloudRunFront(url, audience, "editor@demo-gradeq.iam.gserviceaccount.com").start()
        try:
            for path in ("/tasks/grade", "/tasks/recover"):
                response = requests.post(
                    front.url + path,
                    json={"job_id": "j-unknown"},
                    headers={
                        "X-Serverless-Authorization": "Bearer the-editor's-own-token",
                        "Authorization": f"Bearer {forged}",
                    },
                    timeout=10,
                )
                assert response.status_code == 401, (path, response.text)
            # The tasks account's own push through the same front still passes.
            tasks_front = CloudRunFront(url, audience, TASKS_SA).start()
            try:
                ok = requests.post(
                    tasks_front.url + "/tasks/grade", json={"job_id": "j-unknown"}, timeout=10
                )
            finally:
                tasks_front.stop()
            assert ok.status_code == 200, ok.text
        finally:
            front.stop()


def test_the_cloud_run_front_holds_a_request_until_the_service_is_back() -> None:
    """A push arriving while the service restarts waits for it instead of failing."""
    with socket.socket() as probe:  # a free port, nothing listening on it yet
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    received: list[str] = []

    class Service(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.append(self.path)
            self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    answered: list[dict[str, Any]] = []
    front = CloudRunFront(
        f"http://127.0.0.1:{port}", "https://x-abc-ew.a.run.app", PUSH_SA, timeout_s=5,
        on_answer=lambda line: answered.append(json.loads(line)),
    ).start()  # fmt: skip
    servers: list[ThreadingHTTPServer] = []

    def come_back() -> None:
        server = ThreadingHTTPServer(("127.0.0.1", port), Service)
        servers.append(server)
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()

    restart = threading.Timer(0.5, come_back)
    restart.start()
    try:
        response = requests.post(front.url + "/pubsub/push", json={}, timeout=10)
    finally:
        restart.join()
        front.stop()
        for server in servers:
            server.shutdown()
            server.server_close()
    assert response.status_code == 204
    assert received == ["/pubsub/push"]
    [line] = answered
    assert line["status"] == 204 and line["seconds"] >= 0.4


def test_the_cloud_run_front_reports_each_push_and_what_it_answered() -> None:
    answered: list[dict[str, Any]] = []
    push = {"message": {"data": "e30=", "messageId": "m-7"}, "deliveryAttempt": 3}
    with RecordingTarget() as service:
        front = CloudRunFront(
            service.url, "https://x-abc-ew.a.run.app", PUSH_SA, timeout_s=2,
            on_answer=lambda line: answered.append(json.loads(line)),
        ).start()  # fmt: skip
        try:
            assert requests.post(front.url + "/pubsub/push", json=push, timeout=5).ok
        finally:
            front.stop()
    gone = CloudRunFront(
        service.url, "https://x-abc-ew.a.run.app", PUSH_SA, timeout_s=2, pending_s=0.2,
        on_answer=lambda line: answered.append(json.loads(line)),
    ).start()  # fmt: skip
    try:
        assert requests.post(gone.url + "/pubsub/push", json=push, timeout=5).status_code == 429
    finally:
        gone.stop()
    delivered, refused = answered
    assert delivered["message_id"] == refused["message_id"] == "m-7"
    assert delivered["delivery_attempt"] == 3
    assert (delivered["status"], delivered["upstream_error"]) == (200, None)
    assert refused["status"] == 429 and refused["upstream_error"] == "ConnectionError"
    assert refused["severity"] == "WARNING"
