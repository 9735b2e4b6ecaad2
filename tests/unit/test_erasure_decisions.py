"""What erasure's use case decides, pinned value by value."""

from __future__ import annotations

import pytest

from shared.service_layer.erasure import bigquery_statement


@pytest.mark.parametrize(
    ("table", "job_ids"),
    [("proj.ds.events`; DROP", ["j1"]), ("proj.ds.events", ["j1", "x' OR '1'='1"])],
)
def test_a_statement_refuses_a_table_or_job_id_it_cannot_quote_safely(
    table: str, job_ids: list[str]
) -> None:
    with pytest.raises(ValueError) as refused:
        bigquery_statement(table, job_ids)
    assert str(refused.value) == "not a table name or not job ids"
