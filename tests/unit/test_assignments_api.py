"""The assignments HTTP contract: versioned rubrics, batches item by item, progress, grades."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from typing import Any

import pytest
from flask.testing import FlaskClient

from services.intake.app import create_app
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.errors import PROBLEM_BASE
from shared.domain.grade import GradeResult
from tests.fakes import FakePublisher, FakeTaskQueue
from tests.unit.conftest import API_KEY, OTHER_KEY

ASSIGNMENT: dict[str, Any] = {
    "title": "Photosynthesis",
    "rubric": ["mentions light", "mentions chlorophyll"],
    "max_score": 10,
    "prompt_version": "grading-v1",
}


@pytest.fixture
def client(settings: Settings, adapters: Adapters, clock: FrozenClock) -> FlaskClient:
    return create_app(settings, adapters, clock).test_client()


def auth(api_key: str = API_KEY, **extra: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}", **extra}


def create(client: FlaskClient, key: str = "a-key", body: Any = ASSIGNMENT, **kw: Any) -> Any:
    headers = auth(kw.pop("api_key", API_KEY), **{"Idempotency-Key": key})
    return client.post("/v1/assignments", json=body, headers=headers)


def submit(client: FlaskClient, assignment_id: str, answers: list[Any], **kw: Any) -> Any:
    return client.post(
        f"/v1/assignments/{assignment_id}/submissions:batch",
        json={"answers": answers},
        headers=auth(kw.pop("api_key", API_KEY)),
    )


def answers(n: int, text: str = "light and chlorophyll") -> list[dict[str, Any]]:
    return [{"submission_id": f"s{i}", "answer": f"{text} {i}"} for i in range(n)]


def assert_problem(response: Any, status: int, slug: str) -> dict[str, Any]:
    assert response.status_code == status, response.get_json()
    body: dict[str, Any] = response.get_json()
    assert body["type"] == PROBLEM_BASE + slug
    return body


def test_create_answers_201_once_then_replays_the_same_assignment(client: FlaskClient) -> None:
    first = create(client)
    assert first.status_code == 201, first.get_json()
    body = first.get_json()
    assert first.headers["Location"] == f"/v1/assignments/{body['id']}"
    assert body["rubric"]["version"] == 1
    assert body["rubric"]["rubric"] == ASSIGNMENT["rubric"]
    again = create(client)
    assert again.status_code == 200 and again.headers["Idempotent-Replayed"] == "true"
    assert again.get_json()["id"] == body["id"]
    assert_problem(
        create(client, body={**ASSIGNMENT, "title": "other"}), 422, "idempotency-key-reused"
    )


def test_create_refuses_a_rubric_without_criteria(client: FlaskClient) -> None:
    body = assert_problem(
        create(client, body={**ASSIGNMENT, "rubric": ";;"}), 400, "validation-error"
    )
    assert body["errors"][0]["field"] == "rubric"


def test_a_patch_makes_a_new_rubric_version_and_keeps_the_old(client: FlaskClient) -> None:
    assignment_id = create(client).get_json()["id"]
    patched = client.patch(
        f"/v1/assignments/{assignment_id}", json={"rubric": "only light"}, headers=auth()
    )
    assert patched.status_code == 200, patched.get_json()
    body = patched.get_json()
    assert body["rubric"] == {**body["rubric"], "version": 2, "rubric": "only light"}
    assert [v["version"] for v in body["rubric_versions"]] == [1, 2]
    assert body["rubric_versions"][0]["rubric"] == ASSIGNMENT["rubric"]


def test_another_clients_assignment_is_not_found(client: FlaskClient) -> None:
    assignment_id = create(client).get_json()["id"]
    other = auth(OTHER_KEY)
    assert_problem(
        client.get(f"/v1/assignments/{assignment_id}", headers=other), 404, "assignment-not-found"
    )
    assert_problem(
        client.patch(f"/v1/assignments/{assignment_id}", json={"rubric": "x"}, headers=other),
        404,
        "assignment-not-found",
    )
    assert_problem(
        submit(client, assignment_id, answers(1), api_key=OTHER_KEY), 404, "assignment-not-found"
    )
    listed = client.get("/v1/assignments", headers=other).get_json()
    assert listed == {"assignments": [], "next_cursor": None}


def test_the_list_pages_newest_first(client: FlaskClient, clock: FrozenClock) -> None:
    ids = []
    for n in range(3):
        clock.advance(timedelta(seconds=1))
        ids.append(create(client, key=f"k{n}").get_json()["id"])
    first = client.get("/v1/assignments?limit=2", headers=auth()).get_json()
    assert [a["id"] for a in first["assignments"]] == ids[::-1][:2]
    rest = client.get(f"/v1/assignments?limit=2&cursor={first['next_cursor']}", headers=auth())
    assert [a["id"] for a in rest.get_json()["assignments"]] == ids[:1]
    assert rest.get_json()["next_cursor"] is None


def test_a_batch_answers_item_by_item_and_a_retry_creates_nothing_twice(
    client: FlaskClient, adapters: Adapters
) -> None:
    assignment_id = create(client).get_json()["id"]
    first = submit(client, assignment_id, answers(3))
    assert first.status_code == 200, first.get_json()
    assert first.get_json()["accepted"] == 3
    queue = adapters.queue
    assert isinstance(queue, FakeTaskQueue) and len(queue.tasks) == 3
    # The retry of a batch cut off after three, with one answer changed and one invalid.
    sent = answers(5)
    sent[1] = {"submission_id": "s1", "answer": "something else"}
    sent.append({"submission_id": "s9"})
    sent.append({"submission_id": "s3", "answer": "a repeat within the batch"})
    retry = submit(client, assignment_id, sent).get_json()
    assert [(i["submission_id"], i["status"]) for i in retry["items"]] == [
        ("s0", "existing"),
        ("s1", "refused"),
        ("s2", "existing"),
        ("s3", "accepted"),
        ("s4", "accepted"),
        ("s9", "refused"),  # invalid (no answer): echoes the submission id it was sent
        ("s3", "refused"),
    ]
    assert retry["items"][1]["problem"]["type"] == PROBLEM_BASE + "idempotency-key-reused"
    assert retry["items"][5]["problem"]["errors"] == [
        {"field": "answer", "message": "Value error, give an answer, files, or both"}
    ]
    assert (retry["accepted"], retry["existing"], retry["refused"]) == (2, 2, 3)
    assert len(queue.tasks) == 5
    assert retry["items"][0]["job_id"] == first.get_json()["items"][0]["job_id"]


def test_a_job_records_the_rubric_version_it_was_given(
    client: FlaskClient, adapters: Adapters
) -> None:
    assignment_id = create(client).get_json()["id"]
    client.patch(f"/v1/assignments/{assignment_id}", json={"rubric": "only light"}, headers=auth())
    item = submit(client, assignment_id, answers(1)).get_json()["items"][0]
    job = adapters.store.get(item["job_id"])
    assert job is not None
    assert job.request.rubric == "only light"
    assert (job.request.rubric_version, job.request.prompt_version) == (2, "grading-v1")
    assert job.request.assignment_id == assignment_id


def test_a_batch_of_more_than_a_thousand_is_refused_whole(client: FlaskClient) -> None:
    assignment_id = create(client).get_json()["id"]
    assert_problem(submit(client, assignment_id, answers(1001, "x")), 400, "validation-error")


def finish_all(adapters: Adapters, scores: list[float], clock: FrozenClock) -> None:
    store = adapters.store
    queue = adapters.queue
    assert isinstance(queue, FakeTaskQueue)
    for task, score in zip(queue.tasks, scores, strict=False):
        store.update(task.job_id, lambda j: j.claim("w", clock.now(), timedelta(seconds=30)))
        result = GradeResult(
            score, 10.0, f"feedback {score}", ({"criterion": "light", "met": True},)
        )
        store.update(task.job_id, lambda j, r=result: j.succeed("w", r, clock.now()))  # type: ignore[misc]


def test_progress_counts_by_status_with_the_mean_so_far(
    client: FlaskClient, adapters: Adapters, clock: FrozenClock
) -> None:
    assignment_id = create(client).get_json()["id"]
    submit(client, assignment_id, answers(4))
    finish_all(adapters, [6.0, 8.0], clock)
    response = client.get(f"/v1/assignments/{assignment_id}", headers=auth())
    progress = response.get_json()["progress"]
    assert progress["submissions"] == 4 and progress["final"] == 2
    assert progress["counts"]["SUCCEEDED"] == 2 and progress["counts"]["PENDING"] == 2
    assert progress["mean_score"] == 7.0 and progress["done"] is False
    assert progress["histogram"] == [0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0]
    assert "Retry-After" in response.headers


def test_grades_come_out_as_json_pages_and_as_streamed_csv(
    client: FlaskClient, adapters: Adapters, clock: FrozenClock
) -> None:
    assignment_id = create(client).get_json()["id"]
    submit(client, assignment_id, answers(3))
    finish_all(adapters, [6.0, 8.0, 9.0], clock)
    page = client.get(f"/v1/assignments/{assignment_id}/grades?limit=2", headers=auth()).get_json()
    assert len(page["jobs"]) == 2 and page["next_cursor"]
    assert [g["job_id"] for g in page["grades"]] == [j["id"] for j in page["jobs"]]
    stats = page["statistics"]
    assert (stats["graded"], stats["mean"], stats["min"], stats["max"]) == (3, 23 / 3, 6.0, 9.0)
    response = client.get(
        f"/v1/assignments/{assignment_id}/grades", headers=auth(Accept="text/csv")
    )
    assert response.status_code == 200 and response.mimetype == "text/csv"
    assert response.is_streamed
    rows = list(csv.DictReader(io.StringIO(response.get_data(as_text=True))))
    assert sorted(r["submission_id"] for r in rows) == ["s0", "s1", "s2"]
    assert sorted(float(r["final_score"]) for r in rows) == [6.0, 8.0, 9.0]
    assert {r["final_source"] for r in rows} == {"model"}
    assert {r["rubric_version"] for r in rows} == {"1"}
    assert {r["mentions light"] for r in rows} == {"True"}
    assert all(r["feedback"].startswith("feedback") for r in rows)


def test_answers_conform_to_the_openapi_document(client: FlaskClient) -> None:
    import jsonschema

    from services.intake.openapi import openapi_document

    document = openapi_document()

    def check(response: Any, path: str, method: str, status: int) -> None:
        operation = document["paths"][path][method]
        schema = operation["responses"][str(status)]["content"]["application/json"]["schema"]
        jsonschema.validate(response.get_json(), {**schema, "components": document["components"]})

    created = create(client)
    check(created, "/v1/assignments", "post", 201)
    assignment_id = created.get_json()["id"]
    batch = submit(client, assignment_id, [*answers(2), {"submission_id": "x"}])
    check(batch, "/v1/assignments/{assignment_id}/submissions:batch", "post", 200)
    shown = client.get(f"/v1/assignments/{assignment_id}", headers=auth())
    check(shown, "/v1/assignments/{assignment_id}", "get", 200)
    listed = client.get("/v1/assignments", headers=auth())
    check(listed, "/v1/assignments", "get", 200)
    grades = client.get(f"/v1/assignments/{assignment_id}/grades", headers=auth())
    check(grades, "/v1/assignments/{assignment_id}/grades", "get", 200)


def post_job(client: FlaskClient, body: dict[str, Any], key: str = "k-1") -> Any:
    return client.post("/v1/grading-jobs", json=body, headers=auth(**{"Idempotency-Key": key}))


def test_a_single_job_for_an_assignment_takes_its_rubric_and_its_submission_key(
    client: FlaskClient, adapters: Adapters
) -> None:
    assignment_id = create(client).get_json()["id"]
    body = {"submission_id": "s0", "assignment_id": assignment_id, "answer": "light 0"}
    accepted = post_job(client, body)
    assert accepted.status_code == 202, accepted.get_json()
    job = adapters.store.get(accepted.get_json()["id"])
    assert job is not None and job.request.rubric == tuple(ASSIGNMENT["rubric"])
    assert job.request.rubric_version == 1
    # The same submission in a batch (or under another key) is the same job.
    batch = submit(client, assignment_id, [{"submission_id": "s0", "answer": "light 0"}])
    assert batch.get_json()["items"][0] == {
        **batch.get_json()["items"][0],
        "status": "existing",
        "job_id": job.id,
    }
    replay = post_job(client, body, key="another-key")
    assert replay.status_code == 202 and replay.headers["Idempotent-Replayed"] == "true"
    changed = post_job(client, {**body, "answer": "something else"})
    assert_problem(changed, 422, "idempotency-key-reused")
    with_rubric = post_job(client, {**body, "rubric": "mine"})
    assert_problem(with_rubric, 400, "validation-error")


def test_an_unknown_assignment_id_is_still_a_label_on_a_job_with_its_own_rubric(
    client: FlaskClient, adapters: Adapters
) -> None:
    body = {"submission_id": "s", "assignment_id": "hw-1", "answer": "x", "rubric": "mine"}
    accepted = post_job(client, body)
    assert accepted.status_code == 202
    job = adapters.store.get(accepted.get_json()["id"])
    assert job is not None and job.request.rubric == "mine" and not job.request.tallied


def test_a_batch_may_be_larger_than_a_single_jobs_body_limit(client: FlaskClient) -> None:
    assignment_id = create(client).get_json()["id"]
    big = [{"submission_id": f"s{i}", "answer": "x" * 1024} for i in range(400)]  # ~420 KB
    response = submit(client, assignment_id, big)
    assert response.status_code == 200, response.get_json()
    assert response.get_json()["accepted"] == 400


def test_cancelling_the_last_open_submission_announces_the_round(
    client: FlaskClient, adapters: Adapters, clock: FrozenClock
) -> None:
    from shared.domain.events import AssignmentGraded

    assignment_id = create(client).get_json()["id"]
    items = submit(client, assignment_id, answers(2)).get_json()["items"]
    finish_all(adapters, [6.0], clock)  # the first graded, the second still pending
    publisher = adapters.publisher
    assert isinstance(publisher, FakePublisher)
    cancelled = client.post(f"/v1/grading-jobs/{items[1]['job_id']}/cancel", headers=auth())
    assert cancelled.status_code == 200, cancelled.get_json()
    [event] = [e for e in publisher.events if isinstance(e, AssignmentGraded)]
    assert (event.submissions, event.succeeded, event.cancelled) == (2, 1, 1)
    assert event.mean_score == 6.0
