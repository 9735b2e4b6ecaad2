"""On Cloud Run there is no key file: upload URLs are signed through IAM signBlob with the
service account's email and access token (the IAM call is answered locally)."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlsplit

import google.cloud.storage as storage
import requests_mock
from google.oauth2.credentials import Credentials

from shared.adapters.google.blob_store import GcsBlobStore

SIGNER = "gradeq-intake@demo-project.iam.gserviceaccount.com"
SIGN_BLOB = f"https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/{SIGNER}:signBlob"


def test_without_a_private_key_urls_are_signed_through_iam_sign_blob() -> None:
    # Token-only credentials, as Cloud Run's metadata server gives.
    credentials = Credentials(token="access-token-1")  # type: ignore[no-untyped-call]
    client = storage.Client(project="demo-project", credentials=credentials)
    store = GcsBlobStore(client, "demo-uploads", signer_email=SIGNER)
    expires = datetime.now(UTC) + timedelta(minutes=10)
    with requests_mock.Mocker() as iam:
        iam.post(SIGN_BLOB, json={"keyId": "k1", "signedBlob": base64.b64encode(b"sig").decode()})
        signed = store.signed_put("uploads/o/up_1", "image/png", 1234, expires)
    [call] = iam.request_history
    assert call.headers["Authorization"] == "Bearer access-token-1"
    query = parse_qs(urlsplit(signed.url).query)
    assert signed.url.startswith("https://storage.googleapis.com/demo-uploads/uploads/o/up_1?")
    assert query["X-Goog-Credential"][0].startswith(SIGNER + "/")
    assert query["X-Goog-Signature"] == [b"sig".hex()]
    assert set(query["X-Goog-SignedHeaders"][0].split(";")) == {
        "content-type",
        "host",
        "x-goog-content-length-range",
        "x-goog-if-generation-match",
    }
    assert signed.headers == {
        "Content-Type": "image/png",
        "x-goog-content-length-range": "1234,1234",
        "x-goog-if-generation-match": "0",
    }
