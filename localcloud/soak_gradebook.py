"""The soak's gradebook mode (`python -m localcloud.soak --gradebook`): posted grades
reach the school's LMS under the soak's faults.

The soak's school is registered as an LTI 1.3 platform: the local platform
(localcloud.lti_platform), run in this process, with the class's students on its roster
(NRPS) and the tool's JWKS served from here (the stack's own signing key, read from its
store). Its classes' assignments post manually, and about half of their grades are held
for a teacher's review (posted as `PendingManual` until reviewed). Each class is graded,
then posted, and a few of its held grades are overridden after posting (new versions, one
of them twice); one assignment is graded and never posted. Meanwhile the platform refuses
a share of the score posts with 429 (with `Retry-After`) or 503, and for the first post it
refuses every one until the admin API shows the school's gradebook outage; the gradebook
subscriber is among the processes the soak's faults SIGKILL and SIGSTOP (three times as
often as another, and killed once more just after each post). After the run the platform
takes every score again. Checked at the end:

- every posted grade is in the LMS with its latest version: the score's `timestamp` is
  the version's `posted_at`, and `gradingProgress`, `scoreGiven` and `comment` are the
  version's (no `scoreGiven` while `PendingManual`);
- the platform never took an older version after a newer one for the same student;
- one line item per posted assignment; none, and no score, for the unposted one (the
  gradebook receives posted grades only: nothing is sent before a post, `PendingManual`
  included);
- no grade was dropped: no refusal recorded by the gradebook (admin API `rejected`), no
  dead letter (the soak's own check), every version arrived;
- the outage was visible in the admin API while the LMS refused every score, and the
  school's gradebook is `ok` again at the end.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import requests

from localcloud.lti_platform import (
    INSTRUCTOR,
    LEARNER,
    Member,
    PlatformState,
    ScoreFaults,
    ToolRegistration,
    running_platform,
)
from localcloud.soak import OPERATOR_KEY, Planned, Soak
from services.notification.sealing import Sealer, new_sealing_key
from shared.adapters.embedded.lti_store import SqliteLtiStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.clock import SystemClock
from shared.domain.lti import AssignmentLink, LtiRegistration
from shared.service_layer.lti_keys import LtiToolKeys
from tests.support.lti_tool_keys import served_jwks

CLIENT_ID = "gradeq-soak"
DEPLOYMENT = "soak-deployment"
CONTEXT = "soak-course"
#: The share of score posts the platform refuses over the run (429 or 503, evenly).
FAULT_SHARE = 0.3
#: How long the platform refuses every score, at most, waiting for the admin API to show it.
OUTAGE_WAIT_S = 30.0
#: Classes posted, then one never posted; students per class.
POSTED_CLASSES = 3
CLASS_SIZE = 10
MAX_SCORE = 10.0
#: Held grades overridden after posting, per posted class (the first one twice).
OVERRIDES = 2
#: The stack's settings in this mode: Gradeq's LTI keys sealed, a write lease that a
#: killed gradebook gives up soon (the soak's durations are scaled down).
ENV = {"GRADEQ_GRADEBOOK_LEASE_S": "6"}


@dataclass
class GradebookClass:
    """One assignment of the class, posted or not, and its submissions' jobs."""

    index: int
    posted: bool
    at: float
    assignment_id: str | None = None
    job_ids: set[str] = field(default_factory=set)
    overrides: int = 0


@dataclass
class Lms:
    """The school's LMS (the local LTI platform) and the tool's side of its registration."""

    platform: PlatformState
    store: SqliteLtiStore
    students: list[str]

    def connect(self, school: str) -> None:
        """Register Gradeq's tool with the platform and the platform as the school's."""
        self.store.put_registration(
            LtiRegistration(
                school,
                self.platform.issuer,
                CLIENT_ID,
                (DEPLOYMENT,),
                self.platform.auth_url,
                self.platform.token_url,
                self.platform.jwks_url,
            )
        )

    def link(self, school: str, assignment_id: str) -> None:
        """What a teacher's first launch of the assignment records: where its grades go."""
        self.store.put_link(
            AssignmentLink(
                school,
                assignment_id,
                self.platform.issuer,
                CLIENT_ID,
                CONTEXT,
                self.platform.lineitems_url(CONTEXT),
                self.platform.memberships_url(CONTEXT),
            )
        )

    def user_of(self, student_id: str) -> str:
        return f"lms-{student_id}"


@contextlib.contextmanager
def running_lms(data_dir: Path, env: dict[str, str], seed: int) -> Iterator[Lms]:
    """The platform on loopback, with the class enrolled and the tool's JWKS served.

    `data_dir` and `env` are the stack's (its SQLite file holds Gradeq's LTI keys and
    registrations; `env` the key that seals them, from `stack_env`).
    """
    store = SqliteLtiStore(SqliteDatabase(data_dir / "gradeq.sqlite3"))
    sealer = Sealer.from_setting(env["GRADEQ_LTI_SECRETS_KEY"])
    keys = LtiToolKeys(store, sealer, SystemClock())
    keys.ensure()  # the stack's signing key, made before any process needs it
    students = [f"student-{n:02d}" for n in range(CLASS_SIZE)]
    state = PlatformState(score_faults=ScoreFaults(0.0, random.Random(seed)))
    with (
        _quiet("werkzeug"),  # a line per request of the platform would drown the figures
        served_jwks(keys.jwks) as jwks_url,
        running_platform(state) as platform,
    ):
        platform.register_tool(ToolRegistration(CLIENT_ID, DEPLOYMENT, "", (), jwks_url))
        platform.enrol(CONTEXT, Member("lms-teacher", (INSTRUCTOR,)), "Soak biology")
        lms = Lms(platform, store, students)
        for student in students:
            platform.enrol(CONTEXT, Member(lms.user_of(student), (LEARNER,), "", "", student))
        yield lms


@contextlib.contextmanager
def _quiet(logger: str) -> Iterator[None]:
    """Only the logger's warnings while the block runs."""
    found = logging.getLogger(logger)
    level = found.level
    found.setLevel(logging.WARNING)
    try:
        yield
    finally:
        found.setLevel(level)


def run_with_lms(plain: Soak, env: dict[str, str]) -> dict[str, Any]:
    """Run `plain` (not yet run) as a gradebook soak, its school connected to the LMS."""
    with running_lms(plain.stack.config.data_dir, env, plain.seed) as lms:
        given = {f.name: getattr(plain, f.name) for f in dataclasses.fields(plain) if f.init}
        return GradebookSoak(**given, lms=lms).run()


def stack_env() -> dict[str, str]:
    """What the stack's processes need in this mode (a fresh LTI sealing key)."""
    return {**ENV, "GRADEQ_LTI_SECRETS_KEY": new_sealing_key()}


def _at_ms(text: str) -> datetime:
    """A timestamp as AGS carries it: to the millisecond."""
    moment = datetime.fromisoformat(text)
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


@dataclass
class GradebookSoak(Soak):
    """The soak, plus a class whose posted grades go to the school's LMS (the module doc)."""

    lms: Lms | None = None
    gradebook_classes: list[GradebookClass] = field(default_factory=list)
    #: When the admin API first showed the school's gradebook outage (seconds into the
    #: LMS's outage), and what it showed.
    outage_seen: dict[str, Any] = field(default_factory=dict)
    _driver: threading.Thread | None = None
    _outage_once: threading.Lock = field(default_factory=threading.Lock)
    _outage_started: bool = False
    _grng: random.Random = field(init=False)
    #: Set when a class was just posted: the next fault SIGKILLs the gradebook subscriber
    #: while the class's grades are on their way.
    _kill_due: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        super().__post_init__()
        # The gradebook subscriber is hit three times as often as any other process.
        self.targets = (*self.targets, "gradebook", "gradebook")
        grng = random.Random(self.seed + 2)
        self.gradebook_classes = [
            GradebookClass(i, i < POSTED_CLASSES, grng.uniform(0, self.duration_s * 0.3))
            for i in range(POSTED_CLASSES + 1)
        ]
        self._grng = grng

    @property
    def school(self) -> str:
        return self.stack.config.client_id

    def _platform(self) -> PlatformState:
        assert self.lms is not None, "the gradebook soak needs its LMS"
        return self.lms.platform

    # --- the run -----------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        assert self.lms is not None
        self.lms.connect(self.school)
        self._platform().score_faults.share = FAULT_SHARE
        self._driver = threading.Thread(target=self._drive, daemon=True)
        self._driver.start()
        return super().run()

    def _drive(self) -> None:
        started = time.monotonic()
        threads = [
            threading.Thread(target=self._run_class, args=(c, started), daemon=True)
            for c in self.gradebook_classes
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def _run_class(self, run: GradebookClass, started: float) -> None:
        try:
            time.sleep(max(0.0, started + run.at - time.monotonic()))
            self._create(run)
            if run.assignment_id is None:
                return
            self._wait_graded(run)
            if not run.posted:
                return
            self._post(run)
            self._override(run)
        except Exception as exc:  # a client that never got an answer
            self._violation(f"gradebook class {run.index}: {exc}")

    def _create(self, run: GradebookClass) -> None:
        assert self.lms is not None
        body = {
            "title": f"soak gradebook {run.index}",
            "rubric": ["mentions ATP"],
            "max_score": MAX_SCORE,
            "posting": "manual",
            "review": {"sample_rate": 0.5},
        }
        headers = {**self._auth(), "Idempotency-Key": f"soak-gradebook-{self.seed}-{run.index}"}
        created = self._call("POST", "/v1/assignments", json=body, headers=headers)
        if created.status_code not in (200, 201):
            self._violation(f"gradebook class {run.index}: create answered {created.status_code}")
            return
        run.assignment_id = created.json()["id"]
        # The teacher launched the assignment from the LMS once: its grades go there.
        self.lms.link(self.school, run.assignment_id)
        answers: list[dict[str, Any]] = [
            {
                "submission_id": f"gb-{self.seed}-{run.index}-{n}",
                "student_id": student,
                "answer": f"The mitochondria produce ATP. [{run.index}-{n}]",
                "metadata": {"simulate": {"latency_s": round(self._grng.uniform(0.05, 0.5), 2)}},
            }
            for n, student in enumerate(self.lms.students)
        ]
        path = f"/v1/assignments/{run.assignment_id}/submissions:batch"
        response = self._call("POST", path, json={"answers": answers}, headers=self._auth())
        if response.status_code != 200:
            self._violation(f"gradebook class {run.index}: batch answered {response.status_code}")
            return
        for item, answer in zip(response.json()["items"], answers, strict=True):
            if not item.get("job_id"):
                self._violation(f"gradebook class {run.index}: {item['status']} answer")
                continue
            run.job_ids.add(item["job_id"])
            planned = Planned(-1, "gradebook", answer["submission_id"], answer, 0.0, None, None)
            with self._lock:
                self.accepted[item["job_id"]] = planned

    def _wait_graded(self, run: GradebookClass) -> None:
        deadline = time.monotonic() + self.duration_s + self.settle_s
        path = f"/v1/assignments/{run.assignment_id}"
        while time.monotonic() < deadline:
            progress = self._call("GET", path, headers=self._auth()).json()["progress"]
            if progress["done"] and progress["submissions"] == CLASS_SIZE:
                return
            time.sleep(0.3)
        raise RuntimeError("never graded")

    def _post(self, run: GradebookClass) -> None:
        with self._outage_once:
            first, self._outage_started = not self._outage_started, True
        if first:
            self._platform().score_faults.share = 1.0  # the LMS refuses every score
        path = f"/v1/assignments/{run.assignment_id}/grades:post"
        answer = self._call("POST", path, json={}, headers=self._auth())
        if answer.status_code != 200:
            self._violation(f"gradebook class {run.index}: post answered {answer.status_code}")
        self._kill_due.set()
        if first:
            self._watch_outage()
            self._platform().score_faults.share = FAULT_SHARE

    def _watch_outage(self) -> None:
        """Poll the admin API until it shows the school's outage (or give up, a violation)."""
        began = time.monotonic()
        operator = {"Authorization": f"Bearer {OPERATOR_KEY}"}
        url = self.stack.config.url("intake") + "/admin/v1/gradebooks"
        while time.monotonic() < began + OUTAGE_WAIT_S:
            with contextlib.suppress(requests.RequestException, ValueError):
                body = requests.get(
                    url, params={"school": self.school}, headers=operator, timeout=2
                )
                shown = body.json() if body.status_code == 200 else {}
                if self.school in shown.get("outages", []):
                    [health] = [g for g in shown["gradebooks"] if g["school"] == self.school]
                    self.outage_seen = {
                        "after_s": round(time.monotonic() - began, 2),
                        "failures": health.get("failures"),
                        "last_error": str(health.get("last_error"))[:120],
                    }
                    return
            time.sleep(0.2)
        self._violation(f"the LMS refused every score for {OUTAGE_WAIT_S:g}s; no outage shown")

    def _override(self, run: GradebookClass) -> None:
        """A teacher changes a few held grades after posting (new versions)."""
        time.sleep(self._grng.uniform(0.5, 2.0))
        jobs = self.observer.jobs()
        held = sorted(
            job_id
            for job_id in run.job_ids
            if (jobs.get(job_id, {}).get("review") or {}).get("status") == "held"
        )
        chosen = held[:OVERRIDES]
        for n, job_id in enumerate(chosen):
            times = 2 if n == 0 else 1
            for _ in range(times):
                score = round(self._grng.uniform(0, MAX_SCORE), 1)
                body = {"decision": "override", "score": score, "reason": "soak: a second look"}
                answer = self._call(
                    "POST", f"/v1/reviews/{job_id}", json=body, headers=self._auth()
                )
                if answer.status_code != 200:
                    self._violation(f"{job_id}: override answered {answer.status_code}")
                    break
                run.overrides += 1
                time.sleep(self._grng.uniform(0.1, 1.0))

    def _fault(self) -> None:
        if not self._kill_due.is_set():
            super()._fault()
            return
        self._kill_due.clear()
        self.faults["SIGKILL gradebook"] += 1
        self.stack.kill("gradebook")
        time.sleep(self.rng.uniform(0.1, 1.0))
        self.stack.restart("gradebook")  # from the fault (main) thread, as the soak's own

    # --- settle and check --------------------------------------------------------------

    def _expected(self, subscriber: str, job: dict[str, Any]) -> int:
        # An unposted grade's completion waits for its post: no subscriber hears of it.
        waits = job["request"].get("post_manually") and job.get("status") == "SUCCEEDED"
        if waits and not job.get("posted"):
            return 0
        return super()._expected(subscriber, job)

    def _settle(self) -> None:
        if self._driver is not None:
            self._driver.join(timeout=self.duration_s + self.settle_s)
        self._platform().score_faults.share = 0.0  # the LMS answers again
        super()._settle()

    def _check(self) -> None:
        super()._check()
        self._check_gradebook(self.observer.jobs())

    def _check_gradebook(self, jobs: dict[str, dict[str, Any]]) -> None:
        assert self.lms is not None
        platform = self._platform()
        for run in self.gradebook_classes:
            if run.assignment_id is None:
                continue
            items = [i for i in platform.line_items.values() if i.resource_id == run.assignment_id]
            results: dict[str, dict[str, Any]] = {}
            for item in items:
                results.update(platform.results(item.id))
            if not run.posted:
                if items or results:
                    self._violation(
                        f"unposted assignment {run.assignment_id}: {len(items)} line items,"
                        f" {len(results)} scores in the LMS"
                    )
                for job_id in run.job_ids:
                    if jobs.get(job_id, {}).get("posted"):
                        self._violation(f"{job_id}: posted, though its assignment never was")
                continue
            if len(items) != 1:
                self._violation(f"assignment {run.assignment_id}: {len(items)} line items")
            for job_id in sorted(run.job_ids):
                self._check_grade(job_id, jobs.get(job_id, {}), results)
        self._check_order()
        self._check_health()

    def _check_grade(
        self, job_id: str, job: dict[str, Any], results: dict[str, dict[str, Any]]
    ) -> None:
        assert self.lms is not None
        posted = job.get("posted")
        if posted is None:
            if job.get("status") == "SUCCEEDED":
                self._violation(f"{job_id}: graded, yet never posted")
            return
        student = job["request"]["student_id"]
        found = results.get(self.lms.user_of(student))
        version = posted["version"]
        if found is None:
            self._violation(f"{job_id}: v{version} never reached the LMS")
            return
        if _at_ms(found["timestamp"]) != _at_ms(posted["at"]):
            self._violation(
                f"{job_id}: the LMS holds the score of {found['timestamp']}, v{version} is of"
                f" {posted['at']}"
            )
        final = posted["progress"] == "FullyGraded"
        expected = {
            "gradingProgress": posted["progress"],
            "scoreGiven": posted["score"] if final else None,
            "comment": (posted["feedback"] or None) if final else None,
        }
        shown = {k: found.get(k) for k in expected}
        if shown != expected:
            self._violation(f"{job_id}: the LMS shows {shown}, v{version} is {expected}")

    def _check_order(self) -> None:
        """The platform never took an older version after a newer one (same student)."""
        for item, posts in list(self._platform().score_history.items()):
            latest: dict[str, datetime] = {}
            for post in list(posts):
                user, moment = post["userId"], _at_ms(post["timestamp"])
                if user in latest and moment < latest[user]:
                    self._violation(f"{user}: a score of {moment} sent after a newer one ({item})")
                latest[user] = max(moment, latest.get(user, moment))

    def _check_health(self) -> None:
        operator = {"Authorization": f"Bearer {OPERATOR_KEY}"}
        answer = self._call(
            "GET", "/admin/v1/gradebooks", params={"school": self.school}, headers=operator
        )
        if answer.status_code != 200:
            self._violation(f"admin gradebooks answered {answer.status_code}")
            return
        shown = answer.json()
        if shown["outages"]:
            self._violation(f"gradebook outage still shown after the LMS recovered: {shown}")
        for refused in shown["rejected"]:
            self._violation(f"a grade refused for good: {refused}")
        self.outage_seen["final_state"] = [g["state"] for g in shown["gradebooks"]]

    def gradebook_figures(self) -> dict[str, Any]:
        jobs = self.observer.jobs()
        posted = [
            jobs[j]["posted"]
            for run in self.gradebook_classes
            for j in run.job_ids
            if run.posted and (jobs.get(j) or {}).get("posted")
        ]
        platform = self._platform()
        return {
            "school": self.school,
            "assignments_posted": sum(1 for r in self.gradebook_classes if r.posted),
            "assignments_unposted": sum(1 for r in self.gradebook_classes if not r.posted),
            "grades_posted": len(posted),
            "latest_versions": {
                str(v): sum(1 for p in posted if p["version"] == v)
                for v in sorted({p["version"] for p in posted})
            },
            "pending_manual_at_end": sum(1 for p in posted if p["progress"] == "PendingManual"),
            "overrides_after_posting": sum(r.overrides for r in self.gradebook_classes),
            "lms_429": platform.score_faults.served[429],
            "lms_503": platform.score_faults.served[503],
            "lms_scores_taken": len(platform.score_posts),
            "line_items": len(platform.line_items),
            "gradebook_kills": self.faults["SIGKILL gradebook"],
            "gradebook_stops": self.faults["SIGSTOP gradebook"],
            "outage_seen": self.outage_seen,
        }

    def figures(self, elapsed_s: float) -> dict[str, Any]:
        figures = super().figures(elapsed_s)
        figures["gradebook"] = self.gradebook_figures()
        return figures
