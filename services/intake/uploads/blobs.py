"""PUT /v1/blobs/<name>: the embedded blob store's signed-URL endpoint.

Only registered on the embedded backend; on Google Cloud the browser PUTs to Cloud
Storage itself. The signature is the credential: no API key is asked for.
"""

from __future__ import annotations

from typing import IO, Protocol, runtime_checkable

from flask import Blueprint, Response, current_app, request

from shared.domain.uploads import UploadTooLarge


@runtime_checkable
class SignedPutReceiver(Protocol):
    """Checks a PUT against its signed URL and stores its bytes."""

    def receive(
        self,
        name: str,
        query: dict[str, str],
        content_type: str | None,
        content_length: int | None,
        body: IO[bytes],
    ) -> None: ...


bp = Blueprint("blobs", __name__, url_prefix="/v1/blobs")


@bp.put("/<path:name>")
def put_blob(name: str) -> Response:
    receiver: SignedPutReceiver = current_app.extensions["gradeq.blob_receiver"]
    limit: int = current_app.extensions["gradeq.uploads"].limits.max_file_bytes
    if request.content_length is not None and request.content_length > limit:
        raise UploadTooLarge(f"the limit per file is {limit} bytes", limit=limit)
    request.max_content_length = limit
    receiver.receive(
        name,
        request.args.to_dict(),
        request.headers.get("Content-Type"),
        request.content_length,
        request.stream,
    )
    return Response(status=200)
