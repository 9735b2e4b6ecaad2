"""Push authentication: Cloud Run's forwarded ID tokens, Google-signed ones, a shared token."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable, Mapping
from typing import Any

import jwt as pyjwt
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from google.auth import crypt, jwt

from localcloud.cloudrun import forwarded_id_token as minted_by_local_callers
from shared.config.settings import Backend, PushAuth, Settings
from shared.http import push_auth
from shared.http.errors import Unauthenticated
from shared.http.push_auth import (
    FORWARDED_SIGNATURE,
    ForwardedTokenVerifier,
    OidcVerifier,
    SharedTokenVerifier,
    build_verifier,
    cached_certs_request,
)
from tests.support.http_target import RecordingTarget, Reply
from tests.support.id_tokens import forwarded_id_token, google_claims, signed_id_token

AUDIENCE = "https://worker-123.europe-west1.run.app"
TASKS_SA = "tasks-invoker@proj.iam.gserviceaccount.com"

# google-auth's crypt and jwt helpers carry no annotations; their types as used here.
rsa_signer: Callable[..., crypt.RSASigner] = crypt.RSASigner.from_string
encode_jwt: Callable[[crypt.Signer, Mapping[str, Any]], bytes] = jwt.encode


class _Response:
    def __init__(self, body: dict[str, str]) -> None:
        self.status = 200
        self.data = json.dumps(body).encode()
        self.headers: dict[str, str] = {}


class FakeCertsTransport:
    """Serves our own certificate where google-auth fetches Google's signing certs."""

    def __init__(self, key_id: str, cert_pem: str) -> None:
        self.certs = {key_id: cert_pem}
        self.calls = 0

    def __call__(self, url: str, method: str = "GET", **kwargs: Any) -> _Response:
        self.calls += 1
        return _Response(self.certs)


@pytest.fixture(scope="module")
def signing() -> tuple[crypt.RSASigner, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-signer")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    signer = rsa_signer(pem, key_id="k1")
    return signer, cert.public_bytes(serialization.Encoding.PEM).decode()


def token(signer: crypt.RSASigner, **claims: Any) -> str:
    now = int(time.time())
    payload = {
        "iss": "https://accounts.google.com",
        "aud": AUDIENCE,
        "iat": now,
        "exp": now + 300,
        "email": TASKS_SA,
        "email_verified": True,
        "sub": "1234",
        **claims,
    }
    return encode_jwt(signer, payload).decode()


def verifier(signing: tuple[crypt.RSASigner, str]) -> OidcVerifier:
    return OidcVerifier(AUDIENCE, frozenset({TASKS_SA}), FakeCertsTransport("k1", signing[1]))


def test_valid_google_token_from_an_allowed_account_passes(
    signing: tuple[crypt.RSASigner, str],
) -> None:
    verifier(signing).verify(token(signing[0]))


@pytest.mark.parametrize(
    "claims",
    [
        {"aud": "https://someone-else.run.app"},
        {"email": "intruder@proj.iam.gserviceaccount.com"},
        {"email_verified": False},
        {"iss": "https://evil.example"},
        {"exp": int(time.time()) - 3600, "iat": int(time.time()) - 7200},
    ],
)
def test_wrong_audience_account_issuer_or_expiry_is_rejected(
    signing: tuple[crypt.RSASigner, str], claims: dict[str, Any]
) -> None:
    with pytest.raises(Unauthenticated):
        verifier(signing).verify(token(signing[0], **claims))


def test_token_signed_by_another_key_is_rejected(signing: tuple[crypt.RSASigner, str]) -> None:
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = other.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    forged = token(rsa_signer(pem, key_id="k1"))
    with pytest.raises(Unauthenticated):
        verifier(signing).verify(forged)


def test_shared_token_is_compared_exactly() -> None:
    check = SharedTokenVerifier("s3cret")
    check.verify("s3cret")
    with pytest.raises(Unauthenticated):
        check.verify("s3cret2")


def test_production_refuses_local_push_auth(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FIRESTORE_EMULATOR_HOST", raising=False)
    monkeypatch.delenv("PUBSUB_EMULATOR_HOST", raising=False)
    with pytest.raises(ValueError, match="use oidc"):
        Settings(backend=Backend.GOOGLE, project_id="p", push_auth=PushAuth.SHARED_TOKEN)
    with pytest.raises(ValueError, match="only allowed against the emulators"):
        Settings(push_auth=PushAuth.NONE)
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", "127.0.0.1:1")
    assert Settings(push_auth=PushAuth.NONE).push_auth is PushAuth.NONE


def test_grader_timeout_must_stay_below_the_dispatch_deadline() -> None:
    with pytest.raises(ValueError, match="dispatch_deadline"):
        Settings(grader_timeout_s=600)


# --- behind Cloud Run IAM: the forwarded token's claims --------------------------------


def forwarded(**claims: Any) -> str:
    return forwarded_id_token(google_claims(AUDIENCE, TASKS_SA, **claims))


def claims_verifier() -> ForwardedTokenVerifier:
    return ForwardedTokenVerifier(AUDIENCE, frozenset({TASKS_SA}))


def test_forwarded_token_from_an_allowed_account_passes() -> None:
    token = forwarded()
    assert token.endswith(".SIGNATURE_REMOVED_BY_GOOGLE")
    claims_verifier().verify(token)
    claims_verifier().verify(forwarded(iss="accounts.google.com"))


def test_the_local_stand_ins_mint_the_same_shape() -> None:
    token = minted_by_local_callers(AUDIENCE, TASKS_SA)
    header = pyjwt.get_unverified_header(token)
    assert header["alg"] == "RS256" and header["typ"] == "JWT" and header["kid"]
    assert token.split(".")[2] == FORWARDED_SIGNATURE
    claims_verifier().verify(token)


def _now() -> int:
    return int(time.time())


@pytest.mark.parametrize(
    "claims",
    [
        pytest.param({"aud": "https://someone-else.run.app"}, id="wrong-audience"),
        pytest.param({"aud": [AUDIENCE, "https://other.run.app"]}, id="audience-list"),
        pytest.param({"iss": "https://evil.example"}, id="wrong-issuer"),
        # Times as offsets from when the test runs, not from when it was collected.
        pytest.param({"exp": -60, "iat": -3660}, id="expired"),
        pytest.param({"iat": 600, "exp": 4200}, id="issued-in-future"),
        pytest.param({"email": "intruder@proj.iam.gserviceaccount.com"}, id="email-not-allowed"),
        pytest.param({"email_verified": False}, id="email-not-verified"),
        pytest.param({"email_verified": "true"}, id="email-verified-not-boolean"),
    ],
)
def test_forwarded_token_with_bad_claims_is_rejected(claims: dict[str, Any]) -> None:
    at_run = {k: _now() + v if k in ("exp", "iat") else v for k, v in claims.items()}
    with pytest.raises(Unauthenticated):
        claims_verifier().verify(forwarded(**at_run))


@pytest.mark.parametrize("missing", ["iss", "aud", "exp", "iat", "email", "email_verified"])
def test_forwarded_token_missing_a_claim_is_rejected(missing: str) -> None:
    claims = google_claims(AUDIENCE, TASKS_SA)
    del claims[missing]
    with pytest.raises(Unauthenticated):
        claims_verifier().verify(forwarded_id_token(claims))


def test_expiry_within_the_leeway_is_tolerated() -> None:
    claims_verifier().verify(forwarded(exp=_now() - 2))


@pytest.mark.parametrize(
    "token",
    [
        "not-a-jwt",
        "a.b",
        f"a.b.{FORWARDED_SIGNATURE}",
        f"e30.bm90LWpzb24.{FORWARDED_SIGNATURE}",
        f"..{FORWARDED_SIGNATURE}",
    ],
)
def test_malformed_token_is_rejected(token: str) -> None:
    with pytest.raises(Unauthenticated):
        claims_verifier().verify(token)


def test_a_token_that_still_carries_its_signature_is_rejected() -> None:
    # Cloud Run always strips the signature: a signed token did not come through its front.
    with pytest.raises(Unauthenticated, match="not forwarded by Cloud Run"):
        claims_verifier().verify(signed_id_token(google_claims(AUDIENCE, TASKS_SA)))


def test_a_refused_token_stays_refused() -> None:
    verifier, token = claims_verifier(), forwarded(email="intruder@proj.iam.gserviceaccount.com")
    for _ in range(2):
        with pytest.raises(Unauthenticated, match="not from an allowed service account"):
            verifier.verify(token)


# --- the verifier the settings choose ---------------------------------------------------


def oidc_settings(**changes: Any) -> Settings:
    values: dict[str, Any] = {
        "push_auth": PushAuth.OIDC,
        "push_audience": AUDIENCE,
        "push_service_accounts": f"{TASKS_SA}, scheduler@proj.iam.gserviceaccount.com",
        "push_allow_claims_outside_cloud_run": True,
    }
    values.update(changes)
    return Settings(**values)


def test_oidc_relies_on_cloud_run_for_the_signature_by_default() -> None:
    verifier = build_verifier(oidc_settings())
    assert isinstance(verifier, ForwardedTokenVerifier)
    verifier.verify(minted_by_local_callers(AUDIENCE, "scheduler@proj.iam.gserviceaccount.com"))
    assert isinstance(build_verifier(oidc_settings(push_verify_signature=True)), OidcVerifier)


@pytest.mark.parametrize("verify_signature", [False, True])
@pytest.mark.parametrize(
    "missing", [{"push_audience": ""}, {"push_service_accounts": " , "}], ids=["aud", "accounts"]
)
def test_oidc_without_audience_or_accounts_refuses_to_start(
    missing: dict[str, str], verify_signature: bool
) -> None:
    settings = oidc_settings(push_verify_signature=verify_signature, **missing)
    with pytest.raises(ValueError, match="GRADEQ_PUSH_AUDIENCE and GRADEQ_PUSH_SERVICE_ACCOUNTS"):
        build_verifier(settings)


# --- without IAM in front: full verification, Google's certificates cached -------------


def test_full_verification_fetches_the_certificates_once_while_they_are_fresh(
    signing: tuple[crypt.RSASigner, str],
) -> None:
    certs = json.dumps({"k1": signing[1]}).encode()
    headers = {"Content-Type": "application/json", "Cache-Control": "public, max-age=3600"}
    cacheable = Reply(200, headers, body=certs)
    with RecordingTarget(lambda _request: cacheable) as google:
        verifier = OidcVerifier(
            AUDIENCE, frozenset({TASKS_SA}), cached_certs_request(), google.url + "/certs"
        )
        for _ in range(3):
            verifier.verify(token(signing[0]))
        with pytest.raises(Unauthenticated):
            verifier.verify(minted_by_local_callers(AUDIENCE, TASKS_SA))
    assert len(google.requests) == 1


def test_full_verification_names_the_setting_when_cloud_run_removed_the_signature() -> None:
    verifier = OidcVerifier(AUDIENCE, frozenset({TASKS_SA}), transport=FakeCertsTransport("k1", ""))
    with pytest.raises(Unauthenticated, match="GRADEQ_PUSH_VERIFY_SIGNATURE=false"):
        verifier.verify(minted_by_local_callers(AUDIENCE, TASKS_SA))


def test_claims_only_mode_outside_cloud_run_needs_the_explicit_setting() -> None:
    outside: dict[str, str] = {}
    with pytest.raises(ValueError, match="K_SERVICE"):
        build_verifier(oidc_settings(push_allow_claims_outside_cloud_run=False), outside)
    on_cloud_run = {"K_SERVICE": "worker"}
    verifier = build_verifier(
        oidc_settings(push_allow_claims_outside_cloud_run=False), on_cloud_run
    )
    assert isinstance(verifier, ForwardedTokenVerifier)
    assert isinstance(build_verifier(oidc_settings(), outside), ForwardedTokenVerifier)


def test_the_outside_cloud_run_setting_is_refused_on_google_cloud(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("FIRESTORE_EMULATOR_HOST", "PUBSUB_EMULATOR_HOST", "CLOUD_TASKS_EMULATOR_HOST"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError, match="local runs only"):
        Settings(
            backend=Backend.GOOGLE,
            project_id="p",
            push_auth=PushAuth.OIDC,
            push_allow_claims_outside_cloud_run=True,
        )


class CountedDecode:
    """Counts the full claim checks of forwarded tokens (PyJWT decodes)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        decode = pyjwt.decode

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return decode(*args, **kwargs)

        monkeypatch.setattr("shared.http.push_auth.jwt.decode", counted)


def test_a_token_accepted_once_is_accepted_again_without_a_full_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    decodes = CountedDecode(monkeypatch)
    verifier = claims_verifier()
    token = forwarded()
    for _ in range(3):
        verifier.verify(token)
    assert decodes.calls == 1
    # Another token, refused in full, is not let in by the one remembered.
    with pytest.raises(Unauthenticated):
        verifier.verify(forwarded(email="intruder@proj.iam.gserviceaccount.com"))
    with pytest.raises(Unauthenticated):
        verifier.verify(token[:-1])  # refused before decoding: not Cloud Run's shape
    assert decodes.calls == 2


def test_a_remembered_token_past_its_expiry_is_checked_in_full_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    decodes = CountedDecode(monkeypatch)
    verifier = claims_verifier()
    expiry = _now() + 300
    token = forwarded(exp=expiry)
    verifier.verify(token)
    later = float(expiry + push_auth.LEEWAY_S)
    monkeypatch.setattr("shared.http.push_auth.time.time", lambda: later)
    verifier.verify(token)  # checked again (on PyJWT's own clock, where it is still valid)
    assert decodes.calls == 2


def test_the_remembered_tokens_are_bounded() -> None:
    verifier = claims_verifier()
    tokens = [forwarded(sub=str(n)) for n in range(push_auth.REMEMBERED_TOKENS + 5)]
    for token in tokens:
        verifier.verify(token)
    remembered = [t for t in tokens if verifier._accepted.accepts(t)]
    assert remembered == tokens[5:]
