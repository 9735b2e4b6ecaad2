"""Webhooks through the whole local stack: the demo client's secret, issued when the stack
starts, verifies the webhook of its job, delivered to an HTTPS receiver whose private
certificate authority the stack was told to trust."""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from collections.abc import Iterator

import pytest
import requests

from gradeq.client import InvalidWebhook, verify_webhook
from localcloud.stack import EMBEDDED, LocalStack, StackConfig
from tests.e2e.fast_stack import fast_env
from tests.support.tls import PrivateCa, Received, make_private_ca, tls_receiver

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def private_ca(tmp_path_factory: pytest.TempPathFactory) -> PrivateCa:
    return make_private_ca(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, private_ca: PrivateCa) -> Iterator[LocalStack]:
    root = tmp_path_factory.mktemp("webhooks")
    config = StackConfig.on_free_ports(
        root / "data",
        backend=EMBEDDED,
        client_id="school",
        recover_every_s=0,
        env={**fast_env(root), "GRADEQ_WEBHOOK_CA_BUNDLE": str(private_ca.bundle)},
    )
    with (root / "stack.log").open("w") as log:
        local = LocalStack(config, output=log)
        local.start()
        try:
            yield local
        finally:
            local.stop()


def wait_for(received: list[Received], timeout_s: float = 60) -> Received:
    deadline = time.monotonic() + timeout_s
    while not received:
        assert time.monotonic() < deadline, "no webhook arrived"
        time.sleep(0.2)
    return received[0]


def test_the_clients_own_secret_verifies_its_webhook(
    stack: LocalStack, private_ca: PrivateCa
) -> None:
    assert stack.webhook_secret.startswith("whsec_")
    with tls_receiver(private_ca) as (url, received):
        answer = requests.post(
            stack.config.url("intake") + "/v1/grading-jobs",
            json={
                "submission_id": f"sub-{uuid.uuid4().hex[:6]}",
                "answer": "The mitochondria produce ATP.",
                "rubric": ["mentions mitochondria"],
                "callback_url": url,
            },
            headers={"Authorization": f"Bearer {stack.api_key}", "Idempotency-Key": "hook-1"},
            timeout=10,
        )
        assert answer.status_code == 202, answer.text
        hook = wait_for(received)
    event = verify_webhook(stack.webhook_secret, hook.body, hook.headers, client_id="school")
    assert event["data"]["job_id"] == answer.json()["id"]
    assert event["data"]["callback_url"] is None  # the URL stays in the job
    with pytest.raises(InvalidWebhook):
        verify_webhook(stack.webhook_secret, hook.body, hook.headers, client_id="another-school")


def _submit(stack: LocalStack, key: str, callback_url: str | None = None) -> str:
    body: dict[str, object] = {
        "submission_id": f"sub-{uuid.uuid4().hex[:6]}",
        "answer": "The mitochondria produce ATP.",
        "rubric": ["mentions mitochondria"],
    }
    if callback_url is not None:
        body["callback_url"] = callback_url
    answer = requests.post(
        stack.config.url("intake") + "/v1/grading-jobs",
        json=body,
        headers={"Authorization": f"Bearer {stack.api_key}", "Idempotency-Key": key},
        timeout=10,
    )
    assert answer.status_code == 202, answer.text
    return str(answer.json()["id"])


def _processed(stack: LocalStack) -> dict[tuple[str, str], int]:
    """(subscriber, job id) -> records, and the bus deliveries still pending (key ("", ""))."""
    path = stack.config.data_dir / "gradeq.sqlite3"
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30) as conn:
        rows = conn.execute("SELECT subscriber, record FROM processed_events").fetchall()
        pending = conn.execute("SELECT COUNT(*) FROM bus_deliveries").fetchone()[0]
    seen: dict[tuple[str, str], int] = {("", ""): int(pending)}
    for subscriber, record in rows:
        key = (str(subscriber), str(json.loads(record).get("job_id")))
        seen[key] = seen.get(key, 0) + 1
    return seen


def test_only_a_job_with_a_callback_is_pushed_to_notification(
    stack: LocalStack, private_ca: PrivateCa
) -> None:
    with tls_receiver(private_ca) as (url, received):
        silent = _submit(stack, f"silent-{uuid.uuid4().hex[:6]}")
        hooked = _submit(stack, f"hooked-{uuid.uuid4().hex[:6]}", url)
        deadline = time.monotonic() + 60
        # Both events reached analytics and the bus has nothing left to push.
        while True:
            seen = _processed(stack)
            done = seen.get(("analytics", silent)) and seen.get(("analytics", hooked))
            if done and seen.get(("notification", hooked)) and seen[("", "")] == 0:
                break
            assert time.monotonic() < deadline, f"events not delivered: {seen}"
            time.sleep(0.2)
        time.sleep(1.0)  # a stray push would have arrived by now
        hooks = list(received)
    assert seen.get(("notification", silent)) is None
    assert seen[("notification", hooked)] == 1
    assert not [line for line in stack.lines("notification") if silent in line]
    [hook] = hooks
    event = verify_webhook(stack.webhook_secret, hook.body, hook.headers, client_id="school")
    assert event["data"]["job_id"] == hooked
