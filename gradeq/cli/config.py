"""Where the CLI connects and with which credentials: flags, then environment, then file.

The file is TOML (`$GRADEQ_CONFIG`, default `~/.config/gradeq/config.toml`) with the keys
`url`, `api_key` and `operator_key`.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

DEFAULT_URL = "http://127.0.0.1:8080"


def default_config_path() -> Path:
    configured = os.environ.get("GRADEQ_CONFIG")
    if configured:
        return Path(configured)
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "gradeq" / "config.toml"


@dataclass(frozen=True)
class Target:
    """An intake's base URL and the keys to use with it."""

    url: str
    api_key: str | None
    operator_key: str | None


def resolve(
    url: str | None, api_key: str | None, operator_key: str | None, path: Path | None
) -> Target:
    """Fill what flags and environment (already merged by the caller) left open from the
    config file, then the default URL."""
    file_values: dict[str, object] = {}
    config_path = path or default_config_path()
    if config_path.is_file():
        with config_path.open("rb") as handle:
            file_values = tomllib.load(handle)

    def pick(given: str | None, key: str) -> str | None:
        if given:
            return given
        value = file_values.get(key)
        return str(value) if value else None

    return Target(
        url=(pick(url, "url") or DEFAULT_URL).rstrip("/"),
        api_key=pick(api_key, "api_key"),
        operator_key=pick(operator_key, "operator_key"),
    )
