"""The intake under gunicorn with the memory Cloud Run gives it (512 MiB) survives hostile
batch bodies sent together, and still answers a legitimate request after them."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import requests

from shared.adapters.embedded.api_key_store import SqliteApiKeyStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.domain.api_keys import ApiKey
from tests.support.intake_server import running_intake

MEMORY_LIMIT = 512 * 1024 * 1024
BATCH_CAP = 16 * 1024 * 1024
SECRET = "m" * 43
AUTH = {"Authorization": f"Bearer gq_memory_{SECRET}"}


def hostile(shape: bytes) -> bytes:
    """`{"answers":[shape,shape,...]}` just under the batch body's size cap."""
    n = (BATCH_CAP - 16) // (len(shape) + 1)
    return b'{"answers":[' + b",".join([shape] * n) + b"]}"


def test_four_hostile_batches_at_once_leave_the_worker_answering(tmp_path: Path) -> None:
    _, record = ApiKey.issue("memory", datetime.now(UTC), key_id="memory", secret=SECRET)
    SqliteApiKeyStore(SqliteDatabase(tmp_path / "gradeq.sqlite3")).add(record)
    env = {"GRADEQ_SUBMIT_BURST": "100"}
    with running_intake(tmp_path, env=env, memory_limit=MEMORY_LIMIT) as intake:
        created = requests.post(
            intake.url + "/v1/assignments",
            json={"title": "t", "rubric": ["mentions light"]},
            headers={**AUTH, "Idempotency-Key": "a-1"},
            timeout=30,
        )
        assert created.status_code == 201, created.text
        url = f"{intake.url}/v1/assignments/{created.json()['id']}/submissions:batch"
        bodies = [hostile(b"{}"), hostile(b"[]"), hostile(b'"ab"'), hostile(b"0.5")]

        def send(body: bytes) -> int:
            headers = {**AUTH, "Content-Type": "application/json"}
            return requests.post(url, data=body, headers=headers, timeout=120).status_code

        with ThreadPoolExecutor(max_workers=len(bodies)) as pool:
            statuses = list(pool.map(send, bodies))

        assert statuses == [400] * len(bodies)  # refused, none a 5xx or a dropped connection
        legitimate = requests.post(
            url,
            data=json.dumps({"answers": [{"submission_id": "s1", "answer": "light"}]}),
            headers={**AUTH, "Content-Type": "application/json"},
            timeout=30,
        )
        assert legitimate.status_code == 200, legitimate.text
        assert legitimate.json()["accepted"] == 1
