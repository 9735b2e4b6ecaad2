"""Webhooks through the whole local stack: the demo client's secret, issued when the stack
starts, verifies the webhook of its job, delivered to an HTTPS receiver whose private
certificate authority the stack was told to trust."""

from __future__ import annotations

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
