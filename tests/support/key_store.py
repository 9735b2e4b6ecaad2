"""An API key store for tests that count its reads."""

from __future__ import annotations

from shared.domain.api_keys import ApiKey


class RecordingKeys:
    """A key store holding the given records, writing down every key id it is asked for."""

    def __init__(self, *stored: ApiKey) -> None:
        self._stored = {key.key_id: key for key in stored}
        self.reads: list[str] = []

    def get(self, key_id: str) -> ApiKey | None:
        self.reads.append(key_id)
        return self._stored.get(key_id)
