"""Two deliveries (or two gradebook instances) writing an assignment's first grades at once
make one AGS line item, not two: the creation is claimed in the gradebook's marks, the
other writer is held off and then uses the recorded line item."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests

from services.gradebook.claims import ItemClaims
from services.gradebook.lti import LtiAgsWriter
from services.gradebook.ports import GradebookWriteHeld
from shared.adapters.embedded.gradebook_marks import SqliteGradebookMarks
from shared.adapters.embedded.sqlite import SqliteDatabase
from shared.adapters.lti.ags import AgsClient
from shared.adapters.lti.nrps import NrpsClient
from shared.adapters.lti.tokens import LtiTokens
from shared.service_layer.lti_keys import LtiToolKeys
from tests.unit.test_lti_ags_writer import Rig, grade, rig  # noqa: F401 (the fixture)


class DuringCreate(requests.Session):
    """Runs `meanwhile` just before it sends a line item creation: another delivery's
    write, arriving while this one creates."""

    def __init__(self) -> None:
        super().__init__()
        self.meanwhile: Callable[[], None] = lambda: None

    def request(
        self, method: str | bytes, url: str | bytes, *args: Any, **kwargs: Any
    ) -> requests.Response:
        if method == "POST" and str(url).endswith("/lineitems"):
            run, self.meanwhile = self.meanwhile, lambda: None
            run()
        return super().request(method, url, *args, **kwargs)


def writer(on: Rig, claims: ItemClaims | None, session: requests.Session) -> LtiAgsWriter:
    """One instance's writer, with its own session and token cache."""
    tokens = LtiTokens(LtiToolKeys(on.store, on.sealer, on.clock), on.clock, session)
    return LtiAgsWriter(on.store, AgsClient(tokens, session), NrpsClient(tokens, session), claims)


def racing(on: Rig, claims: ItemClaims | None) -> tuple[LtiAgsWriter, LtiAgsWriter, DuringCreate]:
    session = DuringCreate()
    return writer(on, claims, session), writer(on, claims, requests.Session()), session


def test_without_claims_two_racing_writers_make_two_line_items(rig: Rig) -> None:  # noqa: F811
    first, second, session = racing(rig, None)
    session.meanwhile = lambda: second.write(grade("s-2"))
    first.write(grade("s-1"))
    assert len(rig.platform.line_items) == 2


def test_a_writer_creating_holds_off_the_other_which_then_uses_its_line_item(
    rig: Rig,  # noqa: F811
    tmp_path: Path,
) -> None:
    claims = ItemClaims(SqliteGradebookMarks(SqliteDatabase(tmp_path / "m.sqlite3")), rig.clock)
    first, second, session = racing(rig, claims)
    held: list[GradebookWriteHeld] = []

    def other_write() -> None:
        with pytest.raises(GradebookWriteHeld) as raised:
            second.write(grade("s-2"))
        held.append(raised.value)

    session.meanwhile = other_write
    first.write(grade("s-1"))
    assert len(held) == 1 and rig.platform.score_posts != []
    second.write(grade("s-2"))  # its redelivery
    [item] = rig.platform.line_items.values()
    assert set(rig.platform.results(item.id)) == {"u-1", "u-2"}
    assert claims.recorded("school-a", "a-1") == item.id
