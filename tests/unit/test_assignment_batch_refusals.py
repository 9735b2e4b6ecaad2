"""What a batch is answered when its answers are refused, and what it spends of the
client's submission rate."""

from __future__ import annotations

from typing import Any

from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from tests.unit.test_assignments_api import answers, assert_problem, auth, create, submit
from tests.unit.test_intake_admission import client_with


def test_a_batch_with_no_valid_answer_is_422_listing_each_problem_not_429(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    client = client_with(settings, adapters, clock, max_active_jobs_per_client=5)
    assignment_id = create(client).get_json()["id"]
    sent: list[Any] = [{"submission_id": "s1"}, {"submission_id": "s2", "answer": ""}, 7]

    response = submit(client, assignment_id, sent)

    problem = assert_problem(response, 422, "no-valid-answer")
    assert "Retry-After" not in response.headers
    assert [(i["submission_id"], i["status"]) for i in problem["items"]] == [
        ("s1", "refused"),
        ("s2", "refused"),
        (None, "refused"),  # not an object: no submission id to echo
    ]
    assert {i["problem"]["type"].rsplit("/", 1)[1] for i in problem["items"]} == {
        "validation-error"
    }
    assert adapters.store.active_counts("client-a").client == 0


def test_a_refused_item_echoes_the_submission_id_it_was_sent(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    client = client_with(settings, adapters, clock)
    assignment_id = create(client).get_json()["id"]
    sent: list[Any] = [
        *answers(1),
        {"submission_id": "no-answer"},
        {"submission_id": "x" * 300, "answer": "too long an id"},
    ]

    items = submit(client, assignment_id, sent).get_json()["items"]

    assert [(i["submission_id"], i["status"]) for i in items] == [
        ("s0", "accepted"),
        ("no-answer", "refused"),
        (None, "refused"),  # not a submission id (over 256 characters): not echoed
    ]


def test_a_batch_spends_a_token_per_fifty_answers_and_creation_one(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    client = client_with(settings, adapters, clock, submit_burst=30, submit_rate_per_s=0.5)
    created = create(client)
    assert created.headers["RateLimit-Remaining"] == "29"  # creating spends one
    assignment_id = created.get_json()["id"]

    first = submit(client, assignment_id, answers(101))  # 3 tokens: 101 answers begin 3 fifties
    assert first.status_code == 200, first.get_json()
    assert first.headers["RateLimit-Remaining"] == "26"
    big = submit(client, assignment_id, answers(1000))  # 20 tokens
    assert big.headers["RateLimit-Remaining"] == "6"

    refused = submit(client, assignment_id, answers(1000))
    assert_problem(refused, 429, "rate-limited")
    # Its first token spent, 19 more wanted of the 5 left: 14 at 0.5 a second.
    assert refused.headers["Retry-After"] == "28"
    assert adapters.store.active_counts("client-a").client == 1000  # the refused one added none


def test_a_refused_batch_body_spends_a_token_too(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    client = client_with(settings, adapters, clock, submit_burst=3, submit_rate_per_s=0.01)
    assignment_id = create(client).get_json()["id"]
    hostile = b'{"answers":[' + b",".join([b"{}"] * 200_000) + b"]}"
    url = f"/v1/assignments/{assignment_id}/submissions:batch"
    headers = {**auth(), "Content-Type": "application/json"}

    assert_problem(client.post(url, data=hostile, headers=headers), 400, "json-too-complex")
    assert_problem(client.post(url, data=hostile, headers=headers), 400, "json-too-complex")
    assert_problem(client.post(url, data=hostile, headers=headers), 429, "rate-limited")
