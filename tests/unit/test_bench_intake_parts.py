"""bench.intake_parts takes away exactly the part each variant names, and nothing else."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from bench.intake_parts import BENCH_SCHOOL, VARIANTS, cpu_ms_per_post, gradeq_client
from bench.load import body_bytes
from bench.settings import SUBMIT_PATH


def post(variant: str, tmp_path: Path) -> tuple[int, dict[str, object], int, str | None]:
    """One POST through the variant: status, body, jobs the store then holds, Location."""
    with gradeq_client(tmp_path, VARIANTS[variant]) as (client, key):
        headers = {"Authorization": f"Bearer {key}", "Idempotency-Key": "k-1"}
        answer = client.post(
            SUBMIT_PATH, data=body_bytes(), headers=headers, content_type="application/json"
        )
        cpu_ms_per_post(client, key, 3)  # three more POSTs; one not answered 202 raises
        listed = client.get(SUBMIT_PATH, headers=headers).get_json()
        location: str | None = answer.location  # typed `str`, but None when no header is sent
        return answer.status_code, json.loads(answer.data), len(listed["jobs"]), location


def test_the_whole_post_stores_the_job_and_answers_its_view(tmp_path: Path) -> None:
    status, body, stored, location = post("whole", tmp_path)
    assert status == 202 and body["status"] == "PENDING"
    assert location is not None and location.endswith(f"{SUBMIT_PATH}/{body['id']}")
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


def test_the_cpu_per_post_is_the_process_time_of_the_posts_over_their_number(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A stand-in clock: the process clock is coarse where a CPU limit is set (mutation runs).
    readings = iter([2.0, 2.6])
    monkeypatch.setattr("bench.intake_parts.time.process_time", lambda: next(readings))
    with gradeq_client(tmp_path, VARIANTS["whole"]) as (client, key):
        assert cpu_ms_per_post(client, key, 3) == pytest.approx(200.0)
        listed = client.get(SUBMIT_PATH, headers={"Authorization": f"Bearer {key}"}).get_json()
    assert len(listed["jobs"]) == 3


def test_a_post_not_answered_202_is_no_measurement(tmp_path: Path) -> None:
    with (
        gradeq_client(tmp_path, VARIANTS["whole"]) as (client, _),
        pytest.raises(RuntimeError, match="POST answered 401"),
    ):
        cpu_ms_per_post(client, "gq_not_a_key", 1)


def test_the_environment_and_the_response_are_put_back(tmp_path: Path) -> None:
    from services.intake.jobs import routes

    respond = routes._respond
    data_dir = os.environ.get("GRADEQ_DATA_DIR")
    post("no response body", tmp_path)
    assert routes._respond is respond
    assert os.environ.get("GRADEQ_DATA_DIR") == data_dir


def odd_post(variant: str, tmp_path: Path, what: str) -> tuple[int, str, int]:
    """A POST only the part `what` refuses: its status, problem type (or job status), and
    how many jobs the store then holds."""
    with gradeq_client(tmp_path, VARIANTS[variant]) as (client, key):
        headers = {"Authorization": f"Bearer {key}", "Idempotency-Key": "k-odd"}
        body = body_bytes()
        if what == "deep":  # within the byte limit, past the nesting limit, in metadata
            document = json.loads(body)
            document["metadata"] = {"n": json.loads("[" * 40 + "]" * 40)}
            body = json.dumps(document).encode()
        if what == "anonymous":
            del headers["Authorization"]
        if what == "budget":
            set_spent_budget(client)
        answer = client.post(
            SUBMIT_PATH, data=body, headers=headers, content_type="application/json"
        )
        listed = client.get(SUBMIT_PATH, headers={"Authorization": f"Bearer {key}"})
        sent = json.loads(answer.data)
        return answer.status_code, sent.get("type") or sent["status"], len(listed.json["jobs"])  # type: ignore[index]


def set_spent_budget(client: FlaskClient) -> None:
    """A budget of the bench's school with nothing left (hard limit 0)."""
    from shared.bootstrap import adapter_family
    from shared.config.settings import Settings
    from shared.domain.budgets import Budget, BudgetScope

    budgets = adapter_family(Settings()).budget_store()
    budgets.set_budget(Budget(BudgetScope.CLIENT, BENCH_SCHOOL, hard_micro_usd=0))


def test_no_body_scan_decodes_a_body_the_scan_refuses(tmp_path: Path) -> None:
    status, kind, _ = odd_post("whole", tmp_path / "whole", "deep")
    assert (status, kind.rsplit("/", 1)[-1]) == (400, "nesting-too-deep")
    _, kind, _ = odd_post("no body scan", tmp_path / "variant", "deep")
    assert not kind.endswith("nesting-too-deep")


def test_no_body_scan_keeps_the_rest_of_the_post(tmp_path: Path) -> None:
    status, body, stored, location = post("no body scan", tmp_path)
    assert status == 202 and body["status"] == "PENDING" and location
    assert stored == 4


def test_no_principal_policy_accepts_a_post_without_a_credential(tmp_path: Path) -> None:
    status, kind, _ = odd_post("whole", tmp_path / "whole", "anonymous")
    assert status == 401
    status, kind, stored = odd_post("no principal/policy", tmp_path / "variant", "anonymous")
    assert (status, kind, stored) == (202, "PENDING", 1)


def test_no_principal_policy_keeps_the_rest_of_the_post(tmp_path: Path) -> None:
    status, body, stored, location = post("no principal/policy", tmp_path)
    assert status == 202 and body["status"] == "PENDING" and location
    assert stored == 4


def test_no_budget_gate_accepts_past_a_spent_budget(tmp_path: Path) -> None:
    status, kind, _ = odd_post("whole", tmp_path / "whole", "budget")
    assert (status, kind.rsplit("/", 1)[-1]) == (429, "budget-exhausted")
    status, kind, stored = odd_post("no budget gate", tmp_path / "variant", "budget")
    assert (status, kind, stored) == (202, "PENDING", 1)


def test_no_budget_gate_keeps_the_rest_of_the_post(tmp_path: Path) -> None:
    status, body, stored, location = post("no budget gate", tmp_path)
    assert status == 202 and body["status"] == "PENDING" and location
    assert stored == 4


def test_the_policy_and_the_body_scan_are_put_back(tmp_path: Path) -> None:
    from services.intake.limits import body
    from shared.domain.authorization import Principal

    may, check = Principal.may, body.check_json_shape
    post("no principal/policy", tmp_path / "policy")
    post("no body scan", tmp_path / "scan")
    assert Principal.may is may and body.check_json_shape is check
