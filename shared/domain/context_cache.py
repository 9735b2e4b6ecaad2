"""The record of an explicit provider context cache, shared by every worker instance.

One record per prompt prefix and model: whoever creates it first makes the cache, the
others use it. `name` is empty while its creator makes the cache (`expire_at` then ends
the creator's claim, so a claim whose creator died is taken over), and afterwards the
provider's cache name with the cache's own expiry.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class ContextCacheRecord:
    key: str
    assignment_id: str
    model: str
    name: str
    expire_at: datetime

    @property
    def creating(self) -> bool:
        return not self.name
