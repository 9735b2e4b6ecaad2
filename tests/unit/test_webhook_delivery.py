"""Webhook delivery against real loopback endpoints: a deadline for the whole delivery,
the answer's body never read, and trust in an extra certificate authority when asked."""

from __future__ import annotations

import datetime as dt
import ipaddress
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from services.notification.transport import trust_context
from services.notification.webhook import CallbackFailed, WebhookSender
from shared.domain.webhook_secrets import new_signing_secret
from shared.http.callback_guard import CallbackGuard
from tests.contract.harness_events import sample_event

SECRETS = [new_signing_secret()]
HUGE = 50 * 1024 * 1024


def _read_request(conn: socket.socket) -> None:
    """Read the request's head and its Content-Length body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        (
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        ),
        0,
    )
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return
        body += chunk


@contextmanager
def raw_endpoint(answer: Callable[[socket.socket], None]) -> Iterator[str]:
    """One connection on a loopback port, answered by `answer`; yields the URL."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        with conn, suppress(OSError):
            _read_request(conn)
            answer(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}/hook"
    finally:
        thread.join(timeout=30)
        listener.close()


def loopback_sender(timeout_s: float, **kwargs: object) -> WebhookSender:
    return WebhookSender(timeout_s, CallbackGuard(allow_loopback=True), **kwargs)  # type: ignore[arg-type]


def test_an_endpoint_that_drips_its_answer_is_cut_off_at_the_deadline() -> None:
    drip_s = 8.0
    dripped = threading.Event()

    def drip(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\n")
        end = time.monotonic() + drip_s
        while time.monotonic() < end:  # one header byte every 0.1 s: each read is quick
            conn.sendall(b"X")
            time.sleep(0.1)
        dripped.set()

    with raw_endpoint(drip) as url:
        started = time.monotonic()
        with pytest.raises(CallbackFailed, match=r"did not answer within 0\.5 s"):
            loopback_sender(0.5).send(sample_event(), url, SECRETS)
        held_s = time.monotonic() - started
    assert not dripped.is_set()  # the server was cut off before it finished dripping
    assert held_s < drip_s / 2, f"the delivery was held {held_s:.1f} s"


def test_a_huge_answer_is_never_read() -> None:
    sent = [0]

    def huge(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % HUGE)
        chunk = b"x" * 65536
        while sent[0] < HUGE:
            conn.sendall(chunk)
            sent[0] += len(chunk)

    with raw_endpoint(huge) as url:
        assert loopback_sender(5.0).send(sample_event(), url, SECRETS) == 200
    # The client closed after the status line: only what socket buffers held got out.
    assert sent[0] < HUGE // 2, f"{sent[0]} bytes of the answer were taken"


# --- a private certificate authority --------------------------------------------------


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


@pytest.fixture
def private_ca(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(CA bundle, server certificate, server key) for 127.0.0.1, made here."""
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("Gradeq test CA"))
        .issuer_name(_name("Gradeq test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(_name("127.0.0.1"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .add_extension(x509.ExtendedKeyUsage([x509.ExtendedKeyUsageOID.SERVER_AUTH]), False)
        .sign(ca_key, hashes.SHA256())
    )
    bundle, cert, key_file = tmp_path / "ca.pem", tmp_path / "server.pem", tmp_path / "key.pem"
    bundle.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return bundle, cert, key_file


@contextmanager
def tls_endpoint(cert: Path, key: Path) -> Iterator[str]:
    """An HTTPS endpoint on loopback answering 204 to each connection, until the block ends."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    port = listener.getsockname()[1]
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                raw, _ = listener.accept()
            except TimeoutError:
                continue
            raw.settimeout(5)
            with suppress(OSError), context.wrap_socket(raw, server_side=True) as conn:
                _read_request(conn)
                conn.sendall(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{port}/hook"
    finally:
        stop.set()
        thread.join(timeout=10)
        listener.close()


def test_an_endpoint_with_a_private_ca_is_trusted_only_with_the_extra_bundle(
    private_ca: tuple[Path, Path, Path],
) -> None:
    bundle, cert, key = private_ca
    with tls_endpoint(cert, key) as url:
        with pytest.raises(CallbackFailed, match="unreachable: SSLError"):
            loopback_sender(5.0).send(sample_event(), url, SECRETS)
        trusting = loopback_sender(5.0, extra_ca_bundle=bundle)
        assert trusting.send(sample_event(), url, SECRETS) == 204


def test_the_extra_bundle_adds_to_the_public_roots(private_ca: tuple[Path, Path, Path]) -> None:
    bundle, _, _ = private_ca
    context = trust_context(bundle)
    assert context is not None
    subjects = [dict(x[0] for x in c["subject"]) for c in context.get_ca_certs()]
    assert {"commonName": "Gradeq test CA"} in subjects
    assert len(subjects) > 50  # the public roots are still there


def test_an_unreadable_bundle_is_refused_at_start(tmp_path: Path) -> None:
    (tmp_path / "empty.pem").write_text("not a certificate")
    for bundle in (tmp_path / "missing.pem", tmp_path / "empty.pem"):
        with pytest.raises(ValueError, match="GRADEQ_WEBHOOK_CA_BUNDLE"):
            trust_context(bundle)
