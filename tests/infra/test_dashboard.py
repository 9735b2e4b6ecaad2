"""terraform/dashboard.tf reads what the code logs: the completion line's event, fields
and labels, and the dashboard charts the metrics it defines."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest

from shared.domain.job import GradingRequest, Job, JobError
from shared.service_layer.completion import log_completion
from tests.infra import tfconfig
from tests.infra.tfconfig import Terraform, block

pytestmark = pytest.mark.infra

T0 = datetime(2026, 3, 1, tzinfo=UTC)


@pytest.fixture
def completion_line(caplog: pytest.LogCaptureFixture) -> logging.LogRecord:
    """The completion line of a job that failed after one attempt."""
    request = GradingRequest(submission_id="s", answer="a", rubric="r")
    job = Job.new("j", "c", request, "fp", T0).claim("w", T0, timedelta(seconds=30))
    job = job.fail("w", JobError("grading-permanent", "no"), T0 + timedelta(seconds=1))
    caplog.set_level(logging.INFO)
    log_completion(job)
    [line] = [r for r in caplog.records if r.getMessage() == "job completed"]
    return line


def test_the_completion_filter_matches_the_event_the_code_logs(
    tf: Terraform, completion_line: logging.LogRecord
) -> None:
    event = getattr(completion_line, "event")  # noqa: B009 - a logging extra
    assert f'jsonPayload.event = "{event}"' in tf.locals["completion_filter"]
    for name in ("job_timing", "jobs_completed"):
        metric = tf.resource("google_logging_metric", name)
        assert "${local.completion_filter}" in metric["filter"]


def test_every_timing_metric_extracts_a_field_the_completion_line_carries(
    tf: Terraform, completion_line: logging.LogRecord
) -> None:
    timings = tf.locals["job_timings"]
    assert set(timings.values()) == {"queue_wait_ms", "processing_ms", "total_ms"}
    for field in timings.values():
        assert isinstance(getattr(completion_line, field), int)
    metric = tf.resource("google_logging_metric", "job_timing")
    assert metric["value_extractor"] == "EXTRACT(jsonPayload.${each.value})"
    descriptor = block(metric, "metric_descriptor")
    assert descriptor is not None and descriptor["value_type"] == "DISTRIBUTION"


def test_every_label_is_extracted_from_a_logged_field(
    tf: Terraform, completion_line: logging.LogRecord
) -> None:
    for name in ("job_timing", "jobs_completed"):
        metric = tf.resource("google_logging_metric", name)
        labels = metric["label_extractors"]
        descriptor = block(metric, "metric_descriptor")
        assert descriptor is not None
        declared = {label["key"] for label in descriptor["labels"]}
        assert set(labels) == declared
        for key, extractor in labels.items():
            field = extractor.removeprefix("EXTRACT(jsonPayload.").removesuffix(")")
            assert hasattr(completion_line, field), f"{name}.{key} reads {field}"
    assert getattr(completion_line, "outcome") == "failed"  # noqa: B009
    assert getattr(completion_line, "error_type") == "grading-permanent"  # noqa: B009


def test_the_buckets_reach_past_an_hour(tf: Terraform) -> None:
    metric = tf.resource("google_logging_metric", "job_timing")
    buckets = block(metric, "bucket_options", "exponential_buckets")
    assert buckets is not None
    top_ms = buckets["scale"] * buckets["growth_factor"] ** buckets["num_finite_buckets"]
    assert top_ms >= 3_600_000


def test_the_dashboard_charts_every_metric_it_needs(tf: Terraform) -> None:
    dashboard = str(tf.resource("google_monitoring_dashboard", "operations")["dashboard_json"])
    assert "${local.metric_prefix}/job_${timing}_ms" in dashboard  # queue wait, processing
    assert '["queue_wait", "processing"]' in dashboard
    assert "${local.metric_prefix}/job_total_ms" in dashboard
    assert "${local.metric_prefix}/jobs_completed" in dashboard
    assert tf.locals["metric_prefix"] == "logging.googleapis.com/user/${var.name_prefix}"
    for name in tf.locals["job_timings"]:
        expected = f"${{var.name_prefix}}/job_{name}_ms"
        metric = tf.resource("google_logging_metric", "job_timing")
        assert metric["name"].replace("${each.key}", name) == expected


def _seconds(duration: str) -> int:
    assert duration.endswith("s"), duration
    return int(duration[:-1])


def test_the_dashboard_waits_for_its_metrics_as_long_as_the_alerts_do(tf: Terraform) -> None:
    # Monitoring answers 404 for a log-based metric it does not know yet; the log-event
    # alerts wait for theirs (modules/log_alert), so the dashboard must too.
    alert_wait = tfconfig.load(tfconfig.TERRAFORM_DIR / "modules" / "log_alert").resource(
        "time_sleep", "metric"
    )
    dashboard = tf.resource("google_monitoring_dashboard", "operations")
    waits = [name for rtype, name in tfconfig.depends_on(dashboard) if rtype == "time_sleep"]
    assert waits, "the dashboard is created right after its metrics, with no wait"
    charted = {"job_timing", "jobs_completed"}
    for name in waits:
        wait = tf.resource("time_sleep", name)
        assert _seconds(wait["create_duration"]) >= _seconds(alert_wait["create_duration"])
        triggered = {
            ref[2]
            for ref in tfconfig.references(wait["triggers"])
            if ref[:2] == ("resource", "google_logging_metric")
        }
        if triggered == charted:
            return
    pytest.fail(f"no wait of the dashboard is triggered by every metric it charts: {waits}")
