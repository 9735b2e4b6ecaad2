"""A 202 means committed: the intake killed with SIGKILL in the middle of a burst of POSTs
keeps every job it accepted, with its task and its counters (the real gunicorn intake on
loopback, embedded backend).

Clients POST from several threads; once some POSTs were accepted the gunicorn master and
its worker are killed at once, without a chance to flush or finish anything. Every job
answered 202 must then be in the store, its task in the queue, and the school's counter
of jobs not yet final must count every stored job.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import requests

from shared.adapters.embedded.api_key_store import SqliteApiKeyStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.domain.api_keys import ApiKey
from shared.domain.ids import task_name_for
from tests.support.intake_server import running_intake

SCHOOL = "sigkill"
CLIENTS = 6
#: Each client stops after this many POSTs, killed or not: the test's work is bounded.
POSTS_PER_CLIENT = 60
#: The kill comes once this many POSTs were accepted, in the middle of the burst.
KILL_AFTER = 60
#: Admission's limits out of the way: every POST the server answers in time is accepted.
UNLIMITED = {
    "GRADEQ_SUBMIT_BURST": "100000",
    "GRADEQ_SUBMIT_RATE_PER_S": "100000",
    "GRADEQ_MAX_ACTIVE_JOBS_PER_CLIENT": "100000",
    "GRADEQ_MAX_BACKLOG": "100000",
}
BODY = b'{"submission_id": "s", "answer": "ATP is made in mitochondria.", "rubric": ["ATP"]}'


def test_every_job_answered_202_is_stored_after_a_sigkill(tmp_path: Path) -> None:
    secret = "k" * 43
    key, record = ApiKey.issue(SCHOOL, datetime.now(UTC), key_id="sigkill", secret=secret)
    SqliteApiKeyStore(SqliteDatabase(tmp_path / "gradeq.sqlite3")).add(record)
    accepted: list[str] = []
    guard = threading.Lock()
    enough = threading.Event()

    def client(url: str) -> None:
        with requests.Session() as session:
            for _ in range(POSTS_PER_CLIENT):
                headers = {
                    "Authorization": f"Bearer {key}",
                    "Content-Type": "application/json",
                    "Idempotency-Key": uuid.uuid4().hex,
                }
                try:
                    answer = session.post(url, data=BODY, headers=headers, timeout=10)
                except requests.RequestException:
                    return  # the server is gone: what it answered before is what counts
                if answer.status_code == 202:
                    with guard:
                        accepted.append(answer.json()["id"])
                        if len(accepted) >= KILL_AFTER:
                            enough.set()

    with running_intake(tmp_path, env=UNLIMITED) as intake:
        url = intake.url + "/v1/grading-jobs"
        threads = [threading.Thread(target=client, args=(url,)) for _ in range(CLIENTS)]
        for thread in threads:
            thread.start()
        assert enough.wait(60), f"only {len(accepted)} POSTs accepted"
        workers = _children(intake.pid)
        assert workers, "gunicorn started no worker"
        for pid in (intake.pid, *workers):
            os.kill(pid, signal.SIGKILL)
        for thread in threads:
            thread.join(30)
        assert not any(t.is_alive() for t in threads)

    assert len(accepted) >= KILL_AFTER
    assert len(accepted) < CLIENTS * POSTS_PER_CLIENT  # killed during the burst
    stored = _stored(tmp_path / "gradeq.sqlite3")
    missing = [job_id for job_id in accepted if job_id not in stored.jobs]
    assert missing == [], f"{len(missing)} of {len(accepted)} accepted jobs lost"
    without_task = [job_id for job_id in accepted if stored.jobs[job_id] not in stored.tasks]
    assert without_task == []
    assert stored.counter == len(stored.jobs)


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (Linux /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the process ended meanwhile
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


@dataclass(frozen=True)
class Stored:
    jobs: dict[str, str]
    tasks: set[str]
    counter: int


def _stored(path: Path) -> Stored:
    """What the database holds after the kill: job id -> task name, the task names, and the
    school's counter of jobs not yet final (the file is recovered as any restart would)."""
    conn = sqlite3.connect(path)
    try:
        jobs = {
            job_id: task_name_for(job_id, generation)
            for job_id, generation in conn.execute(
                "SELECT id, json_extract(record, '$.generation') FROM jobs"
            )
        }
        tasks = {name for (name,) in conn.execute("SELECT name FROM tasks")}
        (counter,) = conn.execute(
            "SELECT active FROM job_counters WHERE scope = ?", (f"client:{SCHOOL}",)
        ).fetchone()
    finally:
        conn.close()
    return Stored(jobs, tasks, counter)
