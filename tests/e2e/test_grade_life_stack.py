"""A grade's life through the whole stack, on both backends: a class of 30 graded into an
assignment that posts manually, 5 teacher overrides, the post, then a regrade with a
changed rubric.

All 5 overrides survive the regrade, the ones the new model grade moved away from are
back in the teacher's queue flagged, the CSV's final scores are the teacher's, the report
lists the per-student diff of final and model grades, nothing reaches a student or a
webhook before the post, and each posted grade reaches the webhook exactly once.

`class_answers` builds the class; a variant with file answers adds its items there.
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


def class_answers(callback_url: str, n: int = 30) -> list[dict[str, Any]]:
    """The class's answers: one per student, each naming the webhook receiver."""
    return [
        {
            "submission_id": f"student-{i:02}",
            "student_id": f"student-{i:02}",
            "answer": ANSWERS[i % len(ANSWERS)],
            "callback_url": callback_url,
        }
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def private_ca(tmp_path_factory: pytest.TempPathFactory) -> PrivateCa:
    return make_private_ca(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module", params=[EMBEDDED, GOOGLE_EMULATORS])
def stack(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    private_ca: PrivateCa,
) -> Iterator[LocalStack]:
    if request.param == GOOGLE_EMULATORS and (reason := missing_reason("firestore", "pubsub")):
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


def webhooks(received: list[Received], expected: int, timeout_s: float = 60) -> Counter[str]:
    """The webhooks' (job id, event id) pairs once `expected` arrived, and a moment more."""
    deadline = time.monotonic() + timeout_s
    while len(received) < expected:
        assert time.monotonic() < deadline, f"{len(received)} of {expected} webhooks arrived"
        time.sleep(0.2)
    time.sleep(1.5)  # a duplicate or stray push would have arrived by now
    return Counter(json.loads(hook.body)["id"] for hook in list(received))


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
    with tls_receiver(private_ca) as (url, received):
        answers = class_answers(url)
        batch = api.call(
            "POST", f"/v1/assignments/{assignment_id}/submissions:batch", json={"answers": answers}
        ).json()
        assert batch["accepted"] == len(answers)
        jobs = {item["submission_id"]: item["job_id"] for item in batch["items"]}
        api.wait_round(assignment_id, 0)

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
        student = api.call("GET", f"/v1/grading-jobs/{jobs[OVERRIDDEN[0]]}").json()
        assert student["result"]["score"] == TEACHER_SCORE

        before = api.sheet(assignment_id)
        api.regrade(assignment_id, {"rubric": CHANGED_RUBRIC})
        api.wait_round(assignment_id, 1)
        after = api.sheet(assignment_id)

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
        assert len(received) == len(jobs)
        # A new version where the final grade changed: its score, or the model's feedback.
        changed = {
            s
            for s in jobs
            if (after[s]["final_score"], after[s]["feedback"])
            != (before[s]["final_score"], before[s]["feedback"])
        }
        assert changed and not changed & set(OVERRIDDEN)
        for student in changed:
            seen = api.call("GET", f"/v1/grading-jobs/{jobs[student]}").json()
            assert seen["result"]["score"] == float(before[student]["final_score"])
            assert seen["result"]["feedback"] == before[student]["feedback"]

        again = api.call("POST", f"/v1/assignments/{assignment_id}/grades:post", json={}).json()
        assert set(again["posted"]) == changed
        everything = webhooks(received, len(jobs) + len(changed))
        assert set(everything.values()) == {1}  # each posted grade reached the webhook once
        assert len(everything) == len(jobs) + len(changed)
        for student in changed:
            seen = api.call("GET", f"/v1/grading-jobs/{jobs[student]}").json()
            assert seen["result"]["score"] == float(after[student]["final_score"])
