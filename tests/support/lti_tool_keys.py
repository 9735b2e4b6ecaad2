"""A tool's signing key and its JWKS served on loopback, for tests of the LTI platform."""

from __future__ import annotations

import secrets
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from flask import Flask, Response, jsonify
from werkzeug.serving import make_server

from localcloud.lti_platform import ASSERTION_TYPE


@dataclass
class ToolKey:
    """An RSA key as a tool holds it, with the JWKS it publishes."""

    key: rsa.RSAPrivateKey = field(
        default_factory=lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048)
    )
    kid: str = field(default_factory=lambda: secrets.token_hex(6))

    def jwks(self) -> dict[str, Any]:
        jwk = jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        return {"keys": [{**jwk, "kid": self.kid, "alg": "RS256", "use": "sig"}]}

    def assertion(self, client_id: str, aud: str, **overrides: Any) -> str:
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": client_id,
            "sub": client_id,
            "aud": aud,
            "iat": now,
            "exp": now + 60,
            "jti": uuid.uuid4().hex,
        }
        claims.update(overrides)
        return jwt.encode(claims, self.key, algorithm="RS256", headers={"kid": self.kid})

    def grant_form(self, client_id: str, aud: str, scope: str, **overrides: Any) -> dict[str, str]:
        return {
            "grant_type": "client_credentials",
            "client_assertion_type": ASSERTION_TYPE,
            "client_assertion": self.assertion(client_id, aud, **overrides),
            "scope": scope,
        }


@contextmanager
def served_jwks(key: ToolKey | Callable[[], dict[str, Any]]) -> Iterator[str]:
    """Serve a key's JWKS (or what `key` returns) on loopback; yields its URL."""
    app = Flask(__name__)
    source = key.jwks if isinstance(key, ToolKey) else key

    @app.get("/jwks")
    def jwks() -> Response:
        return jsonify(source())

    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/jwks"
    finally:
        server.shutdown()
        thread.join(timeout=5)
