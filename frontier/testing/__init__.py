"""Test support: a deterministic mock web on loopback.

`SiteSpec` and `SiteGraph` (pure, no aiohttp) describe the synthetic web and what a correct crawler
fetches from it; `MockWeb` serves it (aiohttp, imported on first use so `import frontier.testing`
stays light); `MockWebProcess` runs it as a child process; `HOSTILE_ROUTES` documents the /hostile/
paths; `TrapWeb` serves the crawler-trap site (`frontier.testing.traps`); `NamedWeb` serves many host names
on a few loopback addresses, for network.resolve (`frontier.testing.namedweb`). See `frontier.testing.sitegraph`
and `frontier.testing.mockweb` for the details.

Imports nothing of frontier but the base (errors, lazy): a test server must not share the code it tests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from frontier.lazy import lazy_getattr

from frontier.testing.sitegraph import (
    HOSTILE_HUB,
    HOSTILE_PREFIX,
    INDEX_PATH,
    ROBOTS_PATH,
    STATS_PATH,
    PageKind,
    SiteGraph,
    SiteSpec,
)

if TYPE_CHECKING:
    from frontier.testing.hostile import HOSTILE_CANARIES, HOSTILE_FOUND, HOSTILE_ROUTES, HostileRoute
    from frontier.testing.mockweb import MockWeb, MockWebProcess, fetch_stats
    from frontier.testing.namedweb import Arrival, NamedWeb
    from frontier.testing.traps import TRAPS, TrapSpec, TrapWeb

__all__ = [
    "Arrival",
    "HOSTILE_CANARIES",
    "HOSTILE_FOUND",
    "HOSTILE_HUB",
    "HOSTILE_PREFIX",
    "HOSTILE_ROUTES",
    "INDEX_PATH",
    "ROBOTS_PATH",
    "STATS_PATH",
    "HostileRoute",
    "MockWeb",
    "MockWebProcess",
    "NamedWeb",
    "PageKind",
    "SiteGraph",
    "SiteSpec",
    "TRAPS",
    "TrapSpec",
    "TrapWeb",
    "fetch_stats",
]

_LAZY = {
    "MockWeb": "frontier.testing.mockweb",
    "MockWebProcess": "frontier.testing.mockweb",
    "fetch_stats": "frontier.testing.mockweb",
    "HOSTILE_ROUTES": "frontier.testing.hostile",
    "HOSTILE_FOUND": "frontier.testing.hostile",
    "HOSTILE_CANARIES": "frontier.testing.hostile",
    "HostileRoute": "frontier.testing.hostile",
    "TRAPS": "frontier.testing.traps",
    "TrapSpec": "frontier.testing.traps",
    "TrapWeb": "frontier.testing.traps",
    "Arrival": "frontier.testing.namedweb",
    "NamedWeb": "frontier.testing.namedweb",
}


__getattr__ = lazy_getattr(__name__, _LAZY, globals())
