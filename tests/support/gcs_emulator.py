"""The Cloud Storage emulator from the package index (`gcp-storage-emulator`, a dev
dependency), started by the tests themselves, and credentials that can sign V4 URLs.

The emulator serves the JSON and XML APIs the official client uses, but it checks no
signature: what a signed URL binds (type, size, expiry) is Cloud Storage's to enforce,
and the tests of the Google family say so where they cannot observe it.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from google.oauth2 import service_account

from localcloud.stack import free_port

PROJECT = "demo-gradeq"
SIGNER = "intake@demo-gradeq.iam.gserviceaccount.com"


def missing_reason() -> str | None:
    """Why the emulator cannot run here, or None."""
    if importlib.util.find_spec("gcp_storage_emulator") is None:
        return "gcp-storage-emulator is not installed (make install adds it: a dev dependency)"
    return None


@contextmanager
def running_gcs_emulator(bucket: str) -> Iterator[str]:
    """Start the emulator with `bucket` on a free loopback port; yield its base URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "gcp_storage_emulator", "start", "--host", "127.0.0.1",
         "--port", str(port), "--default-bucket", bucket, "--in-memory", "--quiet"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if requests.get(url + "/", timeout=1).ok:
                    break
            except requests.ConnectionError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the Cloud Storage emulator did not start")
            time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


def signing_credentials() -> service_account.Credentials:
    """Service-account credentials with a fresh private key: they sign, never call Google."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    info = {
        "type": "service_account",
        "project_id": PROJECT,
        "private_key_id": "test",
        "private_key": pem,
        "client_email": SIGNER,
        "client_id": "1",
        "token_uri": "https://oauth2.googleapis.com/token",
    }
    credentials: service_account.Credentials = (
        service_account.Credentials.from_service_account_info(info)  # type: ignore[no-untyped-call]
    )
    return credentials
