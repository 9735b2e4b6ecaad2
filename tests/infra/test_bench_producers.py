"""`make bench` runs every producer as production runs the intake: the container's
gunicorn options, with as many threads as terraform's intake concurrency."""

from __future__ import annotations

import re

import pytest

from bench.settings import PRODUCER_THREADS, gunicorn_args
from tests.infra.tfconfig import REPO, Terraform

pytestmark = pytest.mark.infra


def test_producer_threads_are_terraforms_intake_concurrency(tf: Terraform) -> None:
    declared = re.search(r"concurrency = optional\(number, (\d+)\)", tf.variables["intake"]["type"])
    assert declared is not None
    assert int(declared.group(1)) == PRODUCER_THREADS


def test_producer_options_are_the_containers() -> None:
    entrypoint = (REPO / "scripts" / "container-entrypoint.sh").read_text()
    args = gunicorn_args()
    for option in ("--workers", "--timeout"):
        value = args[args.index(option) + 1]
        assert re.search(rf"{option} {value}\b", entrypoint), option
    graceful = args[args.index("--graceful-timeout") + 1]
    assert f"GRACEFUL_TIMEOUT:-{graceful}" in entrypoint
    assert "--config python:shared.http.gunicorn_conf" in entrypoint
