"""The intake service: accepts grading jobs and answers their status."""

from __future__ import annotations

from flask import Flask, Response, jsonify

from services.intake import admin
from services.intake.assignments.routes import bp as assignments_bp
from services.intake.auth.clients import ClientAuthenticator
from services.intake.auth.cors import register_cors
from services.intake.auth.firebase import FirebaseAuthenticator, SignInPolicy
from services.intake.auth.firebase_revocation import IdentityToolkitLookup
from services.intake.auth.reviewers import ReviewerKeys
from services.intake.jobs.routes import bp
from services.intake.limits.body import check_request_head
from services.intake.limits.rate_limit import SubmissionRateLimiter
from services.intake.lti import init_app as init_lti
from services.intake.openapi import OPENAPI_PATH, openapi_document
from services.intake.reviews import page as review_page
from services.intake.reviews import requests as regrade_requests
from services.intake.reviews import routes as reviews
from services.intake.students import erasure
from services.intake.uploads import blobs
from services.intake.uploads import routes as uploads
from services.notification.sealing import Sealer
from shared.bootstrap import (
    AdapterFamily,
    Adapters,
    adapter_family,
    build_budget_gate,
    build_clock,
    family_adapters,
)
from shared.config.settings import Settings
from shared.domain.admission import AdmissionLimits
from shared.http.callback_guard import CachedResolver, CallbackGuard
from shared.http.client_keys import ApiKeyAuthenticator
from shared.http.failed_auth import FailedAuthLimiter, client_address
from shared.http.health import register_health
from shared.http.problems import register_error_handlers
from shared.http.tracing import register_trace_context
from shared.logs import configure_logging
from shared.ports import ApiKeyStore, Clock
from shared.service_layer.assignment_completion import AssignmentCompletion
from shared.service_layer.assignments import AssignmentService
from shared.service_layer.erasure import ErasureService, Retention
from shared.service_layer.intake import IntakeService
from shared.service_layer.lti_keys import LtiToolKeys
from shared.service_layer.lti_launch import LtiLaunches
from shared.service_layer.posting import PostingService
from shared.service_layer.regrade import Regrader
from shared.service_layer.regrade_requests import RegradeRequests
from shared.service_layer.review import ReviewService
from shared.service_layer.uploads import UploadService

MAX_BODY_BYTES = 160 * 1024


def create_app(
    settings: Settings | None = None,
    adapters: Adapters | None = None,
    clock: Clock | None = None,
    guard: CallbackGuard | None = None,
    api_keys: ApiKeyStore | None = None,
    firebase: FirebaseAuthenticator | None = None,
    family: AdapterFamily | None = None,
) -> Flask:
    """Build the intake app; gunicorn calls this with no arguments."""
    settings = settings or Settings()
    configure_logging("intake", settings.log_level)
    family = family or adapter_family(settings)
    adapters = adapters or family_adapters(family)
    clock = clock or build_clock()
    app = Flask(__name__)
    app.config.update(
        MAX_CONTENT_LENGTH=MAX_BODY_BYTES,
        RETRY_AFTER_S=settings.retry_after_s,
        PRACTICE_CLIENTS=settings.practice_client_set(),
    )
    firebase = firebase or _firebase(settings)
    failures = FailedAuthLimiter(
        settings.auth_failure_burst,
        settings.auth_failure_rate_per_s,
        clock,
        lambda: client_address(settings.trusted_proxy_hops),
    )
    app.extensions["gradeq.failed_auth"] = failures
    lti = _lti(settings, family, clock)
    app.extensions["gradeq.client_auth"] = ClientAuthenticator(
        ApiKeyAuthenticator(
            api_keys or family.api_key_store(), clock, settings.api_key_unknown_cache_s
        ),
        firebase,
        failures,
        ReviewerKeys(settings.reviewer_key_map()),
        lti[0] if lti else None,
    )
    if lti is not None:
        init_lti(app, *lti, secure_cookie=settings.lti_tool_url.startswith("https://"))
    app.extensions["gradeq.callback_guard"] = guard or CallbackGuard(
        CachedResolver(),
        allow_loopback=settings.callback_allow_loopback,
        allowed_ports=settings.callback_port_set(),
    )
    app.extensions["gradeq.rate_limiter"] = SubmissionRateLimiter(
        settings.submit_burst, settings.submit_rate_per_s, clock
    )
    completion = (
        AssignmentCompletion(adapters.assignments, adapters.publisher, clock)
        if adapters.assignments is not None
        else None
    )
    limits = AdmissionLimits(
        settings.max_active_jobs_per_client, settings.max_backlog, settings.admission_retry_after_s
    )
    budgets = build_budget_gate(settings, adapters, clock)
    app.extensions["gradeq.intake"] = IntakeService(
        adapters.store,
        adapters.queue,
        adapters.publisher,
        clock,
        limits,
        settings.fair_spacing(),
        uow=adapters.uow,
        lanes=settings.lane_policy(),
        on_final=completion.on_final if completion else None,
        budgets=budgets,
    )
    if adapters.assignments is not None and adapters.batch is not None:
        assignments = AssignmentService(
            adapters.assignments,
            adapters.store,
            adapters.batch,
            adapters.queue,
            clock,
            limits,
            adapters.uow,
            adapters.enqueue_parallelism,
            lanes=settings.lane_policy(),
            budgets=budgets,
        )
        app.extensions["gradeq.assignments"] = assignments
        app.extensions["gradeq.regrader"] = Regrader(
            assignments,
            adapters.assignments,
            adapters.store,
            adapters.queue,
            clock,
            completion.check if completion else None,
            adapters.enqueue_parallelism,
            lane=settings.regrade_lane(),
            limits=limits,
        )
        app.extensions["gradeq.posting"] = PostingService(
            assignments, adapters.store, adapters.publisher, clock
        )
        app.register_blueprint(assignments_bp)
    review_queue = family.review_queue()
    app.extensions["gradeq.review_queue"] = review_queue
    app.extensions["gradeq.reviews"] = ReviewService(
        adapters.store, review_queue, adapters.publisher, clock
    )
    app.extensions["gradeq.regrade_requests"] = RegradeRequests(
        adapters.store, adapters.assignments, app.extensions["gradeq.reviews"], clock
    )
    app.register_blueprint(reviews.bp)
    app.register_blueprint(regrade_requests.bp)
    app.register_blueprint(reviews.agreement_bp)
    app.register_blueprint(review_page.page)
    blob_store = family.blob_store(clock)
    app.extensions["gradeq.uploads"] = UploadService(
        blob_store,
        clock,
        settings.upload_limits(),
        family.upload_references(),
        family.upload_quota(),
    )
    app.extensions["gradeq.erasure"] = ErasureService(
        adapters.store,
        family.job_eraser(),
        blob_store,
        clock,
        Retention(settings.analytics_table, settings.log_retention_days),
    )
    app.register_blueprint(erasure.bp)
    app.extensions["gradeq.upload_rate_limiter"] = SubmissionRateLimiter(
        settings.upload_burst, settings.upload_rate_per_s, clock
    )
    app.register_blueprint(uploads.bp)
    if isinstance(blob_store, blobs.SignedPutReceiver):  # the embedded store's PUT endpoint
        app.extensions["gradeq.blob_receiver"] = blob_store
        app.register_blueprint(blobs.bp)
    register_error_handlers(app)
    app.before_request(check_request_head)
    register_trace_context(app, settings.project_id)
    register_health(app, [("store", adapters.store.ping), ("queue", adapters.queue.ping)])
    app.register_blueprint(bp)
    app.add_url_rule(OPENAPI_PATH, "openapi", _serve_openapi)
    register_cors(app, settings.cors_origin_list())
    admin.init_app(app, settings, adapters, clock)
    return app


def _lti(
    settings: Settings, family: AdapterFamily, clock: Clock
) -> tuple[LtiLaunches, LtiToolKeys] | None:
    """LTI 1.3 launches, where configured (the tool URL and the key sealing its keys)."""
    if not settings.lti_configured():
        return None
    keys = LtiToolKeys(
        family.lti_store(), Sealer.from_setting(settings.lti_secrets_key.get_secret_value()), clock
    )
    launches = LtiLaunches(
        family.lti_store(), keys, family.processed_events(), clock, settings.lti_tool_url
    )
    return launches, keys


def _firebase(settings: Settings) -> FirebaseAuthenticator | None:
    """ID tokens are accepted when a Firebase project is configured."""
    if not settings.firebase_project_id:
        return None
    roles = frozenset(
        r.strip() for r in settings.firebase_client_wide_roles.split(",") if r.strip()
    )
    policy = SignInPolicy(
        role_claim=settings.firebase_role_claim,
        client_wide_roles=roles,
        allow_anonymous=settings.firebase_allow_anonymous,
        allow_unverified=settings.firebase_allow_unverified,
    )
    accounts = (
        IdentityToolkitLookup(settings.firebase_project_id)
        if settings.firebase_check_revoked
        else None
    )
    return FirebaseAuthenticator(
        settings.firebase_project_id,
        settings.firebase_client_claim,
        settings.firebase_tenant_client_map(),
        policy=policy,
        accounts=accounts,
    )


def _serve_openapi() -> Response:
    return jsonify(openapi_document())
