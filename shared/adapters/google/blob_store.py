"""Uploaded files in a Cloud Storage bucket, through the official google-cloud-storage client.

Signed URLs are V4, for one PUT bound to the content type and, through
`x-goog-content-length-range`, to the exact size: Cloud Storage refuses any other PUT.
The URL only creates the object (`x-goog-if-generation-match: 0`), so the object
checked at submit cannot be replaced before it is graded. On Cloud Run there is no key
file: when the credentials cannot sign, the URL is signed through IAM signBlob with the
service account's email and access token (the account needs
roles/iam.serviceAccountTokenCreator on itself).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from functools import cached_property
from typing import Any

import google.auth.transport.requests
import google.cloud.storage as storage  # the package is untyped: no py.typed
from google.api_core import exceptions as api_exceptions
from google.auth.credentials import Credentials, Signing

from shared.domain.authorization import Owner
from shared.domain.errors import DependencyUnavailable
from shared.ports import BlobInfo, SignedUpload

#: The object's custom metadata naming its owner (sent as x-goog-meta-<key> on the PUT).
SCHOOL_KEY = "gradeq-school"
AUTHOR_KEY = "gradeq-author"


class GcsBlobStore:
    """`BlobStore` on one bucket."""

    def __init__(
        self,
        client: storage.Client | Callable[[], storage.Client],
        bucket: str,
        *,
        signer_email: str = "",
        signing_credentials: Credentials | None = None,
        api_access_endpoint: str | None = None,
    ) -> None:
        # A factory defers the client (and its credentials lookup) to the first call.
        self._client_source = client
        self._bucket_name = bucket
        self._signer_email = signer_email
        # Credentials holding a private key (tests); None: the client's own.
        self._signing = signing_credentials
        # The emulator's address in tests; None: https://storage.googleapis.com.
        self._endpoint = api_access_endpoint

    @cached_property
    def _client(self) -> storage.Client:
        source = self._client_source
        return source if isinstance(source, storage.Client) else source()

    @cached_property
    def _bucket(self) -> storage.Bucket:
        return self._client.bucket(self._bucket_name)

    def signed_put(
        self,
        name: str,
        content_type: str,
        size: int,
        expires_at: datetime,
        owner: Owner | None = None,
    ) -> SignedUpload:
        headers = {
            "x-goog-content-length-range": f"{size},{size}",
            # Created once: a second PUT cannot swap the object checked at submit.
            "x-goog-if-generation-match": "0",
        }
        if owner is not None:
            # Signed headers: the PUT must carry them, so the object names its owner.
            headers[f"x-goog-meta-{SCHOOL_KEY}"] = owner.school
            headers[f"x-goog-meta-{AUTHOR_KEY}"] = owner.author
        # The client keeps its credentials private; the signer needs them.
        credentials = self._signing or self._client._credentials
        signer: dict[str, Any]
        if isinstance(credentials, Signing) and not self._signer_email:
            signer = {"credentials": credentials}
        else:  # no private key here (Cloud Run): sign through IAM signBlob
            if not credentials.valid:
                credentials.refresh(google.auth.transport.requests.Request())
            email = self._signer_email or getattr(credentials, "service_account_email", "")
            signer = {"service_account_email": email, "access_token": credentials.token}
        extra = {"api_access_endpoint": self._endpoint} if self._endpoint else {}
        url = self._bucket.blob(name).generate_signed_url(
            version="v4",
            expiration=expires_at,
            method="PUT",
            content_type=content_type,
            headers=dict(headers),  # the library adds Host to the dict it is given
            **signer,
            **extra,
        )
        return SignedUpload(url, {"Content-Type": content_type, **headers}, expires_at)

    def stat(self, name: str) -> BlobInfo | None:
        try:
            blob = self._bucket.get_blob(name)
        except api_exceptions.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Cloud Storage: {type(exc).__name__}") from None
        if blob is None:
            return None
        metadata = blob.metadata or {}
        school, author = metadata.get(SCHOOL_KEY), metadata.get(AUTHOR_KEY)
        owner = Owner(school, author) if school and author else None
        return BlobInfo(int(blob.size or 0), blob.content_type or "", owner)

    def read(self, name: str, max_bytes: int) -> bytes:
        try:
            data: bytes = self._bucket.blob(name).download_as_bytes(start=0, end=max_bytes - 1)
        except api_exceptions.NotFound:
            raise KeyError(name) from None
        except api_exceptions.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Cloud Storage: {type(exc).__name__}") from None
        return data[:max_bytes]

    def uri(self, name: str) -> str:
        return f"gs://{self._bucket_name}/{name}"

    def delete(self, names: list[str]) -> None:
        if not names:
            return
        try:
            self._bucket.delete_blobs([self._bucket.blob(n) for n in names], on_error=_ignore)
        except api_exceptions.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Cloud Storage: {type(exc).__name__}") from None

    def delete_under(self, prefix: str) -> list[str]:
        try:
            blobs = list(self._client.list_blobs(self._bucket_name, prefix=prefix))
            if blobs:
                self._bucket.delete_blobs(blobs, on_error=_ignore)
        except api_exceptions.GoogleAPIError as exc:
            raise DependencyUnavailable(f"Cloud Storage: {type(exc).__name__}") from None
        return sorted(str(b.name) for b in blobs)


def _ignore(_blob: object) -> None:
    """An object already gone is what a delete wanted."""
