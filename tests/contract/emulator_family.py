"""The Google family on the Firestore emulator, with the embedded blob store beside it.

The intake's routes that the authorization matrix calls read and write Firestore only;
uploads sign a PUT URL, which the embedded blob store does without a Cloud Storage
emulator.
"""

from __future__ import annotations

from typing import Any

from shared.bootstrap.embedded import EmbeddedFamily
from shared.bootstrap.google import GoogleFamily
from shared.config.settings import Settings
from shared.ports import BlobStore, Clock


class EmulatorFamily(GoogleFamily):
    """GoogleFamily on a given Firestore client (the emulator's)."""

    def __init__(self, settings: Settings, firestore_client: Any, local: EmbeddedFamily) -> None:
        super().__init__(settings)
        self.__dict__["_firestore"] = firestore_client  # the cached client property's value
        self._local = local

    # Deliberately the embedded store, not GoogleFamily's GcsBlobStore: no storage emulator.
    def blob_store(self, clock: Clock | None = None) -> BlobStore:  # type: ignore[override]
        return self._local.blob_store(clock)
