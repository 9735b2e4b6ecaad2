"""The worker service: the Cloud Tasks HTTP target that grades jobs."""

from __future__ import annotations

from datetime import timedelta

from flask import Flask

from services.worker.routes import build_blueprint
from services.worker.shutdown import drain_on_sigterm
from shared.bootstrap import (
    Adapters,
    adapter_family,
    build_adapters,
    build_budget_gate,
    build_clock,
    build_grader,
)
from shared.bootstrap.embedded import EmbeddedFamily
from shared.bootstrap.graders import context_caches
from shared.config.settings import Backend, Settings
from shared.domain.admission import AdmissionLimits
from shared.http.health import register_health
from shared.http.problems import register_error_handlers
from shared.http.push_auth import build_verifier, require_push_token
from shared.http.tracing import register_trace_context
from shared.logs import configure_logging
from shared.ports import Clock, Grader
from shared.service_layer.assignment_completion import AssignmentCompletion
from shared.service_layer.assignments import AssignmentService
from shared.service_layer.lanes import LaneService
from shared.service_layer.provider_batches import BatchPolicy, BatchService, ProviderBatchGrader
from shared.service_layer.recovery import RecoveryService
from shared.service_layer.regrade import Regrader
from shared.service_layer.review import ReviewPolicies, ReviewService
from shared.service_layer.upload_expiry import UploadExpiry
from shared.service_layer.worker import WorkerService


def create_app(
    settings: Settings | None = None,
    adapters: Adapters | None = None,
    grader: Grader | None = None,
    clock: Clock | None = None,
    batch_grader: ProviderBatchGrader | None = None,
) -> Flask:
    """Build the worker app; gunicorn calls this with no arguments."""
    settings = settings or Settings()
    configure_logging("worker", settings.log_level)
    adapters = adapters or build_adapters(settings)
    clock = clock or build_clock()
    budget = settings.budget()
    app = Flask(__name__)
    regrader = _regrader(settings, adapters, clock)
    caches = context_caches(settings)
    completion = (
        AssignmentCompletion(
            adapters.assignments,
            adapters.publisher,
            clock,
            regrader.resume if regrader else None,
            on_graded=caches.delete_for if caches is not None else None,
        )
        if adapters.assignments is not None
        else None
    )
    grader = grader or build_grader(settings, clock)
    worker = WorkerService(
        store=adapters.store,
        publisher=adapters.publisher,
        grader=grader,
        clock=clock,
        retry=settings.queue_config().retry_config,
        budget=budget,
        uow=adapters.uow,
        on_final=completion.on_final if completion else None,
        review_policy=ReviewPolicies(adapters.assignments, settings.client_review_policies),
        queue=adapters.queue,
        # Model graders can ask the provider whether it accepts their configuration.
        probe=getattr(grader, "probe", None),
        lane_retries={q.name: q.retry_config for q in settings.queues().values()},
        budgets=build_budget_gate(settings, adapters, clock),
    )
    app.extensions["gradeq.worker"] = worker
    batches = _batches(settings, adapters, clock, worker, batch_grader)
    app.extensions["gradeq.recovery"] = RecoveryService(
        store=adapters.store,
        queue=adapters.queue,
        publisher=adapters.publisher,
        clock=clock,
        budget=budget,
        assignments=completion,
        regrades=regrader.resume_waiting if regrader else None,
        batches=batches.tick if batches else None,
        reviews=ReviewService(
            adapters.store,
            adapter_family(settings).review_queue(),
            adapters.publisher,
            clock,
        ),
    )
    if settings.backend is Backend.EMBEDDED:
        # Cloud Storage expires uploads by the bucket's lifecycle rule; local disk here.
        family = EmbeddedFamily(settings)
        app.extensions["gradeq.upload_expiry"] = UploadExpiry(
            family.blob_store(clock),
            family.upload_references(),
            clock,
            timedelta(days=settings.uploads_retention_days),
        )
    app.extensions["gradeq.lanes"] = LaneService(
        adapters.store,
        adapters.queue,
        adapters.publisher,
        clock,
        settings.queues(),
        settings.lane_policy().default,
    )
    drain_on_sigterm(worker, budget.drain_grace_s)
    register_error_handlers(app)
    register_trace_context(app, settings.project_id)
    register_health(app, [("store", adapters.store.ping), ("bus", adapters.publisher.ping)])
    app.register_blueprint(build_blueprint(require_push_token(build_verifier(settings))))
    return app


def _batches(
    settings: Settings,
    adapters: Adapters,
    clock: Clock,
    worker: WorkerService,
    grader: ProviderBatchGrader | None,
) -> BatchService | None:
    """Batch mode (docs/graders.md#batch-mode): the worker gathers, the sweep's tick sends.

    On when GRADEQ_BATCH_MODE is, or when the app is handed a batch grader (tests).
    """
    from shared.bootstrap.batches import batch_grader_for

    grader = grader or batch_grader_for(settings)
    if grader is None:
        return None
    policy = BatchPolicy(
        lanes=settings.batch_lane_set(),
        regrades=settings.batch_regrades,
        max_size=settings.batch_max_size,
        window=timedelta(seconds=settings.batch_window_s),
        tick=timedelta(seconds=settings.batch_tick_s),
    )
    service = BatchService(
        adapters.store,
        adapters.queue,
        clock,
        grader,
        policy,
        worker.record_batch_answer,
        uow=adapters.uow,
    )
    worker.batches = service
    return service


def _regrader(settings: Settings, adapters: Adapters, clock: Clock) -> Regrader | None:
    """What resumes a regrade waiting for room under the ceilings (docs/assignments.md)."""
    if adapters.assignments is None or adapters.batch is None:
        return None
    limits = AdmissionLimits(
        settings.max_active_jobs_per_client, settings.max_backlog, settings.admission_retry_after_s
    )
    service = AssignmentService(
        adapters.assignments, adapters.store, adapters.batch, adapters.queue, clock, limits
    )
    checker = AssignmentCompletion(adapters.assignments, adapters.publisher, clock)
    regrader = Regrader(
        service,
        adapters.assignments,
        adapters.store,
        adapters.queue,
        clock,
        checker.check,
        adapters.enqueue_parallelism,
        lane=settings.regrade_lane(),
        limits=limits,
    )
    return regrader
