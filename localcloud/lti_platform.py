"""A local LTI 1.3 Advantage platform (an LMS's side) on loopback, for tests and the stack.

It serves what a tool talks to, as LTI 1.3 Core, the 1EdTech Security Framework,
Assignment and Grade Services 2.0 and Names and Role Provisioning Services 2.0 describe:

- `GET /jwks`: the platform's public keys (it signs id_tokens with them).
- `GET|POST /auth`: the OIDC authorization endpoint. It answers a tool's authentication
  request (after the platform's third-party login initiation, `login_initiation`) with
  the form that posts `id_token` and `state` to the tool's registered redirect URI.
- `POST /token`: OAuth 2 client credentials with a JWT client assertion (RFC 7523)
  signed by the tool's key, read from the tool's JWKS URL.
- `/contexts/<ctx>/lineitems[...]`: AGS line items, scores and results.
- `/contexts/<ctx>/memberships`: the NRPS roster.

What it refuses, each as the specs say: a client assertion with a wrong `aud`, an expired
one or a reused `jti`; an authentication request with a reused nonce, an unregistered
redirect URI or client; an expired or unknown access token (401) and one without the
scope the service needs (403); a malformed line item or score (400). A score whose
`timestamp` is not later than the stored one is accepted and does not change the result
("the platform must not update a result if the last timestamp on record is later").
A busy LMS is acted out on request: `score_faults` refuses a share of the score posts
with 429 (with `Retry-After`) or 503, and `forced` answers the next service requests.

Nothing here is Gradeq: it is the other side of the wire, so tests exercise the tool as an
LMS would. Time comes from `now` (seconds since the epoch), so expiry is tested by moving
a clock, not by waiting.
"""

from __future__ import annotations

import html
import json
import math
import random
import secrets
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from flask import Flask, Response, jsonify, request
from werkzeug.serving import make_server

LTI = "https://purl.imsglobal.org/spec/lti/claim/"
AGS_CLAIM = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
NRPS_CLAIM = "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice"
SCOPE_LINEITEM = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"
SCOPE_LINEITEM_READ = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem.readonly"
SCOPE_SCORE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
SCOPE_RESULT_READ = "https://purl.imsglobal.org/spec/lti-ags/scope/result.readonly"
SCOPE_NRPS = "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"
ALL_SCOPES = frozenset(
    {SCOPE_LINEITEM, SCOPE_LINEITEM_READ, SCOPE_SCORE, SCOPE_RESULT_READ, SCOPE_NRPS}
)
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
LINEITEM_TYPE = "application/vnd.ims.lis.v2.lineitem+json"
LINEITEMS_TYPE = "application/vnd.ims.lis.v2.lineitemcontainer+json"
SCORE_TYPE = "application/vnd.ims.lis.v1.score+json"
RESULTS_TYPE = "application/vnd.ims.lis.v2.resultcontainer+json"
MEMBERSHIPS_TYPE = "application/vnd.ims.lti-nrps.v2.membershipcontainer+json"
ACTIVITY_PROGRESS = frozenset({"Initialized", "Started", "InProgress", "Submitted", "Completed"})
GRADING_PROGRESS = frozenset({"FullyGraded", "Pending", "PendingManual", "Failed", "NotReady"})
#: How far a tool's clock may run ahead of the platform's.
CLOCK_SKEW_S = 60
INSTRUCTOR = "http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor"
LEARNER = "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"


@dataclass
class ToolRegistration:
    """A tool as the platform's admin registered it."""

    client_id: str
    deployment_id: str
    login_url: str
    redirect_uris: tuple[str, ...]
    jwks_url: str
    scopes: frozenset[str] = ALL_SCOPES


@dataclass(frozen=True)
class Member:
    """One person enrolled in a context."""

    user_id: str
    roles: tuple[str, ...]
    name: str = ""
    email: str = ""
    #: What the school's roster (SIS) calls the person: where Gradeq's student id comes from.
    lis_person_sourcedid: str = ""


@dataclass
class LineItem:
    id: str
    context: str
    label: str
    score_maximum: float
    resource_id: str | None = None
    resource_link_id: str | None = None
    tag: str | None = None

    def body(self) -> dict[str, Any]:
        shown: dict[str, Any] = {
            "id": self.id,
            "label": self.label,
            "scoreMaximum": self.score_maximum,
        }
        for key, value in (
            ("resourceId", self.resource_id),
            ("resourceLinkId", self.resource_link_id),
            ("tag", self.tag),
        ):
            if value is not None:
                shown[key] = value
        return shown


@dataclass(frozen=True)
class Launch:
    """A resource link launch the platform started, waiting for the tool's auth request."""

    user_id: str
    context: str
    resource_link_id: str
    target_link_uri: str
    custom: dict[str, str]


@dataclass
class ScoreFaults:
    """A busy LMS, for tests and the soak: a share of score posts answered 429 (with
    `Retry-After`) or 503 instead of taken. Nothing else is refused this way."""

    #: The share of score posts refused (0: none, 1: every one: an outage).
    share: float = 0.0
    rng: random.Random = field(default_factory=random.Random)
    #: The refusals drawn from, evenly: (status, headers).
    answers: tuple[tuple[int, dict[str, str]], ...] = (
        (429, {"Retry-After": "1"}),
        (503, {}),
    )
    #: How many of each status were served.
    served: Counter[int] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def draw(self) -> tuple[int, dict[str, str]] | None:
        """The refusal for this score post, or None to take it."""
        with self.lock:
            if self.share <= 0 or self.rng.random() >= self.share:
                return None
            status, headers = self.rng.choice(self.answers)
            self.served[status] += 1
            return status, dict(headers)


@dataclass
class _Token:
    client_id: str
    scopes: frozenset[str]
    expires_at: float


@dataclass
class PlatformState:
    """Everything the platform knows; tests read and arrange it."""

    now: Callable[[], float] = time.time
    issuer: str = ""
    token_lifetime_s: int = 3600
    key: rsa.RSAPrivateKey = field(
        default_factory=lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048)
    )
    kid: str = field(default_factory=lambda: secrets.token_hex(8))
    tools: dict[str, ToolRegistration] = field(default_factory=dict)
    members: dict[str, list[Member]] = field(default_factory=dict)
    contexts: dict[str, str] = field(default_factory=dict)
    line_items: dict[str, LineItem] = field(default_factory=dict)
    #: line item id -> user id -> the last accepted score (as posted).
    scores: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    #: Every score post, accepted or not, in order.
    score_posts: list[dict[str, Any]] = field(default_factory=list)
    #: line item id -> the score posts it took, in order (as `score_posts`).
    score_history: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    launches: dict[str, Launch] = field(default_factory=dict)
    used_nonces: set[str] = field(default_factory=set)
    used_jtis: set[str] = field(default_factory=set)
    tokens: dict[str, _Token] = field(default_factory=dict)
    token_requests: int = 0
    #: Answers to force on the next service requests (status, headers), e.g. 429 or 503.
    forced: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    #: Score posts refused as a busy LMS would (429, 503), a share of them at random.
    score_faults: ScoreFaults = field(default_factory=ScoreFaults)
    lock: threading.Lock = field(default_factory=threading.Lock)

    # --- what the platform's admin and teachers do -------------------------------------

    def register_tool(self, tool: ToolRegistration) -> None:
        self.tools[tool.client_id] = tool

    def enrol(self, context: str, member: Member, title: str = "A course") -> None:
        self.contexts.setdefault(context, title)
        self.members.setdefault(context, []).append(member)

    def login_initiation(
        self,
        client_id: str,
        user_id: str,
        context: str,
        resource_link_id: str,
        target_link_uri: str,
        custom: dict[str, str] | None = None,
    ) -> dict[str, str]:
        """The parameters the platform sends to the tool's login initiation URL."""
        tool = self.tools[client_id]
        hint = secrets.token_urlsafe(12)
        self.launches[hint] = Launch(
            user_id, context, resource_link_id, target_link_uri, dict(custom or {})
        )
        return {
            "iss": self.issuer,
            "login_hint": user_id,
            "target_link_uri": target_link_uri,
            "lti_message_hint": hint,
            "client_id": client_id,
            "lti_deployment_id": tool.deployment_id,
        }

    # --- URLs ---------------------------------------------------------------------------

    @property
    def auth_url(self) -> str:
        return self.issuer + "/auth"

    @property
    def token_url(self) -> str:
        return self.issuer + "/token"

    @property
    def jwks_url(self) -> str:
        return self.issuer + "/jwks"

    def lineitems_url(self, context: str) -> str:
        return f"{self.issuer}/contexts/{context}/lineitems"

    def memberships_url(self, context: str) -> str:
        return f"{self.issuer}/contexts/{context}/memberships"

    def results(self, line_item_id: str) -> dict[str, dict[str, Any]]:
        """user id -> the score on record for a line item."""
        return dict(self.scores.get(line_item_id, {}))

    def public_jwks(self) -> dict[str, Any]:
        jwk = jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        return {"keys": [{**jwk, "kid": self.kid, "alg": "RS256", "use": "sig"}]}

    def private_pem(self) -> bytes:
        return self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )


def _oauth_error(error: str, description: str, status: int = 400) -> Response:
    response = jsonify({"error": error, "error_description": description})
    response.status_code = status
    return response


def _service_error(status: int, detail: str) -> Response:
    response = jsonify({"error": detail})
    response.status_code = status
    return response


def _is_number(value: object) -> bool:
    return _number(value) is not None


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _valid_timestamp(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def score_problems(body: object) -> list[str]:
    """What makes a score malformed (AGS 2.0, the score publish service)."""
    if not isinstance(body, dict):
        return ["the score is not a JSON object"]
    problems = []
    if not isinstance(body.get("userId"), str) or not body["userId"]:
        problems.append("userId is required")
    if body.get("activityProgress") not in ACTIVITY_PROGRESS:
        problems.append("activityProgress is not one of the specified values")
    if body.get("gradingProgress") not in GRADING_PROGRESS:
        problems.append("gradingProgress is not one of the specified values")
    if _valid_timestamp(body.get("timestamp")) is None:
        problems.append("timestamp must be ISO 8601 with a time zone offset")
    if "scoreGiven" in body:
        if not _is_number(body["scoreGiven"]) or body["scoreGiven"] < 0:
            problems.append("scoreGiven must be a number of 0 or more")
        if not _is_number(body.get("scoreMaximum")) or body["scoreMaximum"] <= 0:
            problems.append("scoreMaximum must be a number above 0 when scoreGiven is sent")
    elif "scoreMaximum" in body and (
        not _is_number(body["scoreMaximum"]) or body["scoreMaximum"] <= 0
    ):
        problems.append("scoreMaximum must be a number above 0")
    if "comment" in body and not isinstance(body["comment"], str):
        problems.append("comment must be a string")
    return problems


def create_platform_app(state: PlatformState) -> Flask:
    app = Flask(__name__)
    jwks_clients: dict[str, jwt.PyJWKClient] = {}

    def bearer(*wanted: str) -> _Token | Response:
        """The request's access token, if it holds one of `wanted` scopes."""
        header = request.headers.get("Authorization", "")
        if not header.startswith("Bearer "):
            return _service_error(401, "an access token is required")
        token = state.tokens.get(header.removeprefix("Bearer "))
        if token is None or token.expires_at <= state.now():
            return _service_error(401, "the access token is unknown or expired")
        if not token.scopes & set(wanted):
            return _service_error(403, "the access token lacks the scope this service needs")
        if state.forced:
            status, headers = state.forced.pop(0)
            response = _service_error(status, "forced answer")
            response.headers.update(headers)
            return response
        return token

    @app.get("/jwks")
    def jwks() -> Response:
        return jsonify(state.public_jwks())

    @app.route("/auth", methods=["GET", "POST"])
    def auth() -> Response | tuple[str, int]:
        params = request.values
        tool = state.tools.get(params.get("client_id", ""))
        if tool is None:
            return _oauth_error("unauthorized_client", "unknown client_id")
        redirect_uri = params.get("redirect_uri", "")
        if redirect_uri not in tool.redirect_uris:
            return _oauth_error("invalid_request", "redirect_uri is not registered")
        if "openid" not in params.get("scope", "").split():
            return _oauth_error("invalid_scope", "scope must include openid")
        if params.get("response_type") != "id_token":
            return _oauth_error("unsupported_response_type", "response_type must be id_token")
        if params.get("response_mode") != "form_post" or params.get("prompt") != "none":
            return _oauth_error("invalid_request", "response_mode form_post, prompt none")
        nonce = params.get("nonce", "")
        if not nonce:
            return _oauth_error("invalid_request", "nonce is required")
        launch = state.launches.get(params.get("lti_message_hint", ""))
        if launch is None or params.get("login_hint") != launch.user_id:
            return _oauth_error("invalid_request", "unknown login_hint or lti_message_hint")
        with state.lock:
            if nonce in state.used_nonces:
                return _oauth_error("invalid_request", "nonce was already used")
            state.used_nonces.add(nonce)
        member = next(
            (m for m in state.members.get(launch.context, []) if m.user_id == launch.user_id),
            None,
        )
        if member is None:
            return _oauth_error("access_denied", "the user is not a member of the context")
        now = int(state.now())
        claims: dict[str, Any] = {
            "iss": state.issuer,
            "sub": member.user_id,
            "aud": tool.client_id,
            "azp": tool.client_id,
            "iat": now,
            "exp": now + 300,
            "nonce": nonce,
            "name": member.name,
            "email": member.email,
            LTI + "message_type": "LtiResourceLinkRequest",
            LTI + "version": "1.3.0",
            LTI + "deployment_id": tool.deployment_id,
            LTI + "target_link_uri": launch.target_link_uri,
            LTI + "resource_link": {"id": launch.resource_link_id},
            LTI + "roles": list(member.roles),
            LTI + "context": {"id": launch.context, "title": state.contexts[launch.context]},
            LTI + "custom": launch.custom,
            LTI + "lis": {"person_sourcedid": member.lis_person_sourcedid},
            AGS_CLAIM: {
                "scope": sorted(tool.scopes & {SCOPE_LINEITEM, SCOPE_SCORE, SCOPE_RESULT_READ}),
                "lineitems": state.lineitems_url(launch.context),
            },
            NRPS_CLAIM: {
                "context_memberships_url": state.memberships_url(launch.context),
                "service_versions": ["2.0"],
            },
        }
        id_token = jwt.encode(claims, state.key, algorithm="RS256", headers={"kid": state.kid})
        fields = {"id_token": id_token, "state": params.get("state", "")}
        inputs = "".join(
            f'<input type="hidden" name="{k}" value="{html.escape(v)}">' for k, v in fields.items()
        )
        page = (
            f'<form method="post" action="{html.escape(redirect_uri)}">{inputs}</form>'
            "<script>document.forms[0].submit()</script>"
        )
        return page, 200

    @app.post("/token")
    def token() -> Response:
        form = request.form
        if form.get("grant_type") != "client_credentials":
            return _oauth_error("unsupported_grant_type", "grant_type must be client_credentials")
        if form.get("client_assertion_type") != ASSERTION_TYPE:
            return _oauth_error("invalid_request", "client_assertion_type must be jwt-bearer")
        assertion = form.get("client_assertion", "")
        try:
            unverified = jwt.decode(assertion, options={"verify_signature": False})
        except jwt.InvalidTokenError:
            return _oauth_error("invalid_client", "client_assertion is not a JWT")
        tool = state.tools.get(str(unverified.get("iss", "")))
        if tool is None or unverified.get("sub") != tool.client_id:
            return _oauth_error("invalid_client", "unknown client (iss and sub)")
        client = jwks_clients.setdefault(tool.jwks_url, jwt.PyJWKClient(tool.jwks_url))
        try:
            signing_key = client.get_signing_key_from_jwt(assertion)
            claims = jwt.decode(
                assertion,
                signing_key.key,
                algorithms=["RS256"],
                audience=state.token_url,
                options={
                    "verify_exp": False,
                    "verify_iat": False,
                    "require": ["exp", "iat", "jti", "aud"],
                },
            )
        except jwt.InvalidAudienceError:
            return _oauth_error("invalid_client", "aud is not this token endpoint")
        except (jwt.InvalidTokenError, jwt.PyJWKClientError) as exc:
            return _oauth_error("invalid_client", f"client_assertion refused: {exc}")
        if float(claims["exp"]) <= state.now():
            return _oauth_error("invalid_client", "client_assertion has expired")
        if float(claims["iat"]) > state.now() + CLOCK_SKEW_S:
            return _oauth_error("invalid_client", "client_assertion was issued in the future")
        with state.lock:
            if claims["jti"] in state.used_jtis:
                return _oauth_error("invalid_client", "client_assertion jti was already used")
            state.used_jtis.add(claims["jti"])
        requested = set(form.get("scope", "").split())
        granted = frozenset(requested & tool.scopes)
        if not granted:
            return _oauth_error("invalid_scope", "none of the requested scopes is allowed")
        access = secrets.token_urlsafe(24)
        state.tokens[access] = _Token(tool.client_id, granted, state.now() + state.token_lifetime_s)
        state.token_requests += 1
        return jsonify(
            {
                "access_token": access,
                "token_type": "Bearer",
                "expires_in": state.token_lifetime_s,
                "scope": " ".join(sorted(granted)),
            }
        )

    @app.route("/contexts/<context>/lineitems", methods=["GET", "POST"])
    def line_items(context: str) -> Response:
        if context not in state.contexts:
            return _service_error(404, "no such context")
        if request.method == "GET":
            granted = bearer(SCOPE_LINEITEM, SCOPE_LINEITEM_READ)
            if isinstance(granted, Response):
                return granted
            found = [
                item.body()
                for item in state.line_items.values()
                if item.context == context
                and all(
                    request.args.get(arg) in (None, getattr(item, attr))
                    for arg, attr in (
                        ("resource_id", "resource_id"),
                        ("resource_link_id", "resource_link_id"),
                        ("tag", "tag"),
                    )
                )
            ]
            return Response(json.dumps(found), 200, content_type=LINEITEMS_TYPE)
        granted = bearer(SCOPE_LINEITEM)
        if isinstance(granted, Response):
            return granted
        if request.mimetype != LINEITEM_TYPE:
            return _service_error(415, f"Content-Type must be {LINEITEM_TYPE}")
        body = request.get_json(silent=True)
        if not isinstance(body, dict):
            return _service_error(400, "the line item is not a JSON object")
        label, maximum = body.get("label"), _number(body.get("scoreMaximum"))
        if not isinstance(label, str) or not label.strip():
            return _service_error(400, "label is required")
        if maximum is None or maximum <= 0:
            return _service_error(400, "scoreMaximum must be a number above 0")
        item_id = f"{state.lineitems_url(context)}/{uuid.uuid4().hex[:10]}"
        item = LineItem(
            item_id,
            context,
            label,
            maximum,
            body.get("resourceId"),
            body.get("resourceLinkId"),
            body.get("tag"),
        )
        state.line_items[item_id] = item
        return Response(json.dumps(item.body()), 201, content_type=LINEITEM_TYPE)

    def _item(context: str, item: str) -> LineItem | None:
        return state.line_items.get(f"{state.lineitems_url(context)}/{item}")

    @app.get("/contexts/<context>/lineitems/<item>")
    def line_item(context: str, item: str) -> Response:
        granted = bearer(SCOPE_LINEITEM, SCOPE_LINEITEM_READ)
        if isinstance(granted, Response):
            return granted
        found = _item(context, item)
        if found is None:
            return _service_error(404, "no such line item")
        return Response(json.dumps(found.body()), 200, content_type=LINEITEM_TYPE)

    @app.post("/contexts/<context>/lineitems/<item>/scores")
    def scores(context: str, item: str) -> Response:
        granted = bearer(SCOPE_SCORE)
        if isinstance(granted, Response):
            return granted
        refusal = state.score_faults.draw()
        if refusal is not None:
            status, headers = refusal
            response = _service_error(status, "the platform is busy")
            response.headers.update(headers)
            return response
        found = _item(context, item)
        if found is None:
            return _service_error(404, "no such line item")
        if request.mimetype != SCORE_TYPE:
            return _service_error(415, f"Content-Type must be {SCORE_TYPE}")
        body = request.get_json(silent=True)
        problems = score_problems(body)
        if problems:
            return _service_error(400, "; ".join(problems))
        assert isinstance(body, dict)
        members = {m.user_id for m in state.members.get(context, [])}
        if body["userId"] not in members:
            return _service_error(422, "userId is not a member of the context")
        with state.lock:
            state.score_posts.append(dict(body))
            state.score_history.setdefault(found.id, []).append(dict(body))
            results = state.scores.setdefault(found.id, {})
            held = results.get(body["userId"])
            incoming = _valid_timestamp(body["timestamp"])
            held_at = _valid_timestamp(held["timestamp"]) if held else None
            if held_at is None or (incoming is not None and incoming > held_at):
                results[body["userId"]] = dict(body)
        return Response(status=204)

    @app.get("/contexts/<context>/lineitems/<item>/results")
    def results(context: str, item: str) -> Response:
        granted = bearer(SCOPE_RESULT_READ)
        if isinstance(granted, Response):
            return granted
        found = _item(context, item)
        if found is None:
            return _service_error(404, "no such line item")
        shown = [
            {
                "id": f"{found.id}/results/{user}",
                "scoreOf": found.id,
                "userId": user,
                "resultScore": score.get("scoreGiven"),
                "resultMaximum": score.get("scoreMaximum"),
                "comment": score.get("comment"),
            }
            for user, score in state.scores.get(found.id, {}).items()
        ]
        return Response(json.dumps(shown), 200, content_type=RESULTS_TYPE)

    @app.get("/contexts/<context>/memberships")
    def memberships(context: str) -> Response:
        granted = bearer(SCOPE_NRPS)
        if isinstance(granted, Response):
            return granted
        if context not in state.contexts:
            return _service_error(404, "no such context")
        limit = request.args.get("limit", type=int)
        offset = request.args.get("offset", default=0, type=int)
        everyone = state.members[context]
        page = everyone[offset : offset + limit] if limit else everyone[offset:]
        body = {
            "id": request.base_url,
            "context": {"id": context, "title": state.contexts[context]},
            "members": [
                {
                    "status": "Active",
                    "user_id": m.user_id,
                    "roles": list(m.roles),
                    "name": m.name,
                    "email": m.email,
                    "lis_person_sourcedid": m.lis_person_sourcedid,
                }
                for m in page
            ],
        }
        response = Response(json.dumps(body), 200, content_type=MEMBERSHIPS_TYPE)
        if limit and offset + limit < len(everyone):
            following = urlencode({"limit": limit, "offset": offset + limit})
            response.headers["Link"] = f'<{request.base_url}?{following}>; rel="next"'
        return response

    return app


@contextmanager
def running_platform(state: PlatformState | None = None) -> Iterator[PlatformState]:
    """Serve a platform on a free loopback port for the duration of the block."""
    state = state or PlatformState()
    app = create_platform_app(state)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    state.issuer = f"http://127.0.0.1:{server.server_port}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        thread.join(timeout=5)
