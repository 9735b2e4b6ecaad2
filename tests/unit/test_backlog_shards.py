"""The backlog shards' arithmetic: which shard counts a client, and how capacity moves."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from typing import Any

from shared.adapters.google.backlog_shards import (
    BACKLOG_SHARDS,
    Shard,
    client_field,
    client_key,
    donor_for,
    shard_of,
)


class Snapshot:
    """What the shard reads of a Firestore snapshot."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.exists = True
        self._data = data

    def to_dict(self) -> dict[str, Any]:
        return self._data


def shard(index: int, active: int, adjustment: int = 0) -> Shard:
    return Shard(index, Snapshot({"active": active, "capacity_adjustment": adjustment}))


def test_a_client_and_its_users_are_counted_in_one_shard_whatever_the_process() -> None:
    assert shard_of("acme") == shard_of("acme:user:alice") == shard_of("acme:user:bob")
    # A stable hash, not Python's salted hash(): every instance picks the same shard.
    ids = [f"client-{i}" for i in range(20)]
    code = (
        "import sys; from shared.adapters.google.backlog_shards import shard_of; "
        "print(*[shard_of(c) for c in sys.argv[1:]])"
    )
    elsewhere = subprocess.run(
        [sys.executable, "-c", code, *ids],
        env={**os.environ, "PYTHONHASHSEED": "12345"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert [int(n) for n in elsewhere] == [shard_of(c) for c in ids]
    spread = Counter(shard_of(f"client-{i}") for i in range(800))
    assert set(spread) == set(range(BACKLOG_SHARDS))
    assert all(60 <= n <= 140 for n in spread.values()), spread


def test_a_small_ceiling_uses_only_the_shards_with_a_share() -> None:
    assert {shard_of(f"client-{i}", backlog=3) for i in range(100)} == {0, 1, 2}
    assert {shard_of(f"client-{i}", backlog=1) for i in range(20)} == {0}


def test_any_client_id_is_one_map_key() -> None:
    assert client_key("acme:user:alice") == "c:acme"
    assert client_key("__name__") == "c:__name__"  # Firestore reserves __x__ field names
    assert client_field("a.b") == "clients.`c:a.b`"
    assert client_field("x`y") == "clients.`c:x\\`y`"


def test_the_roomiest_shard_gives_half_its_room_and_at_least_what_is_needed() -> None:
    backlog = 80  # 10 per shard
    others = [shard(1, 9), shard(2, 2), shard(3, 10, adjustment=4)]
    donor, moved = donor_for(others, needed=1, backlog=backlog) or (None, 0)
    assert donor is not None and donor.index == 2 and moved == 4  # room 8: half
    _, moved = donor_for(others, needed=6, backlog=backlog) or (None, 0)
    assert moved == 6
    assert donor_for(others, needed=9, backlog=backlog) is None
    assert donor_for([shard(1, 10), shard(2, 12, adjustment=2)], 1, backlog) is None
    last = donor_for([shard(1, 9)], 1, backlog)
    assert last is not None and (last[0].index, last[1]) == (1, 1)
