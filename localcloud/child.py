"""Run a command that dies with the process that started it (Linux parent-death signal).

    python -m localcloud.child COMMAND [ARG...]

The local stack starts every service through this: the child asks the kernel for SIGKILL
when its parent goes, then becomes COMMAND (exec keeps the request). A runner killed hard,
or stopped after a timeout, so leaves no service running and holding its port. The signal
follows the parent *thread* that started the child: the stack spawns from long-lived
threads only. Elsewhere than on Linux the command simply runs.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Ask for SIGKILL when the parent exits; exit at once if it already has."""
    parent = os.getppid()
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if parent == 1 or os.getppid() != parent:
        raise SystemExit("the parent exited before the child started")


def main() -> None:
    command = sys.argv[1:]
    if not command:
        raise SystemExit(__doc__)
    die_with_parent()
    os.execvp(command[0], command)  # noqa: S606 - the stack's own commands, no shell


if __name__ == "__main__":
    main()
