"""Gunicorn's own log lines (its warnings, worker time-outs, access lines) as JSON lines.

Gunicorn logs through its own handlers with its own text format, so its lines would
not be the JSON lines Cloud Logging parses. This logger class gives those handlers the
services' JSON formatter, and cuts a message to `MAX_MESSAGE_CHARS`: a warning about a
refused request quotes what the client sent, and any outsider can send a request line
of 8 KB.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from gunicorn import glogging

from shared.logs import json_lines

#: Longest message kept from one gunicorn line; the rest is cut off.
MAX_MESSAGE_CHARS = 1000

_SERVICE_APP = re.compile(r"^services\.(\w+)\.app:")


class _Truncate(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if len(message) > MAX_MESSAGE_CHARS:
            record.msg, record.args = message[:MAX_MESSAGE_CHARS] + " [cut]", None
        return True


def service_name(app_uri: str) -> str:
    """`intake` for `services.intake.app:create_app()`; else the app's name as given."""
    match = _SERVICE_APP.match(app_uri)
    return match.group(1) if match else app_uri


class JsonLogger(glogging.Logger):  # type: ignore[misc]
    """Gunicorn's logger, writing the same JSON lines as the services."""

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        service = service_name(str(cfg.proc_name or ""))
        for log in (self.error_log, self.access_log):
            for handler in log.handlers:
                if getattr(handler, "_gunicorn", False):
                    json_lines(handler, service).addFilter(_Truncate())
