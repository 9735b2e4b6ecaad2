"""Reads shared by the Firestore stores of per-client records (API keys, webhook secrets)."""

from __future__ import annotations

from typing import Any

from google.api_core import exceptions as gexc
from google.cloud.firestore_v1.base_query import FieldFilter

from shared.adapters.google import metering
from shared.domain.errors import DependencyUnavailable


def documents_of_client(
    collection: Any, client_id: str | None, retry: Any, timeout: float, meter: metering.Meter
) -> list[dict[str, Any]]:
    """The documents' data in `collection`, of one client when `client_id` is given.

    Metered as Firestore bills a query: one read per document, one for an empty answer.
    """
    query: Any = collection
    if client_id is not None:
        query = query.where(filter=FieldFilter("client_id", "==", client_id))
    try:
        snapshots = list(query.stream(retry=retry, timeout=timeout))
    except gexc.GoogleAPIError as exc:
        raise DependencyUnavailable(f"Firestore query failed: {exc}") from exc
    meter.add(metering.FIRESTORE_READS, max(1, len(snapshots)))
    return [s.to_dict() or {} for s in snapshots]
