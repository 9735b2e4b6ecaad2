"""Client ids and the per-user scopes inside them.

A web frontend's signed-in user works in a scope of its client, `<client>:user:<uid>`:
its jobs are its own, while the client's ceilings and rate limit stay the client's. So
`:user:` is reserved: no client id may contain it, or a key or a claim could name another
client's user.
"""

from __future__ import annotations

USER_SCOPE_MARK = ":user:"


def check_client_id(client_id: str) -> str:
    """Return `client_id` when it may name a client; raise ValueError when it may not."""
    if not client_id.strip():
        raise ValueError("a client id must not be blank")
    if USER_SCOPE_MARK in client_id:
        raise ValueError(f"a client id must not contain {USER_SCOPE_MARK!r} (user scopes use it)")
    return client_id


def user_scope(client_id: str, uid: str) -> str:
    """The scope of one signed-in user of `client_id`."""
    return f"{check_client_id(client_id)}{USER_SCOPE_MARK}{uid}"


def owning_client(scope: str) -> str:
    """The client a scope belongs to: itself, or the client of a user scope."""
    return scope.split(USER_SCOPE_MARK, 1)[0]
