"""docs/auth.md prints the authorization policy exactly as the code holds it."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from shared.domain.authorization import POLICY, Action, Relation, Role, policy_table

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "auth_policy_table", ROOT / "scripts" / "auth-policy-table.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_docs_table_is_the_one_the_policy_generates() -> None:
    script = _script()
    text = (ROOT / "docs" / "auth.md").read_text("utf-8")
    assert script.START in text and script.END in text
    assert script.with_table(text) == text, "run: python scripts/auth-policy-table.py --write"


def test_the_table_has_a_row_per_action_and_a_cell_per_role() -> None:
    rows = policy_table().splitlines()[2:]
    assert len(rows) == len(Action)
    for action, row in zip(Action, rows, strict=True):
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[0] == f"`{action.value}`"
        for role, cell in zip(Role, cells[1:], strict=True):
            allowed = {r.value for r in Relation if r in POLICY[role].get(action, frozenset())}
            assert set(cell.split(", ")) - {"—"} == allowed
