"""LTI 1.3 routes of the intake (see shared.service_layer.lti_launch for the checks).

- `GET|POST /lti/login`: the platform's third-party login initiation; redirects to the
  platform's OIDC authorization endpoint and sets the state cookie.
- `POST /lti/launch`: the platform's form post of `id_token` and `state`; redirects a
  teacher to the assignment's review page and a student to their grade, with an LTI
  session token in the URL fragment (never sent to a server, never in a log).
- `GET /lti/jwks.json`: Gradeq's public LTI keys.
"""

from __future__ import annotations

from typing import cast

from flask import Blueprint, Flask, Response, current_app, jsonify, redirect, request
from werkzeug.wrappers import Response as BaseResponse

from services.intake.lti.page import page as grade_page
from shared.service_layer.lti_keys import LtiToolKeys
from shared.service_layer.lti_launch import (
    JWKS_PATH,
    LAUNCH_PATH,
    LOGIN_PATH,
    STATE_TTL,
    LtiLaunches,
)

bp = Blueprint("lti", __name__)
STATE_COOKIE = "gradeq_lti_state"
#: How long platforms may cache the JWKS; rotations publish a key well before it signs.
JWKS_MAX_AGE_S = 300


def init_app(app: Flask, launches: LtiLaunches, keys: LtiToolKeys, secure_cookie: bool) -> None:
    app.extensions["gradeq.lti_launches"] = launches
    app.extensions["gradeq.lti_keys"] = keys
    app.config["LTI_SECURE_COOKIE"] = secure_cookie
    app.register_blueprint(bp)
    app.register_blueprint(grade_page)


def _launches() -> LtiLaunches:
    return cast(LtiLaunches, current_app.extensions["gradeq.lti_launches"])


def _no_store(response: BaseResponse) -> BaseResponse:
    response.headers["Cache-Control"] = "no-store"
    response.headers["Referrer-Policy"] = "no-referrer"
    return response


@bp.route(LOGIN_PATH, methods=["GET", "POST"])
def login() -> BaseResponse:
    params = {k: v for k, v in request.values.items() if isinstance(v, str)}
    started = _launches().login(params)
    response = redirect(started.url, 302)
    # The launch comes back as a cross-site form post from the LMS: SameSite=None (which
    # browsers accept only with Secure, so on an https tool URL).
    secure = bool(current_app.config["LTI_SECURE_COOKIE"])
    response.set_cookie(
        STATE_COOKIE,
        started.state_cookie,
        max_age=int(STATE_TTL.total_seconds()),
        path="/lti",
        httponly=True,
        secure=secure,
        samesite="None" if secure else "Lax",
    )
    return _no_store(response)


@bp.post(LAUNCH_PATH)
def launch() -> BaseResponse:
    launched = _launches().launch(
        request.form.get("id_token", ""),
        request.form.get("state", ""),
        request.cookies.get(STATE_COOKIE),
    )
    response = redirect(f"{launched.destination}#lti_session={launched.session_token}", 303)
    response.delete_cookie(STATE_COOKIE, path="/lti")
    return _no_store(response)


@bp.get(JWKS_PATH)
def jwks() -> Response:
    keys = cast(LtiToolKeys, current_app.extensions["gradeq.lti_keys"])
    response = jsonify(keys.jwks())
    response.headers["Cache-Control"] = f"public, max-age={JWKS_MAX_AGE_S}"
    return response
