"""Count the RPCs the official Google clients send per request, on the emulators.

    .venv/bin/python bench/google_calls.py [--n 50] [--json data/bench/google_calls.json]

Starts the official Firestore and Pub/Sub emulators and the local dispatcher's Cloud Tasks
v2 gRPC API on free loopback ports (the dispatcher paused: it stores tasks and delivers
none), then builds the intake and the worker with their own app factories, as gunicorn
does, from GRADEQ_BACKEND=google and the emulator variables. So the adapters, clients
and channels measured are the ones the services run.

Every gRPC call the client libraries send is counted per method, retries included, while
it runs: N submissions (`IntakeService.submit`), the same N submissions replayed while
their jobs are pending (same Idempotency-Key), N deliveries (`WorkerService.handle`, the
rubric grader without latency) and the N replayed again once their jobs are final. Each
operation is timed. Then one assignment's batch of `--batch` answers, and the same batch
again, each counted whole and per answer (`AssignmentService.submit_batch`). It also
counts the clients and channels built, and when: none may be built per request (exit
status 1 otherwise). Prints a table and writes it as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from functools import partial
from importlib import metadata
from pathlib import Path
from typing import Any

import grpc

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from localcloud import emulators  # noqa: E402
from localcloud.tasks.dispatcher import Dispatcher  # noqa: E402
from shared.adapters.embedded.sqlite import SqliteDatabase  # noqa: E402
from shared.config.queues import load_queues  # noqa: E402

PROJECT = "demo-gradeq-calls"  # "demo-" projects never reach Google Cloud
CLIENT_ID = "bench-client"
DEFAULT_JSON = ROOT / "data" / "bench" / "google_calls.json"
#: The operations measured, in the order they run and are shown.
OPERATIONS = ("submit", "replay (pending)", "delivery", "replay (final)")
#: The client classes whose constructions are counted: (label, module, class name).
CLIENT_CLASSES = (
    ("Firestore", "google.cloud.firestore_v1.client", "Client"),
    ("Pub/Sub publisher", "google.cloud.pubsub_v1.publisher.client", "Client"),
    ("Cloud Tasks", "google.cloud.tasks_v2.services.cloud_tasks.client", "CloudTasksClient"),
)


# --- counting ------------------------------------------------------------------------


@dataclass
class Calls:
    """The RPCs one operation (or phase) sent: per method, and those that failed."""

    sent: Counter[str] = field(default_factory=Counter)
    failed: Counter[str] = field(default_factory=Counter)


class Recorder:
    """Where the interceptors count: the operation running now, and what was built when."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.phase = "setup"
        self.current = Calls()
        self.phases: dict[str, Calls] = {"setup": self.current}
        #: (phase, what) -> how many were built: clients by library, channels by target.
        self.built: Counter[tuple[str, str]] = Counter()

    def enter_phase(self, phase: str) -> None:
        self.phase = phase
        self.current = self.phases.setdefault(phase, Calls())

    @contextmanager
    def operation(self) -> Iterator[Calls]:
        """Count the RPCs of one operation apart (they are added to its phase too)."""
        phase_calls, calls = self.current, Calls()
        self.current = calls
        try:
            yield calls
        finally:
            self.current = phase_calls
            with self._lock:
                phase_calls.sent.update(calls.sent)
                phase_calls.failed.update(calls.failed)

    def rpc(self, method: str) -> Calls:
        calls = self.current  # the operation the call belongs to, also for late outcomes
        with self._lock:
            calls.sent[method] += 1
        return calls

    def rpc_failed(self, calls: Calls, method: str, code: grpc.StatusCode) -> None:
        with self._lock:
            calls.failed[f"{method} {code.name}"] += 1

    def note_built(self, what: str) -> None:
        with self._lock:
            self.built[(self.phase, what)] += 1


def _method_label(method: str | bytes) -> str:
    """'/google.firestore.v1.Firestore/Commit' -> 'Firestore.Commit'."""
    text = method.decode() if isinstance(method, bytes) else method
    service, _, name = text.strip("/").partition("/")
    return f"{service.rpartition('.')[2]}.{name}"


class RpcCounter(
    grpc.UnaryUnaryClientInterceptor,  # type: ignore[misc]
    grpc.UnaryStreamClientInterceptor,  # type: ignore[misc]
    grpc.StreamUnaryClientInterceptor,  # type: ignore[misc]
    grpc.StreamStreamClientInterceptor,  # type: ignore[misc]
):
    """A gRPC client interceptor: counts each call as it is sent, by method.

    Failed unary calls are noted with their status code (a create that meets
    ALREADY_EXISTS is a sent call all the same). A streaming call's status is not awaited:
    the Firestore client reads the one response of a document get and drops the stream.
    """

    def __init__(self, recorder: Recorder) -> None:
        self._recorder = recorder

    def _unary(self, continuation: Callable[..., Any], details: Any, request: Any) -> Any:
        method = _method_label(details.method)
        calls = self._recorder.rpc(method)
        outcome = continuation(details, request)

        def done(future: Any) -> None:
            code = future.code()
            if code is not None and code is not grpc.StatusCode.OK:
                self._recorder.rpc_failed(calls, method, code)

        outcome.add_done_callback(done)
        return outcome

    def _stream(self, continuation: Callable[..., Any], details: Any, request: Any) -> Any:
        self._recorder.rpc(_method_label(details.method))
        return continuation(details, request)

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return self._unary(continuation, details, request)

    def intercept_stream_unary(self, continuation: Any, details: Any, requests: Any) -> Any:
        return self._unary(continuation, details, requests)

    def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return self._stream(continuation, details, request)

    def intercept_stream_stream(self, continuation: Any, details: Any, requests: Any) -> Any:
        return self._stream(continuation, details, requests)


@contextmanager
def counting_rpcs(recorder: Recorder) -> Iterator[None]:
    """Put an `RpcCounter` on every gRPC channel created in the block, and count them.

    Why this hook: a client interceptor (public gRPC API, `grpc.intercept_channel`) sees
    every call on the wire, streaming calls and each retry attempt included, whatever the
    adapter or library above it does; the adapters' own meters only count what they
    intend to bill. The clients must be built by the services' own composition root, and
    the Firestore and Pub/Sub clients create their channels inside the libraries (the
    Firestore one lazily, at its first call) with no way to pass an interceptor in. On
    the emulators all three clients (Cloud Tasks through `shared.adapters.google.clients`)
    get their channel from the public factory `grpc.insecure_channel`, so that factory is
    wrapped for the block, with `grpc.secure_channel` for completeness: no library
    internals are touched, and every channel built is counted by target.
    """
    factories = {"insecure_channel": grpc.insecure_channel, "secure_channel": grpc.secure_channel}

    def wrap(factory: Callable[..., Any]) -> Callable[..., Any]:
        def build(*args: Any, **kwargs: Any) -> Any:
            target = kwargs.get("target", args[0] if args else "?")
            recorder.note_built(f"channel to {target}")
            return grpc.intercept_channel(factory(*args, **kwargs), RpcCounter(recorder))

        return build

    try:
        for name, factory in factories.items():
            setattr(grpc, name, wrap(factory))
        yield
    finally:
        for name, factory in factories.items():
            setattr(grpc, name, factory)


@contextmanager
def counting_clients(recorder: Recorder) -> Iterator[None]:
    """Count constructions of the three client classes (their constructors, wrapped).

    No hook exists for this, so each class's `__init__` is wrapped for the block; a
    construction changes nothing else and the originals are put back.
    """
    import importlib

    saved: list[tuple[type, Any]] = []
    try:
        for label, module_name, class_name in CLIENT_CLASSES:
            cls = getattr(importlib.import_module(module_name), class_name)
            original = cls.__dict__.get("__init__")
            init = cls.__init__

            def counted(
                self: Any, *args: Any, _init: Any = init, _label: str = label, **kwargs: Any
            ) -> None:
                recorder.note_built(f"{_label} client")
                _init(self, *args, **kwargs)

            saved.append((cls, original))
            setattr(cls, "__init__", counted)  # noqa: B010 - a method of the class
        yield
    finally:
        for cls, original in saved:
            if original is None:
                delattr(cls, "__init__")  # it was inherited
            else:
                setattr(cls, "__init__", original)  # noqa: B010


# --- the run -------------------------------------------------------------------------


@dataclass
class Sample:
    """One operation: the RPCs it sent and how long it took."""

    calls: Calls
    seconds: float


@dataclass
class Run:
    """Everything measured, for the table and the JSON."""

    n: int
    samples: dict[str, list[Sample]]
    recorder: Recorder
    hosts: dict[str, str]  # host:port -> what listens there
    settings: dict[str, Any]
    #: One sample each: a batch of `batch_n` new answers, then the same batch again.
    batches: dict[str, Sample] = field(default_factory=dict)
    batch_n: int = 0


def _request(key: str) -> Any:
    from shared.domain.job import GradingRequest

    return GradingRequest(
        submission_id=f"sub-{key}",
        answer="Plants turn light into chemical energy with chlorophyll.",
        rubric=("mentions light", "mentions chlorophyll"),
    )


def _timed(recorder: Recorder, samples: list[Sample], call: Callable[[], Any]) -> Any:
    with recorder.operation() as calls:
        started = time.perf_counter()
        value = call()
        seconds = time.perf_counter() - started
    samples.append(Sample(calls, seconds))
    return value


def _create_topic(project: str, topic: str) -> None:
    """Create the events topic, with a client of this script's own (not counted)."""
    from google.cloud import pubsub_v1

    admin = pubsub_v1.PublisherClient()
    admin.create_topic(name=admin.topic_path(project, topic))
    admin.stop()


def run(n: int, warm_up: int, batch_n: int = 1000) -> Run:
    """Start the emulators and the dispatcher's API, build the services, measure."""
    reason = emulators.missing_reason()
    if reason:
        raise SystemExit(f"cannot measure: {reason}")
    recorder = Recorder()
    with ExitStack() as stack:
        firestore = emulators.start_firestore(PROJECT)
        stack.callback(firestore.stop)
        pubsub = emulators.start_pubsub()
        stack.callback(pubsub.stop)
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        # Paused: the API stores the tasks (names deduped as on Cloud Tasks), none is sent.
        dispatcher = Dispatcher(
            SqliteDatabase(tmp / "tasks.sqlite3"),
            load_queues(),
            grpc_address=f"127.0.0.1:{emulators.free_port()}",
            paused=True,
        )
        dispatcher.start()
        stack.callback(dispatcher.stop, grace_s=1.0)
        tasks_host = f"127.0.0.1:{dispatcher.grpc_port}"
        os.environ.update(
            {
                emulators.FIRESTORE_HOST_ENV: firestore.host,
                emulators.PUBSUB_HOST_ENV: pubsub.host,
                "CLOUD_TASKS_EMULATOR_HOST": tasks_host,
                "GRADEQ_BACKEND": "google",
                "GRADEQ_PROJECT_ID": PROJECT,
                "GRADEQ_PUSH_AUTH": "none",
                "GRADEQ_GRADER": "rubric",
                "GRADEQ_GRADER_LATENCY_S": "0",
                "GRADEQ_LOG_LEVEL": "ERROR",
                # Tasks name a worker nothing listens at; the dispatcher sends none anyway.
                "GRADEQ_WORKER_URL": "http://127.0.0.1:9",
            }
        )
        from services.intake.app import create_app as create_intake
        from services.worker.app import create_app as create_worker
        from shared.adapters.google.job_store import BACKLOG_SHARDS
        from shared.config.settings import Settings
        from shared.domain.ids import task_name_for
        from shared.domain.status import JobStatus
        from shared.service_layer.intake import IntakeService, Submission
        from shared.service_layer.worker import DeliveryResult, TaskDelivery, Verdict, WorkerService

        settings = Settings()
        _create_topic(PROJECT, settings.topic)
        stack.enter_context(counting_clients(recorder))
        stack.enter_context(counting_rpcs(recorder))

        # Each service's app factory, called as gunicorn calls it (settings from the env).
        recorder.enter_phase("intake app")
        intake_app = create_intake()
        intake: IntakeService = intake_app.extensions["gradeq.intake"]
        recorder.enter_phase("worker app")
        worker: WorkerService = create_worker().extensions["gradeq.worker"]

        def submit(key: str, created: bool, status: JobStatus) -> Submission:
            submission: Submission = intake.submit(CLIENT_ID, key, _request(key))
            if submission.created != created or submission.job.status is not status:
                raise SystemExit(f"unexpected submission of {key}: {submission}")
            return submission

        def deliver(job_id: str) -> DeliveryResult:
            result = worker.handle(TaskDelivery(job_id, task_name_for(job_id, 0)))
            if result.verdict is not Verdict.DONE or result.job is None:
                raise SystemExit(f"unexpected delivery of {job_id}: {result}")
            if result.job.status is not JobStatus.SUCCEEDED or not result.job.event_published:
                raise SystemExit(f"job {job_id} not finished and announced: {result.job}")
            return result

        samples: dict[str, list[Sample]] = {op: [] for op in OPERATIONS}
        for phase, keys in (
            ("warm-up", [f"warm-up-{i}" for i in range(warm_up)]),
            ("measured", [f"bench-{i}" for i in range(n)]),
        ):
            recorder.enter_phase(phase)
            into = samples if phase == "measured" else {op: [] for op in OPERATIONS}
            jobs: list[Submission] = [
                _timed(recorder, into["submit"], partial(submit, k, True, JobStatus.PENDING))
                for k in keys
            ]
            for k in keys:
                replay = partial(submit, k, False, JobStatus.PENDING)
                _timed(recorder, into["replay (pending)"], replay)
            for s in jobs:
                _timed(recorder, into["delivery"], partial(deliver, s.job.id))
            for k in keys:
                replay = partial(submit, k, False, JobStatus.SUCCEEDED)
                _timed(recorder, into["replay (final)"], replay)
        recorder.enter_phase("batch")
        batches = _batches(recorder, intake_app.extensions["gradeq.assignments"], batch_n)
        recorder.enter_phase("done")
        return Run(
            n=n,
            samples=samples,
            recorder=recorder,
            hosts={
                firestore.host: "Firestore emulator",
                pubsub.host: "Pub/Sub emulator",
                tasks_host: "Cloud Tasks API (local dispatcher)",
            },
            settings={
                "fair_spacing_s": settings.fair_spacing().total_seconds(),
                "max_active_jobs_per_client": settings.max_active_jobs_per_client,
                "max_backlog": settings.max_backlog,
                "backlog_shards": BACKLOG_SHARDS,
                "grader": settings.grader.value,
                "grader_latency_s": settings.grader_latency_s,
            },
            batches=batches,
            batch_n=batch_n,
        )
    raise AssertionError("unreachable")


def _batches(recorder: Recorder, assignments: Any, n: int) -> dict[str, Sample]:
    """One assignment's batch of `n` new answers, then the same batch (all existing)."""
    from shared.service_layer.assignments import Answer, ItemStatus

    assignment, _ = assignments.create(
        CLIENT_ID, "bench-assignment", "bench", ("mentions light",), 10.0, "grading-v1"
    )
    answers = [Answer(f"batch-{i}", f"Light and chlorophyll {i}.") for i in range(n)]
    samples: dict[str, Sample] = {}
    for name, expected in (("batch", ItemStatus.ACCEPTED), ("batch again", ItemStatus.EXISTING)):
        into: list[Sample] = []
        items = _timed(
            recorder, into, lambda: assignments.submit_batch(CLIENT_ID, assignment.id, answers)
        )
        if {item.status for item in items} != {expected}:
            raise SystemExit(f"unexpected {name}: {Counter(i.status for i in items)}")
        samples[name] = into[0]
    return samples


# --- the report ----------------------------------------------------------------------


def _stats(values: list[float]) -> dict[str, float]:
    return {"mean": statistics.fmean(values), "min": min(values), "max": max(values)}


def summarise(result: Run) -> dict[str, Any]:
    """The figures of the run, as written to the JSON file."""
    operations: dict[str, Any] = {}
    for op, samples in result.samples.items():
        methods = sorted({m for s in samples for m in s.calls.sent})
        failures = sorted({m for s in samples for m in s.calls.failed})
        millis = [s.seconds * 1000 for s in samples]
        operations[op] = {
            "count": len(samples),
            "rpcs_per_operation": {
                m: _stats([float(s.calls.sent[m]) for s in samples]) for m in methods
            },
            "total_rpcs_per_operation": _stats([float(s.calls.sent.total()) for s in samples]),
            "failed_rpcs_per_operation": {
                m: _stats([float(s.calls.failed[m]) for s in samples]) for m in failures
            },
            "wall_ms": {
                "median": statistics.median(millis),
                "p90": statistics.quantiles(millis, n=10)[8] if len(millis) > 1 else millis[0],
                "min": min(millis),
                "max": max(millis),
            },
        }
    built: dict[str, dict[str, int]] = {}
    for (phase, what), count in result.recorder.built.items():
        for host, name in result.hosts.items():
            what = what.replace(host, name)
        built.setdefault(phase, {})[what] = count
    measured = built.get("measured", {})
    batches = {
        name: {
            "answers": result.batch_n,
            "rpcs": dict(sample.calls.sent),
            "rpcs_per_answer": {
                m: round(c / result.batch_n, 4) for m, c in sample.calls.sent.items()
            },
            "wall_ms": sample.seconds * 1000,
        }
        for name, sample in result.batches.items()
    }
    return {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "n": result.n,
        "operations": operations,
        "batches": batches,
        "built_by_phase": built,
        "reused": not measured,
        "settings": result.settings,
        "versions": {
            name: metadata.version(name)
            for name in (
                "grpcio",
                "google-cloud-firestore",
                "google-cloud-pubsub",
                "google-cloud-tasks",
            )
        },
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
    }


def _figure(stats: dict[str, float]) -> str:
    text = f"{stats['mean']:.2f}".rstrip("0").rstrip(".")
    if stats["min"] != stats["max"]:
        text += f" ({stats['min']:g}-{stats['max']:g})"
    return text


def render(summary: dict[str, Any]) -> str:
    """The table: RPCs per operation by method, totals, wall time; then what was built."""
    ops = summary["operations"]
    methods = sorted({m for op in ops.values() for m in op["rpcs_per_operation"]})
    failures = sorted({m for op in ops.values() for m in op["failed_rpcs_per_operation"]})
    width = max(len(m) for m in [*methods, *failures, "wall time, median (p90) ms"]) + 2
    col = max(len(op) for op in OPERATIONS) + 2
    lines = [
        "RPCs per operation sent by the official clients, by method "
        f"(mean of {summary['n']}; min-max where it varies)",
        "".ljust(width) + "".join(op.rjust(col) for op in OPERATIONS),
    ]

    def row(label: str, cell: Callable[[dict[str, Any]], str]) -> str:
        return label.ljust(width) + "".join(cell(ops[op]).rjust(col) for op in OPERATIONS)

    def per_method(key: str, method: str) -> Callable[[dict[str, Any]], str]:
        zero = {"mean": 0.0, "min": 0.0, "max": 0.0}
        return lambda o: _figure(o[key].get(method, zero))

    for m in methods:
        lines.append(row(m, per_method("rpcs_per_operation", m)))
    lines.append(row("total", lambda o: _figure(o["total_rpcs_per_operation"])))
    if failures:
        lines.append("of which failed, by status:")
        for m in failures:
            lines.append(row("  " + m, per_method("failed_rpcs_per_operation", m)))
    lines.append(
        row(
            "wall time, median (p90) ms",
            lambda o: f"{o['wall_ms']['median']:.1f} ({o['wall_ms']['p90']:.1f})",
        )
    )
    for name, batch in summary.get("batches", {}).items():
        lines.append("")
        lines.append(f"{name} of {batch['answers']} answers, {batch['wall_ms']:.0f} ms:")
        for m, count in sorted(batch["rpcs"].items()):
            lines.append(
                f"  {m.ljust(width)}{count:>8} ({batch['rpcs_per_answer'][m]:g} per answer)"
            )
    lines.append("")
    lines.append("Clients and channels built, by phase:")
    for phase, built in summary["built_by_phase"].items():
        items = ", ".join(f"{what} x{count}" for what, count in sorted(built.items()))
        lines.append(f"  {phase}: {items}")
    verdict = (
        "none during the measured operations: clients and channels are built once per "
        "service and reused"
        if summary["reused"]
        else "SOME DURING THE MEASURED OPERATIONS: built per request"
    )
    lines.append(f"  -> {verdict}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=50, help="operations of each kind (50)")
    parser.add_argument("--warm-up", type=int, default=3, help="jobs run first, not counted")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where to write JSON")
    parser.add_argument("--batch", type=int, default=1000, help="answers in the batch (1000)")
    args = parser.parse_args(argv)
    if args.n < 1 or args.warm_up < 0:
        parser.error("--n must be at least 1 and --warm-up at least 0")
    summary = summarise(run(args.n, args.warm_up, args.batch))
    print(render(summary))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"\nwritten to {args.json}")
    return 0 if summary["reused"] else 1


if __name__ == "__main__":
    sys.exit(main())
