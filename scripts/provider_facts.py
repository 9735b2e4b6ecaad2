"""Write localcloud/terraform_provider/provider_facts.json from the provider's own source.

The provider stand-in (docs/terraform-check.md) needs what the published schemas leave
out: which arguments force a new resource (`ForceNew`, generated from magic-modules'
`immutable`), which optional arguments are also computed, integers versus floats, enum
and format validators, and conflicting arguments. This reads them, as data, from the Go
schema literals of hashicorp/terraform-provider-google at one tag:

    git clone --branch v6.50.0 https://github.com/hashicorp/terraform-provider-google
    .venv/bin/python scripts/provider_facts.py path/to/terraform-provider-google

Only the resource types in RESOURCES and IAM_MEMBERS are read (what terraform/ uses, and
a few it does not use yet); a schema the parser cannot follow fails loudly rather than
leaving a type out.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
OUTPUT = REPO / "localcloud" / "terraform_provider" / "provider_facts.json"
TAG = "v6.50.0"

# Resource type -> (file holding its schema, the schema: a function or a variable).
# IAM members merge the shared member schema with their parent's (resource_iam_member.go).
_IAM = "google/tpgiamresource/resource_iam_member.go"
RESOURCES: dict[str, tuple[str, str]] = {
    "google_monitoring_notification_channel": (
        "google/services/monitoring/resource_monitoring_notification_channel.go",
        "ResourceMonitoringNotificationChannel",
    ),
    "google_secret_manager_secret_version": (
        "google/services/secretmanager/resource_secret_manager_secret_version.go",
        "ResourceSecretManagerSecretVersion",
    ),
    "google_storage_bucket_object": (
        "google/services/storage/resource_storage_bucket_object.go",
        "ResourceStorageBucketObject",
    ),
    "google_artifact_registry_repository": (
        "google/services/artifactregistry/resource_artifact_registry_repository.go",
        "ResourceArtifactRegistryRepository",
    ),
    "google_bigquery_dataset": (
        "google/services/bigquery/resource_bigquery_dataset.go",
        "ResourceBigQueryDataset",
    ),
    "google_bigquery_table": (
        "google/services/bigquery/resource_bigquery_table.go",
        "ResourceBigQueryTable",
    ),
    "google_cloud_run_v2_service": (
        "google/services/cloudrunv2/resource_cloud_run_v2_service.go",
        "ResourceCloudRunV2Service",
    ),
    "google_cloud_scheduler_job": (
        "google/services/cloudscheduler/resource_cloud_scheduler_job.go",
        "ResourceCloudSchedulerJob",
    ),
    "google_cloud_tasks_queue": (
        "google/services/cloudtasks/resource_cloud_tasks_queue.go",
        "ResourceCloudTasksQueue",
    ),
    "google_firestore_database": (
        "google/services/firestore/resource_firestore_database.go",
        "ResourceFirestoreDatabase",
    ),
    "google_firestore_field": (
        "google/services/firestore/resource_firestore_field.go",
        "ResourceFirestoreField",
    ),
    "google_firestore_index": (
        "google/services/firestore/resource_firestore_index.go",
        "ResourceFirestoreIndex",
    ),
    "google_logging_metric": (
        "google/services/logging/resource_logging_metric.go",
        "ResourceLoggingMetric",
    ),
    "google_monitoring_alert_policy": (
        "google/services/monitoring/resource_monitoring_alert_policy.go",
        "ResourceMonitoringAlertPolicy",
    ),
    "google_monitoring_dashboard": (
        "google/services/monitoring/resource_monitoring_dashboard.go",
        "ResourceMonitoringDashboard",
    ),
    "google_project_service": (
        "google/services/resourcemanager/resource_google_project_service.go",
        "ResourceGoogleProjectService",
    ),
    "google_pubsub_subscription": (
        "google/services/pubsub/resource_pubsub_subscription.go",
        "ResourcePubsubSubscription",
    ),
    "google_pubsub_topic": (
        "google/services/pubsub/resource_pubsub_topic.go",
        "ResourcePubsubTopic",
    ),
    "google_secret_manager_secret": (
        "google/services/secretmanager/resource_secret_manager_secret.go",
        "ResourceSecretManagerSecret",
    ),
    "google_service_account": (
        "google/services/resourcemanager/resource_google_service_account.go",
        "ResourceGoogleServiceAccount",
    ),
    "google_storage_bucket": (
        "google/services/storage/resource_storage_bucket.go",
        "ResourceStorageBucket",
    ),
}
IAM_MEMBERS: dict[str, tuple[str, str]] = {
    "google_artifact_registry_repository_iam_member": (
        "google/services/artifactregistry/iam_artifact_registry_repository.go",
        "ArtifactRegistryRepositoryIamSchema",
    ),
    "google_bigquery_table_iam_member": (
        "google/services/bigquery/iam_bigquery_table.go",
        "BigQueryTableIamSchema",
    ),
    "google_cloud_run_v2_service_iam_member": (
        "google/services/cloudrunv2/iam_cloud_run_v2_service.go",
        "CloudRunV2ServiceIamSchema",
    ),
    "google_cloud_tasks_queue_iam_member": (
        "google/services/cloudtasks/iam_cloud_tasks_queue.go",
        "CloudTasksQueueIamSchema",
    ),
    "google_project_iam_member": (
        "google/services/resourcemanager/iam_project.go",
        "IamProjectSchema",
    ),
    "google_pubsub_subscription_iam_member": (
        "google/services/pubsub/iam_pubsub_subscription.go",
        "IamPubsubSubscriptionSchema",
    ),
    "google_pubsub_topic_iam_member": (
        "google/services/pubsub/iam_pubsub_topic.go",
        "PubsubTopicIamSchema",
    ),
    "google_secret_manager_secret_iam_member": (
        "google/services/secretmanager/iam_secret_manager_secret.go",
        "SecretManagerSecretIamSchema",
    ),
    "google_service_account_iam_member": (
        "google/services/resourcemanager/iam_service_account.go",
        "IamServiceAccountSchema",
    ),
    "google_storage_bucket_iam_member": (
        "google/services/storage/iam_storage_bucket.go",
        "StorageBucketIamSchema",
    ),
}

# Replacements a CustomizeDiff forces beyond the schema (read from the same files).
CUSTOM_FORCE_NEW = {
    "google_storage_bucket": {
        "retention_policy.is_locked": "customdiff.ForceNewIfChange: a locked policy unlocked",
    },
    "google_secret_manager_secret": {
        "replication.auto": "secretManagerSecretAutoCustomizeDiff",
        "replication.automatic": "secretManagerSecretAutoCustomizeDiff",
    },
}

_TYPES = {
    "TypeString": "string",
    "TypeInt": "int",
    "TypeFloat": "float",
    "TypeBool": "bool",
    "TypeList": "list",
    "TypeSet": "set",
    "TypeMap": "map",
}
# verify.ValidateRFC1035Name(min, max) (google/verify/validation.go).
_RFC1035 = "^[a-z]([-a-z0-9]*[a-z0-9])?$"


class Source:
    """One Go file, read just far enough to follow schema literals."""

    def __init__(self, text: str) -> None:
        self.text = text

    def skip(self, i: int) -> int:
        """Past whitespace and comments."""
        text = self.text
        while i < len(text):
            if text[i].isspace():
                i += 1
            elif text.startswith("//", i):
                i = text.index("\n", i)
            elif text.startswith("/*", i):
                i = text.index("*/", i) + 2
            else:
                break
        return i

    def string_end(self, i: int) -> int:
        quote = self.text[i]
        i += 1
        while self.text[i] != quote:
            i += 2 if quote == '"' and self.text[i] == "\\" else 1
        return i + 1

    def expression_end(self, i: int) -> int:
        """Index of the ',' or closing bracket ending the expression starting at i."""
        depth = 0
        text = self.text
        while True:
            c = text[i]
            if c in "\"`'":
                i = self.string_end(i)
                continue
            if text.startswith("//", i):
                i = text.index("\n", i)
                continue
            if c in "{([":
                depth += 1
            elif c in "})]":
                if depth == 0:
                    return i
                depth -= 1
            elif c == "," and depth == 0:
                return i
            i += 1

    def fields(self, i: int) -> tuple[dict[str, str], int]:
        """`Name: expression,` pairs of a composite literal whose '{' is at i - 1."""
        found: dict[str, str] = {}
        while True:
            i = self.skip(i)
            if self.text[i] == "}":
                return found, i + 1
            colon = self.text.index(":", i)
            name = self.text[i:colon].strip()
            start = self.skip(colon + 1)
            end = self.expression_end(start)
            found[name] = self.text[start:end].strip()
            i = end + 1 if self.text[end] == "," else end

    def schema_map(self, i: int) -> tuple[dict[str, str], int]:
        """`"name": {...},` entries of a map[string]*schema.Schema literal ('{' at i - 1)."""
        entries: dict[str, str] = {}
        while True:
            i = self.skip(i)
            if self.text[i] == "}":
                return entries, i + 1
            key_end = self.string_end(i)
            key = json.loads(self.text[i:key_end])
            start = self.skip(self.text.index(":", key_end) + 1)
            end = self.expression_end(start)
            entries[key] = self.text[start:end].strip()
            i = end + 1 if self.text[end] == "," else end

    def function_schema(self, name: str) -> dict[str, str]:
        """The first schema map in `func name(...)` or `var name = map...{`."""
        match = re.search(rf"^(func {name}\(\)[^{{]*\{{|var {name} = )", self.text, re.M)
        if match is None:
            raise LookupError(f"{name} not found")
        start = self.text.index("map[string]*schema.Schema{", match.end() - 1)
        entries, _ = self.schema_map(start + len("map[string]*schema.Schema{"))
        return entries


def _list(expression: str) -> list[str]:
    return [json.loads(s) for s in re.findall(r'"(?:[^"\\]|\\.)*"', expression)]


def _path(sdk_path: str) -> str:
    """`retry_policy.0.maximum_backoff` -> `retry_policy.maximum_backoff`."""
    return ".".join(p for p in sdk_path.split(".") if not p.isdigit())


def _validator(expression: str) -> dict[str, Any]:
    if m := re.match(r"(verify\.ValidateEnum|validation\.StringInSlice)\(\[\]string\{", expression):
        return {"enum": _list(expression[m.end() - 1 : expression.index("}", m.end()) + 1])}
    if m := re.match(r"verify\.ValidateRFC1035Name\((\d+), (\d+)\)", expression):
        return {"pattern": _RFC1035, "length": [int(m.group(1)), int(m.group(2))]}
    if m := re.fullmatch(r"verify\.ValidateRegexp\(`([^`]*)`\)", expression):
        return {"regexp": m.group(1)}
    if m := re.match(r"validation\.IntBetween\((-?\d+), (-?\d+)\)", expression):
        return {"range": [int(m.group(1)), int(m.group(2))]}
    if m := re.match(r"validation\.StringLenBetween\((\d+), (\d+)\)", expression):
        return {"length": [int(m.group(1)), int(m.group(2))]}
    return {}


def _literal(expression: str) -> tuple[Any] | None:
    """A Go literal (bool, number, string) as a one-tuple; None for anything else."""
    if expression in ("true", "false"):
        return (expression == "true",)
    if re.fullmatch(r"-?\d+", expression):
        return (int(expression),)
    if re.fullmatch(r"-?\d+\.\d+", expression):
        return (float(expression),)
    if re.fullmatch(r'"(?:[^"\\]|\\.)*"', expression):
        return (json.loads(expression),)
    if re.fullmatch(r"`[^`]*`", expression):
        return (expression[1:-1],)
    return None


def _attributes(source: Source, entries: dict[str, str], prefix: str = "") -> dict[str, Any]:
    facts: dict[str, Any] = {}
    for name, expression in entries.items():
        path = prefix + name
        body = expression.removeprefix("&schema.Schema")
        if not body.startswith("{"):
            raise ValueError(f"{path}: cannot follow {expression[:60]!r}")
        fields, _ = Source(body).fields(1)
        kind = _TYPES[fields["Type"].removeprefix("schema.")]
        fact: dict[str, Any] = {"type": kind}
        for flag in ("Required", "Optional", "Computed", "ForceNew", "Sensitive"):
            if fields.get(flag) == "true":
                fact[re.sub(r"(?<=[a-z])([A-Z])", r"_\1", flag).lower()] = True
        for group in ("ConflictsWith", "ExactlyOneOf", "AtLeastOneOf"):
            if group in fields:
                key = re.sub(r"(?<=[a-z])([A-Z])", r"_\1", group).lower()
                fact[key] = [_path(p) for p in _list(fields[group])]
        if "Default" in fields and (literal := _literal(fields["Default"])) is not None:
            fact["default"] = literal[0]
        if "MaxItems" in fields:
            fact["max_items"] = int(fields["MaxItems"])
        if "ValidateFunc" in fields:
            fact |= _validator(fields["ValidateFunc"])
        elem = fields.get("Elem", "")
        nested: dict[str, str] | None = None
        if elem.startswith("&schema.Resource{"):
            at = elem.index("map[string]*schema.Schema{") + len("map[string]*schema.Schema{")
            nested, _ = Source(elem).schema_map(at)
        elif re.fullmatch(r"\w+\(\)", elem):
            nested = source.function_schema(elem[:-2])
        elif elem.startswith("&schema.Schema{"):
            element, _ = Source(elem).fields(len("&schema.Schema{"))
            fact["element"] = _TYPES[element["Type"].removeprefix("schema.")]
            if "ValidateFunc" in element and (validated := _validator(element["ValidateFunc"])):
                fact["element_validator"] = validated
        if nested is not None:
            fact["block"] = True
        facts[path] = fact
        if nested is not None:
            facts |= _attributes(source, nested, path + ".")
    return facts


def _read(checkout: Path, path: str) -> Source:
    return Source((checkout / path).read_text())


def extract(checkout: Path, commit: str) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    for rtype, (path, function) in RESOURCES.items():
        source = _read(checkout, path)
        entry: dict[str, Any] = {
            "file": path,
            "attributes": _attributes(source, source.function_schema(function)),
        }
        if rtype in CUSTOM_FORCE_NEW:
            entry["custom_force_new"] = CUSTOM_FORCE_NEW[rtype]
        resources[rtype] = entry
    base = _read(checkout, _IAM)
    member = base.function_schema("IamMemberBaseSchema")
    for rtype, (path, variable) in IAM_MEMBERS.items():
        source = _read(checkout, path)
        merged = _attributes(base, member) | _attributes(source, source.function_schema(variable))
        resources[rtype] = {"file": f"{path} + {_IAM}", "attributes": merged}
    return {
        "source": "hashicorp/terraform-provider-google",
        "version": TAG.removeprefix("v"),
        "commit": commit,
        "licence": "MPL-2.0 (facts read from the provider's schema literals, no code)",
        "attribute_paths": "dotted, nested blocks by name, list indexes left out",
        "resources": dict(sorted(resources.items())),
    }


def _dump(facts: dict[str, Any]) -> str:
    """JSON with one line per attribute, so a regenerated table diffs line by line."""
    lines = ["{"]
    for key, value in facts.items():
        if key != "resources":
            lines.append(f"  {json.dumps(key)}: {json.dumps(value)},")
    lines.append('  "resources": {')
    for i, (rtype, entry) in enumerate(facts["resources"].items()):
        lines.append(f"    {json.dumps(rtype)}: {{")
        for key, value in entry.items():
            if key != "attributes":
                lines.append(f"      {json.dumps(key)}: {json.dumps(value)},")
        lines.append('      "attributes": {')
        attributes = list(entry["attributes"].items())
        for j, (path, fact) in enumerate(attributes):
            comma = "," if j < len(attributes) - 1 else ""
            lines.append(f"        {json.dumps(path)}: {json.dumps(fact)}{comma}")
        lines.append("      }")
        lines.append("    }" + ("," if i < len(facts["resources"]) - 1 else ""))
    lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", type=Path, help=f"terraform-provider-google at {TAG}")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    parser.add_argument("--commit", help="the tag's commit, when the checkout is no clone")
    args = parser.parse_args(argv)
    commit = (
        args.commit
        or subprocess.run(
            ["git", "-C", str(args.checkout), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    facts = extract(args.checkout, commit)
    args.output.write_text(_dump(facts))
    count = sum(len(r["attributes"]) for r in facts["resources"].values())
    print(f"{args.output}: {len(facts['resources'])} resource types, {count} attributes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
