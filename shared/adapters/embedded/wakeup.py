"""Wake-ups between local processes sharing one database: a datagram after a commit.

A writer that commits work for another process (a task for the dispatcher, a message for
the bus) sends one empty datagram to that process's socket; the process waits on the
socket instead of sleeping through a poll interval. A lost signal costs only latency: the
listener still polls, slowly, as a fallback. Sending never blocks and never fails the
writer: with no listener, or a listener already signalled, the datagram is dropped.

The socket has no file on Linux (an abstract address derived from the database path);
elsewhere it is a short path in the temporary directory.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import select
import socket
import sys
import tempfile
import threading
from pathlib import Path

#: Channels: who is woken.
TASKS = "tasks"
BUS = "bus"


def address(database: Path, channel: str) -> str:
    """The socket address of `channel`'s listener for one database file."""
    digest = hashlib.sha256(str(database.resolve()).encode()).hexdigest()[:20]
    name = f"gradeq-{digest}-{channel}"
    if sys.platform.startswith("linux"):
        return "\0" + name
    return os.path.join(tempfile.gettempdir(), name + ".sock")


_sender: tuple[int, socket.socket] | None = None
_sender_guard = threading.Lock()


def _sending_socket() -> socket.socket:
    """This process's one sending socket (made again in a forked child)."""
    global _sender
    with _sender_guard:
        if _sender is None or _sender[0] != os.getpid():
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            sock.setblocking(False)
            atexit.register(sock.close)
            _sender = (os.getpid(), sock)
        return _sender[1]


class WakeSender:
    """Signals one channel's listener; cheap enough to call after every commit."""

    def __init__(self, database: Path, channel: str) -> None:
        self._address = address(database, channel)

    def notify(self) -> None:
        # No listener (not started, restarting) or its queue is full: it is awake
        # already, or it will find the work on its fallback poll.
        with contextlib.suppress(OSError):
            _sending_socket().sendto(b"", self._address)


class WakeListener:
    """Receives one channel's signals; `wait` returns early when one arrives."""

    def __init__(self, database: Path, channel: str) -> None:
        self._address = address(database, channel)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if not self._address.startswith("\0") and os.path.exists(self._address):
            os.unlink(self._address)  # left by a listener that died
        try:
            sock.bind(self._address)
        except OSError:
            # Another listener on this database owns the channel: poll only.
            sock.close()
            self._socket: socket.socket | None = None
        else:
            sock.setblocking(False)
            self._socket = sock
        self._reader, self._writer = os.pipe()
        os.set_blocking(self._reader, False)
        os.set_blocking(self._writer, False)

    @property
    def bound(self) -> bool:
        """Whether signals reach this listener (False: only its poll finds new work)."""
        return self._socket is not None

    def wake(self) -> None:
        """Wake a waiting `wait` from this process (stop, a slot freed)."""
        with contextlib.suppress(OSError):  # full (a wake-up is pending anyway) or closed
            os.write(self._writer, b"w")

    def wait(self, timeout_s: float) -> bool:
        """Wait for a signal or `timeout_s`; True if signalled. Drains what is queued."""
        sources: list[socket.socket | int] = [self._reader]
        if self._socket is not None:
            sources.append(self._socket)
        ready, _, _ = select.select(sources, [], [], max(0.0, timeout_s))
        if not ready:
            return False
        self._drain()
        return True

    def _drain(self) -> None:
        if self._socket is not None:
            while True:
                try:
                    self._socket.recv(64)
                except BlockingIOError:
                    break
        try:
            while os.read(self._reader, 4096):
                pass
        except BlockingIOError:
            pass

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            if not self._address.startswith("\0"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self._address)
            self._socket = None
        for fd in (self._reader, self._writer):
            with contextlib.suppress(OSError):
                os.close(fd)
