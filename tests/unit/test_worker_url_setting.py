"""GRADEQ_WORKER_URL is where the queue delivers tasks: an absolute http(s) URL or nothing."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from shared.config.settings import Settings


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8081",
        "https://gradeq-worker-123456789.europe-west1.run.app",
        "https://worker.example.com/",
        "https://Worker.Example.com:8443",
    ],
)
def test_an_absolute_http_url_is_accepted(url: str) -> None:
    assert Settings(worker_url=url).worker_url == url


@pytest.mark.parametrize(
    "url",
    [
        "",
        "worker.example.com",  # no scheme: Cloud Tasks refuses the task
        "127.0.0.1:8081",
        "ftp://worker.example.com",  # Cloud Tasks sends HTTP(S) only
        "HTTPS://worker.example.com",  # Cloud Tasks checks for "https://" as written
        "https://",  # no host
        "https:///tasks",
        "http://worker:port",  # not a port
        "https://worker.example.com/?x=1",  # the queue's path is appended to the base
        "https://worker.example.com/#top",
        " https://worker.example.com",
    ],
)
def test_anything_else_is_refused_naming_the_variable(url: str) -> None:
    with pytest.raises(ValidationError) as refused:
        Settings(worker_url=url)
    message = str(refused.value)
    assert "GRADEQ_WORKER_URL" in message
    assert "absolute http(s) URL" in message


def test_the_environment_variable_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRADEQ_WORKER_URL", "worker:8081")
    with pytest.raises(ValidationError, match="GRADEQ_WORKER_URL"):
        Settings()
