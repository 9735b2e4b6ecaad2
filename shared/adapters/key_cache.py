"""API keys a process found in its store, remembered briefly: the key stores of both families.

Every request to the intake looks its key up, so a key found is remembered for
`KEY_CACHE_S` by the process. Revoking a key, or adding one, through a store of this
process forgets it at once for every store on the same records (entries are keyed by
where the records live); another process (another intake instance, or `python -m
services.intake.auth.keys revoke` beside a live intake) sees the revocation within
KEY_CACHE_S. Expiry is judged at each use, from the remembered record. Unknown keys are
not remembered here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable

from shared.domain.api_keys import ApiKey

#: How long a process trusts a key it read: the longest a revocation elsewhere takes to
#: reach it.
KEY_CACHE_S = 5.0
#: Remembered keys per process; past this the memory is cleared, not grown.
KEY_CACHE_SIZE = 10_000


class FoundKeys:
    """Keys found, by (where the records live, key id), each until its own deadline."""

    def __init__(
        self, size: int = KEY_CACHE_SIZE, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._size = size
        self._clock = clock
        self._entries: dict[tuple[Hashable, str], tuple[float, ApiKey]] = {}
        self._lock = threading.Lock()

    def get(self, where: Hashable, key_id: str) -> ApiKey | None:
        """The key remembered, unless its time is over."""
        entry = self._entries.get((where, key_id))
        if entry is not None and entry[0] > self._clock():
            return entry[1]
        return None

    def now(self) -> float:
        """The time to pass as `since`, taken before reading a key."""
        return self._clock()

    def remember(self, where: Hashable, key: ApiKey, for_s: float, since: float) -> None:
        """Remember `key`, read at `since` (`now()`), for `for_s` seconds (0: not at all)."""
        if for_s <= 0:
            return
        with self._lock:
            if len(self._entries) >= self._size:
                self._entries.clear()
            self._entries[(where, key.key_id)] = (since + for_s, key)

    def forget(self, where: Hashable, key_id: str) -> None:
        with self._lock:
            self._entries.pop((where, key_id), None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


#: The process's memory, shared by every key store in it.
FOUND_KEYS = FoundKeys()
