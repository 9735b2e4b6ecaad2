"""The Python client: one key across retries, the server's pace, webhook signatures."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from typing import Any

import pytest
import requests
import requests_mock as rm
from standardwebhooks.webhooks import Webhook

from gradeq.client import (
    GradeqClient,
    GradeqError,
    InvalidWebhook,
    MissingKey,
    Unreachable,
    retry_after_s,
    verify_webhook,
)

BASE = "http://intake.test"
JOB = {"id": "job-1", "status": "PENDING"}
PROBLEM = "application/problem+json"


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def client(sleeps: list[float]) -> GradeqClient:
    return GradeqClient(BASE, "gq_test_key", sleep=sleeps.append, max_attempts=4)


def problem(status: int, slug: str, retry_after: str | None = None) -> dict[str, Any]:
    headers = {"Content-Type": PROBLEM, **({"Retry-After": retry_after} if retry_after else {})}
    body = {"type": f"https://gradeq.dev/problems/{slug}", "title": slug, "status": status}
    return {"status_code": status, "json": body, "headers": headers}


def test_submit_retries_429_and_503_with_the_same_key_at_the_servers_pace(
    client: GradeqClient, sleeps: list[float], requests_mock: rm.Mocker
) -> None:
    hook = requests_mock.post(
        f"{BASE}/v1/grading-jobs",
        [
            problem(503, "backlog-full", "7"),
            problem(429, "rate-limited", "3"),
            {"status_code": 202, "json": JOB, "headers": {"Retry-After": "2"}},
        ],
    )
    job = client.submit({"submission_id": "s", "answer": "a", "rubric": "r"})
    assert job.id == "job-1" and job.retry_after_s == 2
    keys = {r.headers["Idempotency-Key"] for r in hook.request_history}
    assert len(hook.request_history) == 3 and len(keys) == 1
    assert all(r.headers["Authorization"] == "Bearer gq_test_key" for r in hook.request_history)
    assert sleeps == [7, 3]


def test_a_lost_connection_is_retried_with_the_same_key(
    client: GradeqClient, sleeps: list[float], requests_mock: rm.Mocker
) -> None:
    hook = requests_mock.post(
        f"{BASE}/v1/grading-jobs",
        [{"exc": requests.ConnectionError("reset")}, {"status_code": 202, "json": JOB}],
    )
    client.submit({"answer": "a"}, idempotency_key="mine")
    assert [r.headers["Idempotency-Key"] for r in hook.request_history] == ["mine", "mine"]
    assert sleeps == [1.0]  # no Retry-After from a lost connection: backoff


def test_a_refusal_is_not_retried_and_names_its_problem_type(
    client: GradeqClient, requests_mock: rm.Mocker
) -> None:
    hook = requests_mock.post(f"{BASE}/v1/grading-jobs", **problem(400, "validation-error"))
    with pytest.raises(GradeqError) as refused:
        client.submit({})
    assert refused.value.status == 400
    assert refused.value.type.endswith("/validation-error")
    assert hook.call_count == 1


def test_retries_stop_after_max_attempts(
    client: GradeqClient, sleeps: list[float], requests_mock: rm.Mocker
) -> None:
    requests_mock.post(f"{BASE}/v1/grading-jobs", **problem(429, "too-many-active-jobs", "30"))
    with pytest.raises(GradeqError) as refused:
        client.submit({})
    assert refused.value.status == 429 and sleeps == [30, 30, 30]


def test_wait_polls_at_the_servers_retry_after(
    client: GradeqClient, sleeps: list[float], requests_mock: rm.Mocker
) -> None:
    requests_mock.get(
        f"{BASE}/v1/grading-jobs/job-1",
        [
            {"json": JOB, "headers": {"Retry-After": "5"}},
            {"json": {**JOB, "status": "RUNNING"}, "headers": {"Retry-After": "1"}},
            {"json": {**JOB, "status": "SUCCEEDED", "result": {"score": 7}}},
        ],
    )
    final = client.wait("job-1")
    assert final.is_final and final.result == {"score": 7}
    assert sleeps == [5, 1]


def test_jobs_follow_the_cursor(client: GradeqClient, requests_mock: rm.Mocker) -> None:
    hook = requests_mock.get(
        f"{BASE}/v1/grading-jobs",
        [
            {"json": {"jobs": [JOB], "next_cursor": "c1"}},
            {"json": {"jobs": [{**JOB, "id": "job-0"}], "next_cursor": None}},
        ],
    )
    assert [j.id for j in client.jobs(status="PENDING")] == ["job-1", "job-0"]
    assert hook.request_history[1].qs == {"status": ["pending"], "cursor": ["c1"]}


def test_admin_calls_use_the_operator_key_under_admin_v1(
    sleeps: list[float], requests_mock: rm.Mocker
) -> None:
    ops = GradeqClient(BASE, None, operator_key="ops_key", sleep=sleeps.append)
    hook = requests_mock.get(f"{BASE}/admin/v1/jobs", json={"jobs": [], "next_cursor": None})
    reply = ops.admin("GET", "/jobs", params={"status": "FAILED", "client": None})
    assert reply.status == 200 and reply.body == {"jobs": [], "next_cursor": None}
    assert hook.request_history[0].headers["Authorization"] == "Bearer ops_key"
    assert hook.request_history[0].qs == {"status": ["failed"]}
    with pytest.raises(MissingKey) as missing:
        ops.get("job-1")  # no API key: refused before any request
    assert missing.value.operator is False and hook.call_count == 1
    assert not GradeqClient(BASE, "gq_test_key").has_operator_key


def test_gateway_errors_are_retried_and_an_unreachable_intake_names_its_url(
    client: GradeqClient, sleeps: list[float], requests_mock: rm.Mocker
) -> None:
    requests_mock.get(
        f"{BASE}/v1/grading-jobs/job-1",
        [{"status_code": 502}, {"status_code": 504}, {"json": JOB}],
    )
    assert client.get("job-1").status == "PENDING" and sleeps == [1.0, 2.0]
    requests_mock.get(f"{BASE}/v1/grading-jobs/job-2", exc=requests.ConnectionError("refused"))
    with pytest.raises(Unreachable) as lost:
        client.get("job-2")
    assert isinstance(lost.value, requests.ConnectionError)
    assert lost.value.url == f"{BASE}/v1/grading-jobs/job-2"
    assert str(lost.value).startswith(f"cannot reach {BASE}/v1/grading-jobs/job-2: ")


def test_an_error_without_a_problem_document_is_named_by_its_status(
    client: GradeqClient, requests_mock: rm.Mocker
) -> None:
    requests_mock.get(
        f"{BASE}/v1/grading-jobs/job-1", status_code=418, text="teapot", reason="Teapot"
    )
    with pytest.raises(GradeqError) as refused:
        client.get("job-1")
    assert (refused.value.slug, refused.value.detail) == ("http-418", "Teapot")
    requests_mock.get(f"{BASE}/v1/grading-jobs/job-2", **problem(404, "job-not-found"))
    with pytest.raises(GradeqError) as missing:
        client.get("job-2")
    assert (missing.value.slug, missing.value.detail) == ("job-not-found", "job-not-found")


def test_retry_after_reads_seconds_and_http_dates_and_ignores_the_rest() -> None:
    assert retry_after_s({"Retry-After": "7"}) == 7.0
    assert retry_after_s({"Retry-After": "Mon, 01 Jan 2001 00:00:00 GMT"}) == 0.0  # past
    later = retry_after_s({"Retry-After": "Fri, 01 Jan 2100 00:00:00 GMT"})
    assert later is not None and later > 3600
    assert [retry_after_s({"Retry-After": v}) for v in ("-1", "nan", "soon", "")] == [None] * 4
    assert retry_after_s({}) is None


def test_a_resubmit_is_marked_replayed_and_wait_reports_every_state(
    client: GradeqClient, sleeps: list[float], requests_mock: rm.Mocker
) -> None:
    requests_mock.post(
        f"{BASE}/v1/grading-jobs",
        [
            {"status_code": 202, "json": JOB},
            {"json": JOB, "headers": {"Idempotent-Replayed": "true"}},
        ],
    )
    assert client.submit({}, "k").replayed is False
    assert client.submit({}, "k").replayed is True
    requests_mock.get(
        f"{BASE}/v1/grading-jobs/job-1",
        [{"json": JOB}, {"json": {**JOB, "status": "CANCELLED"}}],
    )
    seen: list[str] = []
    final = client.wait("job-1", default_poll_s=0.25, on_update=lambda job: seen.append(job.status))
    assert final.status == "CANCELLED" and seen == ["PENDING", "CANCELLED"] and sleeps == [0.25]
    requests_mock.get(f"{BASE}/v1/grading-jobs/job-1", json=JOB)
    with pytest.raises(TimeoutError):
        client.wait("job-1", timeout_s=0)


SECRET = "whsec_" + base64.b64encode(b"client-test-webhook-secret-32byt").decode()


def signed(body: str) -> dict[str, str]:
    now = datetime.now(UTC)
    return {
        "webhook-id": "evt-1",
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": Webhook(SECRET).sign("evt-1", now, body),
    }


def test_a_signed_webhook_verifies_and_a_tampered_one_does_not() -> None:
    body = json.dumps(
        {"type": "dev.gradeq.grading.completed", "data": {"job_id": "job-1", "client_id": "a"}}
    )
    headers = signed(body)
    assert (
        verify_webhook(SECRET, body.encode(), headers, client_id="a")["data"]["job_id"] == "job-1"
    )
    with pytest.raises(InvalidWebhook):
        verify_webhook(SECRET, body.replace("job-1", "job-2"), headers, client_id="a")
    with pytest.raises(InvalidWebhook):
        verify_webhook(SECRET, body, {**headers, "webhook-timestamp": "1000000000"}, client_id="a")


def test_a_webhook_about_another_clients_job_is_refused() -> None:
    # Signed with the secret the receiver holds, but about client b's job.
    body = json.dumps({"data": {"job_id": "job-1", "client_id": "b"}})
    with pytest.raises(InvalidWebhook, match="another client"):
        verify_webhook(SECRET, body, signed(body), client_id="a")
    no_client = json.dumps({"data": {"job_id": "job-1"}})
    with pytest.raises(InvalidWebhook):
        verify_webhook(SECRET, no_client, signed(no_client), client_id="a")


@pytest.mark.parametrize(
    ("body", "signature"),
    [
        (b"\xff\xfe not utf-8", None),
        (b"{}", "no-comma-here"),
        (b"{}", "v1,***not base64***"),
        (b"not json", None),
    ],
    ids=["not-utf8", "signature-without-version", "signature-not-base64", "not-json"],
)
def test_a_malformed_webhook_raises_invalid_webhook(body: bytes, signature: str | None) -> None:
    # Signed over the text as a sender would have; the reader's own error, never another.
    headers = signed(body.decode("latin-1"))
    if signature is not None:
        headers["webhook-signature"] = signature
    with pytest.raises(InvalidWebhook):
        verify_webhook(SECRET, body, headers, client_id="a")


def test_the_notifiers_own_webhooks_verify(requests_mock: rm.Mocker) -> None:
    from services.notification.webhook import WebhookSender
    from shared.http.callback_guard import CallbackGuard
    from tests.contract.harness_events import CALLBACK_URL, sample_event

    guard = CallbackGuard(lambda host, port: ["93.184.216.34"])  # no DNS is asked
    hook = requests_mock.post(CALLBACK_URL, status_code=204)
    event = sample_event(client_id="client-a")
    WebhookSender(1.0, guard).send(event, CALLBACK_URL, [SECRET])
    sent = hook.request_history[0]
    verified = verify_webhook(SECRET, sent.body, dict(sent.headers), client_id="client-a")
    assert verified["data"]["job_id"] == event.job_id
    with pytest.raises(InvalidWebhook, match="another client"):
        verify_webhook(SECRET, sent.body, dict(sent.headers), client_id="client-b")


def test_a_signed_in_users_job_belongs_to_its_client() -> None:
    body = json.dumps({"data": {"job_id": "job-1", "client_id": "a:user:uid-7"}})
    assert verify_webhook(SECRET, body, signed(body), client_id="a")["data"]["job_id"] == "job-1"
    with pytest.raises(InvalidWebhook):
        verify_webhook(SECRET, body, signed(body), client_id="b")
    lookalike = json.dumps({"data": {"job_id": "job-1", "client_id": "ab:user:uid-7"}})
    with pytest.raises(InvalidWebhook):
        verify_webhook(SECRET, lookalike, signed(lookalike), client_id="a")


def test_a_webhook_names_its_author_and_a_receiver_may_take_the_servers_jobs_only() -> None:
    by_student = json.dumps({"data": {"job_id": "job-1", "client_id": "a", "author": "ada"}})
    verified = verify_webhook(SECRET, by_student, signed(by_student), client_id="a")
    assert verified["data"]["author"] == "ada"
    with pytest.raises(InvalidWebhook, match="submitted by 'ada'"):
        verify_webhook(SECRET, by_student, signed(by_student), client_id="a", author="server")
    # An event from before authors existed names the user in its client id.
    legacy = json.dumps({"data": {"job_id": "job-1", "client_id": "a:user:ada"}})
    assert verify_webhook(SECRET, legacy, signed(legacy), client_id="a")["data"]["author"] == "ada"
    with pytest.raises(InvalidWebhook):
        verify_webhook(SECRET, legacy, signed(legacy), client_id="a", author="server")
    by_server = json.dumps({"data": {"job_id": "job-2", "client_id": "a"}})
    served = verify_webhook(SECRET, by_server, signed(by_server), client_id="a", author="server")
    assert served["data"]["author"] == "server"


def test_a_practice_jobs_webhook_is_never_the_schools() -> None:
    practice = json.dumps(
        {"data": {"job_id": "job-1", "client_id": "a", "author": "ada", "practice": True}}
    )
    with pytest.raises(InvalidWebhook, match="practice"):
        verify_webhook(SECRET, practice, signed(practice), client_id="a")


def test_a_retry_after_longer_than_the_longest_backoff_is_raised_not_slept(
    client: GradeqClient, sleeps: list[float], requests_mock: rm.Mocker
) -> None:
    # The day's upload bytes are spent: the server says to come back after midnight.
    hook = requests_mock.post(f"{BASE}/v1/uploads", **problem(429, "upload-quota-exceeded", "7200"))
    with pytest.raises(GradeqError) as refused:
        client.upload(b"x" * 10, "text/plain")
    assert refused.value.type.endswith("/upload-quota-exceeded")
    assert hook.call_count == 1 and sleeps == []


def test_the_notifiers_posted_grade_webhooks_verify_and_parse(requests_mock: rm.Mocker) -> None:
    import dataclasses

    from gradeq.client import GRADE_POSTED_TYPE, PostedGrade
    from services.notification.webhook import WebhookSender
    from shared.domain.events import GradePosted
    from shared.http.callback_guard import CallbackGuard
    from tests.contract.harness_events import CALLBACK_URL, sample_job

    job = sample_job(client_id="client-a")
    request = dataclasses.replace(job.request, student_id="st-1", rubric_version=1)
    posted = dataclasses.replace(job, request=request).post(datetime.now(UTC), "auto")
    assert posted.posted is not None
    changed = dataclasses.replace(
        posted,
        posted=dataclasses.replace(
            posted.posted, version=2, score=4.0, source="teacher", reason="misread"
        ),
    )
    event = GradePosted.from_job(changed)
    guard = CallbackGuard(lambda host, port: ["93.184.216.34"])  # no DNS is asked
    hook = requests_mock.post(CALLBACK_URL, status_code=204)
    WebhookSender(1.0, guard).send(event, CALLBACK_URL, [SECRET])
    sent = hook.request_history[0]
    verified = verify_webhook(SECRET, sent.body, dict(sent.headers), client_id="client-a")
    assert verified["type"] == GRADE_POSTED_TYPE
    grade = PostedGrade.from_event(verified)
    assert grade == PostedGrade(
        event_id=event.event_id,
        school="client-a",
        assignment_id="biology-1",
        student_id="st-1",
        submission_id=event.submission_id,
        job_id=event.job_id,
        version=2,
        score=4.0,
        max_score=10.0,
        source="teacher",
        feedback=event.feedback,
        grading_progress=event.grading_progress,
        posted_at=event.posted_at,
        reason="misread",
    )
    with pytest.raises(InvalidWebhook, match="another client"):
        verify_webhook(SECRET, sent.body, dict(sent.headers), client_id="client-b")
    with pytest.raises(InvalidWebhook, match="no author"):
        verify_webhook(SECRET, sent.body, dict(sent.headers), client_id="client-a", author="server")


def test_a_posted_grade_webhook_with_a_mistyped_field_is_refused() -> None:
    data = {
        "school": "a", "assignment_id": "as-1", "student_id": "st-1", "submission_id": "s-1",
        "job_id": "job-1", "version": "2", "score": 4.0, "max_score": 10.0,
        "source": "teacher", "feedback": "", "grading_progress": "FullyGraded",
        "posted_at": "2026-03-01T00:00:00+00:00", "reason": "misread",
    }  # fmt: skip
    body = json.dumps({"id": "evt-1", "type": "dev.gradeq.grade.posted.v1", "data": data})
    with pytest.raises(InvalidWebhook, match="version"):
        verify_webhook(SECRET, body, signed(body), client_id="a")
    fixed = body.replace('"version": "2"', '"version": 2')
    assert verify_webhook(SECRET, fixed, signed(fixed), client_id="a")["data"]["version"] == 2
