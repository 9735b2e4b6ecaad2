"""The gradebook service's own settings (GRADEQ_GRADEBOOK_*), next to the shared ones."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class GradebookSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="GRADEQ_GRADEBOOK_", frozen=True, extra="ignore")

    #: JSON file naming each school's gradebook connection (docs/gradebook.md); none: no
    #: school has one, and posted grades are acknowledged without a write.
    connections_file: Path | None = None
    #: The same as JSON text (Cloud Run's env); used when no file is named.
    connections_json: str = ""
    #: How long one delivery holds a student's mark while it writes.
    lease_s: float = Field(default=60.0, gt=0)
    #: Seconds before a Classroom call gives up (then the write is retried later).
    request_timeout_s: float = Field(default=20.0, gt=0)
    #: The Classroom API's root: https (called through domain-wide delegation), or http on
    #: a loopback host for a local stand-in, called without credentials (the local stack
    #: and the tests); any other URL stops the service at start.
    classroom_base_url: str = "https://classroom.googleapis.com"
