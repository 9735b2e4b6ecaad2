"""The soak's classes: assignments whose answers arrive in batches, under the same faults.

Each class creates an assignment, sends its first half as a batch cut off half way, then
the whole batch again (the retry a frontend makes after a timeout), then follows the
assignment's progress until it is graded. Checked at the end, from the database as an
observer: every answer is one job (0 lost, 0 doubled), every job of a class is final and
counted by the tally, and each class has exactly one AssignmentGraded for its whole size,
recorded and published.
"""

from __future__ import annotations

import json
import random
import sqlite3
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import requests

#: Kinds a class's answers take (no cancels: a class is not cancelled answer by answer).
CLASS_KINDS = {"quick": 40, "slow": 15, "transient": 25, "permanent": 10, "hanging": 5, "doomed": 5}


@dataclass
class ClassRun:
    """One class: its assignment, its answers' kinds, and what the batches answered."""

    index: int
    size: int
    at: float
    assignment_id: str | None = None
    kinds: dict[str, str] = field(default_factory=dict)
    job_ids: set[str] = field(default_factory=set)
    retried_created: int = 0


@dataclass
class Classes:
    """The soak's classes; `call` is the soak's patient client, `violation` its report."""

    rng: random.Random
    count: int
    size: int
    duration_s: float
    call: Callable[..., requests.Response]
    auth: Callable[[], dict[str, str]]
    violation: Callable[[str], None]
    simulation: Callable[[str, random.Random], dict[str, Any]]
    runs: list[ClassRun] = field(default_factory=list)

    def plan(self) -> list[ClassRun]:
        self.runs = [
            ClassRun(i, self.size, self.rng.uniform(0, self.duration_s * 0.6))
            for i in range(self.count)
        ]
        kinds, weights = zip(*CLASS_KINDS.items(), strict=True)
        for run in self.runs:
            for n in range(run.size):
                run.kinds[f"class-{run.index}-{n}"] = self.rng.choices(kinds, weights)[0]
        return self.runs

    def _answers(self, run: ClassRun) -> list[dict[str, Any]]:
        return [
            {
                "submission_id": submission_id,
                "answer": "The mitochondria produce ATP through cellular respiration.",
                "metadata": {"simulate": self.simulation(kind, self.rng)},
            }
            for submission_id, kind in run.kinds.items()
        ]

    def submit(self, run: ClassRun, started: float) -> None:
        time.sleep(max(0.0, started + run.at - time.monotonic()))
        body = {"title": f"soak class {run.index}", "rubric": ["mentions ATP"], "max_score": 9}
        headers = {**self.auth(), "Idempotency-Key": f"soak-class-{run.index}"}
        created = self.call("POST", "/v1/assignments", json=body, headers=headers)
        if created.status_code not in (200, 201):
            self.violation(f"class {run.index}: create answered {created.status_code}")
            return
        run.assignment_id = created.json()["id"]
        path = f"/v1/assignments/{run.assignment_id}/submissions:batch"
        answers = self._answers(run)
        # Cut off half way, then sent whole again: the retry completes it.
        for sent in (answers[: len(answers) // 2], answers):
            response = self.call("POST", path, json={"answers": sent}, headers=self.auth())
            if response.status_code != 200:
                self.violation(f"class {run.index}: batch answered {response.status_code}")
                return
            items = response.json()["items"]
            refused = [i for i in items if i["status"] == "refused"]
            if refused:
                self.violation(f"class {run.index}: {len(refused)} answers refused")
            run.job_ids.update(i["job_id"] for i in items if i["job_id"])
        run.retried_created = sum(1 for i in items if i["status"] == "accepted")
        self._follow(run)

    def _follow(self, run: ClassRun) -> None:
        deadline = time.monotonic() + 2 * self.duration_s + 180
        while time.monotonic() < deadline:
            body = self.call(
                "GET", f"/v1/assignments/{run.assignment_id}", headers=self.auth()
            ).json()
            if body["progress"]["done"] and body["progress"]["submissions"] == run.size:
                return
            time.sleep(0.5)

    def accepted_jobs(self) -> set[str]:
        return {job_id for run in self.runs for job_id in run.job_ids}

    def check(self, conn: sqlite3.Connection, jobs: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """Check the classes' invariants; their figures."""
        graded: Counter[str] = Counter()
        published: Counter[str] = Counter()
        totals: dict[str, list[int]] = {}
        for row in conn.execute("SELECT published, record FROM assignment_graded"):
            data = json.loads(row["record"])["data"]
            graded[data["assignment_id"]] += 1
            published[data["assignment_id"]] += int(row["published"])
            totals.setdefault(data["assignment_id"], []).append(int(data["submissions"]))
        lost = doubled = 0
        for run in self.runs:
            if run.assignment_id is None:
                continue
            of_class = [
                j for j in jobs.values() if j["request"].get("assignment_id") == run.assignment_id
            ]
            by_submission = Counter(j["request"]["submission_id"] for j in of_class)
            lost += run.size - len(by_submission)
            doubled += sum(n - 1 for n in by_submission.values())
            if any(j["status"] not in ("SUCCEEDED", "FAILED", "CANCELLED") for j in of_class):
                self.violation(f"class {run.index}: a job is not final")
            whole = [t for t in totals.get(run.assignment_id, []) if t == run.size]
            if len(whole) != 1:
                self.violation(
                    f"class {run.index}: {len(whole)} AssignmentGraded for all {run.size}"
                )
            if published[run.assignment_id] != graded[run.assignment_id]:
                self.violation(f"class {run.index}: an AssignmentGraded never published")
            if run.retried_created > run.size - run.size // 2:
                self.violation(f"class {run.index}: the retried batch created answers twice")
        if lost or doubled:
            self.violation(f"classes: {lost} answers lost, {doubled} doubled")
        return {
            "classes": len(self.runs),
            "answers": sum(r.size for r in self.runs),
            "lost": lost,
            "doubled": doubled,
            "assignment_graded_per_class": sorted(graded.values()),
        }
