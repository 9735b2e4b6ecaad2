"""Webhook delivery against real loopback endpoints: a deadline for the whole delivery,
the answer's body never read, and trust in an extra certificate authority when asked."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import cast

import pytest

from services.notification.transport import trust_context
from services.notification.webhook import CallbackFailed, WebhookSender
from shared.domain.webhook_secrets import new_signing_secret
from shared.http.callback_guard import CallbackGuard
from tests.contract.harness_events import sample_event
from tests.support.tls import CA_NAME, PrivateCa, make_private_ca, read_request, tls_receiver

SECRETS = [new_signing_secret()]
HUGE = 50 * 1024 * 1024


@contextmanager
def raw_endpoint(answer: Callable[[socket.socket], None]) -> Iterator[str]:
    """One connection on a loopback port, answered by `answer`; yields the URL."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        with conn, suppress(OSError):
            read_request(conn)
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


@pytest.fixture
def private_ca(tmp_path: Path) -> PrivateCa:
    return make_private_ca(tmp_path)


def test_an_endpoint_with_a_private_ca_is_trusted_only_with_the_extra_bundle(
    private_ca: PrivateCa,
) -> None:
    with tls_receiver(private_ca) as (url, received):
        with pytest.raises(CallbackFailed, match="unreachable: SSLError"):
            loopback_sender(5.0).send(sample_event(), url, SECRETS)
        trusting = loopback_sender(5.0, extra_ca_bundle=private_ca.bundle)
        assert trusting.send(sample_event(), url, SECRETS) == 204
    assert len(received) == 1


def test_the_extra_bundle_adds_to_the_public_roots(private_ca: PrivateCa) -> None:
    context = trust_context(private_ca.bundle)
    assert context is not None
    # Each certificate's subject is its relative distinguished names, of (name, value) pairs.
    subjects = [
        dict(x[0] for x in cast(tuple[tuple[tuple[str, str], ...], ...], c["subject"]))
        for c in context.get_ca_certs()
    ]
    assert {"commonName": CA_NAME} in subjects
    assert len(subjects) > 50  # the public roots are still there


def test_an_unreadable_bundle_is_refused_at_start(tmp_path: Path) -> None:
    (tmp_path / "empty.pem").write_text("not a certificate")
    for bundle in (tmp_path / "missing.pem", tmp_path / "empty.pem"):
        with pytest.raises(ValueError, match="GRADEQ_WEBHOOK_CA_BUNDLE"):
            trust_context(bundle)


def test_errors_name_the_host_only() -> None:
    def refuse(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n")

    with raw_endpoint(refuse) as url:
        # The guard refuses user information before any request (test_callback_guard).
        private = url + "/hook?token=abc"
        with pytest.raises(CallbackFailed) as failed:
            loopback_sender(5.0).send(sample_event(), private, SECRETS)
    assert "answered HTTP 500" in failed.value.detail
    for secret in ("hook", "token", "abc"):
        assert secret not in failed.value.detail
