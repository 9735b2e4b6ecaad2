"""On the official emulators, events completed while a subscriber restarts all reach it.

The Pub/Sub emulator may never redeliver a push refused under a retry policy
(docs/emulators.md); Cloud Run keeps a request pending while no instance can take it,
and so does the local front. With notification down for a few seconds while a burst of
jobs completes, every event still reaches it once it is back, and each job's webhook is
sent. The jobs name a callback URL, so notification's filter admits their events
wherever filters are applied (the emulator does not apply them).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from localcloud.emulators import missing_reason
from localcloud.soak import GoogleObserver, soak_stack
from localcloud.stack import GOOGLE_EMULATORS, LocalStack
from localcloud.tls_receiver import Received, make_private_ca, tls_receiver

pytestmark = pytest.mark.e2e
JOBS = 20


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[tuple[str, list[Received], Path]]:
    """The clients' HTTPS webhook endpoint on loopback: its URL, what it got, its CA."""
    (tmp_path / "ca").mkdir()
    ca = make_private_ca(tmp_path / "ca")
    with tls_receiver(ca) as (url, received):
        yield url, received, ca.bundle


@pytest.fixture
def stack(tmp_path: Path, receiver: tuple[str, list[Received], Path]) -> Iterator[LocalStack]:
    if reason := missing_reason("firestore", "pubsub"):
        pytest.skip(f"the official emulators are needed: {reason}")
    with (tmp_path / "stack.log").open("w") as output:
        stack = soak_stack(tmp_path, output, GOOGLE_EMULATORS, ca_bundle=receiver[2])
        stack.start()
        try:
            yield stack
        finally:
            stack.stop()


def test_events_completed_while_a_subscriber_restarts_all_reach_it(
    stack: LocalStack, receiver: tuple[str, list[Received], Path]
) -> None:
    webhook_url, webhooks, _ = receiver
    observer = GoogleObserver(stack)
    url = stack.config.url("intake") + "/v1/grading-jobs"
    auth = {"Authorization": f"Bearer {stack.api_key}"}
    stack.kill("notification")
    jobs = []
    for i in range(JOBS):
        body = {
            "submission_id": f"s{i}",
            "answer": "ATP",
            "rubric": "names ATP",
            "callback_url": webhook_url,
        }
        headers = {**auth, "Idempotency-Key": f"restart-{i}"}
        jobs.append(requests.post(url, json=body, headers=headers, timeout=10).json()["id"])
    # Some events are announced while notification is down: their pushes wait for it.
    deadline = time.monotonic() + 30
    while sum(j["event_published"] for j in observer.jobs().values()) < 3:
        assert time.monotonic() < deadline, "jobs not announced in time"
        time.sleep(0.1)
    stack.restart("notification")
    deadline = time.monotonic() + 60
    while True:
        arrived = {r["job_id"] for s, _, r in observer.events() if s == "notification"}
        if arrived >= set(jobs) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert sorted(set(jobs) - arrived) == []
    deadline = time.monotonic() + 30
    while len({json.loads(w.body)["data"]["job_id"] for w in webhooks}) < JOBS:
        assert time.monotonic() < deadline, f"{len(webhooks)} webhooks for {JOBS} jobs"
        time.sleep(0.2)
    assert {json.loads(w.body)["data"]["job_id"] for w in list(webhooks)} == set(jobs)
    refused = [line for line in stack.lines("notification-front") if '"status": 4' in line]
    assert refused == []  # nothing refused, so nothing for the emulator to strand
