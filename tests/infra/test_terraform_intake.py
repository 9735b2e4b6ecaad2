"""The intake's deployment: API keys in Firestore, browser access, admission, job listing."""

from __future__ import annotations

import itertools
import re
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

import hcl2
import pytest
from google.auth.credentials import AnonymousCredentials
from google.cloud import firestore
from google.cloud.firestore_v1.query import Query
from pydantic import ValidationError

from shared.adapters.google.backlog_shards import CLIENTS
from shared.adapters.google.job_store import FirestoreJobStore
from shared.config.settings import Settings
from shared.domain.status import JobStatus
from shared.ports import JobCursor, JobFilter, JobQuery
from tests.infra import tfconfig
from tests.infra.tfconfig import Terraform, block, depends_on, references

pytestmark = pytest.mark.infra

# var.admission's fields -> the intake settings they become.
ADMISSION_FIELDS = {
    "max_active_jobs_per_client": "max_active_jobs_per_client",
    "max_backlog": "max_backlog",
    "submit_burst": "submit_burst",
    "submit_rate_per_s": "submit_rate_per_s",
}


def _env_for_each(tf: Terraform, service: str) -> str:
    return str(tfconfig.service(tf, service)["env"])


# --- API keys live in Firestore: no client-keys secret any more.


def test_no_client_keys_secret_is_read_or_granted(tf: Terraform) -> None:
    parsed = [tf.resources, tf.modules, tf.locals, tf.outputs, tf.imports]
    configured = "".join(tfconfig.strings(parsed))
    assert "client_keys" not in configured and "CLIENT_KEYS" not in configured
    assert set(tf.locals["secret_ids"]) == {
        "webhook_secret",
        "grader_api_key",
        "operator_keys",
        "reviewer_keys",
        "lti_secrets_key",
    }
    # The intake's secrets are the operator keys (below) and, optionally, reviewer keys.
    assert tfconfig.secret_env(tf, "intake") == {
        "GRADEQ_OPERATOR_KEYS": "operator_keys",
        "GRADEQ_REVIEWER_KEYS": "reviewer_keys",
        "GRADEQ_LTI_SECRETS_KEY": "lti_secrets_key",
    }
    # It starts after its grant, and after the grant had time to propagate.
    assert depends_on(tfconfig.service(tf, "intake")) == {
        ("time_sleep", "apis"),
        ("time_sleep", "service_iam"),
    }
    assert ("google_secret_manager_secret_iam_member", "intake_operator_keys") in (
        tfconfig.dependencies(tf, "time_sleep", "service_iam")
    )


def test_the_old_client_keys_secret_is_forgotten_not_deleted() -> None:
    with (tfconfig.TERRAFORM_DIR / "secrets.tf").open() as handle:
        doc = hcl2.load(handle, serialization_options=tfconfig._OPTIONS)
    removed = doc.get("removed", [])
    assert [r["from"] for r in removed] == ["${google_secret_manager_secret.client_keys}"]
    assert block(removed[0], "lifecycle") == {"destroy": False}


def test_the_intake_may_use_the_key_and_counter_collections(tf: Terraform) -> None:
    # api_keys and grading_job_counters live in the Gradeq database (GoogleFamily uses one
    # Firestore client for every store): the intake's conditioned datastore.user covers them.
    grant = tf.resource("google_project_iam_member", "firestore_user")
    assert grant["role"] == "roles/datastore.user"
    assert tfconfig.account_of(tf.locals["firestore_users"]["intake"]) == "intake"
    condition = block(grant, "condition")
    assert condition is not None
    assert "${google_firestore_database.main.name}" in condition["expression"]
    assert tf.locals["common_env"]["GRADEQ_FIRESTORE_DATABASE"] == (
        "${google_firestore_database.main.name}"
    )


def test_collections_terraform_leaves_to_the_code_defaults(tf: Terraform) -> None:
    # Terraform does not set them, so the intake and `python -m services.intake.auth.keys` run
    # by an operator with the documented env (docs/deploy.md) use the same collections.
    names = set(tf.locals["common_env"]) | set(tf.locals["intake_settings"])
    assert "GRADEQ_API_KEYS_COLLECTION" not in names
    assert "GRADEQ_COUNTERS_COLLECTION" not in names


# --- Operator keys (admin API and dashboard): a secret only the intake reads.


def test_operator_keys_secret_is_named_from_the_prefix_and_adopted(tf: Terraform) -> None:
    assert tf.locals["secret_ids"]["operator_keys"] == "${var.name_prefix}-operator-keys"
    secret = tf.resource("google_secret_manager_secret", "operator_keys")
    assert secret["secret_id"] == "${local.secret_ids.operator_keys}"
    assert "count" not in secret and "for_each" not in secret
    adopted = [i for i in tf.imports if i["to"] == "${google_secret_manager_secret.operator_keys}"]
    assert adopted == [
        {
            "to": "${google_secret_manager_secret.operator_keys}",
            "id": "projects/${var.project_id}/secrets/${local.secret_ids.operator_keys}",
        }
    ]
    assert tf.outputs["secrets"]["value"]["operator_keys"] == (
        "${google_secret_manager_secret.operator_keys.secret_id}"
    )


def test_only_the_intake_may_read_the_operator_keys(tf: Terraform) -> None:
    grants = {
        name: body
        for name, body in tf.of_type("google_secret_manager_secret_iam_member").items()
        if ("resource", "google_secret_manager_secret", "operator_keys")
        in references(body["secret_id"])
    }
    assert set(grants) == {"intake_operator_keys"}
    grant = grants["intake_operator_keys"]
    assert grant["secret_id"] == "${google_secret_manager_secret.operator_keys.id}"
    assert grant["role"] == "roles/secretmanager.secretAccessor"
    assert grant["member"] == 'serviceAccount:${google_service_account.main["intake"].email}'
    assert "condition" not in grant


def test_the_intake_reads_its_operator_keys_from_the_secret(tf: Terraform) -> None:
    # Unconditionally: the first entry of the intake's secret_env, outside any condition.
    assert str(tfconfig.service(tf, "intake")["secret_env"]).startswith(
        "${merge({GRADEQ_OPERATOR_KEYS = google_secret_manager_secret.operator_keys.secret_id}, "
    )
    assert tfconfig.secret_env(tf, "intake")["GRADEQ_OPERATOR_KEYS"] == "operator_keys"
    # The setting the intake reads, and no plain value for it anywhere else.
    assert "operator_keys" in Settings.model_fields
    plain = str(tf.locals["common_env"]) + str(tf.locals["intake_settings"])
    assert "OPERATOR_KEYS" not in plain
    for service in ("worker", "notification"):
        assert "OPERATOR_KEYS" not in str(tfconfig.service(tf, service)), service


# --- Settings passed to the intake.


def test_intake_settings_reach_the_intake_only(tf: Terraform) -> None:
    assert tf.locals["intake_env"] == (
        '${{for name, value in local.intake_settings : name => value if value != ""}}'
    )
    assert "local.intake_env" in _env_for_each(tf, "intake")
    for service in ("worker", "notification"):
        assert "intake_env" not in _env_for_each(tf, service), service
    # GRADEQ_ANALYTICS_READERS: the analytics service is not deployed (BigQuery subscription).
    configured = "".join(tfconfig.strings([tf.resources, tf.modules, tf.locals]))
    assert "ANALYTICS_READERS" not in configured


def test_intake_settings_are_the_variables(tf: Terraform) -> None:
    settings = tf.locals["intake_settings"]
    assert settings == {
        "GRADEQ_CORS_ORIGINS": '${join(",", var.cors_origins)}',
        "GRADEQ_FIREBASE_PROJECT_ID": (
            '${var.firebase_auth ? coalesce(var.firebase_project_id, var.project_id) : ""}'
        ),
        "GRADEQ_FIREBASE_TENANT_CLIENTS": (
            '${join(",", [for tenant, client in var.firebase_tenant_clients'
            ' : "${tenant}=${client}"])}'
        ),
        **{
            f"GRADEQ_{setting.upper()}": f"${{tostring(var.admission.{field})}}"
            for field, setting in ADMISSION_FIELDS.items()
        },
        # Cloud Run's front appends the caller's address: failures are counted per caller.
        "GRADEQ_TRUSTED_PROXY_HOPS": "${tostring(var.intake_trusted_proxy_hops)}",
        # LTI 1.3 launches, when a tool URL is set (left out when empty: LTI off).
        "GRADEQ_LTI_TOOL_URL": "${var.lti_tool_url}",
        # Erasure answers name the raw events table (docs/review.md).
        "GRADEQ_ANALYTICS_TABLE": (
            "${var.project_id}.${var.analytics_dataset_id}.grading_completed_raw"
        ),
    }
    assert tf.variables["intake_trusted_proxy_hops"]["default"] == 1
    for name in settings:
        assert name.removeprefix("GRADEQ_").lower() in Settings.model_fields, name


def test_string_settings_default_to_the_code_defaults(tf: Terraform) -> None:
    # Left out when empty: the code's defaults are empty too.
    assert tf.variables["cors_origins"]["default"] == []
    assert tf.variables["firebase_tenant_clients"]["default"] == {}
    assert tf.variables["firebase_auth"]["default"] is False
    assert tf.variables["lti_tool_url"]["default"] == ""
    for setting in (
        "cors_origins",
        "firebase_project_id",
        "firebase_tenant_clients",
        "lti_tool_url",
    ):
        assert Settings.model_fields[setting].default == "", setting


@pytest.mark.parametrize(
    ("enabled", "firebase_project", "expected"),
    [
        (False, "", ""),
        (False, "other-project", ""),
        (True, "", "my-gradeq-project"),
        (True, "other-project", "other-project"),
    ],
)
def test_firebase_project_is_the_project_unless_set(
    tf: Terraform, enabled: bool, firebase_project: str, expected: str
) -> None:
    value = tfconfig.evaluate(
        tf.locals["intake_settings"]["GRADEQ_FIREBASE_PROJECT_ID"],
        {
            "var.firebase_auth": enabled,
            "var.firebase_project_id": firebase_project,
            "var.project_id": "my-gradeq-project",
        },
    )
    assert value == expected


def test_firebase_project_validation_is_the_project_id_pattern(tf: Terraform) -> None:
    (project,) = tf.variables["project_id"]["validation"]
    (firebase,) = tf.variables["firebase_project_id"]["validation"]
    pattern = re.search(r'regex\("([^"]+)", var\.project_id\)', project["condition"])
    assert pattern
    assert firebase["condition"] == (
        f'${{var.firebase_project_id == "" || can(regex("{pattern.group(1)}", '
        "var.firebase_project_id))}"
    )


def _regex_in(condition: str) -> re.Pattern[str]:
    found = re.findall(r'regex\("(.+?)", \w+\)', condition)
    assert found and len(set(found)) == 1, condition
    assert found[0].startswith("^") and found[0].endswith("$")
    return re.compile(found[0].replace("\\\\", "\\"))


def _tenant_pattern(tf: Terraform) -> re.Pattern[str]:
    conditions = [v["condition"] for v in tf.variables["firebase_tenant_clients"]["validation"]]
    (with_regex,) = [c for c in conditions if "regex(" in c]
    return _regex_in(with_regex)


def _render_tenants(tenants: dict[str, str]) -> str:
    # join(",", [for tenant, client in MAP : "${tenant}=${client}"]); terraform walks a
    # map's keys in lexical order.
    return ",".join(f"{t}={c}" for t, c in sorted(tenants.items()))


@pytest.mark.parametrize(
    ("tenant", "client", "valid"),
    [
        ("tenant-a1b2", "acme", True),
        ("school-x", "client.with.dots", True),
        ("t", "c_1", True),
        ("a=b", "c", False),
        ("a", "b=c", False),  # parses today, but "=" separates a pair: refused
        ("a,b", "c", False),
        ("a", "b,c", False),
        (" a", "c", False),
        ("a", "c ", False),
        ("", "c", False),
        ("a", "", False),
    ],
)
def test_tenant_validation_accepts_only_what_round_trips(
    tf: Terraform, tenant: str, client: str, valid: bool
) -> None:
    pattern = _tenant_pattern(tf)
    accepted = bool(pattern.search(tenant) and pattern.search(client))
    try:
        parsed = Settings(firebase_tenant_clients=_render_tenants({tenant: client}))
        round_trips = parsed.firebase_tenant_client_map() == {tenant: client}
    except ValueError:
        round_trips = False
    assert accepted is valid
    # Whatever terraform accepts reaches the intake as the same tenant -> client pair.
    assert round_trips or not accepted


def test_several_tenants_round_trip() -> None:
    tenants = {"tenant-b": "beta", "tenant-a": "acme", "z": "zed"}
    parsed = Settings(firebase_tenant_clients=_render_tenants(tenants))
    assert parsed.firebase_tenant_client_map() == tenants


@pytest.mark.parametrize(
    ("enabled", "tenants", "accepted"),
    [(False, {}, True), (True, {}, True), (True, {"t": "c"}, True), (False, {"t": "c"}, False)],
)
def test_tenants_need_firebase_auth(
    tf: Terraform, enabled: bool, tenants: dict[str, str], accepted: bool
) -> None:
    conditions = [v["condition"] for v in tf.variables["firebase_tenant_clients"]["validation"]]
    (needs,) = [c for c in conditions if "var.firebase_auth" in c]
    values = {"var.firebase_auth": enabled, "var.firebase_tenant_clients": tenants}
    assert tfconfig.evaluate(needs, values) is accepted


def _cors_pattern(tf: Terraform) -> re.Pattern[str]:
    (validation,) = tf.variables["cors_origins"]["validation"]
    return _regex_in(validation["condition"])


@pytest.mark.parametrize(
    ("origin", "valid"),
    [
        ("https://app.example.com", True),
        ("https://app.example.com:8443", True),
        ("https://xn--bcher-kva.example", True),
        ("*", False),
        ("https://*.example.com", False),
        ("app.example.com", False),
        ("http://app.example.com", False),  # a deployment serves https frontends only
        ("https://app.example.com/", False),
        ("https://app.example.com/path", False),
        ("https://a.example.com,https://b.example.com", False),
        ("https://app.example.com ", False),
        ("", False),
    ],
)
def test_cors_validation_accepts_only_exact_https_origins(
    tf: Terraform, origin: str, valid: bool
) -> None:
    accepted = bool(_cors_pattern(tf).search(origin))
    assert accepted is valid
    try:
        kept = Settings(cors_origins=origin).cors_origin_list()
    except ValueError:
        kept = None
    if accepted:
        # What terraform lets through, the intake keeps exactly (no silent rewrite).
        assert kept == [origin]
    if kept is None:
        assert not accepted  # the intake's own refusals ("*", no scheme) come first


def test_several_cors_origins_are_passed_comma_separated(tf: Terraform) -> None:
    origins = ["https://app.example.com", "https://admin.example.com:8443"]
    assert all(_cors_pattern(tf).search(o) for o in origins)
    # join(",", var.cors_origins)
    assert Settings(cors_origins=",".join(origins)).cors_origin_list() == origins


def _admission_defaults(tf: Terraform) -> dict[str, Any]:
    return tfconfig.optional_defaults(tf.variables["admission"]["type"])


def test_admission_defaults_are_the_code_defaults(tf: Terraform) -> None:
    defaults = _admission_defaults(tf)
    assert set(defaults) == set(ADMISSION_FIELDS)
    for field, setting in ADMISSION_FIELDS.items():
        assert defaults[field] == Settings.model_fields[setting].default, field
    assert tf.variables["admission"]["default"] == {}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_active_jobs_per_client", 0),
        ("max_active_jobs_per_client", 1),
        ("max_active_jobs_per_client", 2.5),
        ("max_active_jobs_per_client", 50000),
        ("max_backlog", 0),
        ("max_backlog", 1),
        ("max_backlog", 1000.5),
        ("max_backlog", 10000000),
        ("submit_burst", 0),
        ("submit_burst", -1),
        ("submit_burst", 1),
        ("submit_burst", 1.5),
        ("submit_rate_per_s", 0),
        ("submit_rate_per_s", -0.5),
        ("submit_rate_per_s", 0.01),
        ("submit_rate_per_s", 20),
    ],
)
def test_admission_bounds_are_the_intakes(tf: Terraform, field: str, value: float) -> None:
    admission = {**_admission_defaults(tf), field: value}
    values = {f"var.admission.{name}": v for name, v in admission.items()}
    (validation,) = tf.variables["admission"]["validation"]
    accepted = tfconfig.evaluate(validation["condition"], values)
    setting: dict[str, Any] = {ADMISSION_FIELDS[field]: value}
    try:
        Settings(**setting)
        intake_accepts = True
    except ValidationError:
        intake_accepts = False
    assert accepted is intake_accepts


# --- Firestore: the client listing's indexes, and no TTL on counters or keys.

LISTING_INDEXES = (
    "jobs_client_created",
    "jobs_client_status_created",
    "jobs_client_submission_created",
    "jobs_client_status_submission_created",
    # the same school's users' jobs stored before authors (a range of client ids)
    "jobs_school_users_created",
    "jobs_school_users_status_created",
    "jobs_school_users_submission_created",
    "jobs_school_users_status_submission_created",
)


def _listing_queries() -> list[Any]:
    """The structured queries FirestoreJobStore.list_jobs sends, one per filter combination."""
    credentials = AnonymousCredentials()  # type: ignore[no-untyped-call]
    client = firestore.Client(project="p", credentials=credentials)
    store = FirestoreJobStore(client, "grading_jobs", ttl=timedelta(days=1))
    sent: list[Any] = []

    def capture(query: Query, *_args: Any, **_kwargs: Any) -> Any:
        sent.append(query._to_protobuf())
        return iter([])

    with mock.patch.object(Query, "stream", capture):
        for status in (None, JobStatus.PENDING):
            for submission in (None, "sub-1"):
                store.list_jobs(
                    JobQuery(client_id="c", limit=10, status=status, submission_id=submission)
                )
    return sent


def _disjuncts(where: Any) -> list[list[Any]]:
    """A filter as OR of ANDs of field filters (its disjunctive normal form)."""
    if where._pb.WhichOneof("filter_type") == "field_filter":
        return [[where.field_filter]]
    composite = where.composite_filter
    parts = [_disjuncts(f) for f in composite.filters]
    if composite.op.name == "OR":
        return [conjunct for part in parts for conjunct in part]
    conjuncts: list[list[Any]] = [[]]
    for part in parts:
        conjuncts = [c + d for c in conjuncts for d in part]
    return conjuncts


def _indexes_for(query: Any) -> list[list[tuple[str, str]]]:
    """The composite indexes a query needs, one per branch of its OR: the branch's equality
    fields, then its order (an equality field's order is no index field)."""
    needed = []
    for conjunct in _disjuncts(query.where):
        equal = [f.field.field_path for f in conjunct if f.op.name == "EQUAL"]
        ranges = [f for f in conjunct if f.op.name != "EQUAL"]
        assert all(f.op.name in ("GREATER_THAN_OR_EQUAL", "LESS_THAN") for f in ranges), ranges
        fields = [(path, "ASCENDING") for path in equal]
        fields += [
            (o.field.field_path, o.direction.name)
            for o in query.order_by
            if o.field.field_path not in equal
        ]
        needed.append(fields)
    return needed


def _fields(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(f["field_path"], f["order"]) for f in body["fields"]]


def test_every_listing_query_has_its_index(tf: Terraform) -> None:
    needed = [index for q in _listing_queries() for index in _indexes_for(q)]
    assert len(needed) == 8
    indexes = tf.of_type("google_firestore_index")
    listing = {name: _fields(indexes[name]) for name in LISTING_INDEXES}
    assert sorted(needed) == sorted(listing.values())
    for name in LISTING_INDEXES:
        assert indexes[name]["collection"] == "${var.jobs_collection}"
        assert indexes[name]["query_scope"] == "COLLECTION"
        assert indexes[name]["database"] == "${google_firestore_database.main.name}"


def test_the_listing_index_reader_sees_the_order() -> None:
    # The check above compares directions too: the newest-first order is DESCENDING.
    (first, *_rest) = _listing_queries()
    assert _indexes_for(first) == [
        [("client_id", "ASCENDING"), ("created_at", "DESCENDING"), ("__name__", "DESCENDING")],
        [("created_at", "DESCENDING"), ("client_id", "DESCENDING"), ("__name__", "DESCENDING")],
    ]


def test_jobs_indexes_are_built_one_after_the_other(tf: Terraform) -> None:
    # Concurrent index builds on one collection can fail with 409: one chain, no forks.
    indexes = tf.of_type("google_firestore_index")
    after: dict[str, str] = {}
    for name, body in indexes.items():
        waits = [n for t, n in depends_on(body) if t == "google_firestore_index"]
        assert len(waits) <= 1, (name, waits)
        if waits:
            after[waits[0]] = name
    roots = [n for n, b in indexes.items() if not depends_on(b)]
    assert len(roots) == 1, roots
    chain = [roots[0]]
    while chain[-1] in after:
        chain.append(after[chain[-1]])
    assert sorted(chain) == sorted(indexes), chain
    assert set(LISTING_INDEXES) <= set(chain)


# The operators' listing (admin API, dashboard): FirestoreJobStore.find_jobs.

OPERATOR_LISTING_INDEXES = (
    "jobs_status_created",
    "jobs_assignment_created",
    "jobs_client_assignment_created",
    "jobs_status_assignment_created",
    "jobs_client_status_assignment_created",
)
_WHEN = datetime(2026, 11, 1, tzinfo=UTC)
_RANGES = ((None, None), (_WHEN, None), (None, _WHEN), (_WHEN, _WHEN + timedelta(days=1)))


def _operator_listing_queries() -> list[tuple[JobFilter, Any]]:
    """(filter, structured query) FirestoreJobStore.find_jobs sends, for every combination of
    its filters, with and without a created range, first page and next page."""
    credentials = AnonymousCredentials()  # type: ignore[no-untyped-call]
    client = firestore.Client(project="p", credentials=credentials)
    store = FirestoreJobStore(client, "grading_jobs", ttl=timedelta(days=1))
    sent: list[tuple[JobFilter, Any]] = []
    where = JobFilter()

    def capture(query: Query, *_args: Any, **_kwargs: Any) -> Any:
        sent.append((where, query._to_protobuf()))
        return iter([])

    with mock.patch.object(Query, "stream", capture):
        for status, client_id, assignment in itertools.product(
            (None, JobStatus.FAILED), (None, "c"), (None, "a-1")
        ):
            for created_from, created_to in _RANGES:
                where = JobFilter(
                    status=status,
                    client_id=client_id,
                    assignment_id=assignment,
                    created_from=created_from,
                    created_to=created_to,
                )
                for after in (None, JobCursor(created_at=_WHEN, job_id="j")):
                    store.find_jobs(where, limit=50, after=after)
    return sent


def _filters(query: Any) -> list[Any]:
    """A structured query's field filters, whether one or several."""
    if query.where.composite_filter.filters:
        return [f.field_filter for f in query.where.composite_filter.filters]
    if query.where.field_filter.field.field_path:
        return [query.where.field_filter]
    return []


def _equalities_and_order(query: Any) -> tuple[frozenset[str], list[tuple[str, str]]]:
    """A query's equality fields and its order; its other filters must be ranges on the
    first ordered field, which the same index serves."""
    order = [(o.field.field_path, o.direction.name) for o in query.order_by]
    equal = set()
    for f in _filters(query):
        if f.op.name == "EQUAL":
            equal.add(f.field.field_path)
        else:
            assert f.op.name in ("GREATER_THAN_OR_EQUAL", "LESS_THAN"), f
            assert f.field.field_path == order[0][0], (f, order)
    return frozenset(equal), order


def _serves(
    index: list[tuple[str, str]], equal: frozenset[str], order: list[tuple[str, str]]
) -> bool:
    """Whether a composite index serves equality filters on `equal` (in any order), then
    `order`."""
    n = len(equal)
    return {f for f, _ in index[:n]} == equal and index[n:] == order


def test_find_jobs_sends_the_shapes_the_indexes_are_made_for() -> None:
    sent = _operator_listing_queries()
    assert len(sent) == 8 * len(_RANGES) * 2
    for where, query in sent:
        equal, order = _equalities_and_order(query)
        expected = {
            name
            for name, value in (
                ("status", where.status),
                ("client_id", where.client_id),
                ("request.assignment_id", where.assignment_id),
            )
            if value is not None
        }
        assert equal == expected, (where, equal)
        assert order == [("created_at", "DESCENDING"), ("__name__", "DESCENDING")]
        ranges = [f.field.field_path for f in _filters(query) if f.op.name != "EQUAL"]
        assert len(ranges) == (where.created_from is not None) + (where.created_to is not None)


def test_every_operator_listing_query_has_an_index(tf: Terraform) -> None:
    indexes = {
        name: _fields(body)
        for name, body in tf.of_type("google_firestore_index").items()
        if body["collection"] == "${var.jobs_collection}" and body["query_scope"] == "COLLECTION"
    }
    used: set[str] = set()
    for where, query in _operator_listing_queries():
        equal, order = _equalities_and_order(query)
        serving = [name for name, fields in indexes.items() if _serves(fields, equal, order)]
        if not equal:
            # Range and order on created_at only: the automatic single-field index, which
            # must therefore stay on (no exemption of created_at).
            assert not serving, serving
            continue
        assert len(serving) == 1, (where, serving)  # one index, none duplicated
        used.update(serving)
    assert set(OPERATOR_LISTING_INDEXES) <= used
    assert used == set(OPERATOR_LISTING_INDEXES) | {
        "jobs_client_created",
        "jobs_client_status_created",
    }


def test_created_at_keeps_its_automatic_index(tf: Terraform) -> None:
    for name, body in tf.of_type("google_firestore_field").items():
        assert body["field"] not in ("created_at", "request", "request.assignment_id"), name


def test_operator_listing_indexes_are_built_after_the_client_listing(tf: Terraform) -> None:
    indexes = tf.of_type("google_firestore_index")
    for name in OPERATOR_LISTING_INDEXES:
        assert indexes[name]["database"] == "${google_firestore_database.main.name}"
        waits = depends_on(indexes[name])
        assert len(waits) == 1, (name, waits)
    assert depends_on(indexes["jobs_status_created"]) == {
        ("google_firestore_index", "jobs_client_status_submission_created")
    }


def test_counters_and_api_keys_never_expire(tf: Terraform) -> None:
    ttl = tf.of_type("google_firestore_field")
    collections = {b["collection"] for b in ttl.values() if "ttl_config" in b}
    assert collections == {
        "${var.jobs_collection}",
        "${var.processed_events_collection}",
        "budget_charges",
    }
    defaults = {tf.variables[c[6:-1]]["default"] for c in collections if c.startswith("${")}
    for setting in ("counters_collection", "api_keys_collection"):
        assert Settings.model_fields[setting].default not in defaults, setting
    for body in ttl.values():
        if "ttl_config" in body:
            assert "counter" not in str(body["collection"]), body
            assert "key" not in str(body["collection"]), body


def test_the_backlog_shards_client_map_is_not_indexed(tf: Terraform) -> None:
    # Each shard holds one map entry per client: indexed, a shard could reach Firestore's
    # 40,000 index entries per document, and nothing queries it.
    field = tf.resource("google_firestore_field", "counters_clients")
    assert field["database"] == "${google_firestore_database.main.name}"
    assert field["collection"] == Settings.model_fields["counters_collection"].default
    assert "GRADEQ_COUNTERS_COLLECTION" not in tf.locals["common_env"]
    assert field["field"] == CLIENTS
    assert block(field, "index_config") == {}
    assert "ttl_config" not in field
