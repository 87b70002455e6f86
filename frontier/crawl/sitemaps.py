"""Sitemaps as a source of URLs (seeds_from_sitemaps): which sitemaps a seed host has, and how a queued
sitemap is told from a page.

A sitemap is queued like any URL (seen-set, per-host FIFO, politeness, robots.txt, leases, retries), so
it is as crash-safe as a page: the sitemaps of a seed host are committed with its robots.txt ack, those of
a sitemap index with the index's ack. What marks a queue entry as a sitemap is its `Link.payload`
(`payload(level)`), which comes back in each lease; the job then carries `FetchJob.sitemap = level` and the
worker parses XML (workers/sitemaps.py) instead of HTML.

Levels bound the nesting: a sitemap named by robots.txt (or the /sitemap.xml fallback) is level 1, the
sitemaps an index at level n lists are level n + 1, and an index at MAX_LEVEL lists nothing more (counted
"sitemap_too_deep"). The protocol allows no index in an index; MAX_LEVEL = 3 allows one such level, seen
in the wild. How many a file may list is the worker's bound (workers.sitemaps.MAX_ENTRIES: the
protocol's 50,000); fetching them counts against limits.max_pages like any page.

Depth: a sitemap is queued at depth 1 and so are the URLs it lists (a sitemap is the site's own list of
its pages, one step from the seed like the seed page's links). A sitemap is therefore never a "seed" whose
network failures keep it queued for a rerun, and scope.max_depth 0 queues none.

First interval (revisits): a page a sitemap lists with <changefreq> or <lastmod> is queued with the payload
`first_payload(seconds)`, so the hint comes back in its lease, survives a crash like the entry, and sets its
first revisit interval (`first_interval`; frontier.crawl.revisit). A URL queued before (by a link) keeps `after`.
"""

from __future__ import annotations

from frontier.url.canonical import url_host

__all__ = ["FALLBACK_PATH", "MAX_LEVEL", "MAX_ROBOTS_SITEMAPS", "SITEMAP_DEPTH", "first_interval",
           "first_payload", "level", "payload", "robots_sitemaps", "seed_hosts"]

MAX_LEVEL = 3
MAX_ROBOTS_SITEMAPS = 1000  # Sitemap lines of one robots.txt that are queued; the rest are ignored
SITEMAP_DEPTH = 1
FALLBACK_PATH = "/sitemap.xml"
_PREFIX = b"frontier:sitemap:"
_FIRST = b"frontier:first:"


def payload(sitemap_level: int) -> bytes:
    """The queue entry payload that marks a sitemap of this nesting level."""
    return _PREFIX + str(sitemap_level).encode()


def level(entry_payload: bytes | None) -> int:
    """The sitemap level a queue entry's payload marks; 0: not a sitemap (a page, or another program's
    payload, e.g. frontier.scrapy's pickled requests, which never start with the prefix)."""
    if not entry_payload or not entry_payload.startswith(_PREFIX):
        return 0
    try:
        return int(entry_payload[len(_PREFIX):])
    except ValueError:
        return 0


def first_payload(seconds: float) -> bytes:
    """The queue entry payload of a page whose sitemap entry suggests a first revisit interval of `seconds`."""
    return _FIRST + repr(float(seconds)).encode()


def first_interval(entry_payload: bytes | None) -> float | None:
    """The first revisit interval a queue entry's payload carries; None: none (a page found by a link)."""
    if not entry_payload or not entry_payload.startswith(_FIRST):
        return None
    try:
        value = float(entry_payload[len(_FIRST):])
    except ValueError:
        return None
    return value if value >= 0 and value != float("inf") else None


def seed_hosts(seeds: list[str] | tuple[str, ...]) -> dict[str, str]:
    """host ("name[:port]") -> the origin ("scheme://host") of the first canonical seed on it."""
    origins: dict[str, str] = {}
    for url in seeds:
        host = url_host(url)
        origins.setdefault(host, url[: url.index(host) + len(host)])
    return origins


def robots_sitemaps(origin: str, robots_txt: str) -> list[str]:
    """The sitemap URLs a host's robots.txt names (Sitemap lines, as protego reads them, at most
    MAX_ROBOTS_SITEMAPS), or `origin`/sitemap.xml when it names none. Not canonicalised: the caller does
    that against the robots.txt URL, like links."""
    urls: list[str] = []
    if robots_txt.strip():
        from protego import Protego

        try:
            urls = list(Protego.parse(robots_txt).sitemaps)[:MAX_ROBOTS_SITEMAPS]
        except Exception:  # noqa: BLE001 - protego is lenient; a parser bug must not stop the crawl
            urls = []
    return urls or [origin + FALLBACK_PATH]
