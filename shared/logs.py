"""JSON log lines for Cloud Logging: severity, message, service and the job id on every line.

The job id travels in a context variable, so every log call made while handling a job
carries it without being passed around. The trace context of the request (see
`shared.http.tracing`) fills `logging.googleapis.com/trace`, `.../spanId` and
`.../trace_sampled`, so Cloud Logging groups a request's lines under its trace. A record
logged with an exception carries the formatted traceback in `stack_trace`, the field
Error Reporting reads.
"""

from __future__ import annotations

import contextvars
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TextIO

from pythonjsonlogger.json import JsonFormatter

TRACE_FIELD = "logging.googleapis.com/trace"
SPAN_FIELD = "logging.googleapis.com/spanId"
SAMPLED_FIELD = "logging.googleapis.com/trace_sampled"
STACK_TRACE_FIELD = "stack_trace"


@dataclass(frozen=True)
class TraceContext:
    """The request's trace as Cloud Logging names it, its span (16 hex digits), sampling."""

    trace: str
    span_id: str | None = None
    sampled: bool | None = None


job_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("job_id", default=None)
trace_var: contextvars.ContextVar[TraceContext | None] = contextvars.ContextVar(
    "trace", default=None
)


#: The attribute an exception leaving a job's block carries its job id in.
_ERROR_JOB_ID = "gradeq_job_id"


@contextmanager
def job_context(job_id: str | None) -> Iterator[None]:
    """Tag every log line emitted inside the block with `job_id`.

    An exception leaving the block is tagged too (`job_id_of`): the line an error handler
    logs for it, after the block has ended, names the job all the same.
    """
    token = job_id_var.set(job_id)
    try:
        yield
    except Exception as exc:
        if job_id is not None and job_id_of(exc) is None:
            setattr(exc, _ERROR_JOB_ID, job_id)
        raise
    finally:
        job_id_var.reset(token)


def job_id_of(error: BaseException) -> str | None:
    """The job an exception was raised for, when it left a `job_context` block."""
    job_id = getattr(error, _ERROR_JOB_ID, None)
    return job_id if isinstance(job_id, str) else None


class _CorrelationFilter(logging.Filter):
    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def filter(self, record: logging.LogRecord) -> bool:
        record.service = self.service
        if getattr(record, "job_id", None) is None:
            record.job_id = job_id_var.get()
        trace = trace_var.get()
        if trace is not None:
            setattr(record, TRACE_FIELD, trace.trace)
            if trace.span_id is not None:
                setattr(record, SPAN_FIELD, trace.span_id)
            if trace.sampled is not None:
                setattr(record, SAMPLED_FIELD, trace.sampled)
        return True


class _Formatter(JsonFormatter):
    def add_fields(
        self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]
    ) -> None:
        super().add_fields(log_data, record, message_dict)
        log_data["severity"] = record.levelname
        log_data.setdefault("job_id", getattr(record, "job_id", None))


class _LineHandler(logging.StreamHandler[TextIO]):
    """A stream handler that formats a record before it takes the handler's lock.

    Only the write of the finished line is serialised: threads logging at once no
    longer queue behind each other's JSON encoding, and the lock is held for one write.
    """

    def handle(self, record: logging.LogRecord) -> bool:
        if not self.filter(record):
            return False
        try:
            line = self.format(record) + self.terminator
        except Exception:
            self.handleError(record)
            return True
        lock = self.lock
        assert lock is not None  # made by Handler.__init__ (createLock)
        with lock:
            try:
                self.stream.write(line)
                self.stream.flush()
            except Exception:
                self.handleError(record)
        return True


def json_lines(handler: logging.Handler, service: str) -> logging.Handler:
    """Make `handler` write Gradeq's JSON lines for `service`; return it."""
    handler.setFormatter(
        _Formatter(
            "%(message)s %(service)s %(job_id)s %(name)s",
            rename_fields={"name": "logger", "exc_info": STACK_TRACE_FIELD},
            json_ensure_ascii=False,
        )
    )
    handler.addFilter(_CorrelationFilter(service))
    return handler


def configure_logging(service: str, level: str = "INFO") -> None:
    """Send this process's logs to stdout as one JSON object per line."""
    # The lines carry no source location: skip the stack walk that finds it for every
    # record (the logging HOWTO's optimisation; `_srcfile` is its documented knob). A
    # format naming it still formats ("(unknown file)", line 0). The thread and process
    # ids stay gathered (under a microsecond a record): a `%(process)d` in another
    # handler's format, such as gunicorn's own when it runs without
    # shared.http.gunicorn_conf, would raise TypeError on None.
    logging._srcfile = None
    handler = json_lines(_LineHandler(sys.stdout), service)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("werkzeug").setLevel("WARNING")
