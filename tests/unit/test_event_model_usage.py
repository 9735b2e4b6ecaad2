"""GradingCompleted carries the model and token usage; events without them stay valid."""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta

from services.analytics.stats import usage_totals
from shared.codecs.cloudevent import from_pubsub, to_pubsub
from shared.codecs.event_schema import schema_errors
from shared.domain.events import GradingCompleted
from shared.domain.grade import GradeResult
from shared.domain.job import GradingRequest, Job
from tests.contract.harness_events import T0, sample_event

USAGE = {"input_tokens": 812, "output_tokens": 140, "total_tokens": 952, "requests": 1}


def graded_event() -> GradingCompleted:
    request = GradingRequest("sub-1", "answer", ("c1",), 10.0, assignment_id="bio-1")
    job = Job.new("job-1", "client-a", request, "fp", T0)
    job = job.claim("w", T0 + timedelta(seconds=1), timedelta(minutes=5))
    result = GradeResult(
        7.0,
        10.0,
        "ok",
        grader="gemini",
        model="gemini-2.5-flash",
        prompt_version="grading-v1",
        usage=USAGE,
    )
    return GradingCompleted.from_job(job.succeed("w", result, T0 + timedelta(seconds=9)))


def test_the_event_carries_model_and_usage_through_pubsub() -> None:
    event = graded_event()
    assert (event.model, event.usage) == ("gemini-2.5-flash", USAGE)
    assert schema_errors(event.data()) == []
    decoded = from_pubsub(*to_pubsub(event))
    assert decoded == event


def test_events_without_model_or_usage_still_validate_and_decode() -> None:
    offline = sample_event()  # the offline grader: no model, no usage
    assert offline.model is None and offline.usage is None
    old = offline.data()
    del old["model"], old["usage"]  # an event published before these fields existed
    assert schema_errors(old) == []
    assert schema_errors({**old, "usage": {"total_tokens": -1}}) != []


def test_old_events_decode_with_no_model() -> None:
    event = sample_event()
    data, attributes = to_pubsub(event)
    payload = json.loads(data)
    del payload["model"], payload["usage"]
    decoded = from_pubsub(json.dumps(payload).encode(), attributes)
    assert decoded == dataclasses.replace(event, model=None, usage=None)


def test_analytics_sums_tokens_per_client_and_assignment_by_model() -> None:
    graded = graded_event().data()
    other = {**graded, "client_id": "client-b", "assignment_id": None}
    offline = sample_event().data()
    totals = usage_totals([graded, graded, other, offline])
    zero = {"cached_input_tokens": 0, "cost_micro_usd": 0, "cache_hit_ratio": 0.0}
    twice = {"jobs": 2, **{k: 2 * v for k, v in USAGE.items()}, **zero}
    once = {"jobs": 1, **USAGE, **zero}
    assert totals == {
        "by_client": {
            "client-a": {"gemini-2.5-flash": twice},
            "client-b": {"gemini-2.5-flash": once},
        },
        "by_assignment": {
            "bio-1": {"gemini-2.5-flash": twice},
            "(none)": {"gemini-2.5-flash": once},
        },
    }


def test_analytics_reports_cost_and_the_cache_hit_ratio_per_assignment_and_model() -> None:
    first = {**graded_event().data(), "usage": {"input_tokens": 2000, "cost_micro_usd": 1400}}
    cached = {
        **first,
        "usage": {"input_tokens": 2000, "cached_input_tokens": 1536, "cost_micro_usd": 500},
    }
    other_model = {**first, "model": "gpt-4.1-mini"}
    totals = usage_totals([first, cached, cached, other_model])
    flash = totals["by_assignment"]["bio-1"]["gemini-2.5-flash"]
    assert flash["cached_input_tokens"] == 3072 and flash["input_tokens"] == 6000
    assert flash["cache_hit_ratio"] == 0.512
    assert flash["cost_micro_usd"] == 2400
    mini = totals["by_assignment"]["bio-1"]["gpt-4.1-mini"]
    assert mini["cache_hit_ratio"] == 0.0 and mini["cost_micro_usd"] == 1400
    assert (
        usage_totals([{**first, "usage": {"requests": 1}}])["by_client"]["client-a"][
            "gemini-2.5-flash"
        ]["cache_hit_ratio"]
        is None
    )
