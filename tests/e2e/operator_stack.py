"""The local stack set up for the operator tests: fast queue, small
leases, a client key and an operator key."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from localcloud.stack import EMBEDDED, LocalStack, StackConfig
from tests.e2e.fast_stack import fast_env

OPERATOR_KEY = "e2e-operator-key"


@contextmanager
def operator_stack(root: Path, backend: str = EMBEDDED, **env: str) -> Iterator[LocalStack]:
    """Start the stack under `root`; stop it (and all it spawned) on the way out."""
    config = StackConfig.on_free_ports(
        root / "data",
        backend=backend,
        recover_every_s=0,
        env=fast_env(root, GRADEQ_OPERATOR_KEYS=f"ops={OPERATOR_KEY}", **env),
    )
    with (root / "stack.log").open("w") as log:
        local = LocalStack(config, output=log)
        local.start()
        try:
            yield local
        finally:
            local.stop()
