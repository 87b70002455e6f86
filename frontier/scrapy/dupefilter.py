"""Scrapy's duplicate filter backed by frontier's seen-test: persistent across runs, exact, canonical.
(The durable scheduler, `SCHEDULER = "frontier.scrapy.Scheduler"`, is frontier/scrapy/scheduler.py; it
shares the settings and the request keys below.)

Enable it in a Scrapy project's settings.py (scrapy must be installed: `pip install frontier[scrapy]`):

    DUPEFILTER_CLASS = "frontier.scrapy.DupeFilter"
    FRONTIER_DATA_DIR = "frontier/%(name)s"  # the default; %(name)s is the spider's name
    FRONTIER_CAPACITY = 10_000_000           # URLs the Bloom filter is sized for (it grows past it)
    FRONTIER_ERROR_RATE = 1e-4               # its false-positive target
    FRONTIER_EXACT = True                    # confirm every Bloom "maybe" in the log: no URL is ever dropped
    FRONTIER_REDIS_URL = None                # e.g. "redis://:password@10.0.0.5:6379/0": the Redis backend
    FRONTIER_REDIS_CRAWL = None              # the crawl's key prefix in Redis; default: the spider's name
    FRONTIER_REDIS_ALLOW_UNAUTHENTICATED = False  # accept a Redis on another machine without a password
    FRONTIER_LEASE_TIMEOUT = 600             # Scheduler on Redis: seconds before a request a spider holds goes back

Local backend (FRONTIER_REDIS_URL unset): a `URLSeen` in FRONTIER_DATA_DIR (a relative path lies under the
project's `.scrapy` dir, as HTTPCACHE_DIR does). What one run saw, the next run on the same dir has seen
too. A data dir serves one process at a time (a second spider process on it fails at start, naming the
dir): runs one after another share it, spider processes running at the same time do not.

Redis backend (FRONTIER_REDIS_URL set): a `RedisSeen` (`pip install frontier[redis]`) on a Redis >= 7 or
Valkey >= 7.2 server or Cluster, always exact (64-bit fingerprints kept exactly, about 7 bytes per URL). Any
number of spider processes, on any machines, with the same FRONTIER_REDIS_CRAWL share one seen-set: each URL
is new to exactly one of them, which fetches it. FRONTIER_DATA_DIR, _CAPACITY, _ERROR_RATE and _EXACT apply
to the local backend only (frontier.scrapy.Scheduler on Redis keeps its queues there too: see
frontier/scrapy/scheduler.py). A Redis that cannot be reached makes `request_seen` raise StorageError (after
redis-py's retry): Scrapy logs the error and drops that one request, as it does with scrapy-redis.

What a request is checked by:
  * a GET without a body: its URL, canonicalised by frontier (RFC 3986 / WHATWG normalisation: case,
    default port, dot segments, percent-escapes, query order, no fragment), so "/x/../p/5.html" and
    "/p/%35.html" are one page. This key ignores REQUEST_FINGERPRINTER_CLASS.
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
import math
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from scrapy.dupefilters import BaseDupeFilter
from scrapy.utils.project import data_path
from scrapy.utils.request import RequestFingerprinter, RequestFingerprinterProtocol, referer_str

from frontier.config import DedupConfig
from frontier.errors import ConfigError, InvalidURL, StorageError
from frontier.fingerprint import fingerprint
from frontier.seen.lru import FingerprintLRU
from frontier.seen.sizing import check_capacity_and_rate
from frontier.seen.urlseen import DEFAULT_CAPACITY, DEFAULT_ERROR_RATE, URLSeen
from frontier.state.lmdb import LmdbCrawlState

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Request
    from scrapy.settings import BaseSettings
    from scrapy.spiders import Spider
    from scrapy.statscollectors import StatsCollector

    from frontier.scrapy.scheduler import Scheduler
    from frontier.state.base import CrawlState, StatePolicy
    from frontier.state.redis_seen import RedisSeen

__all__ = ["DEFAULT_DATA_DIR", "DupeFilter", "FrontierSettings", "Scheduler", "fingerprint_url", "request_key"]

DEFAULT_DATA_DIR = "frontier/%(name)s"
DEFAULT_EXACT = True
DEFAULT_LEASE_TIMEOUT = 600.0
REDIS_LEASE_ATTEMPTS = 3
DEFAULT_CACHE_SIZE = 65536  # spellings of checked requests kept in the filter (about 100 bytes each)
FINGERPRINT_DOMAIN = "scrapy.invalid"
STATS_PREFIX = "frontier/"
# RedisSeen names its settings as crawl.yaml keys; a Scrapy user sets these instead
_REDIS_SETTINGS = {"storage.redis.url": "FRONTIER_REDIS_URL", "storage.redis.crawl": "FRONTIER_REDIS_CRAWL",
                   "storage.redis.allow_unauthenticated": "FRONTIER_REDIS_ALLOW_UNAUTHENTICATED"}

logger = logging.getLogger(__name__)
T = TypeVar("T")


def fingerprint_url(fingerprint: bytes) -> str:
    """The URL a request checked by Scrapy's fingerprint is recorded as. Its first byte picks one of 256
    host names, so the records spread over a backend partitioned by host (Redis slot groups)."""
    hexed = fingerprint.hex()
    return f"http://fp-{hexed[:2]}.{FINGERPRINT_DOMAIN}/{hexed}"


def request_key(request: Request, fingerprinter: RequestFingerprinterProtocol) -> tuple[str, bool]:
    """What a request is checked by, as spelled (frontier canonicalises it): (its URL, True) for a GET without
    a body, else (its fingerprint URL, False). See the module docstring."""
    if request.method == "GET" and not request.body:
        return request.url, True
    return fingerprint_url(fingerprinter.fingerprint(request)), False


def __getattr__(name: str) -> Any:
    """`frontier.scrapy.Scheduler`, imported when first asked for (it imports this module)."""
    if name == "Scheduler":
        from frontier.scrapy.scheduler import Scheduler

        return Scheduler
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# -- settings ------------------------------------------------------------------------------------------


def _whole_number(name: str, value: Any) -> int:
    """An int from an int, a whole float or a string ("10_000_000", "1e7": `scrapy crawl -s` gives strings)."""
    if isinstance(value, str):
        text = value.strip().replace("_", "")
        try:
            value = int(text)
        except ValueError:
            try:
                value = float(text)
            except ValueError:
                raise ConfigError(f"must be a whole number, got {value!r}", key=name) from None
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        value = int(value)
    if type(value) is not int:
        raise ConfigError(f"must be a whole number, got {value!r}", key=name)
    return value


def _number(name: str, value: Any) -> float:
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            raise ConfigError(f"must be a number, got {value!r}", key=name) from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"must be a number, got {value!r}", key=name)
    return float(value)


def _flag(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if value in (0, 1) and type(value) is int:
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0"):
        return value.strip().lower() in ("true", "1")
    raise ConfigError(f"must be True or False, got {value!r}", key=name)


@dataclass(frozen=True, kw_only=True, slots=True)
class FrontierSettings:
    """The FRONTIER_* settings of the plugin, checked when built; errors name the Scrapy setting."""

    data_dir: str = DEFAULT_DATA_DIR
    capacity: int = DEFAULT_CAPACITY
    error_rate: float = DEFAULT_ERROR_RATE
    exact: bool = DEFAULT_EXACT
    redis_url: str | None = None
    redis_crawl: str | None = None  # None: the spider's name
    redis_allow_unauthenticated: bool = False
    max_per_host: int | None = None  # Scheduler: None: 1 with a DOWNLOAD_DELAY, else CONCURRENT_REQUESTS_PER_DOMAIN
    fsync: bool = False  # Scheduler: sync LMDB on every commit (power loss; a kill -9 loses nothing without it)
    lease_timeout: float = DEFAULT_LEASE_TIMEOUT  # Scheduler on Redis: see `open_state`

    def __post_init__(self) -> None:
        if not isinstance(self.data_dir, str) or not self.data_dir.strip():
            raise ConfigError(f"must be a directory path, got {self.data_dir!r}", key="FRONTIER_DATA_DIR")
        for name, value in (("FRONTIER_EXACT", self.exact), ("FRONTIER_FSYNC", self.fsync),
                            ("FRONTIER_REDIS_ALLOW_UNAUTHENTICATED", self.redis_allow_unauthenticated)):
            if type(value) is not bool:
                raise ConfigError(f"must be True or False, got {value!r}", key=name)
        if self.max_per_host is not None and (type(self.max_per_host) is not int or self.max_per_host < 1):
            raise ConfigError(f"must be a whole number >= 1, got {self.max_per_host!r}", key="FRONTIER_MAX_PER_HOST")
        for name, value in (("FRONTIER_REDIS_URL", self.redis_url), ("FRONTIER_REDIS_CRAWL", self.redis_crawl)):
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise ConfigError(f"must be a non-empty string or None, got {value!r}", key=name)
        if type(self.lease_timeout) not in (int, float) or not 0 < self.lease_timeout < math.inf:
            raise ConfigError(f"must be a number of seconds > 0, got {self.lease_timeout!r}",
                              key="FRONTIER_LEASE_TIMEOUT")
        try:
            check_capacity_and_rate(self.capacity, self.error_rate)
        except ConfigError as e:
            name = {"capacity": "FRONTIER_CAPACITY", "error_rate": "FRONTIER_ERROR_RATE"}[e.key or "capacity"]
            raise ConfigError(str(e).removeprefix(f"{e.key}: "), key=name) from None

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> FrontierSettings:
        """Read Scrapy's settings (values given as strings on the command line are parsed)."""
        data_dir = settings.get("FRONTIER_DATA_DIR", DEFAULT_DATA_DIR)
        return cls(
            data_dir=os.fspath(data_dir) if isinstance(data_dir, os.PathLike) else data_dir,
            capacity=_whole_number("FRONTIER_CAPACITY", settings.get("FRONTIER_CAPACITY", DEFAULT_CAPACITY)),
            error_rate=_number("FRONTIER_ERROR_RATE", settings.get("FRONTIER_ERROR_RATE", DEFAULT_ERROR_RATE)),
            exact=_flag("FRONTIER_EXACT", settings.get("FRONTIER_EXACT", DEFAULT_EXACT)),
            redis_url=settings.get("FRONTIER_REDIS_URL") or None,
            redis_crawl=settings.get("FRONTIER_REDIS_CRAWL") or None,
            redis_allow_unauthenticated=_flag("FRONTIER_REDIS_ALLOW_UNAUTHENTICATED",
                                              settings.get("FRONTIER_REDIS_ALLOW_UNAUTHENTICATED", False)),
            max_per_host=(None if settings.get("FRONTIER_MAX_PER_HOST") is None else
                          _whole_number("FRONTIER_MAX_PER_HOST", settings.get("FRONTIER_MAX_PER_HOST"))),
            fsync=_flag("FRONTIER_FSYNC", settings.get("FRONTIER_FSYNC", False)),
            lease_timeout=_number("FRONTIER_LEASE_TIMEOUT",
                                  settings.get("FRONTIER_LEASE_TIMEOUT", DEFAULT_LEASE_TIMEOUT)),
        )

    def data_path(self, spider_name: str) -> Path:
        """The spider's data dir: %(name)s replaced; a relative path under the project's .scrapy dir."""
        return Path(data_path(self.data_dir.replace("%(name)s", spider_name)))

    def open_seen(self, spider_name: str) -> URLSeen | RedisSeen:
        """The spider's seen-test: a RedisSeen if FRONTIER_REDIS_URL is set, else a URLSeen in its data dir."""
        if self.redis_url is not None:
            return self._open_redis(spider_name)
        path = self.data_path(spider_name)
        try:
            return URLSeen(path, capacity=self.capacity, error_rate=self.error_rate, exact=self.exact)
        except StorageError as e:
            raise type(e)(f"FRONTIER_DATA_DIR: {e} (a data dir serves one process at a time: give each spider "
                          "process running at the same time its own FRONTIER_DATA_DIR, or share one seen-set "
                          "between processes with FRONTIER_REDIS_URL)") from e

    def dedup(self) -> DedupConfig:
        """The seen-test's settings, as a crawl state takes them."""
        return DedupConfig(capacity=self.capacity, error_rate=self.error_rate, exact=self.exact)

    def open_state(self, spider_name: str, policy: StatePolicy) -> CrawlState:
        """The Scheduler's crawl state (seen-set, queues, leases): in the spider's data dir, or in Redis when
        FRONTIER_REDIS_URL is set, where any number of spider processes share one crawl. There a lease cannot
        last until the engine is done with the request (a killed spider would hold it for ever): it lasts
        FRONTIER_LEASE_TIMEOUT, then the request is queued again for any spider, at most
        REDIS_LEASE_ATTEMPTS times (a request whose spiders keep dying is given up)."""
        if self.redis_url is not None:
            from frontier.state.redis_state import RedisCrawlState

            policy = replace(policy, lease_timeout=self.lease_timeout, max_retries=REDIS_LEASE_ATTEMPTS - 1)
            return self._redis_errors(lambda: RedisCrawlState(
                self.redis_url, policy, crawl=self.redis_crawl or spider_name,  # type: ignore[arg-type]
                allow_unauthenticated=self.redis_allow_unauthenticated))
        try:
            return LmdbCrawlState(self.data_path(spider_name), policy, dedup=self.dedup(), fsync=self.fsync)
        except StorageError as e:
            raise type(e)(f"FRONTIER_DATA_DIR: {e} (a data dir serves one spider process at a time)") from e

    def _open_redis(self, spider_name: str) -> RedisSeen:
        from frontier.state.redis_seen import RedisSeen

        assert self.redis_url is not None
        return self._redis_errors(lambda: RedisSeen(self.redis_url, crawl=self.redis_crawl or spider_name,
                                                    allow_unauthenticated=self.redis_allow_unauthenticated))

    @staticmethod
    def _redis_errors(open_it: Callable[[], T]) -> T:
        """`open_it()`, its ConfigError naming the Scrapy setting instead of the crawl.yaml key."""
        try:
            return open_it()
        except ConfigError as e:
            message = str(e).removeprefix(f"{e.key}: ") if e.key else str(e)
            for key, name in _REDIS_SETTINGS.items():
                message = message.replace(f"{key}: true", f"{name} = True").replace(key, name)
            raise ConfigError(message, key=_REDIS_SETTINGS.get(e.key or "", e.key)) from None


# -- the filter ----------------------------------------------------------------------------------------


class DupeFilter(BaseDupeFilter):
    """`DUPEFILTER_CLASS = "frontier.scrapy.DupeFilter"`: Scrapy's dupefilter interface on a seen-test.

    `seen` is any seen-test with `add(url) -> bool` (True: new), `stats()` and `close()` (a `URLSeen` or a
    `RedisSeen`); the filter owns it and closes it in `close()`. See the module docstring for the keys.

    Scrapy asks about one request at a time, and a seen-test call per request costs a transaction (URLSeen)
    or a round trip (RedisSeen). Most requests repeat a link spelled exactly as before, so the filter keeps
    the xxh3_128 of the last `cache_size` spellings it checked (an approximate LRU): a spelling in it was
    recorded, and is a duplicate without asking the seen-test. Only the seen-test decides what is new.
    """

    def __init__(self, seen: Any, *, fingerprinter: RequestFingerprinterProtocol | None = None,
                 stats: StatsCollector | None = None, debug: bool = False,
                 cache_size: int = DEFAULT_CACHE_SIZE) -> None:
        self.seen = seen
        self._recent = FingerprintLRU(cache_size)
        self.fingerprinter = fingerprinter or RequestFingerprinter()
        self.stats = stats
        self.debug = debug
        self.logdupes = True

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DupeFilter:
        settings = FrontierSettings.from_settings(crawler.settings)
        seen = settings.open_seen(crawler.spider.name)
        if settings.redis_url is None:
            mode = "exact" if settings.exact else f"probabilistic, error rate {settings.error_rate:g}"
            where = f"{seen.path} ({mode})"
        else:
            where = f"{seen.url} crawl {seen.keys.crawl!r} (exact)"
        logger.info("frontier: seen-test at %s: %d URLs seen before", where, len(seen))
        return cls(seen, fingerprinter=crawler.request_fingerprinter, stats=crawler.stats,
                   debug=crawler.settings.getbool("DUPEFILTER_DEBUG"))

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
        if seen is not None:
            seen.close()

    def log(self, request: Request, spider: Spider) -> None:
        """Log a filtered request (each one with DUPEFILTER_DEBUG, else the first) and count dupefilter/filtered."""
        if self.debug:
            logger.debug("Filtered duplicate request: %(request)s (referer: %(referer)s)",
                         {"request": request, "referer": referer_str(request)}, extra={"spider": spider})
        elif self.logdupes:
            logger.debug("Filtered duplicate request: %(request)s - no more duplicates will be shown"
                         " (see DUPEFILTER_DEBUG to show all duplicates)", {"request": request},
                         extra={"spider": spider})
            self.logdupes = False
        if self.stats is not None:
            self.stats.inc_value("dupefilter/filtered")
