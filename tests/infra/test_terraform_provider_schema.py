"""Every argument and block name in terraform/*.tf exists in the google provider schema."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.infra import provider_schema, tfconfig
from tests.infra.provider_schema import Schema
from tests.infra.tfconfig import REPO, Terraform

pytestmark = [pytest.mark.infra, pytest.mark.timeout(600)]

META = {"count", "for_each", "depends_on", "lifecycle", "provider", "timeouts"}
META |= {"__comments__", "__inline_comments__"}


@pytest.fixture(scope="module")
def schemas(tf: Terraform) -> dict[str, Schema]:
    if shutil.which("npm") is None:
        pytest.skip("SKIPPED provider schema check: npm is not installed")
    try:
        result = subprocess.run(
            ["bash", str(REPO / "scripts" / "provider-schema.sh")],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.skip("SKIPPED provider schema check: npm install took over 300 s")
    if result.returncode != 0:
        pytest.skip(f"SKIPPED provider schema check: npm install failed:\n{result.stderr[-1500:]}")
    wanted = {rtype for rtype, _ in tf.resources} | {dtype for dtype, _ in tf.data}
    wanted |= {"google_" + dtype.removeprefix("google_") for dtype, _ in tf.data}
    lib = Path(result.stdout.strip())
    found = provider_schema.load(lib, wanted)
    found.update({k: v for k, v in provider_schema.load_data(lib, {d for d, _ in tf.data}).items()})
    return found


def unknown_names(body: dict[str, Any], schema: Schema, where: str) -> list[str]:
    problems = []
    for key, value in body.items():
        if key in META:
            continue
        if key == "dynamic":
            for entry in value:
                for name, dyn in entry.items():
                    if name not in schema.blocks:
                        problems.append(f"{where}: unknown dynamic block {name}")
                    else:
                        for content in dyn.get("content", []):
                            problems += unknown_names(
                                content, schema.blocks[name], f"{where}.{name}"
                            )
            continue
        if key not in schema.names:
            problems.append(f"{where}: unknown argument {key}")
            continue
        if key in schema.blocks and isinstance(value, list):
            for item in value:
                if isinstance(item, dict):
                    problems += unknown_names(item, schema.blocks[key], f"{where}.{key}")
    return problems


def test_schema_reader_knows_a_resource(schemas: dict[str, Schema]) -> None:
    queue = schemas["google_cloud_tasks_queue"]
    assert {"max_attempts", "min_backoff"} <= queue.blocks["retry_config"].names
    assert "max_attempt" not in queue.blocks["retry_config"].names
    bogus = {"retry_config": [{"max_attempt": 5}]}
    assert unknown_names(bogus, queue, "q") == ["q.retry_config: unknown argument max_attempt"]


def test_every_name_exists_in_the_provider(tf: Terraform, schemas: dict[str, Schema]) -> None:
    problems = []
    for (rtype, name), body in sorted(tf.resources.items()):
        if rtype not in schemas:
            problems.append(f"{rtype}: not a resource of the google provider")
            continue
        problems += unknown_names(body, schemas[rtype], f"{rtype}.{name}")
    for (dtype, name), body in sorted(tf.data.items()):
        if dtype in schemas:
            problems += unknown_names(body, schemas[dtype], f"data.{dtype}.{name}")
    assert problems == []


def test_tfconfig_loads() -> None:
    assert tfconfig.load().resources
