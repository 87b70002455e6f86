"""The operator's standing orders (frontier.state.controls) applied to a running frontier.

    steering = Steering(store)              # read the orders in force
    steering.put(field, value)              # give one (durable), steering.delete(field) withdraws it
    steering.paused                         # leases stop while True; the crawl is not done
    steering.scope(scope)                   # the crawl's scope with the exclusions on top (links and seeds)
    steering.hold(leases, now)              # the leases the orders hold back, each with its ack

What the Frontier does with them (frontier.crawl.scheduler): while paused it leases nothing and is not done (the
fetches in flight finish); a leased URL an exclusion matches is dropped unfetched (reason operator_excluded), so
the queue is purged as it comes up, with no request; a blocked host's leases go back to its queue with no attempt
counted and the host waits (the state's politeness clock, re-checked every BLOCK_RECHECK seconds so that an
unblock acts at once); a retired host's leases are parked for this run (the crawl ends without them; a later run
fetches them unless the host is still retired); a host's delay order makes it wait that long after each result.
A released trap pattern is handed to the trap detector (`TrapDetector.release`).

The orders are read at start and after each change this process makes; with `refresh` (a crawl shared through
Redis) they are read again every `refresh` seconds, so what another instance is told reaches this one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from frontier.config import CrawlConfig
from frontier.state.base import Ack, CrawlState, Lease, Outcome
from frontier.state.controls import ControlStore, LmdbControls, Orders
from frontier.url.canonical import url_host
from frontier.url.scope import Scope

if TYPE_CHECKING:
    from frontier.crawl.traps import TrapDetector

EXCLUDED = "operator_excluded"  # the reason of a link, seed or queued URL refused by an exclusion
BLOCKED = "operator_blocked"  # a lease of a blocked host, put back
RETIRED = "operator_retired"  # a lease of a retired host, parked for the run
BLOCK_RECHECK = 1.0  # seconds a blocked host waits before its orders are looked at again
REDIS_REFRESH = 0.5  # seconds between reads of a shared crawl's orders


class SteeredScope:
    """A crawl's scope with the operator's exclusions on top (what LinkBatch asks: `check`)."""

    __slots__ = ("_scope", "_steering")

    def __init__(self, scope: Scope, steering: Steering) -> None:
        self._scope = scope
        self._steering = steering

    def check(self, canonical_url: str) -> str | None:
        return self._scope.check(canonical_url) or (EXCLUDED if self._steering.excludes(canonical_url) else None)

    def allows(self, canonical_url: str) -> bool:
        return self.check(canonical_url) is None


class Steering:
    """The orders of `store` as the Frontier applies them (see the module docstring)."""

    def __init__(self, store: ControlStore, *, refresh: float = 0.0, traps: TrapDetector | None = None) -> None:
        """`refresh`: seconds between reads of the store (0: only at start and after this process's own changes).
        `traps`: the trap detector that released patterns go to."""
        self.store = store
        self._refresh = refresh
        self._traps = traps
        self._next_read = 0.0
        self._released: set[tuple[str, str]] = set()
        self.orders = Orders()
        self._patterns: tuple[re.Pattern[str], ...] = ()
        self.reload()

    def reload(self) -> None:
        """Read the orders in force."""
        orders = Orders.parse(self.store.orders())
        if orders.exclude_patterns != self.orders.exclude_patterns:
            self._patterns = tuple(re.compile(p) for p in orders.exclude_patterns)
        self.orders = orders
        if self._traps is not None:
            for host, pattern in set(orders.released) - self._released:
                self._traps.release(host, pattern)
                self._released.add((host, pattern))

    def poll(self, now: float) -> None:
        """Read the orders again if `refresh` seconds passed since the last read (a shared crawl)."""
        if self._refresh and now >= self._next_read:
            self._next_read = now + self._refresh
            self.reload()

    def release(self, host: str, pattern: str) -> bool:
        """Hand a released pattern to the trap detector now; True if it was suspected (`TrapDetector.release`)."""
        if self._traps is None:
            return False
        self._released.add((host, pattern))
        return self._traps.release(host, pattern)

    def put(self, name: str, value: str) -> None:
        self.store.put(name, value)
        self.reload()

    def delete(self, name: str) -> bool:
        gone = self.store.delete(name)
        self.reload()
        return gone

    @property
    def paused(self) -> bool:
        return self.orders.paused

    @property
    def excluding(self) -> bool:
        return bool(self._patterns or self.orders.exclude_hosts)

    def excludes(self, url: str) -> bool:
        """Does an exclusion match this canonical URL?"""
        if self.orders.exclude_hosts and url_host(url) in self.orders.exclude_hosts:
            return True
        return any(p.search(url) for p in self._patterns)

    def scope(self, scope: Scope) -> Scope | SteeredScope:
        """`scope`, with the exclusions on top when there are any."""
        return SteeredScope(scope, self) if self.excluding else scope

    def hold(self, leases: Sequence[Lease], now: float) -> list[tuple[Lease, Ack, str]]:
        """The page leases the orders hold back, each with the ack that does it and its reason: an excluded URL
        dropped, a retired host's URL parked, a blocked host's URL put back (no attempt) with the host paused."""
        orders = self.orders
        if not (self.excluding or orders.blocks or orders.retired):
            return []
        held = []
        for lease in leases:
            if lease.robots:
                continue
            if self.excludes(lease.url):
                held.append((lease, Ack(key=lease.key, outcome=Outcome.DROP), EXCLUDED))
            elif lease.host in orders.retired:
                held.append((lease, Ack(key=lease.key, outcome=Outcome.PARK), RETIRED))
            elif orders.blocks.get(lease.host, 0.0) > now:
                until = min(orders.blocks[lease.host], now + BLOCK_RECHECK)
                held.append((lease, Ack(key=lease.key, outcome=Outcome.WAIT, pause_until=until), BLOCKED))
        return held

    def paced(self, ack: Ack, host: str, now: float) -> Ack:
        """A page result's ack with the host's delay order (if any) as its pause."""
        delay = self.orders.delays.get(host)
        if delay is None or not math.isfinite(delay):
            return ack
        return replace(ack, pause_until=max(ack.pause_until, now + delay))


def steering_for(state: CrawlState, cfg: CrawlConfig, traps: TrapDetector | None = None) -> Steering:
    """The orders of a crawl config's crawl state: in its LMDB data dir, or in its Redis keys (read again every
    REDIS_REFRESH seconds: other instances give orders too)."""
    if cfg.storage.backend == "redis":
        from frontier.state.redis_controls import RedisControls  # redis-py only when asked for

        return Steering(RedisControls(state), refresh=REDIS_REFRESH, traps=traps)  # type: ignore[arg-type]
    return Steering(LmdbControls(state.seen.log, cfg.storage.data_dir), traps=traps)  # type: ignore[attr-defined]
