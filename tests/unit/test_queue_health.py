"""The percentile rule the queue health uses: nearest rank."""

from __future__ import annotations

from shared.service_layer.queue_health import percentile


def test_nearest_rank_percentiles() -> None:
    values = [10, 1, 9, 2, 8, 3, 7, 4, 6, 5]
    assert percentile(values, 50) == 5
    assert percentile(values, 95) == 10
    assert percentile(values, 90) == 9
    assert percentile(values, 91) == 10
    assert percentile(values, 1) == 1
    assert percentile(values, 0) == 1
    assert percentile(list(range(1, 102)), 50) == 51
    assert percentile(list(range(1, 102)), 100) == 101


def test_no_values_have_no_percentile_and_one_value_is_every_percentile() -> None:
    assert percentile([], 50) is None
    assert [percentile([42], p) for p in (1, 50, 99)] == [42, 42, 42]
