"""The provider stand-in on its own: the schemas it reads, how it plans, its plugin handshake."""

from __future__ import annotations

import base64
import json
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

from localcloud.terraform_provider import facts, schema, server, values
from localcloud.terraform_provider.server import MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE
from tests.infra import tfconfig
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


# --- What the provider checks beyond its schema (provider_facts.json, from its source)


@pytest.fixture(scope="module")
def known() -> dict[str, facts.ResourceFacts]:
    return facts.load()


def test_the_facts_are_the_pinned_providers(tf: tfconfig.Terraform) -> None:
    recorded = json.loads(facts.FACTS_FILE.read_text())
    assert recorded["source"] == "hashicorp/terraform-provider-google"
    assert recorded["version"] == schema.PROVIDER_VERSIONS["google"]
    # Every hashicorp/google resource type terraform/ uses (google-beta's are not
    # recorded), and those a deployment is about to take on.
    used = {
        rtype
        for (rtype, _), body in tfconfig.every_resource(tf).items()
        if rtype.startswith("google_") and "google-beta" not in str(body.get("provider", ""))
    }
    expected = used | {"google_artifact_registry_repository", "google_storage_bucket"}
    assert expected <= set(recorded["resources"]), expected - set(recorded["resources"])
    for entry in recorded["resources"].values():
        assert entry["file"].startswith("google/"), entry["file"]


def _served(block: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    for a in block["attributes"]:
        yield prefix + a["name"], a | {"block": False}
    for b in block["blocks"]:
        yield prefix + b["name"], {"block": True}
        yield from _served(b["block"], f"{prefix}{b['name']}.")


def test_the_facts_agree_with_the_published_schema(
    google: dict[str, Any], known: dict[str, facts.ResourceFacts]
) -> None:
    # Two sources, one provider: a path or a required/optional/computed-only flag that
    # differs means the table was read from another version than the schema.
    for rtype, resource in known.items():
        served = dict(_served(google["resources"][rtype]))
        for path, fact in resource.attributes.items():
            if path not in served:
                # A computed-only nested object is an attribute in the schema, its fields
                # blocks in the source.
                parent = path.rsplit(".", 1)[0]
                assert not served.get(parent, {"block": True})["block"], (rtype, path)
                continue
            attribute = served[path]
            if attribute["block"] or fact.get("block"):
                continue
            kind = (
                "required"
                if fact.get("required")
                else "optional"
                if fact.get("optional")
                else "computed"
            )
            assert attribute[kind], (rtype, path, fact, attribute)


def test_optional_attributes_are_computed_only_where_the_provider_computes_them(
    google: dict[str, Any], known: dict[str, facts.ResourceFacts]
) -> None:
    topic = facts.refine(google["resources"]["google_pubsub_topic"], known["google_pubsub_topic"])
    # kms_key_name is Optional only: unset, it plans null, and a count can test it.
    assert attribute(topic, "kms_key_name")["computed"] is False
    assert attribute(topic, "project")["computed"] is True
    planned = values.plan(topic, values.conform(topic, {"name": "t"}), None)
    assert planned["kms_key_name"] is None and planned["project"] is values.UNKNOWN


def _database(location: str, **extra: Any) -> dict[str, Any]:
    return (
        {"id": "projects/p/databases/(default)", "name": "(default)", "project": "p"}
        | {
            "location_id": location,
            "type": "FIRESTORE_NATIVE",
        }
        | extra
    )


def test_a_changed_immutable_attribute_requires_replacement(
    known: dict[str, facts.ResourceFacts],
) -> None:
    database = known["google_firestore_database"]
    assert facts.requires_replace(database, _database("eur3"), _database("europe-west1")) == [
        ("location_id",)
    ]
    # A mutable attribute is updated in place; an unchanged one is nothing.
    assert (
        facts.requires_replace(
            database, _database("eur3"), _database("eur3", delete_protection_state="ENABLED")
        )
        == []
    )
    # A new value known only after apply replaces the object too.
    assert facts.requires_replace(database, _database("eur3"), _database(values.UNKNOWN)) == [
        ("location_id",)
    ]
    # Unset and the zero value are the same to the provider's diff.
    subscription = known["google_pubsub_subscription"]
    before = {"id": "s", "name": "s", "topic": "t", "filter": ""}
    assert facts.requires_replace(subscription, before, before | {"filter": None}) == []
    assert facts.requires_replace(subscription, before, before | {"topic": "u"}) == [("topic",)]


def test_an_immutable_attribute_inside_a_block_names_its_element(
    known: dict[str, facts.ResourceFacts],
) -> None:
    secret = known["google_secret_manager_secret"]

    def replicas(*where: str) -> dict[str, Any]:
        managed = {"replicas": [{"location": w} for w in where]}
        return {"id": "s", "secret_id": "s", "replication": [{"user_managed": [managed]}]}

    assert facts.requires_replace(secret, replicas("a", "b"), replicas("a", "c")) == [
        ("replication", 0, "user_managed", 0, "replicas", 1, "location")
    ]
    # Adding a replica changes a ForceNew block's length.
    assert facts.requires_replace(secret, replicas("a"), replicas("a", "b")) == [
        ("replication", 0, "user_managed", 0, "replicas")
    ]


def test_a_state_known_only_by_its_id_is_not_replaced(
    known: dict[str, facts.ResourceFacts],
) -> None:
    # An import, or a hand-made state: the provider would read the object first; the
    # stand-in cannot, so it plans an update, never a replacement it cannot know of.
    imported = {"id": "projects/p/secrets/s", "secret_id": None, "labels": None}
    secret = known["google_secret_manager_secret"]
    assert facts.requires_replace(secret, imported, {"id": "x", "secret_id": "s"}) == []


@pytest.mark.parametrize(
    ("rtype", "config", "message"),
    [
        (
            "google_cloud_run_v2_service",
            {"name": "s", "location": "l", "ingress": "INGRESS_TRAFFIC_NOPE"},
            "expected ingress to be one of",
        ),
        (
            "google_pubsub_subscription",
            {
                "name": "s",
                "topic": "t",
                "push_config": [{"push_endpoint": "https://example.com"}],
                "bigquery_config": [{"table": "p.d.t"}],
            },
            '"push_config": conflicts with bigquery_config',
        ),
        (
            "google_service_account",
            {"account_id": "Gradeq_Worker"},
            "must match regex",
        ),
        ("google_service_account", {"account_id": "gq-w"}, "between 6 and 30 characters"),
        ("google_storage_bucket", {"name": "b", "location": "EU", "url": "gs://b"}, "computed"),
        (
            "google_cloud_run_v2_service",
            {"name": "s", "location": "l", "template": [{"timeout": "5m"}]},
            '"template.timeout" ("5m") doesn\'t match regexp',
        ),
        (
            "google_cloud_tasks_queue",
            {"name": "q", "location": "l", "retry_config": [{"max_attempts": 8.5}]},
            "Attribute must be a whole number, got 8.5",
        ),
    ],
)
def test_what_the_provider_refuses_is_refused(
    known: dict[str, facts.ResourceFacts], rtype: str, config: dict[str, Any], message: str
) -> None:
    findings = facts.validate(known[rtype], config)
    assert any(message in f.detail for f in findings), findings


def test_valid_and_unknown_values_pass(known: dict[str, facts.ResourceFacts]) -> None:
    service = {"name": "s", "location": "l", "ingress": "INGRESS_TRAFFIC_INTERNAL_ONLY"}
    assert facts.validate(known["google_cloud_run_v2_service"], service) == []
    unknown_ingress = service | {"ingress": values.UNKNOWN}
    assert facts.validate(known["google_cloud_run_v2_service"], unknown_ingress) == []
    queue = {"name": "q", "location": "l", "retry_config": [{"max_attempts": 8.0}]}
    assert facts.validate(known["google_cloud_tasks_queue"], queue) == []
    assert facts.validate(known["google_service_account"], {"account_id": "gradeq-worker"}) == []


def test_the_docs_name_every_resource_type_planned_without_facts(tf: tfconfig.Terraform) -> None:
    # What the stand-in cannot check must be said where its checks are described.
    docs = (REPO / "docs" / "terraform-check.md").read_text()
    limits = docs.split("## What it cannot catch", 1)[1].split("\n## ", 1)[0]
    recorded = json.loads(facts.FACTS_FILE.read_text())["resources"]
    without = {
        rtype
        for (rtype, _) in tfconfig.every_resource(tf)
        if rtype.startswith("google_") and rtype not in recorded
    }
    assert without, "every type has facts: say so in docs/terraform-check.md"
    for rtype in without:
        assert f"`{rtype}`" in limits, rtype


def _apply(servicer: server.ProviderStandIn, rtype: str, planned: dict[str, Any]) -> Any:
    request = pb.ApplyResourceChange.Request(
        type_name=rtype,
        prior_state=pb.DynamicValue(msgpack=values.encode(None)),
        planned_state=pb.DynamicValue(msgpack=values.encode(planned)),
    )
    return servicer.ApplyResourceChange(request, None)


def test_apply_is_refused_unless_a_test_asks_for_a_local_state(
    google: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    servicer = server.ProviderStandIn("google", google, facts.load())
    block = servicer.schema["resources"]["google_pubsub_topic"]
    planned = values.plan(block, values.conform(block, {"name": "events"}), None)
    monkeypatch.delenv(server.APPLY_TO_LOCAL_STATE, raising=False)
    refused = _apply(servicer, "google_pubsub_topic", planned)
    assert [d.summary for d in refused.diagnostics] == ["The provider stand-in does not apply"]

    monkeypatch.setenv(server.APPLY_TO_LOCAL_STATE, "1")
    state = values.decode(_apply(servicer, "google_pubsub_topic", planned).new_state.msgpack)
    other = values.plan(block, values.conform(block, {"name": "dead-letter"}), None)
    other_state = values.decode(_apply(servicer, "google_pubsub_topic", other).new_state.msgpack)
    # What the plan knew stays; what apply would learn is made up, distinct per object,
    # the same for the same plan, and the project is the one every object shares.
    assert state["name"] == "events" and state["kms_key_name"] is None
    assert state["id"].startswith("standin-id-") and state["id"] != other_state["id"]
    assert state == values.decode(
        _apply(servicer, "google_pubsub_topic", planned).new_state.msgpack
    )
    assert state["project"] == other_state["project"] == "standin-project"
    assert values.UNKNOWN not in state.values()


def test_an_unset_argument_with_a_default_plans_its_default(
    known: dict[str, facts.ResourceFacts],
) -> None:
    bucket = known["google_storage_bucket"]
    planned = facts.with_defaults(bucket, {"name": "b", "storage_class": None, "versioning": []})
    assert planned["storage_class"] == "STANDARD"
    configured = {"name": "b", "storage_class": "NEARLINE", "retention_policy": []}
    assert facts.with_defaults(bucket, configured)["storage_class"] == "NEARLINE"
    # Inside a nested block only where the block is present.
    assert facts.with_defaults(bucket, configured)["retention_policy"] == []
    policy = configured | {"retention_policy": [{"retention_period": 60, "is_locked": None}]}
    assert facts.with_defaults(bucket, policy)["retention_policy"][0]["is_locked"] is False
