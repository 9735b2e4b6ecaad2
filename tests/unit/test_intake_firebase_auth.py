"""Web frontends' Firebase ID tokens, forged here with a throwaway key whose certificate
the test hands to the verifier in place of Google's certificate endpoint."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import requests
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from flask.testing import FlaskClient
from google.auth import crypt, jwt
from google.oauth2 import id_token

from services.intake.app import create_app
from services.intake.auth.firebase import CachingRequest, FirebaseAuthenticator, SignInPolicy
from services.intake.auth.firebase_revocation import Account, IdentityToolkitLookup
from shared.bootstrap import Adapters
from shared.clock import FrozenClock
from shared.config.settings import Settings
from shared.domain.errors import DependencyUnavailable
from tests.support.http_target import RecordingTarget, Reply
from tests.unit.conftest import API_KEY
from tests.unit.test_intake_api import BODY, assert_problem

PROJECT = "demo-frontend"
KID = "test-key-1"
FIREBASE_CERTS_URL = (
    "https://www.googleapis.com/robot/v1/metadata/x509/securetoken@system.gserviceaccount.com"
)

# google-auth's crypt and jwt helpers carry no annotations; their types as used here.
rsa_signer: Callable[..., crypt.RSASigner] = crypt.RSASigner.from_string
encode_jwt: Callable[[crypt.Signer, Mapping[str, Any]], bytes] = jwt.encode


def _keypair() -> tuple[bytes, bytes]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "securetoken.test")])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return private, cert.public_bytes(serialization.Encoding.PEM)


PRIVATE_PEM, CERT_PEM = _keypair()


@dataclass
class CertResponse:
    status: int
    data: bytes
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class FakeCertEndpoint:
    """Stands in for Google's certificate URL; counts fetches."""

    calls: list[str] = field(default_factory=list)

    def __call__(self, url: str, method: str = "GET", **kwargs: Any) -> CertResponse:
        self.calls.append(url)
        body = json.dumps({KID: CERT_PEM.decode()}).encode()
        return CertResponse(200, body, {"cache-control": "public, max-age=3600"})


#: Firebase's ID tokens last an hour.
TOKEN_LIFETIME_S = 3600
#: For a token minted once for a whole module (its headers a module constant): it must
#: outlive any run of the suite, however long after the import its tests run (mutmut, for
#: one, imports the tests once and runs a mutant's tests up to hours later).
SESSION_LIFETIME_S = 7 * 24 * 3600


def token(lifetime_s: int = TOKEN_LIFETIME_S, **overrides: Any) -> str:
    now = int(time.time())
    claims = {
        "iss": f"https://securetoken.google.com/{PROJECT}",
        "aud": PROJECT,
        "sub": "user-123",
        "iat": now - 10,
        "exp": now + lifetime_s,
        "auth_time": now - 10,
        "email": "someone@school.example",
        "email_verified": True,
        "firebase": {"sign_in_provider": "password"},
        "gradeq_client": "school-a",
        **overrides,
    }
    claims = {k: v for k, v in claims.items() if v is not None}
    signer = rsa_signer(PRIVATE_PEM, key_id=KID)
    return encode_jwt(signer, claims).decode()


#: The schools of these tests let students send practice jobs of their own.
PRACTICE = "school-a,school-b,client-a"
#: A practice job: a student's own rubric, no assignment, no lane, no callback.
STUDENT_BODY = {k: v for k, v in BODY.items() if k != "assignment_id"}


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"practice_clients": PRACTICE})


@pytest.fixture
def endpoint() -> FakeCertEndpoint:
    return FakeCertEndpoint()


@pytest.fixture
def client(
    settings: Settings, adapters: Adapters, clock: FrozenClock, endpoint: FakeCertEndpoint
) -> FlaskClient:
    firebase = FirebaseAuthenticator(
        PROJECT, "gradeq_client", {"tenant-b": "school-b"}, CachingRequest(endpoint)
    )
    return create_app(settings, adapters, clock, firebase=firebase).test_client()


def submit(client: FlaskClient, bearer: str, key: str = "k-1", **headers: str) -> Any:
    return client.post(
        "/v1/grading-jobs",
        json=BODY if bearer.startswith("gq_") else STUDENT_BODY,
        headers={"Authorization": f"Bearer {bearer}", "Idempotency-Key": key, **headers},
    )


def test_a_valid_token_is_accepted_and_scoped_to_its_client(
    client: FlaskClient, endpoint: FakeCertEndpoint
) -> None:
    job = submit(client, token()).get_json()
    mine = client.get(
        f"/v1/grading-jobs/{job['id']}", headers={"Authorization": f"Bearer {token()}"}
    )
    assert mine.status_code == 200
    # Another client's user cannot see it.
    other = token(gradeq_client="school-z", sub="user-9")
    assert_problem(
        client.get(f"/v1/grading-jobs/{job['id']}", headers={"Authorization": f"Bearer {other}"}),
        404,
        "job-not-found",
    )
    # The certificates were fetched once and then served from the cache.
    assert len(endpoint.calls) == 1


def test_an_expired_token_is_401(client: FlaskClient) -> None:
    now = int(time.time())
    expired = token(iat=now - 7200, auth_time=now - 7200, exp=now - 3600)
    assert_problem(submit(client, expired), 401, "unauthenticated")


def test_a_token_for_another_project_is_401(client: FlaskClient) -> None:
    foreign = token(aud="someone-else", iss="https://securetoken.google.com/someone-else")
    assert_problem(submit(client, foreign), 401, "unauthenticated")


def test_a_token_with_the_wrong_issuer_is_401(client: FlaskClient) -> None:
    assert_problem(submit(client, token(iss="https://accounts.google.com")), 401, "unauthenticated")


def test_a_tampered_token_is_401(client: FlaskClient) -> None:
    head, payload, signature = token().split(".")
    tampered = ".".join(
        [head, payload, signature[:-4] + ("AAAA" if signature[-4:] != "AAAA" else "BBBB")]
    )
    assert_problem(submit(client, tampered), 401, "unauthenticated")


def test_a_valid_token_passes_from_an_address_where_others_keep_failing(
    client: FlaskClient,
) -> None:
    """A teacher behind the school's NAT address, where students sent bad tokens and keys."""
    nat = {"REMOTE_ADDR": "203.0.113.7"}

    def from_nat(bearer: str, key: str) -> Any:
        headers = {"Authorization": f"Bearer {bearer}", "Idempotency-Key": key}
        return client.post("/v1/grading-jobs", json=BODY, headers=headers, environ_base=nat)

    for n in range(25):
        expired = token(sub=f"student-{n}", exp=int(time.time()) - 3600)
        assert_problem(from_nat(expired, f"s-{n}"), 401, "unauthenticated")
        assert from_nat(f"garbage-{n}", f"g-{n}").status_code == (401 if n < 20 else 429)
    teacher = token(sub="teacher-1", gradeq_role="teacher")
    assert from_nat(teacher, "t-1").status_code == 202
    # A token that keeps failing is throttled on its own.
    stale = token(sub="student-x", exp=int(time.time()) - 3600)
    statuses = [from_nat(stale, "x").status_code for _ in range(21)]
    assert statuses[:20] == [401] * 20 and statuses[20] == 429


def test_the_tenant_maps_to_a_client_when_there_is_no_claim(client: FlaskClient) -> None:
    tenant_token = token(
        gradeq_client=None, firebase={"tenant": "tenant-b", "sign_in_provider": "password"}
    )
    assert submit(client, tenant_token).status_code == 202
    unknown = token(
        gradeq_client=None, firebase={"tenant": "tenant-x", "sign_in_provider": "password"}
    )
    assert_problem(submit(client, unknown, key="k-2"), 403, "no-client-for-user")


def bearer(credential: str, **headers: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {credential}", **headers}


def test_without_a_role_a_signed_in_user_sees_only_their_own_jobs(client: FlaskClient) -> None:
    # The school's server submits with its key; a student of the same client signs in.
    server_job = submit(client, API_KEY, key="server-1").get_json()
    student = token(gradeq_client="client-a", sub="student-1")
    own = submit(client, student, key="own-1").get_json()
    url = f"/v1/grading-jobs/{server_job['id']}"
    # No header: the server decides, and the student only has their own scope.
    assert_problem(client.get(url, headers=bearer(student)), 404, "job-not-found")
    assert_problem(client.post(f"{url}/cancel", headers=bearer(student)), 404, "job-not-found")
    listed = client.get("/v1/grading-jobs", headers=bearer(student)).get_json()
    assert [j["id"] for j in listed["jobs"]] == [own["id"]]
    # Another student of the client does not see it either; the server's key does not mix.
    other = token(gradeq_client="client-a", sub="student-2")
    assert_problem(
        client.get(f"/v1/grading-jobs/{own['id']}", headers=bearer(other)), 404, "job-not-found"
    )
    assert client.get(url, headers=bearer(API_KEY)).status_code == 200
    # The student's job is the school's: its server sees it, marked practice.
    seen = client.get(f"/v1/grading-jobs/{own['id']}", headers=bearer(API_KEY))
    assert seen.status_code == 200


@pytest.mark.parametrize("roles", ["teacher", ["admin", "x"]])
def test_a_client_wide_role_claim_sees_the_whole_client(client: FlaskClient, roles: Any) -> None:
    server_job = submit(client, API_KEY, key="server-1").get_json()
    teacher = token(gradeq_client="client-a", sub="teacher-1", gradeq_role=roles)
    url = f"/v1/grading-jobs/{server_job['id']}"
    assert client.get(url, headers=bearer(teacher)).status_code == 200
    # The scope header narrows a client-wide user to their own jobs; it never widens.
    assert_problem(
        client.get(url, headers=bearer(teacher, **{"Gradeq-Scope": "user"})), 404, "job-not-found"
    )
    student = token(gradeq_client="client-a", sub="s-1", gradeq_role="student")
    for scope in ("client", "CLIENT", ""):
        assert_problem(
            client.get(url, headers=bearer(student, **{"Gradeq-Scope": scope})),
            404,
            "job-not-found",
        )


def test_the_client_wide_roles_and_their_claim_are_settings(
    settings: Settings, adapters: Adapters, clock: FrozenClock, endpoint: FakeCertEndpoint
) -> None:
    policy = SignInPolicy(role_claim="school_role", client_wide_roles=frozenset({"staff"}))
    firebase = FirebaseAuthenticator(PROJECT, "gradeq_client", {}, CachingRequest(endpoint), policy)
    app = create_app(settings, adapters, clock, firebase=firebase).test_client()
    server_job = submit(app, API_KEY, key="server-1").get_json()
    url = f"/v1/grading-jobs/{server_job['id']}"
    staff = token(gradeq_client="client-a", school_role="staff")
    assert app.get(url, headers=bearer(staff)).status_code == 200
    # The default claim and roles mean nothing under this policy.
    teacher = token(gradeq_client="client-a", gradeq_role="teacher")
    assert_problem(app.get(url, headers=bearer(teacher)), 404, "job-not-found")


def test_a_frontend_may_scope_jobs_to_the_user(client: FlaskClient) -> None:
    scoped = {"Gradeq-Scope": "user"}
    alice = submit(client, token(sub="alice"), **scoped).get_json()
    # The same client's other user does not see Alice's job; Alice does.
    bob = token(sub="bob")
    url = f"/v1/grading-jobs/{alice['id']}"
    assert_problem(
        client.get(url, headers={"Authorization": f"Bearer {bob}", **scoped}), 404, "job-not-found"
    )
    seen = client.get(url, headers={"Authorization": f"Bearer {token(sub='alice')}", **scoped})
    assert seen.status_code == 200


def test_anonymous_sign_ins_are_refused_unless_allowed(
    client: FlaskClient,
    endpoint: FakeCertEndpoint,
    settings: Settings,
    adapters: Adapters,
    clock: FrozenClock,
) -> None:
    anonymous = token(email=None, email_verified=None, firebase={"sign_in_provider": "anonymous"})
    assert_problem(submit(client, anonymous), 403, "sign-in-not-accepted")
    allowing = FirebaseAuthenticator(
        PROJECT, "gradeq_client", {}, CachingRequest(endpoint), SignInPolicy(allow_anonymous=True)
    )
    app = create_app(settings, adapters, clock, firebase=allowing).test_client()
    assert submit(app, anonymous).status_code == 202


@pytest.mark.parametrize(
    "claims",
    [
        {"email_verified": False},
        {"email_verified": None},
        {"email_verified": "true"},
        {"email_verified": False, "firebase": {"sign_in_provider": "google.com"}},
    ],
)
def test_unverified_sign_ins_are_refused_unless_allowed(
    client: FlaskClient,
    endpoint: FakeCertEndpoint,
    settings: Settings,
    adapters: Adapters,
    clock: FrozenClock,
    claims: dict[str, Any],
) -> None:
    unverified = token(**claims)
    assert_problem(submit(client, unverified), 403, "sign-in-not-accepted")
    allowing = FirebaseAuthenticator(
        PROJECT, "gradeq_client", {}, CachingRequest(endpoint), SignInPolicy(allow_unverified=True)
    )
    app = create_app(settings, adapters, clock, firebase=allowing).test_client()
    assert submit(app, unverified).status_code == 202


@pytest.mark.parametrize("provider", ["phone", "custom"])
def test_providers_that_verify_the_user_need_no_email(client: FlaskClient, provider: str) -> None:
    signed_in = token(email=None, email_verified=None, firebase={"sign_in_provider": provider})
    assert submit(client, signed_in).status_code == 202


def test_a_client_claim_naming_a_user_scope_is_refused(client: FlaskClient) -> None:
    alice = submit(client, token(gradeq_client="client-a", sub="alice"), key="a-1").get_json()
    # Were ":user:" allowed in a client, this claim would be Alice's own scope.
    posing = token(gradeq_client="client-a:user:alice", sub="mallory", gradeq_role="teacher")
    assert_problem(
        client.get(f"/v1/grading-jobs/{alice['id']}", headers=bearer(posing)),
        403,
        "no-client-for-user",
    )
    with pytest.raises(ValueError, match=":user:"):
        FirebaseAuthenticator(PROJECT, "gradeq_client", {"t": "client-a:user:alice"})


def test_tokens_are_refused_when_no_firebase_project_is_configured(
    settings: Settings, adapters: Adapters, clock: FrozenClock
) -> None:
    plain = create_app(settings, adapters, clock).test_client()
    assert_problem(submit(plain, token()), 401, "unauthenticated")


# --- revocation, where the settings ask for it --------------------------------------


@dataclass
class FakeAccounts:
    """Stands in for the account lookup; records whom it was asked about."""

    account_of: dict[str, Account]
    asked: list[tuple[str, str | None]] = field(default_factory=list)

    def account(self, uid: str, tenant: str | None) -> Account | None:
        self.asked.append((uid, tenant))
        return self.account_of.get(uid)


def checking(
    settings: Settings,
    adapters: Adapters,
    clock: FrozenClock,
    endpoint: FakeCertEndpoint,
    accounts: FakeAccounts,
) -> FlaskClient:
    firebase = FirebaseAuthenticator(
        PROJECT,
        "gradeq_client",
        {"tenant-b": "school-b"},
        CachingRequest(endpoint),
        accounts=accounts,
    )
    return create_app(settings, adapters, clock, firebase=firebase).test_client()


def test_a_sign_in_revoked_since_is_refused_when_checked(
    settings: Settings, adapters: Adapters, clock: FrozenClock, endpoint: FakeCertEndpoint
) -> None:
    now = int(time.time())
    accounts = FakeAccounts(
        {
            "kept": Account(valid_since_s=now - 3600, disabled=False),
            "revoked": Account(valid_since_s=now, disabled=False),
            "disabled": Account(valid_since_s=0, disabled=True),
        }
    )
    client = checking(settings, adapters, clock, endpoint, accounts)
    signed_in = {"auth_time": now - 60, "iat": now - 10}
    assert submit(client, token(sub="kept", **signed_in)).status_code == 202
    # Its token is still within its hour, but the sign-in predates the revocation.
    assert_problem(submit(client, token(sub="revoked", **signed_in)), 401, "unauthenticated")
    assert_problem(submit(client, token(sub="disabled", **signed_in)), 401, "unauthenticated")
    assert_problem(submit(client, token(sub="deleted", **signed_in)), 401, "unauthenticated")
    tenant = token(
        sub="kept",
        gradeq_client=None,
        firebase={"tenant": "tenant-b", "sign_in_provider": "password"},
        **signed_in,
    )
    assert submit(client, tenant, key="k-2").status_code == 202
    assert accounts.asked[-1] == ("kept", "tenant-b")
    # Unchecked (the default), the same revoked token is accepted: the check is opt-in.
    unchecked = FirebaseAuthenticator(PROJECT, "gradeq_client", {}, CachingRequest(endpoint))
    app = create_app(settings, adapters, clock, firebase=unchecked).test_client()
    assert submit(app, token(sub="revoked", **signed_in), key="k-3").status_code == 202


def test_the_identity_toolkit_lookup_asks_for_the_user_in_its_tenant() -> None:
    answers = iter(
        [
            Reply(
                200,
                {"Content-Type": "application/json"},
                body=json.dumps(
                    {"users": [{"localId": "u1", "validSince": "1700000000", "disabled": True}]}
                ).encode(),
            ),
            Reply(200, {"Content-Type": "application/json"}, body=b"{}"),
            Reply(500, body=b"{}"),
        ]
    )
    with RecordingTarget(lambda _request: next(answers)) as toolkit:
        lookup = IdentityToolkitLookup(PROJECT, session=requests.Session, base_url=toolkit.url)
        assert lookup.account("u1", "tenant-b") == Account(1_700_000_000, disabled=True)
        assert lookup.account("u2", None) is None
        with pytest.raises(DependencyUnavailable):
            lookup.account("u3", None)
    first, second, _ = toolkit.requests
    assert (first.method, first.path) == ("POST", f"/v1/projects/{PROJECT}/accounts:lookup")
    assert first.json == {"localId": ["u1"], "tenantId": "tenant-b"}
    assert second.json == {"localId": ["u2"]}


@pytest.fixture
def audience_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """google-auth before 2.4x verified a Firebase token's signature and audience only."""

    def verify(token: str, request: Any, audience: str, clock_skew_in_seconds: int) -> Any:
        return id_token.verify_token(
            token,
            request,
            audience=audience,
            certs_url=FIREBASE_CERTS_URL,
            clock_skew_in_seconds=clock_skew_in_seconds,
        )

    monkeypatch.setattr(id_token, "verify_firebase_token", verify)


@pytest.mark.usefixtures("audience_only")
def test_the_issuer_is_checked_whatever_google_auth_checks(client: FlaskClient) -> None:
    assert submit(client, token()).status_code == 202
    for issuer in ("https://accounts.google.com", "https://securetoken.google.com/other"):
        assert_problem(submit(client, token(iss=issuer), key="k-2"), 401, "unauthenticated")
