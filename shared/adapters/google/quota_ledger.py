"""QuotaLedger on Firestore: one document per provider model, its state as a JSON string.

A change reads the document and writes it back conditioned on the version it read (no
read-write transaction, as the job store writes); a change that lost a race runs again on
what the winner wrote. The state is a string field because the pool keeps its grants as
small arrays of arrays, which Firestore's arrays cannot hold. One document per model,
rewritten in place (the pool drops what left the window), so the collection never grows;
its writes are one per slice an instance takes, about one per instance every two seconds
while it grades at its limit.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any, TypeVar

from google.api_core import exceptions as gexc
from google.cloud import firestore

from shared.domain.errors import DependencyUnavailable

T = TypeVar("T")

#: Rounds one change may lose to racing ones before it gives up (each round, one wins).
MAX_ATTEMPTS = 20


class FirestoreQuotaLedger:
    """QuotaLedger in a Firestore collection."""

    def __init__(self, client: firestore.Client, collection: str, deadline_s: float = 10.0) -> None:
        self._client = client
        self._ledger = client.collection(collection)
        self._deadline_s = deadline_s

    def _ref(self, key: str) -> Any:
        # A digest keeps the document name free of the model's slashes and colons.
        return self._ledger.document(hashlib.sha256(key.encode()).hexdigest()[:32])

    def change(
        self, key: str, change: Callable[[dict[str, Any] | None], tuple[dict[str, Any], T]]
    ) -> T:
        ref = self._ref(key)
        try:
            for _ in range(MAX_ATTEMPTS):
                snapshot: Any = ref.get(timeout=self._deadline_s)
                stored = snapshot.to_dict() if snapshot.exists else None
                state, answer = change(json.loads(stored["state"]) if stored else None)
                document = {"key": key, "state": json.dumps(state, separators=(",", ":"))}
                try:
                    if snapshot.exists:
                        option = self._client.write_option(last_update_time=snapshot.update_time)
                        ref.update(document, option=option, timeout=self._deadline_s)
                    else:
                        ref.create(document, timeout=self._deadline_s)
                    return answer
                except (gexc.FailedPrecondition, gexc.AlreadyExists):
                    continue  # another instance wrote first: change what it wrote
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore quota ledger failed: {exc}") from exc
        raise DependencyUnavailable(
            f"the quota ledger of {key} changed {MAX_ATTEMPTS} times during one change"
        )

    def read(self, key: str) -> dict[str, Any] | None:
        try:
            snapshot: Any = self._ref(key).get(timeout=self._deadline_s)
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore quota ledger failed: {exc}") from exc
        if not snapshot.exists:
            return None
        loaded: dict[str, Any] = json.loads(snapshot.to_dict()["state"])
        return loaded
