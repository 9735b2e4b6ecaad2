"""The operator's LTI commands: what an LMS admin enters, registrations stored and listed,
keys rotated and listed without their secrets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import SecretStr

from services.intake.lti.registrations import main
from services.notification.sealing import new_sealing_key
from shared.adapters.embedded.lti_store import SqliteLtiStore
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.config.settings import Settings


@pytest.fixture
def configured(tmp_path: Path) -> Settings:
    return Settings(
        data_dir=tmp_path,
        lti_tool_url="https://gradeq.school.test/",
        lti_secrets_key=SecretStr(new_sealing_key()),
    )


@pytest.fixture
def store(configured: Settings) -> SqliteLtiStore:
    return SqliteLtiStore(SqliteDatabase(configured.database_path))


def lines(capsys: pytest.CaptureFixture[str]) -> list[dict[str, object]]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_tool_config_names_gradeqs_urls(
    configured: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["tool-config"], settings=configured) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["login_initiation_url"] == "https://gradeq.school.test/lti/login"
    assert shown["redirect_uri"] == "https://gradeq.school.test/lti/launch"
    assert shown["public_jwks_url"] == "https://gradeq.school.test/lti/jwks.json"


def test_a_registration_is_added_and_listed(
    configured: Settings, store: SqliteLtiStore, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [
        "add", "--school", "school-a", "--issuer", "https://canvas.instructure.com",
        "--client-id", "10000000000001", "--deployment-id", "1:abc", "--deployment-id", "2:def",
        "--auth-url", "https://sso.canvaslms.com/api/lti/authorize_redirect",
        "--token-url", "https://sso.canvaslms.com/login/oauth2/token",
        "--jwks-url", "https://sso.canvaslms.com/api/lti/security/jwks",
    ]  # fmt: skip
    assert main(args, store, configured) == 0
    capsys.readouterr()
    assert main(["list", "--school", "school-a"], store, configured) == 0
    [shown] = lines(capsys)
    assert shown["deployment_ids"] == ["1:abc", "2:def"]
    assert main(["list", "--school", "school-b"], store, configured) == 0
    assert lines(capsys) == []


def test_a_rotation_adds_a_key_and_nothing_secret_is_printed(
    configured: Settings, store: SqliteLtiStore, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["rotate-key", "--lead-hours", "0.5"], store, configured) == 0
    assert main(["keys"], store, configured) == 0
    out = capsys.readouterr().out
    assert "sealed" not in out and "PRIVATE" not in out
    shown = [json.loads(line) for line in out.splitlines()]
    assert len(shown) == 3  # the rotated one printed, then both listed
    assert shown[0]["kid"] == shown[2]["kid"]
    assert shown[1]["expires_at"] is not None and shown[2]["expires_at"] is None


def test_a_rotation_needs_the_sealing_key(
    tmp_path: Path, store: SqliteLtiStore, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["rotate-key"], store, Settings(data_dir=tmp_path)) == 2
    assert "GRADEQ_LTI_SECRETS_KEY" in capsys.readouterr().err
