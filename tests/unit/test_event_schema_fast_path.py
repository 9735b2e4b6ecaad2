"""The compiled schema check accepts exactly what the jsonschema validator accepts."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from shared.codecs.event_schema import schema, schema_errors
from shared.domain.events import Outcome
from tests.contract.harness_events import sample_event

REFERENCE = Draft202012Validator(schema())

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)


@st.composite
def near_valid_events(draw: st.DrawFn) -> dict[str, Any]:
    """A real event's data with a few fields replaced, removed or added."""
    data = sample_event(draw(st.sampled_from(list(Outcome)))).data()
    for _ in range(draw(st.integers(0, 3))):
        field = draw(st.sampled_from([*data, "timings.total_ms", "error.type", "extra"]))
        target, _, leaf = field.rpartition(".")
        holder = data.get(target) if target else data
        if not isinstance(holder, dict):
            continue
        if draw(st.booleans()):
            holder[leaf or field] = draw(JSON_VALUES)
        else:
            holder.pop(leaf or field, None)
    return data


@settings(max_examples=400, deadline=None)
@given(near_valid_events())
def test_the_compiled_check_agrees_with_jsonschema(data: dict[str, Any]) -> None:
    assert (schema_errors(data) == []) == REFERENCE.is_valid(data)


def test_refused_data_is_still_described_error_by_error() -> None:
    data = sample_event(Outcome.SUCCEEDED).data()
    data["attempts"] = -1
    del data["job_id"]
    assert schema_errors(data) == [
        "$: 'job_id' is a required property",
        "$.attempts: -1 is less than the minimum of 0",
    ]
