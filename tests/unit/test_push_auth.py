"""Push authentication: Google-signed ID tokens in production, a shared token locally."""

from __future__ import annotations

import datetime as dt
import json
import time
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from google.auth import crypt, jwt

from shared.config.settings import Backend, PushAuth, Settings
from shared.http.errors import Unauthenticated
from shared.http.push_auth import OidcVerifier, SharedTokenVerifier

AUDIENCE = "https://worker-123.europe-west1.run.app"
TASKS_SA = "tasks-invoker@proj.iam.gserviceaccount.com"


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
    signer = crypt.RSASigner.from_string(pem, key_id="k1")
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
    return jwt.encode(signer, payload).decode()


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
    forged = token(crypt.RSASigner.from_string(pem, key_id="k1"))
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
