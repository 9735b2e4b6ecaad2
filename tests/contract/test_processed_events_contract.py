"""ProcessedEvents contract: insert-if-absent per (subscriber, event id) on every adapter."""

from __future__ import annotations

import threading

from shared.ports import ProcessedEvents


def test_the_first_add_wins(processed_events: ProcessedEvents) -> None:
    assert not processed_events.contains("notification", "e-1")
    assert processed_events.add("notification", "e-1", {"outcome": "succeeded"}) is True
    assert processed_events.contains("notification", "e-1")
    assert processed_events.add("notification", "e-1", {"outcome": "failed"}) is False


def test_subscribers_are_independent(processed_events: ProcessedEvents) -> None:
    processed_events.add("notification", "e-1", {})
    assert not processed_events.contains("analytics", "e-1")
    assert processed_events.add("analytics", "e-1", {}) is True
    assert not processed_events.contains("notification", "e-2")


def test_concurrent_adds_of_one_event_record_it_once(processed_events: ProcessedEvents) -> None:
    results: list[bool] = []
    barrier = threading.Barrier(8)

    def add() -> None:
        barrier.wait()
        results.append(processed_events.add("analytics", "e-race", {"n": 1}))

    threads = [threading.Thread(target=add) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(results) == [False] * 7 + [True]
