"""Google ID tokens as callers sign them and as Cloud Run forwards them to the container.

A forwarded token is made the way Cloud Run makes it: a real RS256 JWT whose signature
segment is then replaced by `SIGNATURE_REMOVED_BY_GOOGLE`.
"""

from __future__ import annotations

import functools
import time
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

from shared.http.push_auth import FORWARDED_SIGNATURE

KEY_ID = "k1"


@functools.cache
def signing_key() -> rsa.RSAPrivateKey:
    """A throwaway RSA key standing for Google's (one per test session)."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def google_claims(audience: str, email: str, /, **changes: Any) -> dict[str, Any]:
    """The claims of a Google ID token for a service account; `changes` override them."""
    now = int(time.time())
    return {
        "iss": "https://accounts.google.com",
        "aud": audience,
        "azp": email,
        "email": email,
        "email_verified": True,
        "iat": now,
        "exp": now + 300,
        "sub": "1234",
        **changes,
    }


def signed_id_token(claims: dict[str, Any], key: rsa.RSAPrivateKey | None = None) -> str:
    """The token as the caller sends it: RS256-signed."""
    return jwt.encode(claims, key or signing_key(), algorithm="RS256", headers={"kid": KEY_ID})


def forwarded_id_token(claims: dict[str, Any]) -> str:
    """The same token as Cloud Run hands it to the container: signature removed."""
    header, payload, _signature = signed_id_token(claims).split(".")
    return f"{header}.{payload}.{FORWARDED_SIGNATURE}"
