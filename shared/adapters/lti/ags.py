"""Assignment and Grade Services 2.0, tool side: find or create a line item, post a score.

The line item of a Gradeq assignment is found by `resourceId` (the assignment id) and
created with it when absent; a score goes to `<line item URL>/scores` (the path gets
`/scores`, the query string stays), as application/vnd.ims.lis.v1.score+json.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests

from shared.adapters.lti.errors import LtiRefused, call
from shared.adapters.lti.tokens import DEFAULT_TIMEOUT_S, LtiTokens
from shared.domain.lti import SCOPE_LINEITEM, SCOPE_SCORE, LtiRegistration

LINEITEM_TYPE = "application/vnd.ims.lis.v2.lineitem+json"
LINEITEMS_TYPE = "application/vnd.ims.lis.v2.lineitemcontainer+json"
SCORE_TYPE = "application/vnd.ims.lis.v1.score+json"
AGS_SCOPES = frozenset({SCOPE_LINEITEM, SCOPE_SCORE})
#: What Gradeq tags the line items it creates with.
TAG = "gradeq"


@dataclass(frozen=True)
class LineItem:
    url: str
    label: str
    score_maximum: float
    resource_id: str | None = None


def scores_url(line_item_url: str) -> str:
    """The score service of a line item: `/scores` after its path, before its query."""
    parts = urlsplit(line_item_url)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/scores"))


def _line_item(body: dict[str, Any]) -> LineItem:
    return LineItem(
        str(body["id"]),
        str(body.get("label", "")),
        float(body["scoreMaximum"]),
        body.get("resourceId"),
    )


class AgsClient:
    """Line items and scores on one platform, with tokens from `LtiTokens`."""

    def __init__(
        self,
        tokens: LtiTokens,
        session: requests.Session | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self._tokens = tokens
        self._session = session or requests.Session()
        self._timeout_s = timeout_s

    def _send(
        self,
        registration: LtiRegistration,
        what: str,
        method: str,
        url: str,
        headers: dict[str, str],
        **kwargs: Any,
    ) -> requests.Response:
        """Send with a bearer token; a 401 drops the token and tries once with a new one."""
        for attempt in (1, 2):
            token = self._tokens.token(registration, AGS_SCOPES)
            try:
                send = partial(
                    self._session.request,
                    method,
                    url,
                    headers={**headers, "Authorization": f"Bearer {token}"},
                    timeout=self._timeout_s,
                    **kwargs,
                )
                return call(what, send)
            except LtiRefused as exc:
                if exc.status != 401 or attempt == 2:
                    raise
                self._tokens.forget(registration, AGS_SCOPES)
        raise AssertionError("unreachable")

    def _pages(
        self, registration: LtiRegistration, url: str, params: dict[str, str]
    ) -> Iterator[Any]:
        following: str | None = url
        query: dict[str, str] | None = params
        while following:
            answer = self._send(
                registration,
                "line item listing",
                "GET",
                following,
                {"Accept": LINEITEMS_TYPE},
                params=query,
            )
            yield from answer.json()
            following = answer.links.get("next", {}).get("url")
            query = None  # the next link carries its own query

    def find(
        self, registration: LtiRegistration, lineitems_url: str, resource_id: str
    ) -> LineItem | None:
        """The line item whose resourceId is `resource_id`, if the context has one."""
        for body in self._pages(registration, lineitems_url, {"resource_id": resource_id}):
            if isinstance(body, dict) and body.get("resourceId") == resource_id:
                return _line_item(body)
        return None

    def create(
        self,
        registration: LtiRegistration,
        lineitems_url: str,
        label: str,
        score_maximum: float,
        resource_id: str,
    ) -> LineItem:
        body = {
            "label": label,
            "scoreMaximum": score_maximum,
            "resourceId": resource_id,
            "tag": TAG,
        }
        answer = self._send(
            registration,
            "line item creation",
            "POST",
            lineitems_url,
            {"Content-Type": LINEITEM_TYPE, "Accept": LINEITEM_TYPE},
            json=body,
        )
        created = answer.json()
        if not isinstance(created, dict) or "id" not in created:
            raise LtiRefused("the platform answered a line item without an id", answer.status_code)
        return _line_item({**body, **created})

    def find_or_create(
        self,
        registration: LtiRegistration,
        lineitems_url: str,
        label: str,
        score_maximum: float,
        resource_id: str,
    ) -> LineItem:
        found = self.find(registration, lineitems_url, resource_id)
        if found is not None:
            return found
        return self.create(registration, lineitems_url, label, score_maximum, resource_id)

    def post_score(
        self, registration: LtiRegistration, line_item_url: str, score: dict[str, Any]
    ) -> None:
        self._send(
            registration,
            "score",
            "POST",
            scores_url(line_item_url),
            {"Content-Type": SCORE_TYPE},
            json=score,
        )
