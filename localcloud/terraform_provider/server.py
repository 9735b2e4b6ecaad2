"""The provider process terraform starts: go-plugin handshake, then tfplugin6 over gRPC.

Terraform starts the provider binary with a magic cookie and its client certificate in the
environment, reads one line from its stdout (`1|6|unix|SOCKET|grpc|SERVER_CERT`), then
talks gRPC over mutual TLS. Terraform itself checks the configuration against the schema
this serves (names, types, required arguments, references, unknowns); the stand-in plans
each resource with its computed attributes unknown and reads data sources with plausible
values. It never creates anything: apply and import answer with an error.
"""

from __future__ import annotations

import base64
import datetime
import json
import os
import sys
import tempfile
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from tfplugin_proto import tfplugin6_5_pb2 as pb
from tfplugin_proto import tfplugin6_5_pb2_grpc as pb_grpc

from localcloud.terraform_provider import facts as provider_facts
from localcloud.terraform_provider import schema as schemas
from localcloud.terraform_provider import values
from localcloud.terraform_provider.schema import Block

# go-plugin's handshake cookie for terraform providers (hashicorp/terraform plugin/serve.go).
MAGIC_COOKIE_KEY = "TF_PLUGIN_MAGIC_COOKIE"
MAGIC_COOKIE_VALUE = "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2"
# Set (to "1") only where a test builds a local state (check.Workspace(apply=True)).
APPLY_TO_LOCAL_STATE = "GRADEQ_PROVIDER_STANDIN_APPLY"

_NESTING = {
    "list": pb.Schema.NestedBlock.LIST,
    "set": pb.Schema.NestedBlock.SET,
    "single": pb.Schema.NestedBlock.SINGLE,
}


def _block_pb(block: Block) -> Any:
    return pb.Schema.Block(
        attributes=[
            pb.Schema.Attribute(
                name=a["name"],
                type=values.cty_type_json(a["type"]),
                description=a["description"],
                required=a["required"],
                optional=a["optional"],
                computed=a["computed"],
            )
            for a in block["attributes"]
        ],
        block_types=[
            pb.Schema.NestedBlock(
                type_name=b["name"],
                block=_block_pb(b["block"]),
                nesting=_NESTING[b["nesting"]],
                min_items=b["min_items"],
                max_items=b["max_items"],
            )
            for b in block["blocks"]
        ],
    )


def schema_response(schema: dict[str, Any]) -> Any:
    empty: Block = {"attributes": [], "blocks": []}
    return pb.GetProviderSchema.Response(
        provider=pb.Schema(block=_block_pb(schema["provider"] or empty)),
        resource_schemas={k: pb.Schema(block=_block_pb(v)) for k, v in schema["resources"].items()},
        data_source_schemas={
            k: pb.Schema(block=_block_pb(v)) for k, v in schema["data_sources"].items()
        },
        server_capabilities=pb.ServerCapabilities(plan_destroy=False),
    )


def _error(summary: str, detail: str = "") -> Any:
    return pb.Diagnostic(severity=pb.Diagnostic.ERROR, summary=summary, detail=detail)


def attribute_path(steps: tuple[provider_facts.Step, ...]) -> Any:
    return pb.AttributePath(
        steps=[
            pb.AttributePath.Step(element_key_int=step)
            if isinstance(step, int)
            else pb.AttributePath.Step(attribute_name=step)
            for step in steps
        ]
    )


def _finding(finding: provider_facts.Finding) -> Any:
    return pb.Diagnostic(
        severity=pb.Diagnostic.ERROR,
        summary=finding.summary,
        detail=finding.detail,
        attribute=attribute_path(finding.path),
    )


class ProviderStandIn(pb_grpc.ProviderServicer):
    """tfplugin6's Provider service over one provider's published schema."""

    def __init__(
        self,
        name: str,
        schema: dict[str, Any],
        facts: dict[str, provider_facts.ResourceFacts] | None = None,
    ) -> None:
        self.name = name
        self.facts = facts or {}
        resources = dict(schema["resources"])
        for rtype, known in self.facts.items():
            if rtype in resources:
                resources[rtype] = provider_facts.refine(resources[rtype], known)
        self.schema = schema | {"resources": resources}
        self._response = schema_response(self.schema)

    def _resource(self, type_name: str) -> Block:
        block: Block = self.schema["resources"][type_name]
        return block

    def GetMetadata(self, request: Any, context: Any) -> Any:
        return pb.GetMetadata.Response(
            server_capabilities=pb.ServerCapabilities(plan_destroy=False),
            resources=[
                pb.GetMetadata.ResourceMetadata(type_name=t) for t in self.schema["resources"]
            ],
            data_sources=[
                pb.GetMetadata.DataSourceMetadata(type_name=t) for t in self.schema["data_sources"]
            ],
        )

    def GetProviderSchema(self, request: Any, context: Any) -> Any:
        return self._response

    def GetFunctions(self, request: Any, context: Any) -> Any:
        return pb.GetFunctions.Response()

    def ValidateProviderConfig(self, request: Any, context: Any) -> Any:
        return pb.ValidateProviderConfig.Response()

    def ValidateResourceConfig(self, request: Any, context: Any) -> Any:
        known = self.facts.get(request.type_name)
        config = values.decode(request.config.msgpack)
        if known is None or not isinstance(config, dict):
            return pb.ValidateResourceConfig.Response()
        findings = provider_facts.validate(known, config)
        return pb.ValidateResourceConfig.Response(diagnostics=[_finding(f) for f in findings])

    def ValidateDataResourceConfig(self, request: Any, context: Any) -> Any:
        return pb.ValidateDataResourceConfig.Response()

    def ConfigureProvider(self, request: Any, context: Any) -> Any:
        return pb.ConfigureProvider.Response()

    def UpgradeResourceState(self, request: Any, context: Any) -> Any:
        block = self._resource(request.type_name)
        raw = json.loads(request.raw_state.json or b"{}")
        upgraded = values.conform(block, raw)
        return pb.UpgradeResourceState.Response(
            upgraded_state=pb.DynamicValue(msgpack=values.encode(upgraded))
        )

    def ReadResource(self, request: Any, context: Any) -> Any:
        return pb.ReadResource.Response(new_state=request.current_state, private=request.private)

    def PlanResourceChange(self, request: Any, context: Any) -> Any:
        block = self._resource(request.type_name)
        proposed = values.decode(request.proposed_new_state.msgpack)
        prior = values.decode(request.prior_state.msgpack)
        planned = values.plan(block, proposed, prior)
        known = self.facts.get(request.type_name)
        replace = []
        if known is not None:
            planned = provider_facts.with_defaults(known, planned)
            replace = provider_facts.requires_replace(known, prior, planned)
        return pb.PlanResourceChange.Response(
            planned_state=pb.DynamicValue(msgpack=values.encode(planned)),
            requires_replace=[attribute_path(steps) for steps in replace],
            planned_private=request.prior_private,
            # As the provider's SDK says: a planned default differs from the (null)
            # configuration, which terraform then tolerates.
            legacy_type_system=known is not None,
        )

    def ApplyResourceChange(self, request: Any, context: Any) -> Any:
        # Only a state for tests: terraform's apply then records, in a local state file,
        # what an apply of the plan would leave, resolving every reference itself.
        if os.environ.get(APPLY_TO_LOCAL_STATE) != "1":
            return pb.ApplyResourceChange.Response(
                diagnostics=[_error("The provider stand-in does not apply", self.name)]
            )
        planned = values.decode(request.planned_state.msgpack)
        state = values.settle(self._resource(request.type_name), planned)
        return pb.ApplyResourceChange.Response(
            new_state=pb.DynamicValue(msgpack=values.encode(state)),
            private=request.planned_private,
            legacy_type_system=request.type_name in self.facts,
        )

    def ImportResourceState(self, request: Any, context: Any) -> Any:
        # The object as if just read: only its id is known; the plan then updates it to
        # the configuration (terraform reads it back through ReadResource first).
        state = values.conform(self._resource(request.type_name), {"id": request.id})
        imported = pb.ImportResourceState.ImportedResource(
            type_name=request.type_name, state=pb.DynamicValue(msgpack=values.encode(state))
        )
        return pb.ImportResourceState.Response(imported_resources=[imported])

    def ReadDataSource(self, request: Any, context: Any) -> Any:
        block: Block = self.schema["data_sources"][request.type_name]
        config = values.decode(request.config.msgpack)
        state = values.read_data(block, config)
        return pb.ReadDataSource.Response(state=pb.DynamicValue(msgpack=values.encode(state)))

    def CallFunction(self, request: Any, context: Any) -> Any:
        return pb.CallFunction.Response(
            diagnostics=[_error(f"{self.name} has no function {request.name}")]
        )

    def StopProvider(self, request: Any, context: Any) -> Any:
        return pb.StopProvider.Response()


def _certificate() -> tuple[bytes, bytes, bytes]:
    """A self-signed certificate for localhost, as go-plugin's AutoMTLS makes one."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return (
        key_pem,
        cert.public_bytes(serialization.Encoding.PEM),
        cert.public_bytes(serialization.Encoding.DER),
    )


def _plugin_services(stopped: threading.Event) -> tuple[grpc.GenericRpcHandler, ...]:
    """go-plugin's own services: Shutdown ends the process; stdio and the broker are idle."""

    def shutdown(request: bytes, context: Any) -> bytes:
        stopped.set()
        return b""

    def stdio(request: bytes, context: Any) -> Iterator[bytes]:
        return iter(())

    def broker(requests: Iterator[bytes], context: Any) -> Iterator[bytes]:
        return iter(())

    return (
        grpc.method_handlers_generic_handler(
            "plugin.GRPCController", {"Shutdown": grpc.unary_unary_rpc_method_handler(shutdown)}
        ),
        grpc.method_handlers_generic_handler(
            "plugin.GRPCStdio", {"StreamStdio": grpc.unary_stream_rpc_method_handler(stdio)}
        ),
        grpc.method_handlers_generic_handler(
            "plugin.GRPCBroker", {"StartStream": grpc.stream_stream_rpc_method_handler(broker)}
        ),
    )


def load_servicer(provider: str, cache: Path) -> ProviderStandIn:
    # The facts are hashicorp/google's; google-beta's differ and are not recorded.
    known = provider_facts.load() if provider == "google" else {}
    return ProviderStandIn(provider, schemas.load(provider, cache), known)


def serve(provider: str, cache: Path) -> int:
    if os.environ.get(MAGIC_COOKIE_KEY) != MAGIC_COOKIE_VALUE:
        print(
            "This is a terraform provider stand-in: terraform starts it "
            "(see docs/terraform-check.md).",
            file=sys.stderr,
        )
        return 1
    servicer = load_servicer(provider, cache)
    stopped = threading.Event()
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=8),
        options=[("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)],
    )
    pb_grpc.add_ProviderServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]
    server.add_generic_rpc_handlers(_plugin_services(stopped))
    with tempfile.TemporaryDirectory(prefix="tfprovider-") as folder:
        socket = f"{folder}/plugin.sock"
        client_cert = os.environ.get("PLUGIN_CLIENT_CERT", "").encode()
        fields = ["1", "6", "unix", socket, "grpc"]
        if client_cert:
            key_pem, cert_pem, cert_der = _certificate()
            # Terraform's client certificate (P-521) is one gRPC's TLS library does not
            # accept for client authentication; the socket is private to this process's
            # temporary folder, and terraform still verifies the server certificate.
            credentials = grpc.ssl_server_credentials([(key_pem, cert_pem)])
            server.add_secure_port(f"unix:{socket}", credentials)
            fields.append(base64.b64encode(cert_der).decode().rstrip("="))
        else:
            server.add_insecure_port(f"unix:{socket}")
        server.start()
        print("|".join(fields), flush=True)
        stopped.wait()
        server.stop(grace=0.5)
    return 0
