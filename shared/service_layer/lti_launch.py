"""LTI 1.3 launches, tool side: OIDC login initiation, then the launch's id_token checked
as LTI 1.3 Core (section 5.1.3) and the 1EdTech Security Framework (section 5.1.3) say, and
the user signed in to Gradeq with a role of the one policy.

1. The platform calls the login initiation URL with its issuer, a login hint and the
   target link. `login` finds the school's registration and answers the redirect to the
   platform's OIDC authorization endpoint with a fresh nonce and a `state` that Gradeq
   signs (it names the platform, client id and nonce, and expires); a hash of the state
   goes into a cookie, binding the login to this browser.
2. The platform posts `id_token` and `state` to the launch URL. `launch` checks the state
   (Gradeq's signature, expiry, the browser's cookie), then the id_token: the platform's
   signature (its JWKS), `iss`, `aud` (and `azp`), `exp`, `iat`, the nonce (the state's,
   and never seen before: a replayed launch is refused), the deployment id, the message
   type and version. Its roles map to a policy role (`role_of`).
3. The user gets a short-lived Gradeq session token (signed by Gradeq's LTI key), which
   the intake accepts as a bearer credential like an ID token: a teacher lands on the
   assignment's review page, a student on their grade.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt

from shared.domain.authorization import Forbidden, Principal, Role
from shared.domain.errors import GradeqError
from shared.domain.lti import (
    AGS_CLAIM,
    LTI_CLAIM,
    NRPS_CLAIM,
    AssignmentLink,
    LtiRegistration,
    role_of,
    student_id_of,
)
from shared.ports import Clock, LtiStore, ProcessedEvents
from shared.service_layer.lti_keys import LtiToolKeys

STATE_TTL = timedelta(minutes=10)
SESSION_TTL = timedelta(hours=1)
#: How far a platform's clock may run ahead of Gradeq's for `iat`.
CLOCK_SKEW = timedelta(minutes=1)
SESSION_AUDIENCE = "gradeq-lti-session"
STATE_AUDIENCE = "gradeq-lti-state"
NONCE_SUBSCRIBER = "lti-launch-nonce"
LOGIN_PATH = "/lti/login"
LAUNCH_PATH = "/lti/launch"
JWKS_PATH = "/lti/jwks.json"
GRADE_PATH = "/lti/grade/"
REVIEW_PATH = "/review/"
#: The custom parameter of the LMS link that names the Gradeq assignment.
ASSIGNMENT_PARAMETER = "assignment_id"


class LtiLaunchRefused(GradeqError):
    slug = "lti-launch-refused"
    title = "The LTI login or launch was refused"
    status = 400


@dataclass(frozen=True)
class LoginRedirect:
    """Where the browser goes next, and the cookie that binds the state to it."""

    url: str
    state_cookie: str


@dataclass(frozen=True)
class Launched:
    """A valid launch: who signed in, where they go, and their session token."""

    principal: Principal
    assignment_id: str
    destination: str
    session_token: str
    expires_in_s: int


def assignment_of(claims: dict[str, Any]) -> str:
    """The Gradeq assignment a launch opens: the link's custom parameter (Moodle's
    activity settings), else the `assignment_id` query parameter of the link's URL (the
    URL a Canvas assignment names)."""
    custom = claims.get(LTI_CLAIM + "custom") or {}
    named = str(custom.get(ASSIGNMENT_PARAMETER) or "").strip()
    if named:
        return named
    target = str(claims.get(LTI_CLAIM + "target_link_uri") or "")
    found = parse_qs(urlsplit(target).query).get(ASSIGNMENT_PARAMETER, [""])
    return found[0].strip()


def state_cookie(state: str) -> str:
    return hashlib.sha256(state.encode()).hexdigest()


class LtiLaunches:
    """Login initiation, launch validation and LTI session tokens."""

    def __init__(
        self,
        store: LtiStore,
        keys: LtiToolKeys,
        nonces: ProcessedEvents,
        clock: Clock,
        tool_url: str,
    ) -> None:
        self._store = store
        self._keys = keys
        self._nonces = nonces
        self._clock = clock
        self._tool_url = tool_url.rstrip("/")
        self._platform_keys: dict[str, jwt.PyJWKClient] = {}

    @property
    def launch_url(self) -> str:
        return self._tool_url + LAUNCH_PATH

    # --- Gradeq's own tokens -------------------------------------------------------------

    def _sign(self, claims: dict[str, Any], ttl: timedelta) -> str:
        now = self._clock.now()
        signing = self._keys.signing_key()
        body = {
            **claims,
            "iss": self._tool_url,
            "iat": int(now.timestamp()),
            "exp": int((now + ttl).timestamp()),
        }
        return jwt.encode(body, signing.private_key, "RS256", headers={"kid": signing.kid})

    def _verify_own(self, token: str, audience: str) -> dict[str, Any] | None:
        try:
            unverified = jwt.decode(token, options={"verify_signature": False})
            if unverified.get("iss") != self._tool_url:  # another issuer's token: not ours
                return None
            kid = jwt.get_unverified_header(token).get("kid")
            key = self._keys.public_key(str(kid)) if kid else None
            if key is None:
                return None
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=["RS256"],
                audience=audience,
                issuer=self._tool_url,
                options={"verify_exp": False, "require": ["exp", "iat", "aud", "iss"]},
            )
        except jwt.InvalidTokenError:
            return None
        if claims["exp"] <= self._clock.now().timestamp():
            return None
        return claims

    # --- 1. login initiation -------------------------------------------------------------

    def _registration_for(self, issuer: str, client_id: str | None) -> LtiRegistration:
        if client_id:
            found = self._store.registration(issuer, client_id)
            if found is None:
                raise LtiLaunchRefused("no LTI registration for this issuer and client id")
            return found
        candidates = [r for r in self._store.registrations() if r.issuer == issuer]
        if len(candidates) != 1:
            raise LtiLaunchRefused("the login names no client_id and the issuer has none or many")
        return candidates[0]

    def login(self, params: dict[str, str]) -> LoginRedirect:
        """Answer a platform's third-party login initiation."""
        issuer, login_hint = params.get("iss", ""), params.get("login_hint", "")
        target = params.get("target_link_uri", "")
        if not issuer or not login_hint or not target:
            raise LtiLaunchRefused("login initiation needs iss, login_hint and target_link_uri")
        if not (target == self._tool_url or target.startswith(self._tool_url + "/")):
            raise LtiLaunchRefused("target_link_uri is not a Gradeq URL")
        registration = self._registration_for(issuer, params.get("client_id"))
        deployment = params.get("lti_deployment_id")
        if deployment and deployment not in registration.deployment_ids:
            raise LtiLaunchRefused("lti_deployment_id is not registered")
        nonce = secrets.token_urlsafe(24)
        state = self._sign(
            {
                "aud": STATE_AUDIENCE,
                "platform": registration.issuer,
                "client_id": registration.client_id,
                "nonce": nonce,
            },
            STATE_TTL,
        )
        query = {
            "scope": "openid",
            "response_type": "id_token",
            "response_mode": "form_post",
            "prompt": "none",
            "client_id": registration.client_id,
            "redirect_uri": self.launch_url,
            "login_hint": login_hint,
            "state": state,
            "nonce": nonce,
        }
        if params.get("lti_message_hint"):
            query["lti_message_hint"] = params["lti_message_hint"]
        return LoginRedirect(
            f"{registration.auth_login_url}?{urlencode(query)}", state_cookie(state)
        )

    # --- 2. the launch --------------------------------------------------------------------

    def _platform_claims(self, registration: LtiRegistration, id_token: str) -> dict[str, Any]:
        client = self._platform_keys.get(registration.key_set_url)
        if client is None:
            client = jwt.PyJWKClient(registration.key_set_url, timeout=10)
            self._platform_keys[registration.key_set_url] = client
        try:
            key = client.get_signing_key_from_jwt(id_token).key
            claims: dict[str, Any] = jwt.decode(
                id_token,
                key,
                algorithms=["RS256"],
                audience=registration.client_id,
                issuer=registration.issuer,
                options={
                    "verify_exp": False,
                    "verify_iat": False,
                    "require": ["exp", "iat", "nonce", "sub", "aud", "iss"],
                },
            )
        except (jwt.InvalidTokenError, jwt.PyJWKClientError) as exc:
            raise LtiLaunchRefused(f"the id_token was refused: {exc}") from exc
        now = self._clock.now().timestamp()
        if claims["exp"] <= now:
            raise LtiLaunchRefused("the id_token has expired")
        if claims["iat"] > now + CLOCK_SKEW.total_seconds():
            raise LtiLaunchRefused("the id_token was issued in the future")
        audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
        azp = claims.get("azp")
        if (len(audiences) > 1 or azp is not None) and azp != registration.client_id:
            raise LtiLaunchRefused("azp is not Gradeq's client id")
        return claims

    def launch(self, id_token: str, state: str, cookie: str | None) -> Launched:
        """Check a launch and sign the user in."""
        if not cookie or not secrets.compare_digest(cookie, state_cookie(state)):
            raise LtiLaunchRefused("the state does not belong to this browser's login")
        started = self._verify_own(state, STATE_AUDIENCE)
        if started is None:
            raise LtiLaunchRefused("the state is not Gradeq's or has expired")
        registration = self._store.registration(started["platform"], started["client_id"])
        if registration is None:
            raise LtiLaunchRefused("the registration is gone")
        claims = self._platform_claims(registration, id_token)
        if not secrets.compare_digest(str(claims["nonce"]), str(started["nonce"])):
            raise LtiLaunchRefused("the id_token's nonce is not the login's")
        if claims.get(LTI_CLAIM + "deployment_id") not in registration.deployment_ids:
            raise LtiLaunchRefused("the deployment id is not registered")
        if claims.get(LTI_CLAIM + "version") != "1.3.0":
            raise LtiLaunchRefused("only LTI 1.3.0 launches are served")
        if claims.get(LTI_CLAIM + "message_type") != "LtiResourceLinkRequest":
            raise LtiLaunchRefused("only resource link launches are served")
        if not (claims.get(LTI_CLAIM + "resource_link") or {}).get("id"):
            raise LtiLaunchRefused("the launch names no resource link")
        assignment_id = assignment_of(claims)
        if not assignment_id:
            raise LtiLaunchRefused(
                f"the link names no Gradeq assignment (custom parameter {ASSIGNMENT_PARAMETER}"
                f" or ?{ASSIGNMENT_PARAMETER}= in its URL)"
            )
        role = role_of(claims.get(LTI_CLAIM + "roles") or [])
        if role is None:
            raise Forbidden("the launch's roles give no role in Gradeq")
        # Spent last, once everything else holds: a replay of this id_token is refused.
        if not self._nonces.add(
            NONCE_SUBSCRIBER,
            hashlib.sha256(f"{registration.issuer}\n{claims['nonce']}".encode()).hexdigest(),
            {"issuer": registration.issuer, "at": self._clock.now().isoformat()},
        ):
            raise LtiLaunchRefused("the nonce was already used")
        self._remember_link(registration, assignment_id, claims)
        sub = str(claims["sub"])
        if role is Role.STUDENT:
            lis = claims.get(LTI_CLAIM + "lis") or {}
            author = student_id_of(sub, lis.get("person_sourcedid"))
            destination = f"{GRADE_PATH}?{urlencode({'assignment_id': assignment_id})}"
        else:
            author = f"lti-{registration.registration_id[:8]}-{sub}"
            destination = f"{REVIEW_PATH}?{urlencode({'assignment_id': assignment_id})}"
        principal = Principal(registration.school, author, role)
        token = self._sign(
            {
                "aud": SESSION_AUDIENCE,
                "sub": author,
                "school": registration.school,
                "role": role.value,
                "jti": secrets.token_hex(8),
            },
            SESSION_TTL,
        )
        return Launched(
            principal, assignment_id, destination, token, int(SESSION_TTL.total_seconds())
        )

    def _remember_link(
        self, registration: LtiRegistration, assignment_id: str, claims: dict[str, Any]
    ) -> None:
        """Where the assignment's grades go: the launch's AGS and NRPS endpoints."""
        ags = claims.get(AGS_CLAIM) or {}
        context = claims.get(LTI_CLAIM + "context") or {}
        if not ags.get("lineitems") or not context.get("id"):
            return  # the platform offers no gradebook to this link
        nrps = claims.get(NRPS_CLAIM) or {}
        self._store.put_link(
            AssignmentLink(
                school=registration.school,
                assignment_id=assignment_id,
                issuer=registration.issuer,
                client_id=registration.client_id,
                context_id=str(context["id"]),
                lineitems_url=str(ags["lineitems"]),
                memberships_url=nrps.get("context_memberships_url"),
                lineitem_url=ags.get("lineitem"),
            )
        )

    # --- 3. the session ------------------------------------------------------------------

    def principal_for(self, token: str) -> Principal | None:
        """The principal of an LTI session token Gradeq issued, or None for any other."""
        claims = self._verify_own(token, SESSION_AUDIENCE)
        if claims is None:
            return None
        try:
            return Principal(str(claims["school"]), str(claims["sub"]), Role(claims["role"]))
        except (KeyError, ValueError):
            return None
