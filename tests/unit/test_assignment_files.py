"""Files in assignments: a batch's answers and a student's single submission name uploads,
checked as a job's files are; a model grader reads them; progress, the grade sheet and a
regrade (which reads the same files again) count them as text answers; a student attaches
only their own uploads."""

from __future__ import annotations

import csv
import io
import json
from typing import Any
from urllib.parse import urlsplit

import httpx2
import openai
import pytest
from flask.testing import FlaskClient

from services.worker.app import create_app as create_worker
from shared.adapters.graders.limiter import QuotaShare, RollingLimiter
from shared.adapters.graders.llm import ModelGrader
from shared.adapters.graders.openai_compat import OpenAICompatChat
from shared.adapters.graders.prompt import GradingPrompt
from shared.bootstrap import Adapters
from shared.bootstrap.graders import file_reader
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.errors import PROBLEM_BASE
from shared.domain.status import JobStatus
from shared.domain.uploads import object_name
from tests.fakes import FakeTaskQueue
from tests.support import files
from tests.unit.test_assignment_flow import deliver_all
from tests.unit.test_openai_grader import GOOD, Recorder
from tests.unit.test_school_policy import OTHER_STUDENT, SERVER, STUDENT, intake_of

RUBRIC = ["names the mitochondria", "names ATP", "explains glycolysis"]
PNG = files.png()


@pytest.fixture
def intake(settings: Settings, adapters: Adapters, clock: FrozenClock) -> FlaskClient:
    return intake_of(settings, adapters, clock)


def _assignment(intake: FlaskClient) -> str:
    body = {"title": "Respiration", "rubric": RUBRIC, "max_score": 10}
    created = intake.post("/v1/assignments", json=body, headers={**SERVER, "Idempotency-Key": "a"})
    assert created.status_code == 201, created.get_json()
    return str(created.get_json()["id"])


def _uploaded(
    intake: FlaskClient,
    data: bytes = PNG,
    who: dict[str, str] = SERVER,
    student_id: str | None = None,
    content_type: str = "image/png",
) -> dict[str, Any]:
    """An upload made and PUT by `who`: what a submission names."""
    body: dict[str, Any] = {"content_type": content_type, "size": len(data)}
    if student_id is not None:
        body["student_id"] = student_id
    grant = intake.post("/v1/uploads", json=body, headers=who)
    assert grant.status_code == 201, grant.get_json()
    url = urlsplit(grant.get_json()["upload_url"])
    put = intake.put(
        url.path, query_string=url.query, data=data, headers=grant.get_json()["headers"]
    )
    assert put.status_code == 200, put.get_data(as_text=True)
    upload_id = grant.get_json()["upload_id"]
    return {"upload_id": upload_id, "content_type": content_type, "size": len(data)}


def _batch(intake: FlaskClient, assignment_id: str, answers: list[dict[str, Any]]) -> Any:
    return intake.post(
        f"/v1/assignments/{assignment_id}/submissions:batch",
        json={"answers": answers},
        headers=SERVER,
    )


def _model_grader(settings: Settings) -> tuple[ModelGrader, Recorder]:
    """An OpenAI-compatible grader (transport recorded, no network) reading the jobs' files
    from the backend's blob store, as the worker's grader does."""

    def reply(_request: httpx2.Request) -> httpx2.Response:
        message = {"role": "assistant", "content": json.dumps(GOOD)}
        body = {
            "id": "c1",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
            "usage": {"prompt_tokens": 900, "completion_tokens": 50, "total_tokens": 950},
        }
        return httpx2.Response(200, json=body)

    recorder = Recorder(reply)
    client = openai.OpenAI(
        base_url="http://127.0.0.1:9/v1",
        api_key="k",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(recorder)),
    )
    prompt = GradingPrompt.load().with_files(file_reader(settings, by_reference=False))
    chat = OpenAICompatChat(client, "m", max_output_tokens=512)
    return ModelGrader(chat, RollingLimiter(QuotaShare(100, 0)), prompt, 512), recorder


def _images_sent(recorder: Recorder) -> list[str]:
    """The image parts of every request the grader sent, as data URLs."""
    sent = []
    for body in recorder.bodies():
        for message in body["messages"]:
            content = message["content"]
            for part in content if isinstance(content, list) else ():
                if part.get("type") == "image_url":
                    sent.append(part["image_url"]["url"])
    return sent


def test_a_batch_answer_of_a_photo_is_graded_counted_and_regraded_from_the_same_file(
    intake: FlaskClient, settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    assignment_id = _assignment(intake)
    photo = {**_uploaded(intake, student_id="ada"), "name": "page-1.jpg"}
    sent = _batch(
        intake,
        assignment_id,
        [
            {"submission_id": "ada", "student_id": "ada", "files": [photo]},
            {"submission_id": "bo", "answer": "mitochondria make ATP"},
        ],
    )
    assert sent.status_code == 200, sent.get_json()
    items = sent.get_json()["items"]
    assert [i["status"] for i in items] == ["accepted", "accepted"]
    job_id = items[0]["job_id"]
    shown = intake.get(f"/v1/grading-jobs/{job_id}", headers=SERVER).get_json()
    assert shown["files"] == [photo]
    stored = adapters.store.get(job_id)
    assert stored is not None
    [ref] = stored.request.files
    assert ref.object == object_name("client-a", photo["upload_id"], "ada")

    grader, recorder = _model_grader(settings)
    worker = create_worker(settings, adapters, grader, clock).test_client()
    queue = adapters.queue
    assert isinstance(queue, FakeTaskQueue)
    deliver_all(worker, queue)
    [image] = _images_sent(recorder)  # the photo went to the model, once
    assert image.startswith("data:image/png;base64,")
    graded = adapters.store.get(job_id)
    assert graded is not None and graded.status is JobStatus.SUCCEEDED
    assert graded.result is not None and graded.result.score == GOOD["score"]

    url = f"/v1/assignments/{assignment_id}"
    progress = intake.get(url, headers=SERVER).get_json()["progress"]
    assert progress["done"] is True and progress["counts"]["SUCCEEDED"] == 2
    sheet = intake.get(f"{url}/grades", headers={**SERVER, "Accept": "text/csv"})
    rows = {r["submission_id"]: r for r in csv.DictReader(io.StringIO(sheet.get_data(True)))}
    assert rows["ada"]["job_id"] == job_id
    assert float(rows["ada"]["final_score"]) == float(rows["ada"]["model_score"]) == GOOD["score"]

    tasks_before = len(queue.tasks)
    assert intake.post(f"{url}/regrade", json={}, headers=SERVER).status_code == 202
    deliver_all(worker, queue, tasks_before)
    assert _images_sent(recorder) == [image, image]  # the same file, read again
    regraded = adapters.store.get(job_id)
    assert regraded is not None and regraded.generation == 1
    assert regraded.request.files == stored.request.files
    assert regraded.status is JobStatus.SUCCEEDED


def test_each_batch_answer_is_refused_for_its_own_file_and_the_others_are_accepted(
    intake: FlaskClient, adapters: Adapters
) -> None:
    assignment_id = _assignment(intake)
    notes = _uploaded(intake, b"mitochondria make ATP\n", content_type="text/plain")
    wrong_size = {**_uploaded(intake), "size": len(PNG) + 1}
    missing = {"upload_id": "up_nothing", "content_type": "image/png", "size": 10}
    sent = _batch(
        intake,
        assignment_id,
        [
            {"submission_id": "a", "files": [notes]},
            {"submission_id": "b", "files": [wrong_size]},
            {"submission_id": "c", "files": [missing]},
            {"submission_id": "d"},  # neither answer nor files
        ],
    )
    assert sent.status_code == 200, sent.get_json()
    items = sent.get_json()["items"]
    assert [i["status"] for i in items] == ["accepted", "refused", "refused", "refused"]
    assert [i["problem"]["type"] for i in items[1:]] == [
        PROBLEM_BASE + "upload-mismatch",
        PROBLEM_BASE + "upload-not-found",
        PROBLEM_BASE + "validation-error",
    ]
    assert [i["submission_id"] for i in items] == ["a", "b", "c", "d"]


def test_a_batch_sent_again_with_its_files_creates_nothing_and_other_files_conflict(
    intake: FlaskClient,
) -> None:
    assignment_id = _assignment(intake)
    first, second = _uploaded(intake), _uploaded(intake)
    answer = {"submission_id": "ada", "files": [first]}
    assert _batch(intake, assignment_id, [answer]).get_json()["items"][0]["status"] == "accepted"
    again = _batch(intake, assignment_id, [answer]).get_json()["items"][0]
    assert again["status"] == "existing"
    other = _batch(intake, assignment_id, [{**answer, "files": [second]}]).get_json()["items"][0]
    assert other["status"] == "refused"
    assert other["problem"]["type"] == PROBLEM_BASE + "idempotency-key-reused"


def _student_submits(
    intake: FlaskClient, assignment_id: str, refs: list[dict[str, Any]], who: dict[str, str]
) -> Any:
    body = {"submission_id": "mine", "assignment_id": assignment_id, "files": refs}
    return intake.post("/v1/grading-jobs", json=body, headers={**who, "Idempotency-Key": "k"})


def test_a_student_submits_their_own_photo_into_the_assignment(
    intake: FlaskClient, adapters: Adapters
) -> None:
    assignment_id = _assignment(intake)
    mine = _uploaded(intake, who=STUDENT)
    sent = _student_submits(intake, assignment_id, [mine], STUDENT)
    assert sent.status_code == 202, sent.get_json()
    job = adapters.store.get(sent.get_json()["id"])
    assert job is not None and job.author == "ada" and job.request.student_id == "ada"
    assert [f.object for f in job.request.files] == [
        object_name("client-a", mine["upload_id"], "ada")
    ]
    assert job.request.rubric == tuple(RUBRIC)


@pytest.mark.parametrize("whose", ["the school's", "another student's"])
def test_a_student_may_attach_no_upload_but_their_own(
    intake: FlaskClient, settings: Settings, whose: str
) -> None:
    assignment_id = _assignment(intake)
    theirs = (
        _uploaded(intake, who=SERVER)
        if whose == "the school's"
        else _uploaded(intake, who=OTHER_STUDENT)
    )
    refused = _student_submits(intake, assignment_id, [theirs], STUDENT)
    assert refused.status_code == 422, refused.get_json()
    assert refused.get_json()["type"] == PROBLEM_BASE + "upload-not-found"
    # Not the student's to attach: the file is not deleted, its owner still submits it.
    owner = SERVER if whose == "the school's" else OTHER_STUDENT
    kept = _student_submits(intake, assignment_id, [theirs], owner)
    assert kept.status_code == 202, kept.get_json()


def test_the_school_attaches_a_students_upload_to_their_batch_answer(
    intake: FlaskClient,
) -> None:
    assignment_id = _assignment(intake)
    theirs = _uploaded(intake, who=STUDENT)  # ada's own upload
    answer = {"submission_id": "ada", "student_id": "ada", "files": [theirs]}
    sent = _batch(intake, assignment_id, [answer])
    assert sent.get_json()["items"][0]["status"] == "accepted", sent.get_json()
