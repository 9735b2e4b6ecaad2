"""Choose the grader named in the settings, with its client and quota limiter.

The provider clients are built here, when the worker app is made (never at import
time), with the SDKs' own retries off: the queue owns retries.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from shared.adapters.graders.lane_quota import LaneQuota, LaneQuotaLimiter
from shared.adapters.graders.lanes import LaneGraders
from shared.adapters.graders.lifecycle import ModelRetired, RetirementWatch
from shared.adapters.graders.limiter import QuotaShare
from shared.adapters.graders.llm import ChatModel, ModelGrader
from shared.adapters.graders.parts import FileReader
from shared.adapters.graders.prompt import GradingPrompt
from shared.adapters.graders.rubric import RubricGrader
from shared.clock import SystemClock
from shared.config.prices import load_prices
from shared.config.settings import GeminiApi, GraderKind, Settings
from shared.ports import Clock, Grader

if TYPE_CHECKING:
    from shared.adapters.graders.gemini_cache import GeminiContextCaches

log = logging.getLogger(__name__)

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
    queues = settings.queues().values()
    return ModelGrader(
        chat,
        limiter=LaneQuotaLimiter(
            quota_share(settings), LaneQuota.of(queues), settings.default_lane or settings.queue
        ),
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
