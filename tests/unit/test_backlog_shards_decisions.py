"""The backlog shards' decisions: each shard's share of the ceiling, what a shard reads as
counted and as capacity, and the writes that move the counts, blind or conditioned on the
shard as read (recorded by a fake of the batch and client they are given)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from google.cloud import firestore

from shared.adapters.google.backlog_shards import (
    BACKLOG_SHARDS,
    Shard,
    adjust_checked,
    count,
    count_checked,
    donor_for,
    shard_capacity,
    shard_of,
    shards_in_use,
)


@dataclass(frozen=True)
class Snapshot:
    """What the shards read of a Firestore snapshot."""

    data: dict[str, Any] | None
    exists: bool = True
    update_time: str = "t-seen"

    def to_dict(self) -> dict[str, Any] | None:
        return self.data


ABSENT = Snapshot(None, exists=False)


@dataclass(frozen=True)
class Option:
    """The precondition a write is conditioned on."""

    last_update_time: Any


class Client:
    """The Firestore client's part the conditioned writes use."""

    def write_option(self, **precondition: Any) -> Option:
        return Option(**precondition)


class Writes:
    """A batch or transaction: records each write with its arguments."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def set(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append(("set", args, kwargs))

    def create(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append(("create", args, kwargs))

    def update(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append(("update", args, kwargs))


REF = "ref-backlog:3"
SEEN = Option("t-seen")


def inc(n: int) -> Any:
    return firestore.Increment(n)


def test_the_shares_of_a_ceiling_give_the_rest_to_the_first_shards() -> None:
    backlog = 8 * 10 + 3
    shares = [shard_capacity(s, backlog) for s in range(BACKLOG_SHARDS)]
    assert shares == [11, 11, 11, 10, 10, 10, 10, 10]
    assert sum(shares) == backlog
    assert [shard_capacity(s, 80) for s in range(BACKLOG_SHARDS)] == [10] * 8
    assert [shard_capacity(s, 2) for s in range(BACKLOG_SHARDS)] == [1, 1, 0, 0, 0, 0, 0, 0]


def test_a_ceiling_smaller_than_the_shards_uses_one_shard_per_job_it_admits() -> None:
    assert shards_in_use(None) == BACKLOG_SHARDS
    assert [shards_in_use(b) for b in (0, 1, 2, 7, 8, 9, 1000)] == [1, 1, 2, 7, 8, 8, 8]


def test_a_clients_shard_is_the_first_eight_bytes_of_its_schools_digest() -> None:
    # sha256 of the school's id, its first 8 bytes big-endian, modulo the shards in use.
    ids = ["acme", "beta", "client-1", "client-2", "client-3", "client-4"]
    assert [shard_of(c) for c in ids] == [0, 1, 4, 3, 1, 2]
    assert [shard_of(c, backlog=100) for c in ids] == [0, 1, 4, 3, 1, 2]
    assert [shard_of(c, backlog=5) for c in ids] == [2, 0, 2, 3, 3, 0]
    assert [shard_of(c, backlog=3) for c in ids] == [0, 0, 1, 2, 2, 1]
    assert shard_of("acme:user:alice", backlog=5) == 2


def test_a_shard_not_read_or_not_yet_written_counts_nothing_and_has_its_share() -> None:
    for snapshot in (None, ABSENT):
        unread = Shard(2, snapshot)
        assert unread.active == 0
        assert unread.of_client("acme") == 0
        assert unread.capacity(83) == 11
        assert unread.room(83) == 11
    assert Shard(2, Snapshot(None)).active == 0  # exists, but holds nothing


def test_a_shard_reads_its_total_its_clients_counts_and_its_adjustment() -> None:
    read = Shard(
        4,
        Snapshot({"active": 7, "clients": {"c:acme": 5, "c:beta": 2}, "capacity_adjustment": 3}),
    )
    assert read.active == 7
    assert read.of_client("acme") == 5
    assert read.of_client("acme:user:alice") == 5  # a user scope counts as its client
    assert read.of_client("beta") == 2
    assert read.of_client("gamma") == 0
    assert read.capacity(80) == 13
    assert read.room(80) == 6
    given = Shard(4, Snapshot({"active": 7, "capacity_adjustment": -4}))
    assert given.capacity(80) == 6
    assert given.room(80) == -1


def test_a_shard_without_clients_or_adjustment_counts_none_and_keeps_its_share() -> None:
    bare = Shard(1, Snapshot({"active": 4}))
    assert bare.of_client("acme") == 0
    assert bare.capacity(80) == 10
    emptied = Shard(1, Snapshot({"active": 0, "clients": {}}))
    assert emptied.of_client("acme") == 0


def test_no_shard_to_take_from_gives_no_donor() -> None:
    assert donor_for([], needed=1, backlog=80) is None


def test_a_blind_count_adds_to_the_total_and_the_clients_count_merged() -> None:
    writes = Writes()
    count(writes, REF, "acme:user:alice", 2)
    assert writes.calls == [
        ("set", (REF, {"active": inc(2), "clients": {"c:acme": inc(2)}}), {"merge": True})
    ]


def test_a_checked_count_on_a_shard_not_yet_written_creates_it() -> None:
    for snapshot in (None, ABSENT):
        writes = Writes()
        count_checked(writes, Client(), REF, Shard(3, snapshot), "acme:user:alice", 1, moved=4)
        assert writes.calls == [
            (
                "create",
                (REF, {"active": 1, "clients": {"c:acme": 1}, "capacity_adjustment": 4}),
                {},
            )
        ]
    writes = Writes()
    count_checked(writes, Client(), REF, Shard(3, ABSENT), "beta", 2)
    assert writes.calls == [
        ("create", (REF, {"active": 2, "clients": {"c:beta": 2}, "capacity_adjustment": 0}), {})
    ]


def test_a_checked_count_updates_the_shard_as_read_and_nothing_else() -> None:
    seen = Shard(3, Snapshot({"active": 5}))
    writes = Writes()
    count_checked(writes, Client(), REF, seen, "acme:user:alice", 1)
    assert writes.calls == [
        ("update", (REF, {"active": inc(1), "clients.`c:acme`": inc(1)}), {"option": SEEN})
    ]
    writes = Writes()
    count_checked(writes, Client(), REF, seen, "beta", -1, moved=0)
    assert writes.calls == [
        ("update", (REF, {"active": inc(-1), "clients.`c:beta`": inc(-1)}), {"option": SEEN})
    ]


def test_a_checked_count_that_takes_capacity_moves_the_adjustment_too() -> None:
    seen = Shard(3, Snapshot({"active": 10}))
    writes = Writes()
    count_checked(writes, Client(), REF, seen, "acme", 1, moved=5)
    assert writes.calls == [
        (
            "update",
            (
                REF,
                {"active": inc(1), "clients.`c:acme`": inc(1), "capacity_adjustment": inc(5)},
            ),
            {"option": SEEN},
        )
    ]


def test_giving_capacity_from_a_shard_not_yet_written_creates_it_empty() -> None:
    for snapshot in (None, ABSENT):
        writes = Writes()
        adjust_checked(writes, Client(), REF, Shard(5, snapshot), -3)
        assert writes.calls == [
            ("create", (REF, {"active": 0, "clients": {}, "capacity_adjustment": -3}), {})
        ]


def test_giving_capacity_updates_only_the_adjustment_of_the_shard_as_read() -> None:
    writes = Writes()
    adjust_checked(writes, Client(), REF, Shard(5, Snapshot({"active": 1})), -3)
    assert writes.calls == [("update", (REF, {"capacity_adjustment": inc(-3)}), {"option": SEEN})]


def test_the_condition_is_the_update_time_of_the_snapshot_read() -> None:
    later = Shard(5, Snapshot({"active": 1}, update_time="t-later"))
    writes = Writes()
    adjust_checked(writes, Client(), REF, later, 2)
    count_checked(writes, Client(), REF, later, "acme", 1)
    assert [call[2] for call in writes.calls] == [{"option": Option("t-later")}] * 2
