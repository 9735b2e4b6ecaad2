"""LtiStore on Firestore: registrations named by (issuer, client id); signing keys by kid."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from google.api_core import exceptions as gexc
from google.cloud import firestore
from google.cloud.firestore_v1.base_query import FieldFilter

from shared.adapters.google import metering
from shared.adapters.google.clients import DEFAULT_DEADLINE_S, bounded_retry
from shared.adapters.google.firestore_codec import with_plain_datetimes
from shared.domain.errors import DependencyUnavailable
from shared.domain.lti import (
    AssignmentLink,
    LtiRegistration,
    ToolKey,
    ToolKeyNotFound,
    link_id,
    registration_id,
)

_DATETIMES = ("created_at", "signs_from", "expires_at")


def _key(data: dict[str, Any]) -> ToolKey:
    return ToolKey.from_record(with_plain_datetimes(data, _DATETIMES))


class FirestoreLtiStore:
    """LTI registrations and signing keys in two Firestore collections."""

    def __init__(
        self,
        client: firestore.Client,
        registrations: str = "lti_registrations",
        keys: str = "lti_tool_keys",
        links: str = "lti_assignment_links",
        deadline_s: float = DEFAULT_DEADLINE_S,
    ) -> None:
        self._client = client
        self._registrations = client.collection(registrations)
        self._keys = client.collection(keys)
        self._links = client.collection(links)
        self._retry = bounded_retry(deadline_s)
        self._deadline_s = deadline_s
        self.meter = metering.Meter()

    def _stream(self, query: Any) -> list[dict[str, Any]]:
        try:
            snapshots = list(query.stream(retry=self._retry, timeout=self._deadline_s))
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore query failed: {exc}") from exc
        self.meter.add(metering.FIRESTORE_READS, max(1, len(snapshots)))
        return [s.to_dict() or {} for s in snapshots]

    def put_registration(self, registration: LtiRegistration) -> None:
        self.meter.add(metering.FIRESTORE_WRITES)
        try:
            self._registrations.document(registration.registration_id).set(
                registration.to_record(), retry=self._retry, timeout=self._deadline_s
            )
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore write failed: {exc}") from exc

    def registration(self, issuer: str, client_id: str) -> LtiRegistration | None:
        self.meter.add(metering.FIRESTORE_READS)
        try:
            snapshot = self._registrations.document(registration_id(issuer, client_id)).get(
                retry=self._retry, timeout=self._deadline_s
            )
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore read failed: {exc}") from exc
        if not snapshot.exists:
            return None
        return LtiRegistration.from_record(snapshot.to_dict() or {})

    def registrations(self, school: str | None = None) -> list[LtiRegistration]:
        query: Any = self._registrations
        if school is not None:
            query = query.where(filter=FieldFilter("school", "==", school))
        found = [LtiRegistration.from_record(data) for data in self._stream(query)]
        return sorted(found, key=lambda r: (r.issuer, r.client_id))

    def add_key(self, key: ToolKey) -> None:
        self.meter.add(metering.FIRESTORE_WRITES)
        try:
            self._keys.document(key.kid).create(
                key.to_record(), retry=self._retry, timeout=self._deadline_s
            )
        except gexc.AlreadyExists as exc:
            raise ValueError(f"LTI signing key {key.kid} already exists") from exc
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore create failed: {exc}") from exc

    def tool_keys(self) -> list[ToolKey]:
        found = [_key(data) for data in self._stream(self._keys)]
        return sorted(found, key=lambda k: (k.created_at, k.kid))

    def expire_key(self, kid: str, at: datetime) -> ToolKey:
        ref = self._keys.document(kid)

        @firestore.transactional
        def apply(transaction: firestore.Transaction) -> ToolKey:
            snapshot = ref.get(transaction=transaction, retry=self._retry, timeout=self._deadline_s)
            if not snapshot.exists:
                raise ToolKeyNotFound(f"no LTI signing key {kid}")
            expired = _key(snapshot.to_dict() or {}).expire(at)
            transaction.update(ref, {"expires_at": expired.expires_at})
            return expired

        try:
            result: ToolKey = apply(self._client.transaction())
        except ToolKeyNotFound:
            raise
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore update failed: {exc}") from exc
        self.meter.add(metering.FIRESTORE_WRITES)
        return result

    def put_link(self, link: AssignmentLink) -> None:
        ref = self._links.document(link_id(link.school, link.assignment_id))

        @firestore.transactional
        def apply(transaction: firestore.Transaction) -> None:
            snapshot = ref.get(transaction=transaction, retry=self._retry, timeout=self._deadline_s)
            stored = link
            if snapshot.exists and link.lineitem_url is None:
                known = AssignmentLink.from_record(snapshot.to_dict() or {})
                same = (known.issuer, known.client_id, known.context_id) == (
                    link.issuer,
                    link.client_id,
                    link.context_id,
                )
                if same and known.lineitem_url:
                    stored = link.with_line_item(known.lineitem_url)
            transaction.set(ref, stored.to_record())

        try:
            apply(self._client.transaction())
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore write failed: {exc}") from exc
        self.meter.add(metering.FIRESTORE_WRITES)

    def link(self, school: str, assignment_id: str) -> AssignmentLink | None:
        self.meter.add(metering.FIRESTORE_READS)
        try:
            snapshot = self._links.document(link_id(school, assignment_id)).get(
                retry=self._retry, timeout=self._deadline_s
            )
        except gexc.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Firestore read failed: {exc}") from exc
        return AssignmentLink.from_record(snapshot.to_dict() or {}) if snapshot.exists else None
