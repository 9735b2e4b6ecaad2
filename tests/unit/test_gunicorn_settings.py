"""The gunicorn settings each process of a local stack runs with, read by gunicorn itself."""

from __future__ import annotations

from pathlib import Path

import pytest
from gunicorn.app.wsgiapp import WSGIApplication

from localcloud.stack import FRONTEND, HTTP_SERVICES, LocalStack, StackConfig


def gunicorn_settings(command: list[str], monkeypatch: pytest.MonkeyPatch) -> WSGIApplication:
    """Gunicorn's own reading of a command line `python -m gunicorn ...` (nothing started)."""
    assert command[1:3] == ["-m", "gunicorn"]
    monkeypatch.setattr("sys.argv", ["gunicorn", *command[3:]])
    return WSGIApplication("%(prog)s [OPTIONS] [APP_MODULE]")


def test_no_process_of_the_stack_opens_gunicorns_control_socket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack = LocalStack(StackConfig.on_free_ports(tmp_path))
    for name in (*HTTP_SERVICES, FRONTEND):
        app = gunicorn_settings(stack.command(name), monkeypatch)
        assert app.cfg.control_socket_disable, name
