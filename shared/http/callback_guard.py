"""Keep webhooks away from internal addresses (SSRF), at submit time and again at send time.

A callback URL is refused when its host is, or resolves to, a loopback, private,
link-local (the metadata server 169.254.169.254 among them), site-local, multicast,
reserved or otherwise non-public address, including IPv6 forms that carry an IPv4
address inside (IPv4-mapped and -compatible, 6to4, NAT64, Teredo); when it names a port
other than 443 (80 for http) and the ports the deployment allows; and when it carries
user information (`user:pass@`). The intake checks when a job is submitted; the notifier
checks again when it sends and then connects only to the addresses it vetted, so a name
that resolves differently the second time (DNS rebinding) cannot reach inside.

Every refusal tells the client the same thing, so the answers cannot map which internal
names exist or what they resolve to; the reason is logged (never the URL, which may carry
a token).

The names are the caller's choice, so what resolving them may cost is bounded: the intake
resolves through `CachedResolver` (a deadline per lookup, answers and failures kept for a
short TTL in a cache of bounded size), and one request may name at most
`MAX_HOSTS_PER_REQUEST` distinct hosts, counted before anything is resolved. The notifier
resolves afresh when it connects, and connects only to what it just vetted.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as LookupTimeout
from typing import Any, ClassVar, NoReturn
from urllib.parse import urlsplit

import requests
from cachetools import TTLCache
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import NewConnectionError
from urllib3.util import connection

from shared.domain.errors import GradeqError

#: host, port -> the IP addresses the name resolves to.
Resolver = Callable[[str, int], list[str]]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

log = logging.getLogger(__name__)

#: The one thing every refusal tells the client.
PUBLIC_DETAIL = (
    "the callback URL must be an https URL, without user information, on an allowed port "
    "of a host that resolves only to public addresses"
)
#: The port each scheme may use unless the deployment allows more.
DEFAULT_PORTS = {"https": 443, "http": 80}

#: Distinct callback hosts one request may make the intake resolve.
MAX_HOSTS_PER_REQUEST = 5
#: The intake's resolver: the wait for one lookup, how long an answer (or a failure) is
#: kept, how many are kept, and the threads lookups run on.
LOOKUP_TIMEOUT_S = 2.0
LOOKUP_CACHE_TTL_S = 60.0
LOOKUP_CACHE_SIZE = 4096
LOOKUP_THREADS = 16

_SITE_LOCAL = ipaddress.ip_network("fec0::/10")
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_TEREDO = ipaddress.ip_network("2001::/32")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")


class CallbackRefused(GradeqError):
    """The callback URL points where Gradeq never sends.

    The detail says why, for the logs and the notifier's records; clients read only
    `public_detail`.
    """

    slug = "callback-url-refused"
    title = "The callback URL is not allowed"
    status = 400
    public_detail: ClassVar[str] = PUBLIC_DETAIL


class TooManyCallbackHosts(GradeqError):
    """One request names more distinct callback hosts than the intake resolves for it."""

    slug = "too-many-callback-hosts"
    title = "The request names too many callback hosts"
    status = 400


def _refuse(reason: str) -> NoReturn:
    log.warning("callback URL refused: %s", reason)
    raise CallbackRefused(reason)


def system_resolver(host: str, port: int) -> list[str]:
    """Resolve with the operating system, every address family."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class CachedResolver:
    """A resolver with a deadline per lookup and a bounded TTL cache of its answers.

    Failures are kept as answers are, so a name that does not resolve (or not in time)
    costs one lookup per TTL however often it is named. A lookup past its deadline is a
    failure; its thread finishes in the background, and the pool bounds how many do.
    """

    def __init__(
        self,
        resolver: Resolver = system_resolver,
        *,
        timeout_s: float = LOOKUP_TIMEOUT_S,
        ttl_s: float = LOOKUP_CACHE_TTL_S,
        size: int = LOOKUP_CACHE_SIZE,
        threads: int = LOOKUP_THREADS,
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        self._resolve = resolver
        self._timeout_s = timeout_s
        self._answers: TTLCache[str, tuple[str, ...] | str] = TTLCache(
            maxsize=size, ttl=ttl_s, timer=timer
        )
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="dns")

    def __call__(self, host: str, port: int) -> list[str]:
        """The addresses of `host`; OSError when it did not resolve (now or when cached)."""
        key = host.lower()  # a name's addresses do not depend on the port asked for
        with self._lock:
            answer = self._answers.get(key)
        if answer is None:
            answer = self._lookup(host, port)
            with self._lock:
                self._answers[key] = answer
        if isinstance(answer, str):
            raise OSError(answer)
        return list(answer)

    def _lookup(self, host: str, port: int) -> tuple[str, ...] | str:
        """The answer, or why there is none (a string)."""
        future = self._pool.submit(self._resolve, host, port)
        try:
            return tuple(future.result(timeout=self._timeout_s))
        except LookupTimeout:
            future.cancel()
            return f"no answer within {self._timeout_s:g} s"
        except (OSError, UnicodeError, ValueError) as exc:
            return f"{type(exc).__name__}: {exc}"


def _host_of(url: str) -> str:
    """The URL's host as the resolver is asked for it; an unparsable URL stands for itself
    (`check` refuses it)."""
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return url


def _refusal(address: IPAddress, allow_loopback: bool) -> str | None:
    """Why `address` is refused, or None when it is public."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        elif address.sixtofour is not None:
            # 6to4 reaches the IPv4 address inside: refused when that one would be.
            inner = _refusal(address.sixtofour, allow_loopback=False)
            return None if inner is None else f"6to4 form of a {inner}"
        elif address in _SITE_LOCAL:
            return "site-local"
        elif any(address in net for net in _NAT64):
            return "NAT64"  # a gateway's translation of an IPv4 address, maybe internal
        elif address in _TEREDO:
            return "Teredo"
        elif address in _IPV4_COMPATIBLE and int(address) > 1:
            return "IPv4-compatible"
    if address.is_loopback:
        return None if allow_loopback else "loopback"
    if address.is_link_local:
        return "link-local (metadata)"
    if address.is_private:
        return "private"
    if address.is_multicast or address.is_reserved or address.is_unspecified:
        return "reserved"
    if not address.is_global:
        return "non-public"
    return None


class CallbackGuard:
    """Vet callback URLs and the addresses their hosts resolve to."""

    def __init__(
        self,
        resolver: Resolver = system_resolver,
        allow_loopback: bool = False,
        allowed_ports: Iterable[int] = (),
        max_hosts_per_request: int = MAX_HOSTS_PER_REQUEST,
    ) -> None:
        """`allowed_ports`: ports a callback may name besides its scheme's default."""
        self._resolve = resolver
        self.allow_loopback = allow_loopback
        self.allowed_ports = frozenset(allowed_ports)
        self.max_hosts_per_request = max_hosts_per_request

    def check_hosts(self, urls: Iterable[str]) -> None:
        """Refuse a request whose callback URLs name too many distinct hosts (nothing is
        resolved); each URL is still vetted by `check`."""
        hosts = {_host_of(url) for url in urls}
        if len(hosts) > self.max_hosts_per_request:
            raise TooManyCallbackHosts(
                f"the request names {len(hosts)} callback hosts, at most "
                f"{self.max_hosts_per_request} are allowed",
                limit=self.max_hosts_per_request,
            )

    def vetted_addresses(self, host: str, port: int) -> list[str]:
        """Every address `host` resolves to, or CallbackRefused if any is not public."""
        try:
            addresses = [ipaddress.ip_address(host.strip("[]"))]
        except ValueError:
            try:
                resolved = self._resolve(host, port)
                addresses = [ipaddress.ip_address(a.split("%")[0]) for a in resolved]
            except (OSError, UnicodeError, ValueError) as exc:
                _refuse(f"the callback host {host} does not resolve ({exc})")
        if not addresses:
            _refuse(f"the callback host {host} does not resolve")
        for address in addresses:
            reason = _refusal(address, self.allow_loopback)
            if reason is not None:
                _refuse(f"the callback host {host} resolves to a {reason} address ({address})")
        return [str(a) for a in addresses]

    def check(self, url: str) -> list[str]:
        """Vet a callback URL; return the addresses its host resolves to now."""
        parts = urlsplit(url)
        if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
            _refuse("the callback URL is not an absolute http(s) URL")
        if "@" in parts.netloc:
            _refuse(f"the callback URL to {parts.hostname} carries user information")
        try:
            port = parts.port or DEFAULT_PORTS[parts.scheme]
        except ValueError:
            _refuse(f"the callback URL to {parts.hostname} has an invalid port")
        if port == DEFAULT_PORTS[parts.scheme] or port in self.allowed_ports:
            return self.vetted_addresses(parts.hostname, port)
        if self.allow_loopback:
            # Local receivers listen on any port: allowed when every address is loopback.
            addresses = self.vetted_addresses(parts.hostname, port)
            if all(ipaddress.ip_address(a).is_loopback for a in addresses):
                return addresses
        _refuse(f"the callback URL to {parts.hostname} names port {port}")


class RefusedConnection(NewConnectionError):
    """The guard refused the address a connection was about to be made to."""


class _Pinned(HTTPConnection):
    """Connect only to addresses the guard vetted when the connection is made."""

    guard: CallbackGuard

    def _new_conn(self) -> socket.socket:
        try:
            addresses = self.guard.vetted_addresses(self._dns_host, self.port)
        except CallbackRefused as exc:
            raise RefusedConnection(self, exc.detail) from exc
        error: OSError | None = None
        for address in addresses:
            try:
                return connection.create_connection(
                    (address, self.port),
                    self.timeout,
                    source_address=self.source_address,
                    socket_options=self.socket_options,
                )
            except OSError as exc:
                error = exc
        raise NewConnectionError(self, f"Failed to establish a new connection: {error}")


class GuardedAdapter(HTTPAdapter):
    """A requests adapter whose connections go only where the guard allows."""

    def __init__(self, guard: CallbackGuard) -> None:
        self._guard = guard
        super().__init__(max_retries=0)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        attrs = {"guard": self._guard}
        http_conn = type("GuardedHTTPConnection", (_Pinned, HTTPConnection), attrs)
        https_conn = type("GuardedHTTPSConnection", (_Pinned, HTTPSConnection), attrs)
        http_pool = type("GuardedHTTPPool", (HTTPConnectionPool,), {"ConnectionCls": http_conn})
        https_pool = type("GuardedHTTPSPool", (HTTPSConnectionPool,), {"ConnectionCls": https_conn})
        self.poolmanager.pool_classes_by_scheme = {"http": http_pool, "https": https_pool}


def guarded_session(guard: CallbackGuard) -> requests.Session:
    """A session that connects only to vetted addresses and ignores proxy variables."""
    session = requests.Session()
    session.trust_env = False  # a proxy would resolve the name itself, out of the guard's sight
    adapter = GuardedAdapter(guard)
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    return session


def refused_by_guard(error: BaseException) -> CallbackRefused | None:
    """The guard's refusal behind a requests error, if that is what stopped it."""
    seen: BaseException | None = error
    for _ in range(10):
        if seen is None:
            return None
        if isinstance(seen, CallbackRefused):
            return seen
        reason = getattr(seen, "reason", None)
        nested = seen.args[0] if seen.args and isinstance(seen.args[0], BaseException) else None
        seen = reason if isinstance(reason, BaseException) else nested or seen.__cause__
    return None
