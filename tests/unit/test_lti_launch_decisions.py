"""LTI launches' decisions, tool side, called directly: what the login initiation sends
the platform and signs into its state, each check of the launch and its exact refusal,
the session a launch signs and who it names, where a launch says the grades go, the
nonce spent only once everything else holds, and the session tokens Gradeq accepts."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from services.notification.sealing import Sealer, new_sealing_key
from shared.adapters.embedded.lti_store import SqliteLtiStore
from shared.adapters.embedded.processed_events import SqliteProcessedEvents
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.clock import FrozenClock
from shared.domain.authorization import Forbidden, Principal, Role
from shared.domain.lti import AGS_CLAIM, LTI_CLAIM, NRPS_CLAIM, AssignmentLink, LtiRegistration
from shared.service_layer import lti_launch
from shared.service_layer.lti_keys import LtiToolKeys
from shared.service_layer.lti_launch import (
    NONCE_SUBSCRIBER,
    Launched,
    LtiLaunches,
    LtiLaunchRefused,
    assignment_of,
    state_cookie,
)
from tests.support.lti_tool_keys import ToolKey as PlatformKey
from tests.support.lti_tool_keys import served_jwks

#: Long past, so a check left to PyJWT's wall clock instead of Gradeq's clock shows.
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
NOW = int(T0.timestamp())
TOOL = "https://gradeq.test"
ISSUER = "https://lms.test"
CLIENT = "client-1"
SCHOOL = "school-a"
INSTRUCTOR = "http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor"
LEARNER = "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"
TEACHING_ASSISTANT = (
    "http://purl.imsglobal.org/vocab/lis/v2/membership/Instructor#TeachingAssistant"
)
MENTOR = "http://purl.imsglobal.org/vocab/lis/v2/membership#Mentor"
LINEITEMS = ISSUER + "/contexts/course-1/lineitems"
MEMBERSHIPS = ISSUER + "/contexts/course-1/memberships"


@dataclass
class Platform:
    key: PlatformKey
    jwks_url: str
    fetches: list[int]


@pytest.fixture(scope="module")
def tool_rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(autouse=True)
def one_tool_key(monkeypatch: pytest.MonkeyPatch, tool_rsa_key: rsa.RSAPrivateKey) -> None:
    """Gradeq's key made once for the module: a new RSA key per test takes most of its time."""
    monkeypatch.setattr(rsa, "generate_private_key", lambda **_: tool_rsa_key)


@pytest.fixture(scope="module")
def platform() -> Iterator[Platform]:
    key = PlatformKey()
    fetches: list[int] = []

    def jwks() -> dict[str, Any]:
        fetches.append(1)
        return key.jwks()

    with served_jwks(jwks) as url:
        yield Platform(key, url, fetches)


def registration(platform: Platform, **changes: Any) -> LtiRegistration:
    fields: dict[str, Any] = {
        "school": SCHOOL,
        "issuer": ISSUER,
        "client_id": CLIENT,
        "deployment_ids": ("dep-1", "dep-2"),
        "auth_login_url": ISSUER + "/auth",
        "auth_token_url": ISSUER + "/token",
        "key_set_url": platform.jwks_url,
    }
    return LtiRegistration(**{**fields, **changes})


@dataclass
class Started:
    url: str
    state: str
    cookie: str
    nonce: str


@dataclass
class Rig:
    platform: Platform
    launches: LtiLaunches
    keys: LtiToolKeys
    store: SqliteLtiStore
    nonces: SqliteProcessedEvents
    clock: FrozenClock
    registration: LtiRegistration

    def login(self, **params: str) -> Started:
        sent = {
            "iss": ISSUER,
            "login_hint": "hint-1",
            "target_link_uri": TOOL + "/lti/launch",
            "client_id": CLIENT,
            **params,
        }
        redirect = self.launches.login({k: v for k, v in sent.items() if v is not None})
        parsed = {k: v[0] for k, v in parse_qs(urlsplit(redirect.url).query).items()}
        return Started(redirect.url, parsed["state"], redirect.state_cookie, parsed["nonce"])

    def id_token(
        self,
        nonce: str,
        claims: dict[str, Any] | None = None,
        drop: tuple[str, ...] = (),
        key: PlatformKey | None = None,
    ) -> str:
        body: dict[str, Any] = {
            "iss": ISSUER,
            "aud": CLIENT,
            "sub": "user-1",
            "nonce": nonce,
            "iat": int(self.clock.now().timestamp()),
            "exp": int(self.clock.now().timestamp()) + 300,
            LTI_CLAIM + "deployment_id": "dep-1",
            LTI_CLAIM + "version": "1.3.0",
            LTI_CLAIM + "message_type": "LtiResourceLinkRequest",
            LTI_CLAIM + "resource_link": {"id": "rl-1"},
            LTI_CLAIM + "custom": {"assignment_id": "a-1"},
            LTI_CLAIM + "roles": [INSTRUCTOR],
            LTI_CLAIM + "context": {"id": "course-1"},
            AGS_CLAIM: {"lineitems": LINEITEMS, "lineitem": LINEITEMS + "/7"},
            NRPS_CLAIM: {"context_memberships_url": MEMBERSHIPS},
        }
        body.update({c.replace("lti:", LTI_CLAIM): v for c, v in (claims or {}).items()})
        for claim in drop:
            body.pop(claim.replace("lti:", LTI_CLAIM))
        signer = key or self.platform.key
        return jwt.encode(body, signer.key, algorithm="RS256", headers={"kid": signer.kid})

    def launch(
        self,
        claims: dict[str, Any] | None = None,
        drop: tuple[str, ...] = (),
        key: PlatformKey | None = None,
    ) -> Launched:
        started = self.login()
        token = self.id_token(started.nonce, claims, drop, key)
        return self.launches.launch(token, started.state, started.cookie)

    def refusal(
        self,
        claims: dict[str, Any] | None = None,
        drop: tuple[str, ...] = (),
        key: PlatformKey | None = None,
    ) -> str:
        with pytest.raises(LtiLaunchRefused) as refused:
            self.launch(claims, drop, key)
        return refused.value.detail

    def own_token(self, claims: dict[str, Any], headers: dict[str, Any] | None = None) -> str:
        """A token signed with Gradeq's own key, claims as given."""
        signing = self.keys.signing_key()
        return jwt.encode(
            claims,
            signing.private_key,
            "RS256",
            headers={"kid": signing.kid} if headers is None else headers,
        )

    def session_claims(self, **changes: Any) -> dict[str, Any]:
        claims: dict[str, Any] = {
            "aud": lti_launch.SESSION_AUDIENCE,
            "sub": "author-1",
            "school": SCHOOL,
            "role": "teacher",
            "iss": TOOL,
            "iat": NOW,
            "exp": NOW + 60,
        }
        claims.update(changes)
        return {k: v for k, v in claims.items() if v is not None}


def make_rig(tmp_path: Path, platform: Platform, start: datetime = T0) -> Rig:
    clock = FrozenClock(start)
    db = SqliteDatabase(tmp_path / "lti.sqlite3")
    store = SqliteLtiStore(db)
    nonces = SqliteProcessedEvents(db)
    keys = LtiToolKeys(store, Sealer.from_setting(new_sealing_key()), clock)
    reg = registration(platform)
    store.put_registration(reg)
    launches = LtiLaunches(store, keys, nonces, clock, TOOL + "/")
    return Rig(platform, launches, keys, store, nonces, clock, reg)


@pytest.fixture
def rig(tmp_path: Path, platform: Platform) -> Rig:
    return make_rig(tmp_path, platform)


def own_claims(rig: Rig, token: str) -> dict[str, Any]:
    kid = jwt.get_unverified_header(token)["kid"]
    assert kid == rig.keys.signing_key().kid
    key = rig.keys.public_key(kid)
    assert key is not None
    claims: dict[str, Any] = jwt.decode(
        token, key, algorithms=["RS256"], options={"verify_aud": False, "verify_exp": False}
    )
    return claims


# --- assignment_of and the state cookie ---------------------------------------------------


def test_the_links_custom_parameter_names_the_assignment_before_its_url() -> None:
    target = LTI_CLAIM + "target_link_uri"
    custom = LTI_CLAIM + "custom"
    url = TOOL + "/lti/launch?x=1&assignment_id=%20a-url%20&assignment_id=a-second"
    assert assignment_of({custom: {"assignment_id": " a-custom "}, target: url}) == "a-custom"
    assert assignment_of({custom: {"assignment_id": "  "}, target: url}) == "a-url"
    assert assignment_of({custom: {"assignment_id": None}, target: url}) == "a-url"
    assert assignment_of({custom: None, target: url}) == "a-url"
    assert assignment_of({custom: {"other": "x"}, target: url}) == "a-url"
    assert assignment_of({target: url}) == "a-url"
    assert assignment_of({custom: {"assignment_id": 7}}) == "7"
    assert assignment_of({target: TOOL + "/lti/launch?other=a-1"}) == ""
    assert assignment_of({target: None}) == ""
    assert assignment_of({}) == ""


def test_the_state_cookie_is_the_states_sha256() -> None:
    assert state_cookie("a.b.c") == hashlib.sha256(b"a.b.c").hexdigest()


# --- 1. login initiation --------------------------------------------------------------------


def test_a_login_redirects_to_the_platform_with_a_state_gradeq_signed(rig: Rig) -> None:
    redirect = rig.launches.login(
        {
            "iss": ISSUER,
            "login_hint": "hint-1",
            "target_link_uri": TOOL + "/lti/launch",
            "client_id": CLIENT,
            "lti_deployment_id": "dep-2",
            "lti_message_hint": "message-9",
        }
    )
    query = {k: v[0] for k, v in parse_qs(urlsplit(redirect.url).query).items()}
    state, nonce = query["state"], query["nonce"]
    assert redirect.url == ISSUER + "/auth?" + urlencode(
        {
            "scope": "openid",
            "response_type": "id_token",
            "response_mode": "form_post",
            "prompt": "none",
            "client_id": CLIENT,
            "redirect_uri": TOOL + "/lti/launch",
            "login_hint": "hint-1",
            "state": state,
            "nonce": nonce,
            "lti_message_hint": "message-9",
        }
    )
    assert len(nonce) == 32
    assert redirect.state_cookie == hashlib.sha256(state.encode()).hexdigest()
    assert own_claims(rig, state) == {
        "aud": "gradeq-lti-state",
        "platform": ISSUER,
        "client_id": CLIENT,
        "nonce": nonce,
        "iss": TOOL,
        "iat": NOW,
        "exp": NOW + 600,
    }
    assert rig.launches.launch_url == TOOL + "/lti/launch"


def test_the_tool_url_loses_only_its_trailing_slashes(rig: Rig) -> None:
    for url in ("https://gradeq.test/toolX/", "https://gradeq.test/toolX//"):
        launches = LtiLaunches(rig.store, rig.keys, rig.nonces, rig.clock, url)
        assert launches.launch_url == "https://gradeq.test/toolX/lti/launch"


def test_each_login_has_a_nonce_of_its_own(rig: Rig) -> None:
    assert rig.login().nonce != rig.login().nonce


def test_a_login_without_a_message_hint_passes_none_on(rig: Rig) -> None:
    assert "lti_message_hint" not in rig.login().url
    assert "lti_message_hint" not in rig.login(lti_message_hint="").url


@pytest.mark.parametrize("missing", ["iss", "login_hint", "target_link_uri"])
def test_a_login_missing_a_parameter_is_refused(rig: Rig, missing: str) -> None:
    for absent in ("", None):
        with pytest.raises(LtiLaunchRefused) as refused:
            rig.login(**{missing: absent})  # type: ignore[arg-type]
        assert refused.value.detail == "login initiation needs iss, login_hint and target_link_uri"


def test_a_login_targets_only_gradeq(rig: Rig) -> None:
    assert rig.login(target_link_uri=TOOL).url
    assert rig.login(target_link_uri=TOOL + "/anything?x=1").url
    for foreign in ("https://gradeq.test.evil/lti/launch", TOOL + "x", "https://evil.test/"):
        with pytest.raises(LtiLaunchRefused) as refused:
            rig.login(target_link_uri=foreign)
        assert refused.value.detail == "target_link_uri is not a Gradeq URL"


def test_a_login_names_a_registered_deployment_or_none(rig: Rig) -> None:
    assert rig.login(lti_deployment_id="dep-1").url
    assert rig.login(lti_deployment_id="").url
    with pytest.raises(LtiLaunchRefused) as refused:
        rig.login(lti_deployment_id="dep-9")
    assert refused.value.detail == "lti_deployment_id is not registered"


def test_a_login_for_an_unknown_client_id_is_refused(rig: Rig) -> None:
    with pytest.raises(LtiLaunchRefused) as refused:
        rig.login(client_id="client-9")
    assert refused.value.detail == "no LTI registration for this issuer and client id"


def test_a_login_without_a_client_id_takes_the_issuers_only_registration(
    rig: Rig, platform: Platform
) -> None:
    rig.store.put_registration(registration(platform, issuer="https://other.test", client_id="o"))
    started = rig.login(client_id="")
    assert f"client_id={CLIENT}&" in started.url
    assert own_claims(rig, started.state)["client_id"] == CLIENT


def test_a_login_without_a_client_id_is_refused_where_the_issuer_has_none_or_many(
    rig: Rig, platform: Platform
) -> None:
    for issuer in ("https://unknown.test", ISSUER):
        if issuer == ISSUER:
            rig.store.put_registration(registration(platform, client_id="client-2"))
        with pytest.raises(LtiLaunchRefused) as refused:
            rig.login(iss=issuer, client_id="")
        assert refused.value.detail == (
            "the login names no client_id and the issuer has none or many"
        )


# --- 2. the launch ----------------------------------------------------------------------------


def test_a_teacher_is_signed_in_to_the_review_page(rig: Rig) -> None:
    launched = rig.launch()
    author = f"lti-{rig.registration.registration_id[:8]}-user-1"
    assert launched.principal == Principal(SCHOOL, author, Role.TEACHER)
    assert launched.assignment_id == "a-1"
    assert launched.destination == "/review/?assignment_id=a-1"
    assert launched.expires_in_s == 3600
    claims = own_claims(rig, launched.session_token)
    jti = claims.pop("jti")
    assert len(jti) == 16 and int(jti, 16) >= 0
    assert claims == {
        "aud": "gradeq-lti-session",
        "sub": author,
        "school": SCHOOL,
        "role": "teacher",
        "iss": TOOL,
        "iat": NOW,
        "exp": NOW + 3600,
    }
    assert rig.launches.principal_for(launched.session_token) == launched.principal


def test_a_teaching_assistant_is_signed_in_as_a_reviewer(rig: Rig) -> None:
    launched = rig.launch({"lti:roles": [INSTRUCTOR, TEACHING_ASSISTANT]})
    assert launched.principal.role is Role.REVIEWER
    assert launched.destination == "/review/?assignment_id=a-1"
    assert own_claims(rig, launched.session_token)["role"] == "reviewer"


def test_a_student_is_signed_in_to_their_grade_by_their_roster_id(rig: Rig) -> None:
    launched = rig.launch(
        {"lti:roles": [LEARNER], "lti:lis": {"person_sourcedid": "s-1"}},
    )
    assert launched.principal == Principal(SCHOOL, "s-1", Role.STUDENT)
    assert launched.destination == "/lti/grade/?assignment_id=a-1"
    claims = own_claims(rig, launched.session_token)
    assert (claims["sub"], claims["role"]) == ("s-1", "student")
    assert rig.launches.principal_for(launched.session_token) == launched.principal


def test_a_student_without_a_roster_id_is_their_lms_user(rig: Rig) -> None:
    assert rig.launch({"lti:roles": [LEARNER]}).principal.author == "user-1"
    lis = {"lti:roles": [LEARNER], "lti:lis": {"other": "x"}}
    assert rig.launch(lis).principal.author == "user-1"


def test_a_launch_spends_its_nonce_and_a_replay_is_refused(rig: Rig) -> None:
    started = rig.login()
    token = rig.id_token(started.nonce)
    rig.launches.launch(token, started.state, started.cookie)
    spent = hashlib.sha256(f"{ISSUER}\n{started.nonce}".encode()).hexdigest()
    assert rig.nonces.contains(NONCE_SUBSCRIBER, spent)
    assert rig.nonces.records(NONCE_SUBSCRIBER) == [{"issuer": ISSUER, "at": T0.isoformat()}]
    with pytest.raises(LtiLaunchRefused) as refused:
        rig.launches.launch(token, started.state, started.cookie)
    assert refused.value.detail == "the nonce was already used"


def test_a_launch_refused_late_leaves_its_nonce_unspent(rig: Rig) -> None:
    started = rig.login()
    with pytest.raises(Forbidden) as forbidden:
        rig.launches.launch(
            rig.id_token(started.nonce, {"lti:roles": [MENTOR]}), started.state, started.cookie
        )
    assert forbidden.value.detail == "the launch's roles give no role in Gradeq"
    assert rig.nonces.records(NONCE_SUBSCRIBER) == []
    assert rig.store.link(SCHOOL, "a-1") is None
    launched = rig.launches.launch(rig.id_token(started.nonce), started.state, started.cookie)
    assert launched.principal.role is Role.TEACHER


def test_a_launch_without_roles_is_forbidden(rig: Rig) -> None:
    with pytest.raises(Forbidden):
        rig.launch(drop=("lti:roles",))


@pytest.mark.parametrize("cookie", [None, "", "0" * 64])
def test_a_launch_needs_the_browsers_state_cookie(rig: Rig, cookie: str | None) -> None:
    started = rig.login()
    with pytest.raises(LtiLaunchRefused) as refused:
        rig.launches.launch(rig.id_token(started.nonce), started.state, cookie)
    assert refused.value.detail == "the state does not belong to this browser's login"


def test_a_state_expires_after_ten_minutes(rig: Rig) -> None:
    started = rig.login()
    rig.clock.advance(timedelta(minutes=10) - timedelta(seconds=1))
    token = rig.id_token(started.nonce)
    assert rig.launches.launch(token, started.state, started.cookie).assignment_id == "a-1"
    started = rig.login()
    rig.clock.advance(timedelta(minutes=10))
    with pytest.raises(LtiLaunchRefused) as refused:
        rig.launches.launch(rig.id_token(started.nonce), started.state, started.cookie)
    assert refused.value.detail == "the state is not Gradeq's or has expired"


def test_a_state_gradeq_did_not_sign_is_refused(rig: Rig) -> None:
    started = rig.login()
    forged = jwt.encode(
        own_claims(rig, started.state),
        rig.platform.key.key,
        "RS256",
        headers={"kid": rig.keys.signing_key().kid},
    )
    for state in (forged, "not-a-token"):
        with pytest.raises(LtiLaunchRefused) as refused:
            rig.launches.launch(rig.id_token(started.nonce), state, state_cookie(state))
        assert refused.value.detail == "the state is not Gradeq's or has expired"


def test_a_state_whose_registration_is_gone_is_refused(rig: Rig, tmp_path: Path) -> None:
    started = rig.login()
    empty = SqliteLtiStore(SqliteDatabase(tmp_path / "other.sqlite3"))
    elsewhere = LtiLaunches(empty, rig.keys, rig.nonces, rig.clock, TOOL)
    with pytest.raises(LtiLaunchRefused) as refused:
        elsewhere.launch(rig.id_token(started.nonce), started.state, started.cookie)
    assert refused.value.detail == "the registration is gone"


def test_an_id_token_the_platform_did_not_sign_is_refused(
    rig: Rig, tool_rsa_key: rsa.RSAPrivateKey
) -> None:
    stranger = PlatformKey(key=rig.platform.key.key, kid="unknown-kid")
    assert rig.refusal(key=stranger).startswith("the id_token was refused: ")
    forger = PlatformKey(key=tool_rsa_key, kid=rig.platform.key.kid)
    assert rig.refusal(key=forger) == "the id_token was refused: Signature verification failed"


@pytest.mark.parametrize(
    ("claims", "detail"),
    [
        ({"aud": "client-9"}, "the id_token was refused: Audience doesn't match"),
        ({"iss": "https://other.test"}, "the id_token was refused: Invalid issuer"),
    ],
)
def test_an_id_token_for_another_client_or_issuer_is_refused(
    rig: Rig, claims: dict[str, Any], detail: str
) -> None:
    assert rig.refusal(claims) == detail


@pytest.mark.parametrize("claim", ["exp", "iat", "nonce", "sub", "aud", "iss"])
def test_an_id_token_missing_a_required_claim_is_refused(rig: Rig, claim: str) -> None:
    assert rig.refusal(drop=(claim,)) == (
        f'the id_token was refused: Token is missing the "{claim}" claim'
    )


def test_an_id_token_expires_on_gradeqs_clock(rig: Rig) -> None:
    assert rig.launch({"exp": NOW + 1}).assignment_id == "a-1"
    assert rig.refusal({"exp": NOW}) == "the id_token has expired"


def test_an_id_token_may_be_issued_up_to_a_minute_ahead(rig: Rig) -> None:
    assert rig.launch({"iat": NOW + 60}).assignment_id == "a-1"
    assert rig.refusal({"iat": NOW + 61}) == "the id_token was issued in the future"


def test_the_issue_time_is_judged_on_gradeqs_clock(tmp_path: Path, platform: Platform) -> None:
    # Gradeq's clock at the wall clock's time, the id_token issued within the skew ahead of
    # both: PyJWT's own check, on the wall clock and without the skew, would refuse it.
    now = datetime.now(UTC).replace(microsecond=0)
    rig = make_rig(tmp_path, platform, now)
    assert rig.launch({"iat": int(now.timestamp()) + 60}).assignment_id == "a-1"


@pytest.mark.parametrize(
    "claims",
    [
        {"aud": [CLIENT, "other"], "azp": CLIENT},
        {"aud": [CLIENT]},
        {"aud": CLIENT, "azp": CLIENT},
    ],
)
def test_an_authorized_party_of_gradeq_is_accepted(rig: Rig, claims: dict[str, Any]) -> None:
    assert rig.launch(claims).assignment_id == "a-1"


@pytest.mark.parametrize(
    "claims",
    [
        {"aud": [CLIENT, "other"]},
        {"aud": [CLIENT, "other"], "azp": "other"},
        {"aud": CLIENT, "azp": "other"},
        {"aud": [CLIENT], "azp": "other"},
    ],
)
def test_another_authorized_party_is_refused(rig: Rig, claims: dict[str, Any]) -> None:
    assert rig.refusal(claims) == "azp is not Gradeq's client id"


def test_the_platforms_keys_are_fetched_once_per_key_set(rig: Rig) -> None:
    rig.launch()
    before = len(rig.platform.fetches)
    rig.launch()
    rig.launch()
    assert len(rig.platform.fetches) == before


def test_the_platforms_keys_are_fetched_with_a_timeout(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[tuple[str, dict[str, Any]]] = []
    real = jwt.PyJWKClient

    def client(url: str, **options: Any) -> jwt.PyJWKClient:
        made.append((url, options))
        return real(url, **options)

    monkeypatch.setattr(jwt, "PyJWKClient", client)
    rig.launch()
    assert made == [(rig.platform.jwks_url, {"timeout": 10})]


def test_an_id_token_for_another_login_is_refused(rig: Rig) -> None:
    started = rig.login()
    token = rig.id_token("another-nonce")
    with pytest.raises(LtiLaunchRefused) as refused:
        rig.launches.launch(token, started.state, started.cookie)
    assert refused.value.detail == "the id_token's nonce is not the login's"


def test_the_deployment_must_be_registered(rig: Rig) -> None:
    assert rig.launch({"lti:deployment_id": "dep-2"}).assignment_id == "a-1"
    assert rig.refusal({"lti:deployment_id": "dep-9"}) == "the deployment id is not registered"
    assert rig.refusal(drop=("lti:deployment_id",)) == "the deployment id is not registered"


def test_only_lti_1_3_resource_link_launches_are_served(rig: Rig) -> None:
    assert rig.refusal({"lti:version": "1.1"}) == "only LTI 1.3.0 launches are served"
    assert rig.refusal(drop=("lti:version",)) == "only LTI 1.3.0 launches are served"
    assert rig.refusal({"lti:message_type": "LtiDeepLinkingRequest"}) == (
        "only resource link launches are served"
    )
    assert rig.refusal(drop=("lti:message_type",)) == "only resource link launches are served"
    for link in ({}, {"id": ""}, None):
        assert rig.refusal({"lti:resource_link": link}) == "the launch names no resource link"
    assert rig.refusal(drop=("lti:resource_link",)) == "the launch names no resource link"


def test_a_link_that_names_no_assignment_is_refused(rig: Rig) -> None:
    assert rig.refusal(drop=("lti:custom",)) == (
        "the link names no Gradeq assignment (custom parameter assignment_id"
        " or ?assignment_id= in its URL)"
    )


def test_a_link_may_name_its_assignment_in_its_url(rig: Rig) -> None:
    launched = rig.launch(
        {"lti:target_link_uri": TOOL + "/lti/launch?assignment_id=a 7"}, drop=("lti:custom",)
    )
    assert launched.assignment_id == "a 7"
    assert launched.destination == "/review/?assignment_id=a+7"


# --- where the grades go -----------------------------------------------------------------------


def test_a_launch_remembers_where_the_assignments_grades_go(rig: Rig) -> None:
    rig.launch({"lti:context": {"id": 42}})
    assert rig.store.link(SCHOOL, "a-1") == AssignmentLink(
        school=SCHOOL,
        assignment_id="a-1",
        issuer=ISSUER,
        client_id=CLIENT,
        context_id="42",
        lineitems_url=LINEITEMS,
        memberships_url=MEMBERSHIPS,
        lineitem_url=LINEITEMS + "/7",
    )


def test_a_link_without_a_roster_or_a_line_item_keeps_none(rig: Rig) -> None:
    rig.launch({AGS_CLAIM: {"lineitems": LINEITEMS}}, drop=(NRPS_CLAIM,))
    link = rig.store.link(SCHOOL, "a-1")
    assert link is not None
    assert (link.lineitems_url, link.memberships_url, link.lineitem_url) == (
        LINEITEMS,
        None,
        None,
    )


@pytest.mark.parametrize(
    ("drop", "claims"),
    [
        ((AGS_CLAIM,), {}),
        ((), {AGS_CLAIM: {"lineitem": LINEITEMS + "/7"}}),
        (("lti:context",), {}),
        ((), {"lti:context": {"title": "Course"}}),
    ],
)
def test_a_launch_without_a_gradebook_remembers_nothing(
    rig: Rig, drop: tuple[str, ...], claims: dict[str, Any]
) -> None:
    assert rig.launch(claims, drop).assignment_id == "a-1"
    assert rig.store.link(SCHOOL, "a-1") is None


# --- 3. the session -------------------------------------------------------------------------


def test_a_session_lasts_an_hour_on_gradeqs_clock(rig: Rig) -> None:
    launched = rig.launch()
    rig.clock.advance(timedelta(hours=1) - timedelta(seconds=1))
    assert rig.launches.principal_for(launched.session_token) == launched.principal
    rig.clock.advance(timedelta(seconds=1))
    assert rig.launches.principal_for(launched.session_token) is None


def test_a_session_token_gradeq_signed_names_its_principal(rig: Rig) -> None:
    token = rig.own_token(rig.session_claims())
    assert rig.launches.principal_for(token) == Principal(SCHOOL, "author-1", Role.TEACHER)


@pytest.mark.parametrize(
    "changes",
    [
        {"iss": "https://other.test"},
        {"iss": None},
        {"aud": "gradeq-lti-state"},
        {"aud": None},
        {"exp": None},
        {"iat": None},
        {"exp": NOW},
        {"school": None},
        {"sub": None},
        {"role": None},
        {"role": "principal"},
    ],
)
def test_a_token_that_is_no_session_of_gradeqs_names_no_one(
    rig: Rig, changes: dict[str, Any]
) -> None:
    assert rig.launches.principal_for(rig.own_token(rig.session_claims(**changes))) is None


def test_a_token_without_gradeqs_key_names_no_one(rig: Rig) -> None:
    claims = rig.session_claims()
    assert rig.launches.principal_for(rig.own_token(claims, headers={})) is None
    assert rig.launches.principal_for(rig.own_token(claims, headers={"kid": "unknown"})) is None
    forged = jwt.encode(
        claims, rig.platform.key.key, "RS256", headers={"kid": rig.keys.signing_key().kid}
    )
    assert rig.launches.principal_for(forged) is None
    assert rig.launches.principal_for("not-a-token") is None
