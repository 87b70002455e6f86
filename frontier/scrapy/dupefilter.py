"""Scrapy's duplicate filter backed by frontier's seen-test: persistent across runs, exact, canonical.
(The durable scheduler, `SCHEDULER = "frontier.scrapy.Scheduler"`, is frontier/scrapy/scheduler.py; both
read the settings below and key requests the same way: frontier/scrapy/settings.py.)

Enable it in a Scrapy project's settings.py (scrapy must be installed: `pip install "frontier-crawl[scrapy]"`):

    DUPEFILTER_CLASS = "frontier.scrapy.DupeFilter"
    FRONTIER_PERSIST = False                 # keep the state across runs; default True with JOBDIR or FRONTIER_DATA_DIR
    FRONTIER_DATA_DIR = "frontier/%(name)s"  # the default; %(name)s is the spider's name (JOBDIR: JOBDIR/frontier)
    FRONTIER_CAPACITY = 10_000_000           # URLs the Bloom filter is sized for (it grows past it)
    FRONTIER_ERROR_RATE = 1e-4               # its false-positive target
    FRONTIER_EXACT = True                    # confirm every Bloom "maybe" in the log: no URL is ever dropped
    FRONTIER_REDIS_URL = None                # e.g. "rediss://:password@10.0.0.5:6379/0": the Redis backend
    FRONTIER_REDIS_CRAWL = None              # the crawl's key prefix in Redis; default: the spider's name
    FRONTIER_REDIS_ALLOW_UNAUTHENTICATED = False  # accept a Redis on another machine without a password
    FRONTIER_REDIS_ALLOW_PLAINTEXT = False   # accept a password over plain redis:// to another machine (else rediss://)
    FRONTIER_LEASE_TIMEOUT = 600             # Scheduler on Redis: seconds before a dead spider's requests go back

Local backend (FRONTIER_REDIS_URL unset): a `URLSeen` in FRONTIER_DATA_DIR (a relative path lies under the
project's `.scrapy` dir, as HTTPCACHE_DIR does) when the state persists (FrontierSettings.from_settings: Scrapy's
rules, a JOBDIR or an explicit FRONTIER_DATA_DIR / FRONTIER_PERSIST = True); then what one run saw, the next run
on the same dir has seen too. Otherwise each crawl starts fresh in a temporary dir, removed at close. A data dir serves one process at a time (a second spider process on it fails at start, naming the
dir): runs one after another share it, spider processes running at the same time do not.

Redis backend (FRONTIER_REDIS_URL set): a `RedisSeen` (`pip install "frontier-crawl[redis]"`) on a Redis >= 7 or
Valkey >= 7.2 server or Cluster, always exact (64-bit fingerprints kept exactly, about 7 bytes per URL). Any
number of spider processes, on any machines, with the same FRONTIER_REDIS_CRAWL share one seen-set: each URL
is new to exactly one of them, which fetches it. FRONTIER_DATA_DIR, _CAPACITY, _ERROR_RATE and _EXACT apply
to the local backend only (frontier.scrapy.Scheduler on Redis keeps its queues there too: see
frontier/scrapy/scheduler.py). A Redis that cannot be reached makes `request_seen` raise StorageError (after
redis-py's retry): Scrapy logs the error and drops that one request, as it does with scrapy-redis.

What a request is checked by:
  * a GET without a body: its URL, canonicalised by frontier (RFC 3986 / WHATWG normalisation: case,
    default port, dot segments, percent-escapes, query order, no fragment), so "/x/../p/5.html" and
    "/p/%35.html" are one page; under a REQUEST_FINGERPRINTER_CLASS of the project's own, the next rule.
  * any other request (POST, HEAD, PUT, ..., or a GET with a body), and a URL frontier does not crawl (not
    http/https, e.g. data: or file:): Scrapy's request fingerprint (`crawler.request_fingerprinter`: method,
    canonical URL and body), recorded as the URL "http://fp-XX.scrapy.invalid/<fingerprint hex>". The
    ".invalid" top-level domain is reserved (RFC 6761), so no crawled URL can ever be one of these.
  * `dont_filter=True`: not checked and not recorded (Scrapy's scheduler does not even ask the filter).
    Scrapy's default `start()` sends `start_urls` with dont_filter, so they are fetched on every run;
    yield `Request(url)` from your own `start()` to have them de-duplicated too.

A request is recorded when it is scheduled, not when it is fetched (as with RFPDupeFilter). Requests
still queued when a run stops are recorded as seen, so without a persistent queue (JOBDIR after a clean
stop) the next run will not fetch them: a persistent seen-set alone makes incremental crawls (fetch
only what is new), not resumable ones.

Stats (Scrapy's stats collector): frontier/seen_new, frontier/seen_duplicate (= dupefilter/filtered),
frontier/seen_by_fingerprint (requests checked by Scrapy's fingerprint), frontier/cache_hits (duplicates
answered by the filter's own cache, see `DupeFilter`), and at close the seen-test's
own figures as frontier/seen/<name> (URLSeen: tiers, LRU hit rate, Bloom fill, false positives caught;
RedisSeen: calls, round trips, the crawl's URL count).
"""

from __future__ import annotations

import logging
import shutil
from typing import TYPE_CHECKING, Any

from scrapy.dupefilters import BaseDupeFilter
from scrapy.utils.request import RequestFingerprinter, RequestFingerprinterProtocol, referer_str

from frontier.errors import InvalidURL, StorageError
from frontier.scrapy.settings import (DEFAULT_CACHE_SIZE, STATS_PREFIX, FrontierSettings, fingerprint_url, refuse_spider,
                                      discard_after, request_key, spider_name)
from frontier.seen.fingerprint import fingerprint
from frontier.seen.lru import FingerprintLRU

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Request
    from scrapy.spiders import Spider
    from scrapy.statscollectors import StatsCollector


__all__ = ["DupeFilter"]

logger = logging.getLogger(__name__)
dupes_logger = logging.getLogger("scrapy.dupefilters")  # where Scrapy logs filtered requests: a user's filters see them


# -- the filter ----------------------------------------------------------------------------------------


class _RefusedDupeFilter(BaseDupeFilter):
    """The filter of a spider whose seen-test could not be opened: it refuses the spider at open."""

    def __init__(self, why: str, crawler: Crawler) -> None:
        self.why = why
        self.crawler = crawler

    def open(self) -> None:
        refuse_spider(self.crawler, self.why)

    def request_seen(self, request: Request) -> bool:
        return True  # nothing is fetched: the spider closes


class DupeFilter(BaseDupeFilter):
    """`DUPEFILTER_CLASS = "frontier.scrapy.DupeFilter"`: Scrapy's dupefilter interface on a seen-test.

    `seen` is any seen-test with `add(url) -> bool` (True: new), `stats()` and `close()` (a `URLSeen` or a
    `RedisSeen`); the filter owns it and closes it in `close()`. See the module docstring for the keys.

    Scrapy asks about one request at a time, and a seen-test call per request costs a transaction (URLSeen)
    or a round trip (RedisSeen). Most requests repeat a link spelled exactly as before, so the filter keeps
    the xxh3_128 of the last `cache_size` spellings it checked (an approximate LRU): a spelling in it was
    recorded, and is a duplicate without asking the seen-test. Only the seen-test decides what is new.

    Args:
        seen: the seen-test it owns.
        fingerprinter: Scrapy's request fingerprinter, for `request_fingerprint` (None: Scrapy's default).
        stats: Scrapy's stats collector, for the filter's counts.
        debug: log every duplicate (DUPEFILTER_DEBUG), else the first.
        cache_size: spellings kept in the approximate LRU (0: none).
    """

    def __init__(self, seen: Any, *, fingerprinter: RequestFingerprinterProtocol | None = None,
                 stats: StatsCollector | None = None, debug: bool = False,
                 cache_size: int = DEFAULT_CACHE_SIZE) -> None:
        self.discard: Any = None  # a fresh crawl's data dir: removed after close (FrontierSettings.location)
        self.seen = seen
        self._recent = FingerprintLRU(cache_size)
        self.fingerprinter = fingerprinter or RequestFingerprinter()
        self.stats = stats
        self.debug = debug
        self.logdupes = True

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DupeFilter | _RefusedDupeFilter:
        """A data dir in use (or a seen-test that cannot be opened) gives a filter that closes the spider once
        open, with one error line (`refuse_spider`), where raising here ends in Scrapy's tracebacks."""
        settings = FrontierSettings.from_settings(crawler.settings)
        name = spider_name(crawler)
        path, scratch = settings.location(name)
        try:
            seen = settings.open_seen(name, path)
        except StorageError as e:
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)
            return _RefusedDupeFilter(str(e), crawler)
        if settings.redis_url is None:
            mode = "exact" if settings.exact else f"probabilistic, error rate {settings.error_rate:g}"
            where = f"{seen.path} ({mode})"
        else:
            where = f"{seen.url} crawl {seen.keys.crawl!r} (exact)"
        logger.info("frontier: seen-test at %s: %d URLs seen before", where, len(seen))
        dupefilter = cls(seen, fingerprinter=crawler.request_fingerprinter, stats=crawler.stats,
                         debug=crawler.settings.getbool("DUPEFILTER_DEBUG"))
        dupefilter.discard = discard_after(dupefilter, scratch)
        return dupefilter

    def request_seen(self, request: Request) -> bool:
        """True if the request was seen before (Scrapy drops it); False if new, and records it now."""
        if request.dont_filter:
            return False
        key, by_url = request_key(request, self.fingerprinter)
        as_written = fingerprint(key)
        if as_written in self._recent:  # this very spelling was checked before: recorded, so seen
            new = False
            self._count("cache_hits")
        else:
            try:
                new = self.seen.add(key)
            except InvalidURL:  # a URL frontier does not canonicalise (data:, file:, ftp:, ...)
                by_url = False
                key = fingerprint_url(self.fingerprinter.fingerprint(request))
                as_written = fingerprint(key)
                new = self.seen.add(key)
            self._recent.add_many((as_written,))
        self._count("seen_new" if new else "seen_duplicate")
        if not by_url:
            self._count("seen_by_fingerprint")
        return not new

    def _count(self, name: str) -> None:
        if self.stats is not None:
            self.stats.inc_value(STATS_PREFIX + name)

    def close(self, reason: str) -> None:
        """Put the seen-test's figures into the stats, then close it (a URLSeen snapshots its filter)."""
        if self.stats is not None and self.seen is not None:
            for name, value in self.seen.stats().items():
                if isinstance(value, (int, float, str)):
                    self.stats.set_value(f"{STATS_PREFIX}seen/{name}", value)
        seen, self.seen = self.seen, None
        try:
            if seen is not None:
                seen.close()
        finally:
            if self.discard is not None:
                self.discard()

    def log(self, request: Request, spider: Spider) -> None:
        """Log a filtered request (each one with DUPEFILTER_DEBUG, else the first) and count dupefilter/filtered."""
        if self.debug:
            dupes_logger.debug("Filtered duplicate request: %(request)s (referer: %(referer)s)",
                         {"request": request, "referer": referer_str(request)}, extra={"spider": spider})
        elif self.logdupes:
            dupes_logger.debug("Filtered duplicate request: %(request)s - no more duplicates will be shown"
                         " (see DUPEFILTER_DEBUG to show all duplicates)", {"request": request},
                         extra={"spider": spider})
            self.logdupes = False
        if self.stats is not None:
            self.stats.inc_value("dupefilter/filtered")
