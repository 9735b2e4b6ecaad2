"""The stand-ins' HTTP client: a urllib3 pool per sender, connections kept alive.

The dispatcher and the bus send thousands of small requests to a few loopback targets;
`requests` adds more CPU per request than the request itself costs there, so they use the
connection pools underneath it directly. Like Cloud Tasks and Pub/Sub, they follow no
redirect, retry nothing within an attempt and take no proxy from the environment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import urllib3
from urllib3.exceptions import HTTPError, NewConnectionError, TimeoutError

#: Why a request got no response.
TIMED_OUT = "timeout"
NO_CONNECTION = "unreachable"


@dataclass(frozen=True)
class Reply:
    """A response (status, headers, body), or why there was none (`status` None).

    `headers` is case-insensitive, as HTTP header names are.
    """

    status: int | None
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    failure: str = ""
    detail: str = ""


def pool(size: int) -> urllib3.PoolManager:
    """Pools of up to `size` kept-alive connections per target, shared by the threads."""
    return urllib3.PoolManager(num_pools=16, maxsize=size, block=False, retries=False)


def send(
    http: urllib3.PoolManager,
    method: str,
    url: str,
    body: bytes,
    headers: dict[str, str],
    timeout_s: float,
) -> Reply:
    """One request with no retry and no redirect; the body is read (the connection reused)."""
    try:
        response = http.request(
            method,
            url,
            body=body,
            headers=headers,
            timeout=urllib3.Timeout(connect=timeout_s, read=timeout_s),
            retries=False,
            redirect=False,
        )
    except NewConnectionError as exc:  # a subclass of the connect timeout: test it first
        return Reply(None, failure=NO_CONNECTION, detail=f"{type(exc).__name__}: {exc}")
    except TimeoutError as exc:
        return Reply(None, failure=TIMED_OUT, detail=f"{type(exc).__name__}: {exc}")
    except HTTPError as exc:
        return Reply(None, failure=NO_CONNECTION, detail=f"{type(exc).__name__}: {exc}")
    return Reply(response.status, response.headers, response.data)
