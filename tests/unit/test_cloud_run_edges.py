"""What each service shows Cloud Run: push auth behind IAM, both health paths, trace logs."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import requests_mock as rm
from flask import Flask

from services.analytics.app import create_app as analytics_app
from services.gradebook.app import create_app as gradebook_app
from services.gradebook.settings import GradebookSettings
from services.intake.app import create_app as intake_app
from services.notification.app import create_app as notification_app
from services.worker.app import create_app as worker_app
from shared.adapters.embedded.gradebook_marks import SqliteGradebookMarks
from shared.adapters.embedded.processed_events import SqliteProcessedEvents
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import PushAuth, Settings
from shared.domain.errors import PROBLEM_BASE
from tests.contract.harness_events import CALLBACK_URL, sample_event
from tests.fakes import ScriptedGrader
from tests.support.grade_posted import grade_data, push_body
from tests.support.id_tokens import forwarded_id_token, google_claims, signed_id_token
from tests.support.push import pubsub_push_body, restored_root_logger
from tests.unit.test_notification_app import SEALING_KEY

SERVICES = ("intake", "worker", "notification", "analytics", "gradebook")
PUSHED = {
    "worker": "/tasks/grade",
    "notification": "/pubsub/push",
    "analytics": "/pubsub/push",
    "gradebook": "/pubsub/push",
}
TASKS_SA = "tasks-invoker@proj.iam.gserviceaccount.com"
PUSH_SA = "pubsub-push@proj.iam.gserviceaccount.com"
CALLER = {"worker": TASKS_SA, "notification": PUSH_SA, "analytics": PUSH_SA, "gradebook": PUSH_SA}
PROJECT = "proj"
log = logging.getLogger("tests.edges")


class Stores(NamedTuple):
    adapters: Adapters
    processed: SqliteProcessedEvents


def audience(service: str) -> str:
    return f"https://{service}-abc123-ew.a.run.app"


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    with restored_root_logger():
        yield


@pytest.fixture(autouse=True)
def _client_callback(requests_mock: rm.Mocker) -> None:
    """The client's webhook endpoint accepts; no other HTTP request leaves the test."""
    requests_mock.post(CALLBACK_URL, status_code=200)


@pytest.fixture
def stores(adapters: Adapters, processed: SqliteProcessedEvents) -> Stores:
    return Stores(adapters, processed)


def build(service: str, tmp_path: Path, stores: Stores, **changes: Any) -> Flask:
    """The service's app in production push-auth mode (claims of Cloud Run's token)."""
    values: dict[str, Any] = {
        "data_dir": tmp_path,
        "project_id": PROJECT,
        "webhook_secrets_key": SEALING_KEY,
        "grader_timeout_s": 5,
        "push_auth": PushAuth.OIDC,
        # Outside Cloud Run; these tests send what its front would pass on.
        "push_allow_claims_outside_cloud_run": True,
        "push_audience": audience(service) if service in PUSHED else "",
        "push_service_accounts": CALLER.get(service, ""),
        **changes,
    }
    settings = Settings(**values)
    adapters, processed = stores
    if service == "intake":
        return intake_app(settings, adapters, FrozenClock())
    if service == "worker":
        return worker_app(settings, adapters, ScriptedGrader(), FrozenClock())
    if service == "notification":
        return notification_app(settings, processed)
    if service == "gradebook":
        marks = SqliteGradebookMarks(SqliteDatabase(settings.database_path))
        return gradebook_app(settings, GradebookSettings(), marks=marks, processed=processed)
    return analytics_app(settings, processed, processed)


def push(app: Flask, service: str, token: str | None) -> Any:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    body: Any = {"job_id": "j-unknown"}
    if service == "gradebook":
        body = push_body(grade_data(1))
    elif service != "worker":
        body = pubsub_push_body(sample_event(), service, "301")
    return app.test_client().post(PUSHED[service], json=body, headers=headers)


def forwarded(service: str, **changes: Any) -> str:
    return forwarded_id_token(google_claims(audience(service), CALLER[service], **changes))


@pytest.mark.parametrize("service", sorted(PUSHED))
def test_a_token_forwarded_by_cloud_run_is_accepted(
    service: str, tmp_path: Path, stores: Stores
) -> None:
    app = build(service, tmp_path, stores)
    response = push(app, service, forwarded(service))
    # Past authentication: the worker drops the unknown job, the subscribers take the event.
    if service == "worker":
        assert response.status_code == 200 and response.json["dropped"] == "no job j-unknown"
    else:
        assert response.status_code == 204, response.json


REJECTED = {
    "no-token": None,
    "malformed": "garbage",
    "wrong-audience": {"aud": "https://other-abc123-ew.a.run.app"},
    "wrong-issuer": {"iss": "https://issuer.example"},
    "expired": {"iat": 1_700_000_000, "exp": 1_700_003_600},
    "email-not-allowed": {"email": "intruder@proj.iam.gserviceaccount.com"},
    "email-not-verified": {"email_verified": False},
    "still-signed": "signed",
}


@pytest.mark.parametrize("service", sorted(PUSHED))
@pytest.mark.parametrize("case", sorted(REJECTED))
def test_a_push_without_a_valid_forwarded_token_is_401_problem(
    service: str,
    case: str,
    tmp_path: Path,
    stores: Stores,
    capsys: pytest.CaptureFixture[str],
) -> None:
    app = build(service, tmp_path, stores)
    spec = REJECTED[case]
    if spec is None or spec == "garbage":
        token = spec
    elif spec == "signed":
        token = signed_id_token(google_claims(audience(service), CALLER[service]))
    else:
        assert isinstance(spec, dict)
        token = forwarded(service, **spec)
    response = push(app, service, token)
    assert response.status_code == 401
    assert response.mimetype == "application/problem+json"
    assert response.json["type"] == PROBLEM_BASE + "unauthenticated"
    [refused] = [r for r in _log_lines(capsys) if r["message"].startswith("push refused: ")]
    assert refused["severity"] == "WARNING" and refused["path"] == PUSHED[service]
    if token:
        assert token not in json.dumps(refused)  # credentials never reach the logs


@pytest.mark.parametrize("service", sorted(PUSHED))
@pytest.mark.parametrize("missing", ["push_audience", "push_service_accounts"])
def test_claims_mode_without_audience_or_accounts_refuses_to_start(
    service: str, missing: str, tmp_path: Path, stores: Stores
) -> None:
    with pytest.raises(ValueError, match="GRADEQ_PUSH_AUDIENCE and GRADEQ_PUSH_SERVICE_ACCOUNTS"):
        build(service, tmp_path, stores, **{missing: ""})


@pytest.mark.parametrize("service", SERVICES)
@pytest.mark.parametrize(
    ("live", "ready"), [("/healthz", "/readyz"), ("/health/live", "/health/ready")]
)
def test_both_health_paths_answer_on_every_service(
    service: str, live: str, ready: str, tmp_path: Path, stores: Stores
) -> None:
    client = build(service, tmp_path, stores).test_client()
    assert client.get(live).json == {"status": "ok"}
    response = client.get(ready)
    body = response.json
    assert response.status_code == 200 and body is not None
    assert body["status"] == "ok" and body["checks"]


def _log_lines(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    out = capsys.readouterr().out
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def _logging_app(service: str, tmp_path: Path, stores: Stores) -> Flask:
    app = build(service, tmp_path, stores)

    def emit() -> str:
        log.warning("inside a request")
        return ""

    app.add_url_rule("/emit-log", view_func=emit)
    return app


@pytest.mark.parametrize("service", SERVICES)
def test_every_service_puts_the_cloud_trace_context_on_its_log_lines(
    service: str, tmp_path: Path, stores: Stores, capsys: pytest.CaptureFixture[str]
) -> None:
    app = _logging_app(service, tmp_path, stores)
    capsys.readouterr()
    trace_id = "105445aa7843bc8bf206b12000100000"
    header = {"X-Cloud-Trace-Context": f"{trace_id}/1234567890123;o=1"}
    assert app.test_client().get("/emit-log", headers=header).status_code == 200
    [line] = [r for r in _log_lines(capsys) if r["message"] == "inside a request"]
    assert line["logging.googleapis.com/trace"] == f"projects/{PROJECT}/traces/{trace_id}"
    assert line["logging.googleapis.com/spanId"] == f"{1234567890123:016x}"
    assert line["logging.googleapis.com/trace_sampled"] is True
    assert line["service"] == service and line["severity"] == "WARNING"


@pytest.mark.parametrize("service", ["worker", "notification"])
def test_a_w3c_traceparent_is_read_too(
    service: str, tmp_path: Path, stores: Stores, capsys: pytest.CaptureFixture[str]
) -> None:
    app = _logging_app(service, tmp_path, stores)
    capsys.readouterr()
    traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
    assert app.test_client().get("/emit-log", headers={"traceparent": traceparent}).status_code
    [line] = [r for r in _log_lines(capsys) if r["message"] == "inside a request"]
    trace = "projects/proj/traces/4bf92f3577b34da6a3ce929d0e0e4736"
    assert line["logging.googleapis.com/trace"] == trace
    assert line["logging.googleapis.com/spanId"] == "00f067aa0ba902b7"
    assert line["logging.googleapis.com/trace_sampled"] is False


# --- which header Cloud Run validated -------------------------------------------------

INVOKER = "someone-with-run-invoker@proj.iam.gserviceaccount.com"
PUSH_PATHS = [("worker", "/tasks/grade"), ("worker", "/tasks/recover")] + [
    (s, PUSHED[s]) for s in ("notification", "analytics", "gradebook")
]


def push_to(app: Flask, service: str, path: str, headers: dict[str, str]) -> Any:
    body: Any = {"job_id": "j-unknown"}
    if service == "gradebook":
        body = push_body(grade_data(1))
    elif service != "worker":
        body = pubsub_push_body(sample_event(), service, "301")
    return app.test_client().post(path, json=body, headers=headers)


@pytest.mark.parametrize(("service", "path"), PUSH_PATHS)
def test_a_hand_written_token_beside_the_validated_one_is_refused(
    service: str, path: str, tmp_path: Path, stores: Stores
) -> None:
    # Anyone allowed to invoke the service gets their own token validated in
    # X-Serverless-Authorization; Cloud Run then passes Authorization on unread, so a
    # hand-written "forwarded" token for the push account can ride along there.
    app = build(service, tmp_path, stores)
    headers = {
        "X-Serverless-Authorization": f"Bearer {forwarded(service, email=INVOKER)}",
        "Authorization": f"Bearer {forwarded(service)}",
    }
    response = push_to(app, service, path, headers)
    assert response.status_code == 401
    assert response.json["type"] == PROBLEM_BASE + "unauthenticated"


@pytest.mark.parametrize(("service", "path"), PUSH_PATHS)
def test_the_identity_is_read_from_x_serverless_authorization_when_present(
    service: str, path: str, tmp_path: Path, stores: Stores
) -> None:
    app = build(service, tmp_path, stores)
    allowed = {"X-Serverless-Authorization": f"Bearer {forwarded(service)}"}
    assert push_to(app, service, path, allowed).status_code != 401
    intruder = {"X-Serverless-Authorization": f"Bearer {forwarded(service, email=INVOKER)}"}
    assert push_to(app, service, path, intruder).status_code == 401
    # Authorization alone is what Cloud Run validated when no X-Serverless-Authorization came.
    assert (
        push_to(app, service, path, {"Authorization": f"Bearer {forwarded(service)}"}).status_code
        != 401
    )


@pytest.mark.parametrize("service", sorted(PUSHED))
def test_claims_mode_outside_cloud_run_refuses_to_start_unless_allowed(
    service: str, tmp_path: Path, stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("K_SERVICE", raising=False)
    with pytest.raises(ValueError, match="K_SERVICE"):
        build(service, tmp_path, stores, push_allow_claims_outside_cloud_run=False)
    # On Cloud Run it starts; so does a service that verifies signatures anywhere.
    monkeypatch.setenv("K_SERVICE", service)
    build(service, tmp_path, stores, push_allow_claims_outside_cloud_run=False)
    monkeypatch.delenv("K_SERVICE")
    build(
        service,
        tmp_path,
        stores,
        push_allow_claims_outside_cloud_run=False,
        push_verify_signature=True,
    )
