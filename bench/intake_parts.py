"""Where one accepted POST's CPU goes in the intake, measured in-process on one thread.

    .venv/bin/python -m bench.intake_parts [--posts 600] [--rounds 5] [--variant NAME ...]

Builds the intake app on a fresh embedded data directory (the settings of `make bench`'s
acceptance scenario: admission limits and fair spacing out of the way), issues an API
key, and POSTs the acceptance scenario's body through Flask's test client, a new
Idempotency-Key each time, on one thread: no gunicorn, no other thread, so the figure is
the request's own work. Each variant takes one part away, and the difference to the
whole POST is what that part costs:

- whole: the POST as served;
- no body scan: the body is decoded without the pass that checks its depth, tokens and
  key lengths first (services/intake/limits/body.py);
- no principal/policy: the caller is the key's school without reading the credential,
  and every policy question is answered yes without the table;
- no budget gate: the service admits without asking the school's budgets;
- no store: the service builds the job but stores and enqueues nothing, logs nothing;
- no response body: the route answers with an empty JSON object (no job view, Location);
- routing only: the route answers 202 at once (Flask, the app's hooks, the test client);
- bare Flask: the benchmark's bare Flask app (bench.peer_producer) in the same client.

Prints one JSON line per variant: the median CPU milliseconds per POST over `--rounds`
rounds of `--posts` POSTs (time.process_time), and the lowest and highest round.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TextIO
from unittest import mock

from flask import Flask, Response
from flask.testing import FlaskClient

from bench import stats
from bench.gradeq_stack import UNLIMITED
from bench.load import body_bytes
from bench.settings import SUBMIT_PATH

#: The school the benchmark's API key speaks for.
BENCH_SCHOOL = "bench"

#: Takes a part away from the app; what it replaced outside the app is put back on exit.
Variant = Callable[[Flask, ExitStack], None]


def _no_body_scan(app: Flask, undo: ExitStack) -> None:
    from services.intake.limits import body

    check = body.check_json_shape
    undo.callback(setattr, body, "check_json_shape", check)
    body.check_json_shape = lambda raw, max_depth, max_tokens: None


def _no_principal_policy(app: Flask, undo: ExitStack) -> None:
    from services.intake.auth.clients import ClientAuthenticator
    from shared.domain.authorization import SERVER, Principal, Role

    auth: ClientAuthenticator = app.extensions["gradeq.client_auth"]
    caller = Principal(BENCH_SCHOOL, SERVER, Role.SERVER)
    auth.principal = lambda: caller  # type: ignore[method-assign]
    may = Principal.may
    undo.callback(setattr, Principal, "may", may)
    Principal.may = lambda self, action, owner=None: True  # type: ignore[method-assign]


def _no_budget_gate(app: Flask, undo: ExitStack) -> None:
    from shared.service_layer.intake import IntakeService

    service: IntakeService = app.extensions["gradeq.intake"]
    service._budgets = None


def _no_store(app: Flask, undo: ExitStack) -> None:
    from shared.domain.authorization import Principal, as_principal
    from shared.domain.ids import job_id_for
    from shared.domain.job import GradingRequest, Job
    from shared.service_layer.intake import IntakeService, Submission, fingerprint

    service: IntakeService = app.extensions["gradeq.intake"]
    now = service._clock.now

    def submit(
        caller: Principal | str, idempotency_key: str, request: GradingRequest
    ) -> Submission:
        principal = as_principal(caller)
        job_id = job_id_for(principal.key_space, idempotency_key)
        job = Job.new(job_id, principal.owner.school, request, fingerprint(request), now())
        return Submission(job, True)

    service.submit = submit  # type: ignore[method-assign]


def _no_response_body(app: Flask, undo: ExitStack) -> None:
    from services.intake.jobs import routes

    respond = routes._respond
    undo.callback(setattr, routes, "_respond", respond)
    routes._respond = lambda job, status: Response(b"{}", status, mimetype="application/json")


def _routing_only(app: Flask, undo: ExitStack) -> None:
    app.view_functions["grading_jobs.create_job"] = lambda: Response(b"{}", 202)


VARIANTS: dict[str, Variant | None] = {
    "whole": None,
    "no body scan": _no_body_scan,
    "no principal/policy": _no_principal_policy,
    "no budget gate": _no_budget_gate,
    "no store": _no_store,
    "no response body": _no_response_body,
    "routing only": _routing_only,
}


@contextmanager
def gradeq_client(directory: Path, variant: Variant | None) -> Iterator[tuple[FlaskClient, str]]:
    """The intake app on a data directory of its own, with `variant` applied; its key.

    The environment, the log handlers' streams and whatever the variant replaced are
    put back when the block ends.
    """
    environment = {
        "GRADEQ_DATA_DIR": str(directory),
        "GRADEQ_SUBMIT_BURST": UNLIMITED,
        "GRADEQ_SUBMIT_RATE_PER_S": UNLIMITED,
        "GRADEQ_MAX_ACTIVE_JOBS_PER_CLIENT": UNLIMITED,
        "GRADEQ_MAX_BACKLOG": UNLIMITED,
        "GRADEQ_FAIR_SPACING_S": "0",
    }
    with (
        mock.patch.dict(os.environ, environment),
        open(os.devnull, "w") as sink,
        ExitStack() as undo,
    ):
        yield _client(undo, sink, variant)


def _client(undo: ExitStack, sink: TextIO, variant: Variant | None) -> tuple[FlaskClient, str]:
    from services.intake.app import create_app
    from services.intake.auth import keys
    from shared.bootstrap import adapter_family, build_clock
    from shared.config.settings import Settings

    app = create_app()
    issued = keys.create(adapter_family(Settings()).api_key_store(), build_clock(), BENCH_SCHOOL)
    key = issued["key"]
    # The lines are still formatted and written, to a sink instead of the terminal.
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler):
            before = handler.setStream(sink)
            if before is not None:
                undo.callback(handler.setStream, before)
    if variant is not None:
        variant(app, undo)
    return app.test_client(), key


def cpu_ms_per_post(client: FlaskClient, key: str, posts: int) -> float:
    body = body_bytes()
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    started = time.process_time()
    for _ in range(posts):
        answer = client.post(
            SUBMIT_PATH, data=body, headers={**headers, "Idempotency-Key": uuid.uuid4().hex}
        )
        if answer.status_code != 202:
            raise RuntimeError(f"POST answered {answer.status_code}: {answer.get_data()!r}")
    return (time.process_time() - started) * 1000 / posts


def measure(client: FlaskClient, key: str, posts: int, rounds: int) -> stats.Spread:
    cpu_ms_per_post(client, key, posts // 3)  # warm-up: caches, first connections
    spread = stats.spread(cpu_ms_per_post(client, key, posts) for _ in range(rounds))
    assert spread is not None
    return spread


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.intake_parts", description=__doc__)
    parser.add_argument("--posts", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--variant",
        action="append",
        choices=[*VARIANTS, "bare Flask"],
        help="measure only this variant (repeatable; default: all)",
    )
    args = parser.parse_args(argv)
    chosen = args.variant or [*VARIANTS, "bare Flask"]
    for name, variant in VARIANTS.items():
        if name not in chosen:
            continue
        with (
            tempfile.TemporaryDirectory(prefix="intake-parts-") as tmp,
            gradeq_client(Path(tmp), variant) as (client, key),
        ):
            spread = measure(client, key, args.posts, args.rounds)
        print(json.dumps({"variant": name, "cpu_ms_per_post": spread.as_dict()}), flush=True)
    if "bare Flask" not in chosen:
        return
    os.environ["BENCH_PEER"] = "flask"
    from bench.peer_producer import create_app as bare_flask

    spread = measure(bare_flask().test_client(), "unused", args.posts, args.rounds)
    print(json.dumps({"variant": "bare Flask", "cpu_ms_per_post": spread.as_dict()}), flush=True)


if __name__ == "__main__":
    main()
