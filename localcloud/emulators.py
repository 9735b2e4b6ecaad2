"""Start and stop the official Firestore and Pub/Sub emulators on free local ports.

Used by the pytest fixtures and by the local runner (`make run-google-emulators`). The
jars are started directly with java: stopping a `gcloud emulators ... start` wrapper
leaves java running.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

#: Where the Google Cloud CLI keeps its platform components; override with this variable.
SDK_ROOT_ENV = "GRADEQ_GCLOUD_SDK_ROOT"
_DEFAULT_SDK_ROOTS = (Path("/usr/lib/google-cloud-sdk"), Path("/usr/share/google-cloud-sdk"))

FIRESTORE_HOST_ENV = "FIRESTORE_EMULATOR_HOST"
PUBSUB_HOST_ENV = "PUBSUB_EMULATOR_HOST"


class EmulatorUnavailable(RuntimeError):
    """Java or an emulator jar is missing, or the emulator did not come up."""


@dataclass
class Emulator:
    """A running emulator process and the `host:port` clients should use."""

    name: str
    host: str
    process: subprocess.Popen[bytes]
    log_path: Path
    _log_file: IO[bytes] | None = field(repr=False, default=None)

    @property
    def port(self) -> int:
        return int(self.host.rpartition(":")[2])

    def stop(self, timeout_s: float = 10.0, keep_log: bool = False) -> None:
        """Stop the emulator (SIGTERM, then SIGKILL); delete its log unless asked to keep it."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=timeout_s)
        if self._log_file is not None:
            self._log_file.close()
        if not keep_log:
            self.log_path.unlink(missing_ok=True)

    def log_tail(self, chars: int = 2000) -> str:
        """The end of the emulator's output, for error messages."""
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


def free_port() -> int:
    """Ask the OS for a free TCP port on the loopback interface."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _sdk_roots() -> list[Path]:
    if os.environ.get(SDK_ROOT_ENV):
        return [Path(os.environ[SDK_ROOT_ENV])]  # explicit: look nowhere else
    roots = []
    gcloud = shutil.which("gcloud")
    if gcloud:
        # gcloud lives in <root>/bin/gcloud (often behind a symlink in /usr/bin).
        roots.append(Path(gcloud).resolve().parent.parent)
    roots.extend(_DEFAULT_SDK_ROOTS)
    return roots


def _java() -> str:
    java = shutil.which("java")
    if java is None:
        raise EmulatorUnavailable("java is not on the PATH (the emulators need Java 11+)")
    return java


def firestore_jar() -> Path:
    """Locate the Firestore emulator jar or raise `EmulatorUnavailable` naming the paths."""
    relative = "platform/cloud-firestore-emulator/cloud-firestore-emulator.jar"
    candidates = [root / relative for root in _sdk_roots()]
    for jar in candidates:
        if jar.is_file():
            return jar
    raise EmulatorUnavailable(
        "Firestore emulator jar not found (component cloud-firestore-emulator); looked at: "
        + ", ".join(str(c) for c in candidates)
        + f"; set {SDK_ROOT_ENV} to the Google Cloud SDK root"
    )


def pubsub_jar() -> Path:
    """Locate the Pub/Sub emulator jar or raise `EmulatorUnavailable` naming the paths."""
    folders = [r / "platform/pubsub-emulator/lib" for r in _sdk_roots()]
    for folder in folders:
        jars = sorted(folder.glob("cloud-pubsub-emulator-*-all.jar"))
        if jars:
            return jars[-1]
    raise EmulatorUnavailable(
        "Pub/Sub emulator jar not found (component pubsub-emulator); looked in: "
        + ", ".join(str(f) for f in folders)
        + f"; set {SDK_ROOT_ENV} to the Google Cloud SDK root"
    )


def missing_reason(*names: str) -> str | None:
    """Why the named emulators ("firestore", "pubsub", "storage"; default the first two)
    cannot run here."""
    if "storage" in names and importlib.util.find_spec("gcp_storage_emulator") is None:
        return "gcp-storage-emulator is not installed (a dev dependency: make install)"
    jars = {"firestore": firestore_jar, "pubsub": pubsub_jar}
    try:
        _java()
        for name in [n for n in names if n != "storage"] or list(jars):
            jars[name]()
    except EmulatorUnavailable as exc:
        return str(exc)
    return None


def _wait_ready(emulator: Emulator, timeout_s: float) -> None:
    # Every emulator answers 200 on GET / once it accepts requests.
    deadline = time.monotonic() + timeout_s
    url = f"http://{emulator.host}/"
    while time.monotonic() < deadline:
        if emulator.process.poll() is not None:
            break
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            time.sleep(0.1)
    emulator.stop(keep_log=True)
    raise EmulatorUnavailable(
        f"{emulator.name} emulator did not start on {emulator.host} within {timeout_s:.0f}s "
        f"(log: {emulator.log_path}):\n{emulator.log_tail()}"
    )


def _launch(name: str, command: list[str], port: int, timeout_s: float) -> Emulator:
    log_path = Path(tempfile.mkstemp(prefix=f"gradeq-{name}-emulator-", suffix=".log")[1])
    log_file = log_path.open("wb")
    process = subprocess.Popen(  # the jar path and port are ours, no shell involved
        command, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
    )
    emulator = Emulator(name, f"127.0.0.1:{port}", process, log_path, log_file)
    _wait_ready(emulator, timeout_s)
    return emulator


def start_firestore(project: str, port: int | None = None, timeout_s: float = 60.0) -> Emulator:
    """Start the Firestore emulator for `project`; return once it answers."""
    port = port or free_port()
    command = [
        _java(),
        "-Duser.language=en",  # the emulator only supports English messages
        "-cp",
        str(firestore_jar()),
        "com.google.cloud.datastore.emulator.firestore.CloudFirestore",
        "start",
        "--host=127.0.0.1",
        f"--port={port}",
        f"--project_id={project}",
    ]
    return _launch("firestore", command, port, timeout_s)


def start_pubsub(port: int | None = None, timeout_s: float = 60.0) -> Emulator:
    """Start the Pub/Sub emulator (it serves any project id); return once it answers."""
    port = port or free_port()
    command = [_java(), "-jar", str(pubsub_jar()), "--host=127.0.0.1", f"--port={port}"]
    return _launch("pubsub", command, port, timeout_s)


def start_storage(bucket: str, port: int | None = None, timeout_s: float = 60.0) -> Emulator:
    """Start the Cloud Storage emulator (PyPI `gcp-storage-emulator`) holding `bucket`."""
    if importlib.util.find_spec("gcp_storage_emulator") is None:
        raise EmulatorUnavailable(
            "gcp-storage-emulator is not installed (a dev dependency: make install)"
        )
    port = port or free_port()
    command = [
        sys.executable, "-m", "gcp_storage_emulator", "start", "--host", "127.0.0.1",
        "--port", str(port), "--default-bucket", bucket, "--in-memory",
    ]  # fmt: skip
    return _launch("storage", command, port, timeout_s)


def reset_firestore(host: str, project: str, database: str = "(default)") -> None:
    """Delete every document in the emulator's database (between tests)."""
    url = f"http://{host}/emulator/v1/projects/{project}/databases/{database}/documents"
    request = urllib.request.Request(url, method="DELETE")
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
        if response.status != 200:
            raise RuntimeError(f"Firestore emulator reset answered {response.status}")


def reset_pubsub(host: str) -> None:
    """Drop every topic and subscription of the Pub/Sub emulator."""
    request = urllib.request.Request(f"http://{host}/reset", method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
        if response.status != 200:
            raise RuntimeError(f"Pub/Sub emulator reset answered {response.status}")


@contextmanager
def running_emulators(project: str) -> Iterator[dict[str, str]]:
    """Run both emulators for the block; yield the `*_EMULATOR_HOST` variables to export."""
    firestore = start_firestore(project)
    try:
        pubsub = start_pubsub()
        try:
            yield {FIRESTORE_HOST_ENV: firestore.host, PUBSUB_HOST_ENV: pubsub.host}
        finally:
            pubsub.stop()
    finally:
        firestore.stop()


def main(argv: list[str] | None = None) -> None:
    """Start both emulators, print their variables as shell exports, run until signalled.

    python -m localcloud.emulators --project demo-gradeq > emulators.env
    """
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--project", default="demo-gradeq")
    args = parser.parse_args(argv)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        with running_emulators(args.project) as variables:
            for name, value in variables.items():
                print(f"export {name}={value}", flush=True)
            stop.wait()
    except EmulatorUnavailable as exc:
        raise SystemExit(f"emulators unavailable: {exc}") from exc


if __name__ == "__main__":
    main()
