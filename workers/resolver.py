"""A worker's DNS: one resolver per process, its answers cached for every fetch of that process.

    resolver = CachingResolver.from_config(cfg)         # inside the worker's event loop
    aiohttp.TCPConnector(resolver=resolver, use_dns_cache=False)   # this cache replaces aiohttp's

Lookups go through, in order:

1. `network.resolve` (curl's --resolve): "name:port" or "name" -> a fixed address, used as given. Only the
   connection goes there: the URL, the scope, robots.txt, the Host header and the TLS name (SNI) keep the name.
2. Names under `.invalid` fail at once, without asking any server: RFC 6761 6.4 reserves the domain so that
   it never resolves, and says resolver APIs should answer that themselves.
3. The cache: an answer is kept for its record's TTL within [network.dns_min_ttl, network.dns_max_ttl].
   The system resolver (getaddrinfo in a thread, aiohttp's ThreadedResolver) does not give TTLs, so its
   answers are kept dns_min_ttl. Concurrent lookups of one name share a single query; a failure is not
   cached (the frontier retries the URL with a backoff). At most MAX_CACHED_NAMES answers are kept.
4. The system resolver, which honours /etc/hosts and the machine's resolv.conf.

With scope.block_private, private, loopback, link-local and reserved addresses are dropped from what the
system resolver answers (a name or a DNS rebinding never reaches a private address); a name left with none
fails with `PrivateAddress`. The addresses of network.resolve are the operator's own and are not judged.
A failed lookup raises an OSError, which aiohttp turns into ClientConnectorDNSError: the fetch's
"dns_error" (workers.fetcher).
"""

from __future__ import annotations

import asyncio
import functools
import socket
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult

from frontier.url.scope import is_private_host

if TYPE_CHECKING:
    from frontier.config import CrawlConfig

__all__ = ["CachingResolver", "MAX_CACHED_NAMES", "NEVER_RESOLVES", "PrivateAddress"]

NEVER_RESOLVES = ".invalid"  # RFC 6761 6.4
# Answers a worker keeps at most: a crawl of millions of hosts would otherwise hold every one it met (an answer
# is some 300 bytes); an expired answer is dropped when its name comes again, the oldest when this is reached.
MAX_CACHED_NAMES = 100_000
_NUMERIC = socket.AI_NUMERICHOST | socket.AI_NUMERICSERV


class PrivateAddress(OSError):
    """A host name that resolves only to private addresses, with scope.block_private on."""


class CachingResolver(AbstractResolver):
    """The worker's resolver (see the module docstring). Plain values: `overrides` maps "name" or
    "name:port" (lowercase IDNA, as network.resolve keeps them) to an IP address; `inner` is the resolver
    asked on a miss (None: aiohttp's ThreadedResolver); `clock` is monotonic seconds; `max_names` bounds the cache."""

    def __init__(self, *, overrides: Mapping[str, str] | None = None, min_ttl: float = 300.0,
                 max_ttl: float = 21600.0, block_private: bool = False, inner: AbstractResolver | None = None,
                 clock: Callable[[], float] = time.monotonic, max_names: int = MAX_CACHED_NAMES) -> None:
        self._overrides = dict(overrides or {})
        self._min_ttl = min_ttl
        self._max_ttl = max_ttl
        self._block_private = block_private
        self._inner = inner
        self._clock = clock
        self._cache: dict[tuple[str, int, int], tuple[float, list[ResolveResult]]] = {}
        self._pending: dict[tuple[str, int, int], asyncio.Future[list[ResolveResult]]] = {}
        self._max_names = max_names

    @classmethod
    def from_config(cls, cfg: CrawlConfig) -> CachingResolver:
        """network.* and scope.block_private. Through a proxy the proxy resolves the sites' names, so the private
        filter is off (only the URL text is judged, by the scope)."""
        net = cfg.network
        return cls(overrides=dict(net.resolve), min_ttl=net.dns_min_ttl, max_ttl=net.dns_max_ttl,
                   block_private=cfg.scope.block_private and cfg.workers.proxy is None)

    def ttl(self, record_ttl: float | None) -> float:
        """Seconds an answer is kept: its record's TTL within [min_ttl, max_ttl]; None (no TTL given): min_ttl."""
        if record_ttl is None:
            return self._min_ttl
        return min(max(record_ttl, self._min_ttl), self._max_ttl)

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        name = host.rstrip(".").lower()
        fixed = self._overrides.get(f"{name}:{port}") or self._overrides.get(name)
        if fixed is not None:
            return [_result(host, fixed, port)]
        if name.endswith(NEVER_RESOLVES) or name == NEVER_RESOLVES[1:]:
            raise socket.gaierror(socket.EAI_NONAME, f"{host}: a name under .invalid never resolves (RFC 6761)")
        key = (name, port, int(family))
        hit = self._cache.get(key)
        if hit is not None:
            if hit[0] > self._clock():
                return hit[1]
            del self._cache[key]
        pending = self._pending.get(key)
        if pending is None:
            pending = self._pending[key] = asyncio.ensure_future(self._lookup(host, port, family, key))
            pending.add_done_callback(functools.partial(self._settled, key))
        # a cancelled fetch must not cancel the query its neighbours wait for
        return await asyncio.shield(pending)

    def _settled(self, key: tuple[str, int, int], future: asyncio.Future[list[ResolveResult]]) -> None:
        self._pending.pop(key, None)
        if not future.cancelled():
            future.exception()  # retrieved here: every fetch that waited for it may have been cancelled

    async def _lookup(self, host: str, port: int, family: socket.AddressFamily,
                      key: tuple[str, int, int]) -> list[ResolveResult]:
        if self._inner is None:
            self._inner = aiohttp.ThreadedResolver()
        answers = await self._inner.resolve(host, port, family)
        if self._block_private:
            answers = [r for r in answers if not is_private_host(r["host"])]
            if not answers:
                raise PrivateAddress(f"{host} resolves only to private addresses")
        self._cache[key] = (self._clock() + self.ttl(None), answers)
        if len(self._cache) > self._max_names:  # the longest-held answer goes first (insertion order)
            del self._cache[next(iter(self._cache))]
        return answers

    async def close(self) -> None:
        for future in self._pending.values():
            future.cancel()
        self._pending.clear()
        self._cache.clear()
        if self._inner is not None:
            await self._inner.close()


def _result(host: str, address: str, port: int) -> ResolveResult:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    return ResolveResult(hostname=host, host=address, port=port, family=family, proto=0, flags=_NUMERIC)
