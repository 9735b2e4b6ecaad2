"""A grade's life through the whole stack, on both backends: a class of 30 (10 of whose
answers are photographed pages or PDFs sent through the upload flow) graded into an
assignment that posts manually, 5 teacher overrides, the post, then a regrade with a
changed rubric.

All 5 overrides survive the regrade, the ones the new model grade moved away from are
back in the teacher's queue flagged, the CSV's final scores are the teacher's, the report
lists the per-student diff of final and model grades, nothing reaches a student or a
webhook before the post, and each posted grade reaches the webhook exactly once (its
GradingCompleted, and its GradePosted version: 1 at the post, 2 for a changed grade). The file
answers count in progress, the review queue, the CSV and the regrade like the others.

`class_answers` builds the class. The offline grader reads text only, so a file answer
carries its page's text beside the photo or PDF (as a transcription would).
"""

from __future__ import annotations

import csv
import io
import json
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from localcloud.emulators import missing_reason
from localcloud.stack import EMBEDDED, GOOGLE_EMULATORS, LocalStack, StackConfig
from tests.e2e.fast_stack import fast_env
from tests.e2e.test_cli_stack import gradeq
from tests.support import files
from tests.support.tls import PrivateCa, Received, make_private_ca, tls_receiver

pytestmark = pytest.mark.e2e

MAX_SCORE = 8
RUBRIC = ["light", "chlorophyll", "water", "carbon dioxide"]
CHANGED_RUBRIC = ["light", "chlorophyll", "glucose", "oxygen"]
#: The answers, by the criteria they meet; the class cycles through them.
ANSWERS = [
    "light chlorophyll glucose oxygen",
    "nothing relevant",
    "light water",
    "chlorophyll carbon dioxide water",
    "light chlorophyll water carbon dioxide",
]
#: The students a teacher overrides, and the teacher's score.
OVERRIDDEN = [f"student-{n:02}" for n in range(5)]
TEACHER_SCORE = 7.5
#: The students whose answers are files: every third, so two are overridden too.
FILE_STUDENTS = [f"student-{n:02}" for n in range(0, 30, 3)]


def class_answers(
    callback_url: str, n: int = 30, uploads: dict[str, list[dict[str, Any]]] | None = None
) -> list[dict[str, Any]]:
    """The class's answers: one per student, each naming the webhook receiver; a student
    in `uploads` answers with those files too."""
    answers: list[dict[str, Any]] = []
    for i in range(n):
        student = f"student-{i:02}"
        answer: dict[str, Any] = {
            "submission_id": student,
            "student_id": student,
            "answer": ANSWERS[i % len(ANSWERS)],
            "callback_url": callback_url,
        }
        if uploads and student in uploads:
            answer["files"] = uploads[student]
        answers.append(answer)
    return answers


def upload(api: Api, name: str, data: bytes, content_type: str) -> dict[str, Any]:
    """One file through the upload flow: declare it, PUT it to its signed URL."""
    declared = {"content_type": content_type, "size": len(data)}
    body = api.call("POST", "/v1/uploads", 201, json=declared).json()
    put = requests.put(body["upload_url"], data=data, headers=body["headers"], timeout=10)
    assert put.status_code == 200, put.text
    return {"upload_id": body["upload_id"], "name": name, **declared}


def class_uploads(api: Api) -> dict[str, list[dict[str, Any]]]:
    """Half the file answers a photographed page, half a PDF (each file its own bytes)."""
    return {
        student: [
            upload(api, "page-1.png", files.png(8 + n, 8), "image/png")
            if n % 2 == 0
            else upload(api, "answer.pdf", files.pdf(padding=n), "application/pdf")
        ]
        for n, student in enumerate(FILE_STUDENTS)
    }


@pytest.fixture(scope="module")
def private_ca(tmp_path_factory: pytest.TempPathFactory) -> PrivateCa:
    return make_private_ca(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module", params=[EMBEDDED, GOOGLE_EMULATORS])
def stack(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    private_ca: PrivateCa,
) -> Iterator[LocalStack]:
    if request.param == GOOGLE_EMULATORS and (
        reason := missing_reason("firestore", "pubsub", "storage")
    ):
        pytest.skip(f"the official emulators are needed for this backend: {reason}")
    root = tmp_path_factory.mktemp(f"grade-life-{request.param}")
    config = StackConfig.on_free_ports(
        root / "data",
        backend=request.param,
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


class Api:
    def __init__(self, stack: LocalStack) -> None:
        self.base = stack.config.url("intake")
        self.headers = {"Authorization": f"Bearer {stack.api_key}"}

    def call(self, method: str, path: str, status: int = 200, **kwargs: Any) -> Any:
        headers = {**self.headers, **kwargs.pop("headers", {})}
        answer = requests.request(method, self.base + path, headers=headers, timeout=30, **kwargs)
        assert answer.status_code == status, answer.text
        return answer

    def wait_round(self, assignment_id: str, round_: int, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            body = self.call("GET", f"/v1/assignments/{assignment_id}").json()
            progress = body["progress"]
            if progress["round"] == round_ and progress["done"]:
                return
            assert time.monotonic() < deadline, f"round {round_} not graded: {progress}"
            time.sleep(0.3)

    def regrade(self, assignment_id: str, body: dict[str, Any], tries: int = 5) -> None:
        """Start the regrade; a 503 (a store too busy to move every job) is finished by
        asking again, as a client does (docs/assignments.md)."""
        path = f"{self.base}/v1/assignments/{assignment_id}/regrade"
        for _ in range(tries):
            answer = requests.post(path, json=body, headers=self.headers, timeout=60)
            if answer.status_code != 503:
                assert answer.status_code == 202, answer.text
                return
            time.sleep(1)
        raise AssertionError(f"the regrade did not start: {answer.text}")

    def sheet(self, assignment_id: str) -> dict[str, dict[str, str]]:
        csv_text = self.call(
            "GET", f"/v1/assignments/{assignment_id}/grades", headers={"Accept": "text/csv"}
        ).text
        return {r["student_id"]: r for r in csv.DictReader(io.StringIO(csv_text))}


COMPLETED = "dev.gradeq.grading.completed.v1"
POSTED = "dev.gradeq.grade.posted.v1"


def webhooks(
    received: list[Received], expected: int, kind: str = COMPLETED, timeout_s: float = 60
) -> Counter[str]:
    """The event ids of the webhooks of type `kind`, with how often each arrived, once
    `expected` of them arrived, and a moment more."""

    def of_kind() -> list[dict[str, Any]]:
        documents = [json.loads(hook.body) for hook in list(received)]
        return [d for d in documents if d["type"] == kind]

    deadline = time.monotonic() + timeout_s
    while len(of_kind()) < expected:
        assert time.monotonic() < deadline, f"{len(of_kind())} of {expected} {kind} arrived"
        time.sleep(0.2)
    time.sleep(1.5)  # a duplicate or stray push would have arrived by now
    return Counter(d["id"] for d in of_kind())


def posted_versions(received: list[Received]) -> dict[str, list[int]]:
    """Each job's posted-grade versions in the order their webhooks arrived."""
    versions: dict[str, list[int]] = {}
    for hook in list(received):
        document = json.loads(hook.body)
        if document["type"] == POSTED:
            versions.setdefault(document["data"]["job_id"], []).append(document["data"]["version"])
    return versions


def test_a_class_keeps_its_teachers_grades_through_a_regrade_and_posting(
    stack: LocalStack, private_ca: PrivateCa
) -> None:
    api = Api(stack)
    body = {
        "title": "Photosynthesis",
        "rubric": RUBRIC,
        "max_score": MAX_SCORE,
        "posting": "manual",
        # Every grade can be reviewed; the student waits for the post anyway.
        "review": {"sample_rate": 1},
    }
    created = api.call(
        "POST", "/v1/assignments", 201, json=body, headers={"Idempotency-Key": "grade-life"}
    )
    assignment_id = created.json()["id"]
    uploads = class_uploads(api)
    with tls_receiver(private_ca) as (url, received):
        answers = class_answers(url, uploads=uploads)
        assert sum("files" in a for a in answers) == len(FILE_STUDENTS) == 10
        batch = api.call(
            "POST", f"/v1/assignments/{assignment_id}/submissions:batch", json={"answers": answers}
        ).json()
        assert batch["accepted"] == len(answers)
        jobs = {item["submission_id"]: item["job_id"] for item in batch["items"]}
        api.wait_round(assignment_id, 0)
        progress = api.call("GET", f"/v1/assignments/{assignment_id}").json()["progress"]
        assert progress["submissions"] == progress["final"] == len(answers), progress
        assert progress["counts"]["SUCCEEDED"] == len(answers), progress
        # Each file answer's job names its upload, and waits in the review queue like the rest.
        for student in FILE_STUDENTS:
            job = api.call("GET", f"/v1/grading-jobs/{jobs[student]}").json()
            assert [f["upload_id"] for f in job["files"]] == [
                f["upload_id"] for f in uploads[student]
            ], job
        held = api.call(
            "GET", "/v1/reviews", params={"assignment_id": assignment_id, "limit": 100}
        ).json()["reviews"]
        assert {jobs[s] for s in FILE_STUDENTS} <= {r["job_id"] for r in held}

        # Graded, not posted: no student sees a grade, no webhook went out.
        time.sleep(1.5)
        assert received == []
        for job_id in jobs.values():
            assert "result" not in api.call("GET", f"/v1/grading-jobs/{job_id}").json()

        for student in OVERRIDDEN:
            decision = {
                "decision": "override",
                "score": TEACHER_SCORE,
                "reason": "read the whole answer",
                "feedback": "Well reasoned.",
            }
            api.call("POST", f"/v1/reviews/{jobs[student]}", json=decision)
        assert received == []  # an override before the post reaches no one either

        posted = api.call("POST", f"/v1/assignments/{assignment_id}/grades:post", json={})
        assert sorted(posted.json()["posted"]) == sorted(jobs)
        first = webhooks(received, len(jobs))
        assert len(first) == len(jobs) and set(first.values()) == {1}
        # Each posted grade is also its GradePosted, version 1, once.
        first_posted = webhooks(received, len(jobs), POSTED)
        assert len(first_posted) == len(jobs) and set(first_posted.values()) == {1}
        assert posted_versions(received) == {job_id: [1] for job_id in jobs.values()}
        student = api.call("GET", f"/v1/grading-jobs/{jobs[OVERRIDDEN[0]]}").json()
        assert student["result"]["score"] == TEACHER_SCORE

        before = api.sheet(assignment_id)
        assert set(before) == set(jobs)  # the file answers have their rows like the others
        assert all(before[s]["final_score"] != "" for s in FILE_STUDENTS)
        api.regrade(assignment_id, {"rubric": CHANGED_RUBRIC})
        api.wait_round(assignment_id, 1)
        after = api.sheet(assignment_id)

        # The file answers were regraded too, against the new rubric.
        assert all(after[s]["rubric_version"] == "2" for s in FILE_STUDENTS)
        assert FILE_STUDENTS[0] in OVERRIDDEN and FILE_STUDENTS[1] in OVERRIDDEN
        # Every override survives: the CSV's final score is the teacher's.
        for student in OVERRIDDEN:
            row = after[student]
            assert (row["final_score"], row["final_source"]) == (str(TEACHER_SCORE), "teacher")
            assert row["teacher_score"] == str(TEACHER_SCORE)
            assert row["feedback"] == "Well reasoned." and row["rubric_version"] == "2"
        # The ones the new model grade moved away from are back in the queue, flagged.
        moved = {
            s
            for s in OVERRIDDEN
            if abs(float(after[s]["model_score"]) - TEACHER_SCORE) > MAX_SCORE / 10
        }
        assert moved and moved != set(OVERRIDDEN)  # the class has both cases
        queue = api.call(
            "GET", "/v1/reviews", params={"assignment_id": assignment_id, "limit": 100}
        ).json()["reviews"]
        flagged = {r["job_id"] for r in queue if "regrade-moved" in r["reasons"]}
        assert flagged == {jobs[s] for s in moved}

        # The report: per student, final and model grades before and after.
        report = api.call("GET", f"/v1/assignments/{assignment_id}/regrade").json()
        changes = {c["student_id"]: c for c in report["changes"]}
        assert len(changes) == len(jobs) and report["flagged"] == len(moved)
        for student, change in changes.items():
            assert change["old"] == float(before[student]["final_score"])
            assert change["new"] == float(after[student]["final_score"])
            assert change["new_model"] == float(after[student]["model_score"])
            assert change["old_model"] == float(before[student]["model_score"])

        # The CLI's report shows the same per-student rows without --json.
        table = gradeq(stack, "assignments", "regrade", assignment_id, "--report")
        assert table.returncode == 0, table.stderr
        rows = {
            cells[0]: cells
            for line in table.stdout.splitlines()
            if (cells := [c.strip() for c in line.strip("│ ").split("│")])[0].startswith("student-")
        }
        assert len(rows) == len(jobs)
        assert all(rows[s][5] == "teacher" and rows[s][3] == str(TEACHER_SCORE) for s in OVERRIDDEN)

        # The regrade is not posted yet: students see the posted grades, no webhook.
        time.sleep(1.5)
        assert len(received) == 2 * len(jobs)
        # A new version where the final grade changed: its score, or the model's feedback.
        changed = {
            s
            for s in jobs
            if (after[s]["final_score"], after[s]["feedback"])
            != (before[s]["final_score"], before[s]["feedback"])
        }
        assert changed and not changed & set(OVERRIDDEN)
        assert changed & set(FILE_STUDENTS)  # file answers get their new versions too
        for student in changed:
            seen = api.call("GET", f"/v1/grading-jobs/{jobs[student]}").json()
            assert seen["result"]["score"] == float(before[student]["final_score"])
            assert seen["result"]["feedback"] == before[student]["feedback"]

        again = api.call("POST", f"/v1/assignments/{assignment_id}/grades:post", json={}).json()
        assert set(again["posted"]) == changed
        everything = webhooks(received, len(jobs) + len(changed))
        assert set(everything.values()) == {1}  # each posted grade reached the webhook once
        assert len(everything) == len(jobs) + len(changed)
        # The changed grades' second versions, once each; the others stay at version 1.
        all_posted = webhooks(received, len(jobs) + len(changed), POSTED)
        assert set(all_posted.values()) == {1} and len(all_posted) == len(jobs) + len(changed)
        assert posted_versions(received) == {
            job_id: [1, 2] if student in changed else [1] for student, job_id in jobs.items()
        }
        for student in changed:
            seen = api.call("GET", f"/v1/grading-jobs/{jobs[student]}").json()
            assert seen["result"]["score"] == float(after[student]["final_score"])

        # A teacher changes a posted grade (a file answer's): its next version reaches the
        # webhook at once, exactly once, and nothing else is sent.
        late = next(s for s in FILE_STUDENTS if s not in OVERRIDDEN)
        versions = posted_versions(received)[jobs[late]]
        decision = {"decision": "override", "score": 1.5, "reason": "copied", "feedback": "See me."}
        api.call("POST", f"/v1/reviews/{jobs[late]}", json=decision)
        final_posted = webhooks(received, len(jobs) + len(changed) + 1, POSTED)
        assert set(final_posted.values()) == {1}
        assert posted_versions(received)[jobs[late]] == [*versions, versions[-1] + 1]
        [hook] = [
            d
            for d in (json.loads(h.body) for h in list(received))
            if d["type"] == POSTED
            and d["data"]["job_id"] == jobs[late]
            and d["data"]["version"] == versions[-1] + 1
        ]
        assert (hook["data"]["score"], hook["data"]["source"]) == (1.5, "teacher")
        assert len(received) == 2 * (len(jobs) + len(changed)) + 1
