"""The API key admin command's decisions: what it requires and documents, where it finds
the key store when none is given, and where a failed revocation is reported."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta

import pytest

from services.intake.auth import keys
from shared.adapters.embedded.api_key_store import SqliteApiKeyStore
from shared.clock import FrozenClock
from shared.config.settings import Settings
from tests.unit.test_intake_api_keys import store  # noqa: F401


def _said(text: str) -> str:
    """`text` with its line breaks and runs of spaces (argparse's layout) as one space."""
    return " ".join(text.split())


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as exited:
        keys.main([*argv, "--help"])
    assert exited.value.code == 0
    return _said(capsys.readouterr().out)


def test_the_help_names_the_command_says_what_it_does_and_lists_the_subcommands(
    capsys: pytest.CaptureFixture[str],
) -> None:
    said = _help(capsys)
    assert said.startswith(
        "usage: python -m services.intake.auth.keys [-h] {create,list,revoke} ... "
        "Manage server clients' API keys"
    )
    assert _said(str(keys.__doc__)) in said
    assert (
        "create issue a key for a client "
        "list list keys (never the keys themselves) "
        "revoke revoke a key by its key id "
        "options:"
    ) in said


def test_the_create_help_shows_the_client_as_required_and_what_it_is(
    capsys: pytest.CaptureFixture[str],
) -> None:
    said = _help(capsys, "create")
    assert said.startswith(
        "usage: python -m services.intake.auth.keys create [-h] --client CLIENT "
    )
    assert "--client CLIENT the client id jobs are scoped to --expires-in-days" in said


def test_a_command_is_required(
    store: SqliteApiKeyStore,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        keys.main([], store)
    assert exited.value.code == 2
    assert "the following arguments are required: command" in capsys.readouterr().err


def test_create_requires_a_client(
    store: SqliteApiKeyStore,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    before = store.list()
    with pytest.raises(SystemExit) as exited:
        keys.main(["create"], store)
    assert exited.value.code == 2
    assert "the following arguments are required: --client" in capsys.readouterr().err
    assert store.list() == before


def test_revoking_an_unknown_key_is_reported_on_stderr_alone(
    store: SqliteApiKeyStore,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert keys.main(["revoke", "nosuchid"], store) == 1
    assert capsys.readouterr() == ("", "no API key nosuchid\n")


def test_without_a_store_the_command_uses_the_one_the_settings_name(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in [n for n in os.environ if n.startswith("GRADEQ_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("GRADEQ_DATA_DIR", str(settings.data_dir))
    assert keys.main(["list"]) == 0
    listed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert sorted(k["key_id"] for k in listed) == ["clienta", "clientb"]


@pytest.mark.parametrize(("days", "ahead"), [(0.5, timedelta(hours=12)), (30, timedelta(days=30))])
def test_a_key_expires_the_given_days_after_it_is_made(
    store: SqliteApiKeyStore,  # noqa: F811
    days: float,
    ahead: timedelta,
) -> None:
    # Half a day is a valid expiry: only zero and less are refused.
    now = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    made = keys.create(store, FrozenClock(now), "acme", expires_in_days=days)
    assert made["created_at"] == now.isoformat()
    assert made["expires_at"] == (now + ahead).isoformat()
    [stored] = store.list("acme")
    assert stored.expires_at == now + ahead


@pytest.mark.parametrize(
    ("days", "said"),
    [
        (0, "--expires-in-days must be more than 0 (leave it out: no expiry)"),
        (1e12, "--expires-in-days is too large"),
    ],
)
def test_an_expiry_refused_says_why_in_the_commands_words(
    store: SqliteApiKeyStore,  # noqa: F811
    days: float,
    said: str,
) -> None:
    with pytest.raises(ValueError) as refused:
        keys.create(store, FrozenClock(datetime(2026, 3, 1, tzinfo=UTC)), "acme", days)
    assert str(refused.value) == said
    assert store.list("acme") == []
