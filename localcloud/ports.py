"""Find out whether a loopback port is free, and which process holds it if not (Linux /proc)."""

from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` different loopback ports that are free now.

    Every socket stays bound until all are picked: a port asked for one at a time is free
    again once its socket closes, so the OS may hand it out twice.
    """
    with contextlib.ExitStack() as held:
        sockets = [held.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind((host, 0))
        return [int(sock.getsockname()[1]) for sock in sockets]


def is_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a listener could bind `host:port` now."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def _listening_inodes(port: int) -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                    inodes.add(inode)
    return inodes


def holder(port: int) -> str | None:
    """'pid N (command line)' of a process listening on `port`, or None when unknown."""
    inodes = _listening_inodes(port)
    if not inodes:
        return None
    wanted = {f"socket:[{inode}]" for inode in inodes}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        if any(_link(fd) in wanted for fd in _fds(entry)):
            with contextlib.suppress(OSError):
                raw = (entry / "cmdline").read_bytes()
                command = raw.replace(b"\0", b" ").decode(errors="replace").strip()
                return f"pid {entry.name} ({command or '?'})"
            return f"pid {entry.name}"
    return None


def _fds(process: Path) -> list[Path]:
    try:
        return list((process / "fd").iterdir())
    except OSError:  # gone, or not ours to look into
        return []


def _link(fd: Path) -> str | None:
    # A descriptor closed between the listing and this read is simply not the socket.
    try:
        return os.readlink(fd)
    except OSError:
        return None


def check_free(ports: dict[str, int]) -> None:
    """Raise RuntimeError naming every taken port and, where visible, its process."""
    taken = []
    names: dict[int, list[str]] = {}
    for name, port in ports.items():
        names.setdefault(port, []).append(name)
    for port, sharing in names.items():
        if len(sharing) > 1:
            # The second listener could not bind, and the first would answer its health check.
            taken.append(f"port {port} is named for {' and '.join(sharing)}")
    for name, port in ports.items():
        if not is_free(port):
            who = holder(port) or "a process this user cannot see"
            taken.append(f"port {port} ({name}) is held by {who}")
    if taken:
        raise RuntimeError(
            "cannot start the local stack: "
            + "; ".join(taken)
            + ". Stop that process (a stack left over from an earlier run?) or free the port."
        )
