"""The provider stand-in on its own: the schemas it reads, how it plans, its plugin handshake."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from tfplugin_proto import tfplugin6_5_pb2 as pb
from tfplugin_proto import tfplugin6_5_pb2_grpc as pb_grpc

from localcloud.terraform_provider import schema, server, values
from localcloud.terraform_provider.server import MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE
from tests.infra.tfconfig import REPO

pytestmark = [pytest.mark.infra, pytest.mark.timeout(600)]

CACHE = REPO / ".cache"


@pytest.fixture(scope="module")
def google() -> dict[str, Any]:
    if shutil.which("npm") is None:
        pytest.skip("SKIPPED provider stand-in tests: npm is not installed")
    return schema.load("google", CACHE)


def attribute(block: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [a for a in block["attributes"] if a["name"] == name]
    return dict(found)


def nested(block: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [b for b in block["blocks"] if b["name"] == name]
    return dict(found)


def test_the_schema_keeps_required_optional_and_computed(google: dict[str, Any]) -> None:
    queue = google["resources"]["google_cloud_tasks_queue"]
    assert attribute(queue, "name")["required"] and attribute(queue, "location")["required"]
    assert attribute(queue, "project")["optional"]
    rate_limits = nested(queue, "rate_limits")
    assert (rate_limits["nesting"], rate_limits["max_items"]) == ("list", 1)
    burst = attribute(rate_limits["block"], "max_burst_size")
    assert burst["computed"] and not burst["optional"]

    service = google["resources"]["google_cloud_run_v2_service"]
    assert attribute(service, "invoker_iam_disabled")["type"] == "bool"
    assert attribute(service, "uri") | {"description": ""} == {
        "name": "uri",
        "type": "string",
        "required": False,
        "optional": False,
        "computed": True,
        "description": "",
    }
    assert attribute(service, "labels")["type"] == ["map", "string"]
    assert nested(service, "timeouts")["nesting"] == "single"
    containers = nested(nested(service, "template")["block"], "containers")
    assert (containers["nesting"], containers["max_items"]) == ("list", 0)
    conditions = attribute(service, "conditions")["type"]
    assert conditions[0] == "list" and "last_transition_time" in conditions[1][1]

    assert attribute(google["data_sources"]["google_project"], "number")["computed"]
    assert attribute(google["provider"], "project")["optional"]


def test_a_create_plans_every_unset_computed_attribute_unknown() -> None:
    block: schema.Block = {
        "attributes": [
            {
                "name": "name",
                "type": "string",
                "required": True,
                "optional": False,
                "computed": False,
            },
            {
                "name": "project",
                "type": "string",
                "required": False,
                "optional": True,
                "computed": True,
            },
            {
                "name": "uri",
                "type": "string",
                "required": False,
                "optional": False,
                "computed": True,
            },
            {
                "name": "note",
                "type": "string",
                "required": False,
                "optional": True,
                "computed": False,
            },
        ],
        "blocks": [
            {
                "name": "limits",
                "nesting": "list",
                "min_items": 0,
                "max_items": 1,
                "block": {
                    "attributes": [
                        {
                            "name": "burst",
                            "type": "number",
                            "required": False,
                            "optional": False,
                            "computed": True,
                        }
                    ],
                    "blocks": [],
                },
            }
        ],
    }
    proposed = {
        "name": "q",
        "project": None,
        "uri": None,
        "note": None,
        "limits": [{"burst": None}],
    }
    planned = values.plan(block, proposed, None)
    assert planned["name"] == "q" and planned["note"] is None
    assert planned["project"] is values.UNKNOWN and planned["uri"] is values.UNKNOWN
    assert planned["limits"][0]["burst"] is values.UNKNOWN
    # An update keeps what the state already knows.
    prior = {
        "name": "q",
        "project": "p",
        "uri": "https://q",
        "note": None,
        "limits": [{"burst": 5}],
    }
    again = values.plan(block, proposed, prior)
    assert (again["project"], again["uri"], again["limits"][0]["burst"]) == ("p", "https://q", 5)
    # Unknown survives the wire format terraform reads (msgpack extension 0).
    assert values.decode(values.encode(planned)) == planned


def test_a_data_source_reads_wholly_known_values(google: dict[str, Any]) -> None:
    project = values.read_data(google["data_sources"]["google_project"], {"project_id": "p"})
    assert project["project_id"] == "p" and project["number"].isdigit()
    assert values.UNKNOWN not in project.values()


def _client_certificate() -> bytes:
    """A certificate like the one terraform puts in PLUGIN_CLIENT_CERT (go-plugin's AutoMTLS)."""
    _, cert_pem, _ = server._certificate()
    return cert_pem


@pytest.fixture
def provider_process(google: dict[str, Any]) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    env = {
        **os.environ,
        MAGIC_COOKIE_KEY: MAGIC_COOKIE_VALUE,
        "PLUGIN_CLIENT_CERT": _client_certificate().decode(),
        "GRADEQ_PROVIDER_SCHEMA_CACHE": str(CACHE),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "localcloud.terraform_provider", "google"],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    try:
        yield process, process.stdout.readline().strip().split("|")
    finally:
        process.kill()
        process.wait(timeout=10)
        process.stdout.close()


def test_the_handshake_and_the_grpc_service_are_what_terraform_expects(
    provider_process: tuple[subprocess.Popen[str], list[str]],
) -> None:
    process, handshake = provider_process
    # core protocol | app protocol | network | address | protocol | server certificate
    assert handshake[:3] == ["1", "6", "unix"] and handshake[4] == "grpc"
    der = base64.b64decode(handshake[5] + "=" * (-len(handshake[5]) % 4))
    certificate = x509.load_der_x509_certificate(der)
    pem = certificate.public_bytes(serialization.Encoding.PEM)
    credentials = grpc.ssl_channel_credentials(root_certificates=pem)
    options = [
        ("grpc.ssl_target_name_override", "localhost"),
        ("grpc.max_receive_message_length", -1),
    ]
    with grpc.secure_channel(f"unix:{handshake[3]}", credentials, options=options) as channel:
        stub = pb_grpc.ProviderStub(channel)  # type: ignore[no-untyped-call]
        schemas = stub.GetProviderSchema(pb.GetProviderSchema.Request(), timeout=60)
        assert "google_cloud_run_v2_service" in schemas.resource_schemas
        assert "google_project" in schemas.data_source_schemas
        block = schema.load("google", CACHE)["resources"]["google_pubsub_topic"]
        config = values.conform(block, {"name": "events"})
        planned = stub.PlanResourceChange(
            pb.PlanResourceChange.Request(
                type_name="google_pubsub_topic",
                prior_state=pb.DynamicValue(msgpack=values.encode(None)),
                proposed_new_state=pb.DynamicValue(msgpack=values.encode(config)),
                config=pb.DynamicValue(msgpack=values.encode(config)),
            ),
            timeout=30,
        )
        state = values.decode(planned.planned_state.msgpack)
        assert state["name"] == "events" and state["id"] is values.UNKNOWN
        # go-plugin's Shutdown ends the process.
        channel.unary_unary("/plugin.GRPCController/Shutdown")(b"", timeout=10)
    assert process.wait(timeout=30) == 0


def test_started_by_hand_it_says_what_it_is(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != MAGIC_COOKIE_KEY}
    result = subprocess.run(
        [sys.executable, "-m", "localcloud.terraform_provider", "google"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1 and result.stdout == ""
    assert "terraform starts it" in result.stderr
