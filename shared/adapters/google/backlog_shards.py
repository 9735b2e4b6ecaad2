"""The counters of jobs not yet final on Firestore: backlog shards holding clients' counts.

The total is spread over `BACKLOG_SHARDS` documents so creates and completions do not all
write one document (Firestore sustains about one write a second per document). A client's
jobs are all counted in one shard, a stable hash of the client it counts as (`shard_of`),
and the shard document holds, besides its total (`active`), each of its clients' counts
(`clients`, a map) and a capacity adjustment: one read answers both admission ceilings,
and one conditioned write moves both.

Under admission limits each shard holds at most its capacity: its share of the backlog
ceiling (`shard_capacity`) plus its adjustment. The adjustments always sum to zero (they
only move in pairs, in one batch), so the capacities sum to the ceiling and the total
never passes it, although a create reads and writes a single shard. A client whose shard
is full while others have room takes capacity from the roomiest one (`donor_for`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from google.cloud import firestore
from google.cloud.firestore_v1.field_path import FieldPath

from shared.domain.admission import counted_as

BACKLOG_SHARDS = 8
ACTIVE = "active"
CLIENTS = "clients"
ADJUSTMENT = "capacity_adjustment"


def shard_capacity(shard: int, backlog: int) -> int:
    """Shard `shard`'s share of a backlog ceiling; the shares add up to the ceiling."""
    share, rest = divmod(backlog, BACKLOG_SHARDS)
    return share + (1 if shard < rest else 0)


def shards_in_use(backlog: int | None) -> int:
    """How many shards count jobs: all of them, or as many as have a share of a small ceiling."""
    return BACKLOG_SHARDS if backlog is None else max(1, min(BACKLOG_SHARDS, backlog))


def shard_of(client_id: str, backlog: int | None = None) -> int:
    """The shard counting the jobs of `client_id` (a client or a user scope)."""
    digest = hashlib.sha256(counted_as(client_id).encode()).digest()
    return int.from_bytes(digest[:8], "big") % shards_in_use(backlog)


def shard_id(shard: int) -> str:
    """The counter document of a shard."""
    return f"backlog:{shard}"


def client_key(client_id: str) -> str:
    """The key of a client's count in its shard's map.

    Prefixed: Firestore reserves field names of the form `__name__`, and any client id
    must be a key; the prefix keeps distinct ids distinct.
    """
    return "c:" + counted_as(client_id)


def client_field(client_id: str) -> str:
    """The field path of a client's count, quoted so any client id is one map key."""
    return FieldPath(CLIENTS, client_key(client_id)).to_api_repr()


@dataclass(frozen=True)
class Shard:
    """A shard as read: its snapshot (None or absent: nothing counted yet)."""

    index: int
    snapshot: Any

    def _data(self) -> dict[str, Any]:
        if self.snapshot is None or not self.snapshot.exists:
            return {}
        return self.snapshot.to_dict() or {}

    @property
    def active(self) -> int:
        return int(self._data().get(ACTIVE, 0))

    def of_client(self, client_id: str) -> int:
        clients = self._data().get(CLIENTS) or {}
        return int(clients.get(client_key(client_id), 0))

    def capacity(self, backlog: int) -> int:
        return shard_capacity(self.index, backlog) + int(self._data().get(ADJUSTMENT, 0))

    def room(self, backlog: int) -> int:
        return self.capacity(backlog) - self.active


def donor_for(shards: list[Shard], needed: int, backlog: int) -> tuple[Shard, int] | None:
    """The shard to take capacity from and how much, or None when no shard has `needed`.

    Half the roomiest shard's room moves (at least `needed`), so a busy client's next
    jobs find room in their own shard instead of moving capacity one job at a time, and
    the donor keeps the other half for its own clients.
    """
    roomy = max(shards, key=lambda s: s.room(backlog), default=None)
    if roomy is None or roomy.room(backlog) < needed:
        return None
    room = roomy.room(backlog)
    return roomy, max(needed, (room + 1) // 2)


def count(writes: Any, ref: Any, client_id: str, delta: int) -> None:
    """Add `delta` to a shard's total and to the client's count, blind."""
    fields = {
        ACTIVE: firestore.Increment(delta),
        CLIENTS: {client_key(client_id): firestore.Increment(delta)},
    }
    writes.set(ref, fields, merge=True)


def count_checked(
    writes: Any, client: Any, ref: Any, seen: Shard, client_id: str, delta: int, moved: int = 0
) -> None:
    """Add `delta` to both counts and `moved` to the capacity, conditioned on `seen`."""
    if seen.snapshot is None or not seen.snapshot.exists:
        writes.create(
            ref, {ACTIVE: delta, CLIENTS: {client_key(client_id): delta}, ADJUSTMENT: moved}
        )
        return
    fields: dict[str, Any] = {
        ACTIVE: firestore.Increment(delta),
        client_field(client_id): firestore.Increment(delta),
    }
    if moved:
        fields[ADJUSTMENT] = firestore.Increment(moved)
    writes.update(
        ref, fields, option=client.write_option(last_update_time=seen.snapshot.update_time)
    )


def adjust_checked(writes: Any, client: Any, ref: Any, seen: Shard, moved: int) -> None:
    """Add `moved` to a shard's capacity, conditioned on `seen`."""
    if seen.snapshot is None or not seen.snapshot.exists:
        writes.create(ref, {ACTIVE: 0, CLIENTS: {}, ADJUSTMENT: moved})
        return
    option = client.write_option(last_update_time=seen.snapshot.update_time)
    writes.update(ref, {ADJUSTMENT: firestore.Increment(moved)}, option=option)
