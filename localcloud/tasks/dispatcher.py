"""The local dispatcher: one pump per queue plus the Cloud Tasks gRPC API, on one table."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from types import TracebackType

import grpc

from localcloud.cloudrun import ForwardedTokens
from localcloud.tasks.attempt import DISPATCHER_STOPPED
from localcloud.tasks.grpc_api import CloudTasksApi
from localcloud.tasks.queue_pump import QueuePump
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.adapters.embedded.task_table import DEFAULT_NAME_RESERVATION, TaskTable
from shared.adapters.embedded.wakeup import TASKS, WakeListener
from shared.config.queues import QueueConfig

log = logging.getLogger(__name__)


class Dispatcher:
    """Delivers the `tasks` table's tasks with Cloud Tasks semantics; start() then stop()."""

    def __init__(
        self,
        db: SqliteDatabase,
        queues: Mapping[str, QueueConfig],
        *,
        push_token: str | None = None,
        oidc_account: str | None = None,
        target_base: str | None = None,
        grpc_address: str | None = "127.0.0.1:0",
        poll_interval_s: float = 1.0,
        lease_margin_s: float = 5.0,
        name_reservation: timedelta = DEFAULT_NAME_RESERVATION,
        paused: bool = False,
        reclaim_leases: bool = False,
    ) -> None:
        self.table = TaskTable(db)
        self.queues = dict(queues)
        self.owner = f"dispatcher-{uuid.uuid4().hex[:12]}"
        self.grpc_address = grpc_address
        self.grpc_port: int | None = None
        self.paused = paused
        self.reclaim_leases = reclaim_leases
        reservation_s = name_reservation.total_seconds()
        self._database = db.path
        self._listener: WakeListener | None = None
        self._relay: threading.Thread | None = None
        self._relaying = threading.Event()
        #: The ID tokens this dispatcher forwards: reused while it runs, never by another.
        self.tokens = ForwardedTokens()
        self.pumps = {
            name: QueuePump(
                self.table,
                queue,
                self.owner,
                push_token=push_token,
                oidc_account=oidc_account,
                target_base=target_base,
                poll_interval_s=poll_interval_s,
                lease_margin_s=lease_margin_s,
                name_reservation_s=reservation_s,
                tokens=self.tokens,
            )
            for name, queue in self.queues.items()
        }
        self.api = CloudTasksApi(self.table, self.queues, reservation_s, self._created)
        self._server: grpc.Server | None = None

    def start(self) -> None:
        """Serve the gRPC API (if an address is set) and start dispatching."""
        if self.reclaim_leases:
            # Only safe when this is the database's sole dispatcher: leases of a dead one
            # would otherwise hold their tasks until their deadline passes.
            count = self.table.release(None, DISPATCHER_STOPPED)
            log.info("reclaimed %d leased tasks", count)
        if self.grpc_address is not None:
            self._server = grpc.server(ThreadPoolExecutor(max_workers=8, thread_name_prefix="grpc"))
            self._server.add_generic_rpc_handlers((self.api.handler(),))
            self.grpc_port = self._server.add_insecure_port(self.grpc_address)
            self._server.start()
        if not self.paused:
            for pump in self.pumps.values():
                pump.start()
            self._listen()
        log.info(
            "dispatcher started",
            extra={
                "grpc_port": self.grpc_port,
                "queues": sorted(self.queues),
                "paused": self.paused,
                "owner": self.owner,
            },
        )

    def stop(self, grace_s: float = 10.0) -> None:
        """Stop: let attempts in flight finish for `grace_s`, then hand the rest back."""
        if self._server is not None:
            self._server.stop(grace=min(grace_s, 1.0)).wait()
        self._relaying.clear()
        if self._listener is not None:
            self._listener.wake()
        if self._relay is not None:
            self._relay.join()
        for pump in self.pumps.values():
            pump.stop_claiming()
        until = time.monotonic() + grace_s
        left = sum(pump.wait_idle(until) for pump in self.pumps.values())
        if left:
            # Their requests may still complete, but their outcome will not be recorded:
            # the next dispatcher sends them again at once (at-least-once delivery).
            released = self.table.release(self.owner, DISPATCHER_STOPPED)
            log.warning("abandoned %d attempts in flight (%d released)", left, released)
        if self._listener is not None:
            self._listener.close()
        log.info("dispatcher stopped")

    def __enter__(self) -> Dispatcher:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _listen(self) -> None:
        """Receive the wake-ups writers send after committing a task.

        Without them (another dispatcher on this database receives them) the pumps look
        for new tasks every `poll_interval_s` instead.
        """
        listener = WakeListener(self._database, TASKS)
        if not listener.bound:
            log.warning("another dispatcher receives this database's wake-ups; polling only")
            listener.close()
            return
        self._listener = listener
        self._relaying.set()
        self._relay = threading.Thread(target=self._relay_wakeups, args=(listener,), daemon=True)
        self._relay.start()

    def _relay_wakeups(self, listener: WakeListener) -> None:
        """Wake every pump when another process signals a new task."""
        while self._relaying.is_set():
            if listener.wait(60.0) and self._relaying.is_set():
                for pump in self.pumps.values():
                    pump.wake()

    def _created(self, queue: str) -> None:
        pump = self.pumps.get(queue)
        if pump is not None:
            pump.wake()
