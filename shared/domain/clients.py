"""Client ids: a client, or one signed-in user's scope within a client.

A per-user scope reads `<client>:user:<uid>`; it belongs to its client, whose webhook
secret signs its webhooks and whose analytics readers see its records.
"""

from __future__ import annotations

USER_SCOPE = ":user:"


def account_of(client_id: str) -> str:
    """The client a client id belongs to: itself, or the client of a per-user scope."""
    return client_id.split(USER_SCOPE, 1)[0]
