"""Choose the grader named in the settings, with its client and quota limiter.

The provider clients are built here, when the worker app is made (never at import
time), with the SDKs' own retries off: the queue owns retries.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from shared.adapters.graders.lane_quota import LaneQuota, LaneQuotaLimiter
from shared.adapters.graders.lanes import LaneGraders
from shared.adapters.graders.lifecycle import ModelRetired, RetirementWatch
from shared.adapters.graders.limiter import QuotaLimiter, QuotaShare
from shared.adapters.graders.llm import ChatModel, ModelGrader
from shared.adapters.graders.parts import FileReader
from shared.adapters.graders.prompt import GradingPrompt
from shared.adapters.graders.quota_pool import (
    ADAPTIVE_PARTS,
    PARTS,
    Adaptive,
    PoolLimits,
    status,
)
from shared.adapters.graders.rubric import RubricGrader
from shared.adapters.graders.shared_quota import SharedQuotaLimiter
from shared.clock import SystemClock
from shared.config.prices import load_prices
from shared.config.settings import GeminiApi, GraderKind, QuotaMode, Settings
from shared.ports import Clock, Grader, QuotaLedger

if TYPE_CHECKING:
    from shared.adapters.graders.gemini_cache import GeminiContextCaches

log = logging.getLogger(__name__)

T = TypeVar("T")

#: SDK and HTTP loggers that log request bodies (the answers) or headers at DEBUG.
_CHATTY_LOGGERS = ("openai", "httpx", "httpx2", "httpcore", "httpcore2", "google_genai")


def grader_for(settings: Settings, clock: Clock | None = None) -> Grader:
    """Build the configured grader: the offline rubric grader, Gemini, or OpenAI-compatible.

    Gemini on Vertex AI minds its model's retirement date on `clock` (`RetirementWatch`):
    past a default model's date it suspends grading instead of refusing to start.
    """
    if settings.grader is GraderKind.RUBRIC:
        return RubricGrader(
            latency_s=settings.grader_latency_s,
            simulate=settings.simulation_enabled,
            files=file_reader(settings, by_reference=False),
        )
    for name in _CHATTY_LOGGERS:
        # Answers and keys never reach the logs, whatever GRADEQ_LOG_LEVEL says.
        logging.getLogger(name).setLevel(logging.WARNING)
    on_vertex = (
        settings.grader is GraderKind.GEMINI and settings.grader_gemini_api is GeminiApi.VERTEX
    )
    watch_clock = clock or SystemClock()

    def model_grader(model_settings: Settings) -> Grader:
        grader = _model_grader(model_settings)
        return _watched(grader, model_settings, watch_clock) if on_vertex else grader

    default = model_grader(settings)
    # A lane naming its own model gets a grader (and a quota limiter) of its own.
    models = {q.name: q.lane.grader_model for q in settings.queues().values()}
    own = {lane: m for lane, m in models.items() if m and m != settings.grader_model_name}
    if not own:
        return default
    by_model = {
        m: model_grader(settings.model_copy(update={"grader_model": m})) for m in set(own.values())
    }
    return LaneGraders(default, {lane: by_model[m] for lane, m in own.items()})


def _watched(grader: Grader, settings: Settings, clock: Clock) -> RetirementWatch:
    """The grader minding its model's retirement date; where the model stands is logged now."""
    watch = RetirementWatch(
        grader,
        settings.grader_model_name,
        default=not settings.grader_model,
        today=lambda: clock.now().date(),
    )
    try:
        watch.check()
    except ModelRetired as retired:
        log.error("grading is suspended from the first delivery on: %s", retired.detail)
    return watch


def _model_grader(settings: Settings) -> ModelGrader:
    """The model grader of the settings' model, its quota shared by the lanes by priority."""
    chat = gemini_chat(settings) if settings.grader is GraderKind.GEMINI else openai_chat(settings)
    return ModelGrader(
        chat,
        limiter=quota_limiter(settings),
        prompt=GradingPrompt.load(settings.grader_prompt_version).with_files(
            file_reader(settings, by_reference=_reads_cloud_storage(settings))
        ),
        max_output_tokens=settings.grader_max_output_tokens,
        max_input_tokens=settings.grader_max_input_tokens,
        answer_retries=settings.grader_answer_retries,
        request_timeout_s=settings.grader_request_timeout_s,
        prices=load_prices(settings.prices_file),
    )


def file_reader(settings: Settings, *, by_reference: bool) -> FileReader:
    """Reads jobs' uploaded files from the backend's blob store."""
    from shared.bootstrap import adapter_family

    blobs = adapter_family(settings).blob_store()
    return FileReader(blobs, settings.upload_limits(), by_reference=by_reference)


def _reads_cloud_storage(settings: Settings) -> bool:
    """Gemini on Vertex AI reads gs:// objects itself; every other provider gets bytes."""
    return settings.grader is GraderKind.GEMINI and settings.grader_gemini_api is GeminiApi.VERTEX


def quota_limiter(
    settings: Settings,
    clock: Callable[[], float] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> QuotaLimiter:
    """The lanes' limiter of the settings' quota mode (docs/graders.md); `clock` and
    `sleep` for tests."""
    lanes = LaneQuota.of(settings.queues().values())
    default_lane = settings.default_lane or settings.queue
    if settings.grader_quota_mode is QuotaMode.INSTANCE:
        return LaneQuotaLimiter(quota_share(settings), lanes, default_lane, clock or time.monotonic)
    key = f"{settings.grader.value}/{settings.grader_model_name}"
    ledger = _LazyLedger(settings)
    limits = pool_limits(settings)
    return SharedQuotaLimiter(
        ledger, key, limits, lanes, default_lane, clock or time.time, sleep=sleep
    )


class _LazyLedger:
    """The backend's quota ledger, opened on the first grading (not when the app is made)."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._ledger: QuotaLedger | None = None
        self._lock = threading.Lock()

    def _open(self) -> QuotaLedger:
        with self._lock:
            if self._ledger is None:
                from shared.bootstrap import adapter_family

                self._ledger = adapter_family(self._settings).quota_ledger()
            return self._ledger

    def change(
        self, key: str, change: Callable[[dict[str, Any] | None], tuple[dict[str, Any], T]]
    ) -> T:
        return self._open().change(key, change)

    def read(self, key: str) -> dict[str, Any] | None:
        return self._open().read(key)


class QuotaReport:
    """The provider quota of each model the worker grades with, as operators see it."""

    def __init__(self, settings: Settings, clock: Callable[[], float] = time.time) -> None:
        self._settings = settings
        self._ledger = _LazyLedger(settings)
        self._clock = clock

    def __call__(self) -> list[dict[str, Any]]:
        s = self._settings
        if s.grader is GraderKind.RUBRIC:
            return []  # the offline grader has no provider quota
        models = {s.grader_model_name}
        models |= {q.lane.grader_model for q in s.queues().values() if q.lane.grader_model}
        pools: list[dict[str, Any]] = []
        for model in sorted(models):
            pool: dict[str, Any] = {"provider": s.grader.value, "model": model}
            if s.grader_quota_mode is QuotaMode.INSTANCE:
                share = quota_share(s)
                pool |= {
                    "mode": "instance",
                    "share_rpm": share.requests_per_minute,
                    "share_tpm": share.tokens_per_minute,
                    "max_instances": s.worker_max_instances,
                }
            else:
                key = f"{s.grader.value}/{model}"
                state = self._ledger.read(key)
                pool |= status(state, pool_limits(s), self._clock())
            pools.append(pool)
        return pools


def pool_limits(settings: Settings) -> PoolLimits:
    """The pool's limits: the declared quota x headroom, or the adaptive controller's."""
    adaptive = None
    if settings.grader_quota_mode is QuotaMode.ADAPTIVE:
        adaptive = Adaptive(
            start_rpm=settings.grader_adaptive_start_rpm,
            min_rpm=settings.grader_adaptive_min_rpm,
            max_rpm=settings.grader_adaptive_max_rpm,
        )
    headroom = settings.grader_quota_headroom
    return PoolLimits(
        rpm=max(1, math.floor(settings.grader_quota_rpm * headroom)),
        tpm=math.floor(settings.grader_quota_tpm * headroom),
        window_s=settings.grader_quota_window_s,
        adaptive=adaptive,
        parts=ADAPTIVE_PARTS if adaptive else PARTS,
    )


def quota_share(settings: Settings) -> QuotaShare:
    """This instance's share of the project's quota for the model."""
    return QuotaShare.of(
        settings.grader_quota_rpm,
        settings.grader_quota_tpm,
        settings.worker_max_instances,
        settings.grader_quota_headroom,
    )


def gemini_client(settings: Settings) -> Any:
    """A google-genai client for the settings' endpoint and credentials."""
    from google import genai
    from google.genai import types

    http_options = types.HttpOptions(timeout=int(settings.grader_request_timeout_s * 1000))
    if settings.grader_gemini_api is GeminiApi.VERTEX:
        # Application Default Credentials: the Cloud Run service account.
        client = genai.Client(
            vertexai=True,
            project=settings.project_id,
            location=settings.grader_vertex_location,
            http_options=http_options,
        )
    else:
        client = genai.Client(
            api_key=settings.grader_api_key.get_secret_value(), http_options=http_options
        )
    return client


def context_caches(settings: Settings, client: Any | None = None) -> GeminiContextCaches | None:
    """The explicit Gemini context caches of a Gemini grader, if the settings want them."""
    if settings.grader is not GraderKind.GEMINI or not settings.grader_context_cache:
        return None
    from shared.adapters.graders.gemini_cache import GeminiContextCaches
    from shared.bootstrap import adapter_family

    family = adapter_family(settings)
    assignments = family.assignment_store()

    def expected_answers(assignment_id: str, round_: int) -> int:
        tally = assignments.tally(assignment_id, round_)
        return tally.total - tally.final

    return GeminiContextCaches(
        client or gemini_client(settings),
        family.context_cache_records(),
        load_prices(settings.prices_file),
        expected_answers,
    )


def gemini_chat(settings: Settings) -> ChatModel:
    from shared.adapters.graders.gemini import GeminiChat

    client = gemini_client(settings)
    return GeminiChat(
        client,
        settings.grader_model_name,
        max_output_tokens=settings.grader_max_output_tokens,
        temperature=settings.grader_temperature,
        thinking_level=settings.grader_thinking_level.value,
        thinking_budget=settings.grader_thinking_budget,
        caches=context_caches(settings, client),
    )


def openai_chat(settings: Settings) -> ChatModel:
    import openai

    from shared.adapters.graders.openai_compat import OpenAICompatChat

    client = openai.OpenAI(
        base_url=settings.grader_base_url,
        # Self-hosted servers usually need no key; the SDK insists on one.
        api_key=settings.grader_api_key.get_secret_value() or "none",
        max_retries=0,
        timeout=settings.grader_request_timeout_s,
    )
    return OpenAICompatChat(
        client,
        settings.grader_model_name,
        max_output_tokens=settings.grader_max_output_tokens,
        temperature=settings.grader_temperature,
        token_limit_param=settings.grader_token_limit_param.value,
    )
