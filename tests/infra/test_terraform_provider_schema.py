"""Every argument and block name in terraform/*.tf exists in its provider's schema.

Resources use the google provider unless they say `provider = google-beta`; time_*
resources belong to hashicorp/time. Each provider's names come from its own package.
"""

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


def provider_of(rtype: str, body: dict[str, Any]) -> str:
    """The provider (local name) that manages a resource of this configuration."""
    return str(body.get("provider") or rtype.split("_", 1)[0])


@pytest.fixture(scope="module")
def schemas(tf: Terraform) -> dict[str, dict[str, Schema]]:
    """Schemas by provider name, then by resource or data source type."""
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
    wanted = {rtype for rtype, _ in tfconfig.every_resource(tf)} | {dtype for dtype, _ in tf.data}
    wanted |= {"google_" + dtype.removeprefix("google_") for dtype, _ in tf.data}
    lib = Path(result.stdout.strip())
    found = provider_schema.load(lib, wanted)
    found.update({k: v for k, v in provider_schema.load_data(lib, {d for d, _ in tf.data}).items()})
    by_provider = {"google": found}
    for provider in provider_schema.EXTRA_PACKAGES:
        try:
            extra = provider_schema.install(provider, REPO / ".cache")
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            pytest.skip(f"SKIPPED provider schema check: installing the {provider} schema: {exc}")
        by_provider[provider] = provider_schema.load(extra, wanted, prefix=f"{provider}_")
    return by_provider


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


def test_schema_reader_knows_a_resource(schemas: dict[str, dict[str, Schema]]) -> None:
    queue = schemas["google"]["google_cloud_tasks_queue"]
    assert {"max_attempts", "min_backoff"} <= queue.blocks["retry_config"].names
    assert "max_attempt" not in queue.blocks["retry_config"].names
    bogus = {"retry_config": [{"max_attempt": 5}]}
    assert unknown_names(bogus, queue, "q") == ["q.retry_config: unknown argument max_attempt"]


def test_schema_reader_knows_the_beta_and_time_resources(
    schemas: dict[str, dict[str, Schema]],
) -> None:
    identity = schemas["google-beta"]["google_project_service_identity"]
    assert {"project", "service"} <= identity.names
    # Only in beta: the GA schema must not vouch for it.
    assert "google_project_service_identity" not in schemas["google"]
    sleep = schemas["time"]["time_sleep"]
    assert {"create_duration", "triggers"} <= sleep.names
    assert unknown_names({"create_durations": "1s"}, sleep, "s") == [
        "s: unknown argument create_durations"
    ]


def test_every_name_exists_in_the_provider(
    tf: Terraform, schemas: dict[str, dict[str, Schema]]
) -> None:
    problems = []
    for (rtype, name), body in sorted(tfconfig.every_resource(tf).items()):
        provider = provider_of(rtype, body)
        if rtype not in schemas.get(provider, {}):
            problems.append(f"{rtype}: not a resource of the {provider} provider")
            continue
        problems += unknown_names(body, schemas[provider][rtype], f"{rtype}.{name}")
    for (dtype, name), body in sorted(tf.data.items()):
        if dtype in schemas["google"]:
            problems += unknown_names(body, schemas["google"][dtype], f"data.{dtype}.{name}")
    assert problems == []


def test_tfconfig_loads() -> None:
    assert tfconfig.load().resources
