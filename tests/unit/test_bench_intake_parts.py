"""bench.intake_parts takes away exactly the part each variant names, and nothing else."""

from __future__ import annotations

import json
import os
from pathlib import Path

from bench.intake_parts import VARIANTS, cpu_ms_per_post, gradeq_client
from bench.load import body_bytes
from bench.settings import SUBMIT_PATH


def post(variant: str, tmp_path: Path) -> tuple[int, dict[str, object], int, str]:
    """One POST through the variant: status, body, jobs the store then holds, Location."""
    with gradeq_client(tmp_path, VARIANTS[variant]) as (client, key):
        headers = {"Authorization": f"Bearer {key}", "Idempotency-Key": "k-1"}
        answer = client.post(
            SUBMIT_PATH, data=body_bytes(), headers=headers, content_type="application/json"
        )
        assert cpu_ms_per_post(client, key, 3) > 0
        listed = client.get(SUBMIT_PATH, headers=headers).get_json()
        return answer.status_code, json.loads(answer.data), len(listed["jobs"]), answer.location


def test_the_whole_post_stores_the_job_and_answers_its_view(tmp_path: Path) -> None:
    status, body, stored, location = post("whole", tmp_path)
    assert status == 202 and body["status"] == "PENDING"
    assert location.endswith(f"{SUBMIT_PATH}/{body['id']}")
    assert stored == 4  # the POST above and the three measured


def test_no_store_answers_the_view_of_a_job_it_never_stored(tmp_path: Path) -> None:
    status, body, stored, location = post("no store", tmp_path)
    assert status == 202 and body["status"] == "PENDING" and location
    assert stored == 0


def test_no_response_body_stores_the_job_and_answers_an_empty_object(tmp_path: Path) -> None:
    status, body, stored, location = post("no response body", tmp_path)
    assert (status, body, stored, location) == (202, {}, 4, None)


def test_routing_only_stores_nothing(tmp_path: Path) -> None:
    status, body, stored, _ = post("routing only", tmp_path)
    assert (status, body, stored) == (202, {}, 0)


def test_the_environment_and_the_response_are_put_back(tmp_path: Path) -> None:
    from services.intake.jobs import routes

    respond = routes._respond
    data_dir = os.environ.get("GRADEQ_DATA_DIR")
    post("no response body", tmp_path)
    assert routes._respond is respond
    assert os.environ.get("GRADEQ_DATA_DIR") == data_dir
