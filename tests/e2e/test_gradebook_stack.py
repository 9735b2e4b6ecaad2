"""Posted grades reach the gradebook each school already uses, through the whole stack, on
both backends.

Two schools, each with a class of 30 in an assignment that posts manually and holds for
review every grade on its pass mark (5 of the 30):

- `lti-school` is registered with the local LTI 1.3 platform (localcloud.lti_platform).
  Its teacher launches Gradeq from the course and lands on the assignment's review page;
  each student launches it and submits an answer with the launch's session. The
  gradebook writes AGS scores to the line item it makes for the assignment and finds the
  students in the platform's NRPS roster.
- `classroom-school` is connected to the Classroom fake (tests.support.classroom_fake)
  through the stack's connections setting; the school's server submits the class in one
  batch. The gradebook makes the course work and sets each submission's draftGrade, then
  its assignedGrade once the grade is final.

Graded, nothing reaches either LMS. Once the teacher posts, every grade arrives, the 5
held ones as `PendingManual` (no number in AGS, a draft only in Classroom). After the
post the teacher overrides 2 held grades and accepts the other 3: each LMS then holds
exactly the final grades, every one `FullyGraded`, the latest version of each (by AGS's
`timestamp`). Last, a student's launch opens their own grade, the teacher's score.
"""

from __future__ import annotations

import csv
import html
import io
import json
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests

from localcloud.emulators import missing_reason
from localcloud.lti_platform import (
    INSTRUCTOR,
    LEARNER,
    Member,
    PlatformState,
    ToolRegistration,
    running_platform,
)
from localcloud.stack import EMBEDDED, GOOGLE_EMULATORS, LocalStack, StackConfig
from services.notification.sealing import new_sealing_key
from tests.e2e.fast_stack import fast_env
from tests.support.classroom_fake import ClassroomFake

pytestmark = pytest.mark.e2e

LTI_SCHOOL = "lti-school"
CLASSROOM_SCHOOL = "classroom-school"
#: The tool's registration in the LMS.
CLIENT = "gradeq-tool"
DEPLOYMENT = "deployment-1"
CONTEXT = "biology-7"
RESOURCE_LINK = "photosynthesis-link"
TEACHER = "lms-teacher"
CLASSROOM_COURSE = "600100200300"

MAX_SCORE = 8
RUBRIC = ["light", "chlorophyll", "water", "carbon dioxide"]
PASS_MARK = 4.0
STUDENTS = [f"student-{n:02}" for n in range(30)]
#: Held for review: their answers meet 2 of the 4 criteria, exactly the pass mark.
HELD = STUDENTS[3::6]
HELD_ANSWER = "light water"
#: The other answers and their scores; the rest of the class cycles through them.
OTHER_ANSWERS = [
    ("light chlorophyll water carbon dioxide", 8.0),
    ("chlorophyll carbon dioxide water", 6.0),
    ("light", 2.0),
    ("nothing relevant", 0.0),
]
#: The teacher's overrides after the post (the other held grades are accepted).
OVERRIDES = {HELD[0]: 6.5, HELD[3]: 1.5}
OVERRIDE_FEEDBACK = "Read with the diagram."
TIMEOUT_S = 45.0


def answer_of(student: str) -> tuple[str, float]:
    """The student's answer and the score the offline grader gives it."""
    if student in HELD:
        return HELD_ANSWER, PASS_MARK
    return OTHER_ANSWERS[STUDENTS.index(student) % len(OTHER_ANSWERS)]


def final_score(student: str) -> float:
    return OVERRIDES.get(student, answer_of(student)[1])


def lms_user(student: str) -> str:
    return "lms-" + student


def classroom_user(student: str) -> str:
    return "cu-" + student.removeprefix("student-")


def classroom_email(student: str) -> str:
    return f"{student}@classroom-school.example"


def classroom_roster() -> dict[str, str]:
    """Gradeq student id -> Classroom user: by email for half the class, by id for the rest
    (Classroom takes either)."""
    return {
        s: classroom_email(s) if n % 2 == 0 else classroom_user(s) for n, s in enumerate(STUDENTS)
    }


# --- the stack and the two LMSs ---------------------------------------------------------


@dataclass
class World:
    stack: LocalStack
    platform: PlatformState
    classroom: ClassroomFake
    #: Each school's API key.
    keys: dict[str, str]

    @property
    def tool(self) -> str:
        return self.stack.config.url("intake")


def _register_lti_school(stack: LocalStack, platform: PlatformState) -> None:
    """Both sides of the registration, as the LMS admin and Gradeq's operator make it."""
    tool = stack.config.url("intake")
    platform.register_tool(
        ToolRegistration(
            CLIENT,
            DEPLOYMENT,
            tool + "/lti/login",
            (tool + "/lti/launch",),
            tool + "/lti/jwks.json",
        )
    )
    platform.enrol(CONTEXT, Member(TEACHER, (INSTRUCTOR,), "Tess Teacher"), "Biology 7")
    for student in STUDENTS:
        platform.enrol(CONTEXT, Member(lms_user(student), (LEARNER,), lis_person_sourcedid=student))
    added = subprocess.run(
        [
            sys.executable, "-m", "services.intake.lti.registrations", "add",
            "--school", LTI_SCHOOL, "--issuer", platform.issuer, "--client-id", CLIENT,
            "--deployment-id", DEPLOYMENT, "--auth-url", platform.auth_url,
            "--token-url", platform.token_url, "--jwks-url", platform.jwks_url,
        ],
        env=stack.environment("intake"),
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr


@pytest.fixture(scope="module", params=[EMBEDDED, GOOGLE_EMULATORS])
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    if request.param == GOOGLE_EMULATORS and (reason := missing_reason("firestore", "pubsub")):
        pytest.skip(f"the official emulators are needed for this backend: {reason}")
    root = tmp_path_factory.mktemp(f"gradebook-{request.param}")
    with ClassroomFake(page_size=10) as classroom, running_platform() as platform:
        classroom.add_course(
            CLASSROOM_COURSE, {classroom_user(s): classroom_email(s) for s in STUDENTS}
        )
        config = StackConfig.on_free_ports(
            root / "data",
            backend=request.param,
            client_id=LTI_SCHOOL,
            recover_every_s=0,
            env=fast_env(root),
        )
        connections = {
            CLASSROOM_SCHOOL: {
                "kind": "classroom",
                "course_id": CLASSROOM_COURSE,
                "teacher": "teacher@classroom-school.example",
                "roster": classroom_roster(),
            }
        }
        config.env.update(
            GRADEQ_LTI_TOOL_URL=config.url("intake"),
            GRADEQ_LTI_SECRETS_KEY=new_sealing_key(),
            GRADEQ_GRADEBOOK_CONNECTIONS_JSON=json.dumps(connections),
            GRADEQ_GRADEBOOK_CLASSROOM_BASE_URL=classroom.base_url,
        )
        with (root / "stack.log").open("w") as log:
            stack = LocalStack(config, output=log)
            stack.start()
            try:
                _register_lti_school(stack, platform)
                keys = {
                    LTI_SCHOOL: stack.api_key,
                    CLASSROOM_SCHOOL: stack.issue_api_key(CLASSROOM_SCHOOL),
                }
                yield World(stack, platform, classroom, keys)
            finally:
                stack.stop()


# --- talking to the intake ----------------------------------------------------------------


def call(
    world: World, credential: str, method: str, path: str, status: int = 200, **kwargs: Any
) -> Any:
    headers = {"Authorization": f"Bearer {credential}", **kwargs.pop("headers", {})}
    answer = requests.request(method, world.tool + path, headers=headers, timeout=60, **kwargs)
    assert answer.status_code == status, f"{method} {path}: {answer.status_code} {answer.text}"
    return answer.json() if answer.content and "json" in answer.headers["Content-Type"] else answer


def create_assignment(world: World, school: str) -> str:
    body = {
        "title": "Photosynthesis",
        "rubric": RUBRIC,
        "max_score": MAX_SCORE,
        "posting": "manual",
        "review": {"pass_mark": PASS_MARK, "margin": 0},
    }
    key = {"Idempotency-Key": f"gradebook-{school}"}
    created = call(
        world, world.keys[school], "POST", "/v1/assignments", 201, json=body, headers=key
    )
    return str(created["id"])


def wait_graded(world: World, school: str, assignment_id: str) -> None:
    def graded() -> tuple[bool, object]:
        progress = call(world, world.keys[school], "GET", f"/v1/assignments/{assignment_id}")[
            "progress"
        ]
        return progress["done"] and progress["final"] == len(STUDENTS), progress

    until(graded, f"{school}'s class graded")


def sheet(world: World, school: str, assignment_id: str) -> dict[str, dict[str, str]]:
    text = call(
        world,
        world.keys[school],
        "GET",
        f"/v1/assignments/{assignment_id}/grades",
        headers={"Accept": "text/csv"},
    ).text
    return {row["student_id"]: row for row in csv.DictReader(io.StringIO(text))}


def held_jobs(world: World, credential: str, assignment_id: str) -> set[str]:
    query = {"assignment_id": assignment_id, "limit": 100}
    return {
        r["job_id"] for r in call(world, credential, "GET", "/v1/reviews", params=query)["reviews"]
    }


def decide(world: World, credential: str, jobs: dict[str, str]) -> None:
    """After the post: the teacher overrides two held grades and accepts the others."""
    for student in HELD:
        if student in OVERRIDES:
            decision = {
                "decision": "override",
                "score": OVERRIDES[student],
                "reason": "the diagram shows the rest",
                "feedback": OVERRIDE_FEEDBACK,
            }
        else:
            decision = {"decision": "accept", "reason": "on the mark, as graded"}
        call(world, credential, "POST", f"/v1/reviews/{jobs[student]}", json=decision)


def until(
    probe: Callable[[], tuple[bool, object]], what: str, timeout_s: float = TIMEOUT_S
) -> None:
    """Poll `probe` until it says done; fail with what it saw last at the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        done, seen = probe()
        if done:
            return
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s:g}s; last seen {seen}"
        time.sleep(0.2)


# --- an LTI launch over HTTP ----------------------------------------------------------------


@dataclass
class Launch:
    path: str
    assignment_id: str
    session: str
    page: str


def launch(world: World, user: str, assignment_id: str) -> Launch:
    """Login initiation, the platform's auto-submitting form, the launch, the landing page:
    what a browser does, with one cookie jar."""
    browser = requests.Session()
    params = world.platform.login_initiation(
        CLIENT,
        user,
        CONTEXT,
        RESOURCE_LINK,
        world.tool + "/lti/launch",
        {"assignment_id": assignment_id},
    )
    login = browser.post(world.tool + "/lti/login", data=params, allow_redirects=False, timeout=10)
    assert login.status_code == 302, login.text
    form = browser.get(login.headers["Location"], timeout=10)
    assert form.status_code == 200, form.text
    found = re.search(r'<form method="post" action="([^"]+)"', form.text)
    assert found is not None, form.text
    fields = {
        name: html.unescape(value)
        for name, value in re.findall(r'name="([^"]+)" value="([^"]*)"', form.text)
    }
    assert set(fields) == {"id_token", "state"}
    launched = browser.post(html.unescape(found[1]), data=fields, allow_redirects=False, timeout=10)
    assert launched.status_code == 303, launched.text
    target = urlsplit(launched.headers["Location"])
    session = parse_qs(target.fragment)["lti_session"][0]
    page = browser.get(world.tool + target.path + "?" + target.query, timeout=10)
    assert page.status_code == 200, page.text
    return Launch(target.path, parse_qs(target.query)["assignment_id"][0], session, page.text)


# --- what each LMS holds --------------------------------------------------------------------


def line_items(platform: PlatformState) -> list[str]:
    with platform.lock:
        return [i.id for i in platform.line_items.values() if i.context == CONTEXT]


def lti_results(platform: PlatformState) -> dict[str, dict[str, Any]]:
    """LMS user id -> the score on record, over every line item of the course."""
    with platform.lock:
        results: dict[str, dict[str, Any]] = {}
        for item in platform.scores.values():
            results.update({user: dict(score) for user, score in item.items()})
        return results


def lti_posts(platform: PlatformState, user: str) -> list[dict[str, Any]]:
    with platform.lock:
        return [dict(p) for p in platform.score_posts if p["userId"] == user]


def classroom_work(classroom: ClassroomFake) -> list[str]:
    return [w["id"] for w in classroom.created_by_gradeq() if w["courseId"] == CLASSROOM_COURSE]


def classroom_submissions(classroom: ClassroomFake) -> dict[str, dict[str, Any]]:
    """Classroom user id -> the submission, over every course work Gradeq made."""
    found: dict[str, dict[str, Any]] = {}
    for work in classroom_work(classroom):
        found.update(classroom.submissions_of(work))
    return found


def ms(moment: str) -> datetime:
    """An instant as AGS's `timestamp` carries it: UTC, whole milliseconds."""
    at = datetime.fromisoformat(moment).astimezone(UTC)
    return at.replace(microsecond=at.microsecond // 1000 * 1000)


# --- the story ------------------------------------------------------------------------------


def test_posted_grades_reach_each_schools_lms_latest_version_only(world: World) -> None:
    platform, classroom = world.platform, world.classroom
    lti_assignment = create_assignment(world, LTI_SCHOOL)
    classroom_assignment = create_assignment(world, CLASSROOM_SCHOOL)

    # The teacher opens Gradeq from the LMS course: the assignment's review page, signed in.
    teacher = launch(world, TEACHER, lti_assignment)
    assert (teacher.path, teacher.assignment_id) == ("/review/", lti_assignment)
    assert '<main hidden id="board">' in teacher.page  # the review page
    assert held_jobs(world, teacher.session, lti_assignment) == set()

    # Each LTI student launches and submits; the Classroom school's server sends its class.
    lti_jobs: dict[str, str] = {}
    for student in STUDENTS:
        own = launch(world, lms_user(student), lti_assignment)
        assert own.path == "/lti/grade/"
        body = {
            "assignment_id": lti_assignment,
            "submission_id": student,
            "answer": answer_of(student)[0],
        }
        job = call(
            world,
            own.session,
            "POST",
            "/v1/grading-jobs",
            202,
            json=body,
            headers={"Idempotency-Key": f"answer-{student}"},
        )
        assert job["student_id"] == student
        lti_jobs[student] = job["id"]
    answers = [{"submission_id": s, "student_id": s, "answer": answer_of(s)[0]} for s in STUDENTS]
    batch = call(
        world,
        world.keys[CLASSROOM_SCHOOL],
        "POST",
        f"/v1/assignments/{classroom_assignment}/submissions:batch",
        json={"answers": answers},
    )
    assert batch["accepted"] == len(STUDENTS)
    classroom_jobs = {item["submission_id"]: item["job_id"] for item in batch["items"]}

    wait_graded(world, LTI_SCHOOL, lti_assignment)
    wait_graded(world, CLASSROOM_SCHOOL, classroom_assignment)
    # 5 of each class are held; the launched teacher sees them in the review queue.
    assert held_jobs(world, teacher.session, lti_assignment) == {lti_jobs[s] for s in HELD}
    assert held_jobs(world, world.keys[CLASSROOM_SCHOOL], classroom_assignment) == {
        classroom_jobs[s] for s in HELD
    }
    # Graded, not posted: neither LMS has heard of a grade.
    assert platform.score_posts == [] and line_items(platform) == []
    assert classroom.history == [] and classroom_work(classroom) == []

    # Both teachers post at once (the LTI school's from the launch, the other with its
    # server key).
    posts = {
        LTI_SCHOOL: (teacher.session, lti_assignment),
        CLASSROOM_SCHOOL: (world.keys[CLASSROOM_SCHOOL], classroom_assignment),
    }
    with ThreadPoolExecutor(len(posts)) as pool:
        reports = pool.map(
            lambda post: call(
                world, post[0], "POST", f"/v1/assignments/{post[1]}/grades:post", json={}
            ),
            posts.values(),
        )
        for report in reports:
            assert sorted(report["posted"]) == STUDENTS and report["not_ready"] == []

    # Every grade arrives; the held ones as PendingManual, without their number.
    def lti_posted() -> tuple[bool, object]:
        results = lti_results(platform)
        return len(results) == len(STUDENTS), sorted(results)

    def classroom_posted() -> tuple[bool, object]:
        subs = classroom_submissions(classroom)
        drafted = [u for u, s in subs.items() if "draftGrade" in s]
        returned = [u for u, s in subs.items() if s["state"] == "RETURNED"]
        return (len(drafted), len(returned)) == (30, 25), (len(drafted), len(returned))

    until(lti_posted, "every posted grade in the LTI platform")
    until(classroom_posted, "every posted grade in Classroom")
    results = lti_results(platform)
    for student in STUDENTS:
        score = results[lms_user(student)]
        if student in HELD:
            assert (score["gradingProgress"], score["activityProgress"]) == (
                "PendingManual",
                "Submitted",
            ), score
            assert "scoreGiven" not in score and "comment" not in score
        else:
            assert (score["gradingProgress"], score["scoreGiven"]) == (
                "FullyGraded",
                answer_of(student)[1],
            ), score
    submissions = classroom_submissions(classroom)
    for student in STUDENTS:
        submission = submissions[classroom_user(student)]
        assert submission["draftGrade"] == answer_of(student)[1], submission
        if student in HELD:
            assert "assignedGrade" not in submission and submission["state"] == "CREATED"
        else:
            assert submission["assignedGrade"] == answer_of(student)[1], submission

    # After the post the teacher decides the held grades: 2 overrides, 3 accepted.
    decide(world, teacher.session, lti_jobs)
    decide(world, world.keys[CLASSROOM_SCHOOL], classroom_jobs)

    def lti_final() -> tuple[bool, object]:
        results = lti_results(platform)
        pending = [u for u, s in results.items() if s["gradingProgress"] != "FullyGraded"]
        return not pending, pending

    def classroom_final() -> tuple[bool, object]:
        subs = classroom_submissions(classroom)
        waiting = [u for u, s in subs.items() if s["state"] != "RETURNED"]
        stale = [
            s for s in STUDENTS if subs[classroom_user(s)].get("assignedGrade") != final_score(s)
        ]
        return not waiting and not stale, (waiting, stale)

    until(lti_final, "every held grade FullyGraded in the LTI platform")
    until(classroom_final, "every final grade assigned in Classroom")

    # The LTI platform: one line item for the assignment, exactly the final grades, each
    # the latest posted version (its timestamp), held ones PendingManual before FullyGraded.
    [item] = line_items(platform)
    assert platform.line_items[item].resource_id == lti_assignment
    final = sheet(world, LTI_SCHOOL, lti_assignment)
    results = lti_results(platform)
    assert set(results) == {lms_user(s) for s in STUDENTS}
    for student in STUDENTS:
        score, row = results[lms_user(student)], final[student]
        assert float(row["final_score"]) == final_score(student)
        assert (score["scoreGiven"], score["scoreMaximum"], score["gradingProgress"]) == (
            final_score(student),
            MAX_SCORE,
            "FullyGraded",
        ), score
        assert score["comment"] == row["feedback"]
        assert ms(score["timestamp"]) == ms(row["posted_at"])
        progress = [p["gradingProgress"] for p in lti_posts(platform, lms_user(student))]
        versions = ["PendingManual", "FullyGraded"] if student in HELD else ["FullyGraded"]
        assert progress == versions, (student, progress)
    assert {final[s]["final_source"] for s in HELD} == {"teacher"}
    assert final[HELD[0]]["feedback"] == OVERRIDE_FEEDBACK

    # Classroom: one course work made by Gradeq, every submission's grade the final one.
    [work] = classroom_work(classroom)
    submissions = classroom.submissions_of(work)
    assert set(submissions) == {classroom_user(s) for s in STUDENTS}
    for student in STUDENTS:
        submission = submissions[classroom_user(student)]
        assert (submission["draftGrade"], submission["assignedGrade"], submission["state"]) == (
            final_score(student),
            final_score(student),
            "RETURNED",
        ), submission
    rows = sheet(world, CLASSROOM_SCHOOL, classroom_assignment)
    assert {s: float(r["final_score"]) for s, r in rows.items()} == {
        s: final_score(s) for s in STUDENTS
    }

    # A student opens Gradeq from the course: their own grade, the teacher's score.
    overridden = HELD[0]
    own = launch(world, lms_user(overridden), lti_assignment)
    assert (own.path, own.assignment_id) == ("/lti/grade/", lti_assignment)
    assert '<table id="grades">' in own.page  # the grade page, which lists the jobs below
    seen = call(world, own.session, "GET", "/v1/grading-jobs", params={"limit": 100})["jobs"]
    assert [(j["id"], j["result"]["score"]) for j in seen] == [
        (lti_jobs[overridden], OVERRIDES[overridden])
    ]
    assert seen[0]["result"]["feedback"] == OVERRIDE_FEEDBACK
