"""Upload settings: limits reach the service, and a local signing key stays local."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
from pydantic import ValidationError

from shared.config.settings import Backend, PushAuth, Settings
from shared.domain.uploads import UploadLimits


def test_the_limits_are_the_settings() -> None:
    settings = Settings(upload_max_file_bytes=5, upload_max_files_per_job=2, upload_url_ttl_s=60)
    limits = settings.upload_limits()
    assert (limits.max_file_bytes, limits.max_files_per_job, limits.url_ttl_s) == (5, 2, 60)
    assert limits.max_job_bytes == UploadLimits().max_job_bytes


def test_a_signing_key_file_is_refused_on_google_cloud(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("FIRESTORE_EMULATOR_HOST", "PUBSUB_EMULATOR_HOST"):
        monkeypatch.delenv(name, raising=False)
    google = partial(Settings, backend=Backend.GOOGLE, project_id="p", push_auth=PushAuth.OIDC)
    google()  # fine without the key file
    with pytest.raises(ValidationError, match="GRADEQ_UPLOAD_SIGNING_KEY_FILE"):
        google(upload_signing_key_file=tmp_path / "key.json")
    monkeypatch.setenv("FIRESTORE_EMULATOR_HOST", "127.0.0.1:1")
    assert google(upload_signing_key_file=tmp_path / "k.json").upload_signing_key_file
