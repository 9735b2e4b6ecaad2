"""What Cloud Run's front does to a request for a service that requires authentication.

Cloud Tasks, Cloud Scheduler and Pub/Sub send a Google-signed ID token for a service
account; Cloud Run verifies it and hands the request to the container with the token's
signature replaced by `SIGNATURE_REMOVED_BY_GOOGLE`. The local stand-ins send exactly that
forwarded shape (`forwarded_id_token`), and `CloudRunFront` puts it on requests from the
Pub/Sub emulator, which pushes without any token.

Cloud Run validates `X-Serverless-Authorization` instead of `Authorization` when a request
carries it, and then passes `Authorization` on untouched. The front does the same, so the
services meet locally the requests they meet in production, hand-written tokens included.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import requests
import urllib3
from jwt.utils import base64url_encode

from shared.http.push_auth import FORWARDED_SIGNATURE

log = logging.getLogger(__name__)

GOOGLE_ISSUER = "https://accounts.google.com"
TOKEN_LIFETIME_S = 3600
#: How long Cloud Run keeps a request pending when no instance can take it (at least
#: 10 s; more for containers slow to start), before refusing it with 429.
PENDING_S = 10.0
#: Hop-by-hop headers a proxy must not pass on (RFC 9110 section 7.6.1), plus those it sets.
_NOT_FORWARDED = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "host"}
    | {"proxy-authorization", "proxy-authenticate", "content-length"}
)
SERVERLESS_AUTHORIZATION = "X-Serverless-Authorization"
#: `requests` hands the body over decoded, so its encoding header goes too.
_NOT_RETURNED = _NOT_FORWARDED | {"content-encoding"}


def base_url(url: str) -> str:
    """The scheme and authority of `url`: the audience Gradeq sets for a service."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def forwarded_id_token(audience: str, email: str, now: float | None = None) -> str:
    """An ID token for `email` and `audience` as Cloud Run forwards it to the container."""
    issued = int(time.time() if now is None else now)
    header = {"alg": "RS256", "kid": secrets.token_hex(20), "typ": "JWT"}
    claims = {
        "iss": GOOGLE_ISSUER,
        "aud": audience,
        "azp": email,
        "email": email,
        "email_verified": True,
        "iat": issued,
        "exp": issued + TOKEN_LIFETIME_S,
        "sub": str(int(hashlib.sha256(email.encode()).hexdigest()[:15], 16)),
    }
    segments = [base64url_encode(json.dumps(part).encode()).decode() for part in (header, claims)]
    return ".".join([*segments, FORWARDED_SIGNATURE])


def forwarded_authorization(audience: str, email: str) -> dict[str, str]:
    """The Authorization header of a request that passed Cloud Run's IAM check."""
    return {"Authorization": f"Bearer {forwarded_id_token(audience, email)}"}


#: How long a sender reuses an ID token; Google's clients also reuse theirs until close
#: to its expiry, so a receiver sees the same token on many requests.
TOKEN_REUSE_S = 300.0


class ForwardedTokens:
    """The ID tokens one sender forwards, each reused for `reuse_s` as Google's clients do.

    Each sender (a dispatcher, the bus, a front) owns its own: a token lives as long as
    the sender that issued it, on the sender's clock.
    """

    def __init__(
        self, clock: Callable[[], float] = time.time, reuse_s: float = TOKEN_REUSE_S
    ) -> None:
        self._clock = clock
        self._reuse_s = reuse_s
        self._tokens: dict[tuple[str, str], tuple[float, str]] = {}
        self._guard = threading.Lock()

    def authorization(self, audience: str, email: str) -> dict[str, str]:
        """The Authorization header for `email` and `audience`: reused, or issued now."""
        now = self._clock()
        key = (audience, email)
        with self._guard:
            issued, token = self._tokens.get(key, (0.0, ""))
            if not token or now - issued >= self._reuse_s or now < issued:
                token = forwarded_id_token(audience, email, now)
                self._tokens[key] = (now, token)
        return {"Authorization": f"Bearer {token}"}


class CloudRunFront:
    """A loopback reverse proxy to one service that adds the forwarded ID token.

    It stands for the push subscription's OIDC token and Cloud Run's check together: the
    caller is taken to be `email`, validated for `audience`. As on Cloud Run, a request
    with `X-Serverless-Authorization` reaches `upstream` with the forwarded token there and
    its `Authorization` untouched; any other with the forwarded token in `Authorization`.
    """

    def __init__(
        self,
        upstream: str,
        audience: str,
        email: str,
        timeout_s: float = 600,
        on_answer: Callable[[str], None] | None = None,
        pending_s: float = PENDING_S,
    ) -> None:
        self.upstream = upstream.rstrip("/")
        self.audience = audience
        self.email = email
        self.timeout_s = timeout_s
        self.pending_s = pending_s
        #: Given one JSON line per request answered: what the front did with each push.
        self.on_answer = on_answer
        self._tokens = ForwardedTokens()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.1,), name="cloud-run-front", daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> CloudRunFront:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def forward(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> requests.Response:
        """Send one request on to the service, with the forwarded token."""
        validated = self._tokens.authorization(self.audience, self.email)["Authorization"]
        serverless = any(k.lower() == SERVERLESS_AUTHORIZATION.lower() for k in headers)
        # The header Cloud Run validates is replaced; the other one passes as it came.
        replaced = SERVERLESS_AUTHORIZATION if serverless else "Authorization"
        kept = {
            k: v
            for k, v in headers.items()
            if k.lower() not in _NOT_FORWARDED and k.lower() != replaced.lower()
        }
        kept[replaced] = validated
        return requests.request(
            method,
            self.upstream + path,
            headers=kept,
            data=body,
            timeout=self.timeout_s,
            allow_redirects=False,
        )

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        front = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self) -> None:
                started = time.monotonic()
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                pending_until = started + front.pending_s
                while True:
                    try:
                        response = front.forward(self.command, self.path, dict(self.headers), body)
                        status, content = response.status_code, response.content
                        headers = {
                            k: v
                            for k, v in response.headers.items()
                            if k.lower() not in _NOT_RETURNED
                        }
                        error = None
                    except requests.RequestException as exc:
                        error = type(exc).__name__
                        if _refused(exc) and time.monotonic() < pending_until:
                            # No instance takes requests (it is restarting): Cloud Run keeps
                            # the request pending for one, for up to about 10 s.
                            time.sleep(0.1)
                            continue
                        # 429: no instance came up in time; 503: the container failed
                        # while handling the request.
                        status = 429 if _refused(exc) else 503
                        content, headers = str(exc).encode(), {}
                    break
                if front.on_answer is not None:
                    front.on_answer(_answer_line(self.path, body, status, error, started))
                try:
                    self.send_response(status)
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(content)))
                    self.end_headers()
                    self.wfile.write(content)
                except OSError:
                    pass  # the caller gave up waiting (ack deadline): nobody to answer

            do_POST = do_PUT = do_GET = do_DELETE = do_PATCH = _handle  # noqa: N815

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


def _refused(exc: requests.RequestException) -> bool:
    """Whether nothing accepted the connection (as opposed to failing mid-request)."""
    cause = exc.args[0] if exc.args else None
    return isinstance(exc, requests.ConnectionError) and isinstance(
        getattr(cause, "reason", None), urllib3.exceptions.NewConnectionError
    )


def _answer_line(path: str, body: bytes, status: int, error: str | None, started: float) -> str:
    """One JSON line: the push (message id, delivery attempt) and what the front answered."""
    try:
        envelope = json.loads(body)
        message = envelope.get("message") or {}
        message_id, attempt = message.get("messageId"), envelope.get("deliveryAttempt")
    except (ValueError, AttributeError):
        message_id = attempt = None
    fields = {
        "severity": "INFO" if status < 400 else "WARNING",
        "message": "push forwarded",
        "path": path,
        "status": status,
        "upstream_error": error,
        "message_id": message_id,
        "delivery_attempt": attempt,
        "seconds": round(time.monotonic() - started, 3),
    }
    return json.dumps(fields)
