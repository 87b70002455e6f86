"""The plugin's FRONTIER_* settings and request keys, shared by the DupeFilter (frontier.scrapy.dupefilter) and
the Scheduler (frontier.scrapy.scheduler): both import this module, neither imports the other."""

from __future__ import annotations

import logging
import math
import os
import shutil
import tempfile
import weakref
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from scrapy import signals
from scrapy.exceptions import CloseSpider
from scrapy.utils.project import data_path
from scrapy.utils.request import RequestFingerprinter, RequestFingerprinterProtocol

from frontier.config import DEFAULT_REVISIT, DedupConfig, RevisitConfig
from frontier.errors import ConfigError, StorageError
from frontier.seen.sizing import check_capacity_and_rate
from frontier.seen.urlseen import DEFAULT_CAPACITY, DEFAULT_ERROR_RATE, URLSeen
from frontier.state.lmdb import LmdbCrawlState

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Request
    from scrapy.settings import BaseSettings

    from frontier.state.base import CrawlState, StatePolicy
    from frontier.state.redis_seen import RedisSeen

logger = logging.getLogger("frontier.scrapy.dupefilter")

__all__ = ["DEFAULT_DATA_DIR", "REFUSED", "FrontierSettings", "fingerprint_url", "refuse_spider", "request_key",
           "discard_after", "revisit_config", "spider_name"]

DEFAULT_DATA_DIR = "frontier/%(name)s"
DEFAULT_EXACT = True
DEFAULT_LEASE_TIMEOUT = 600.0
REDIS_LEASE_ATTEMPTS = 3
DEFAULT_CACHE_SIZE = 65536  # spellings of checked requests kept in the filter (about 100 bytes each)
FINGERPRINT_DOMAIN = "scrapy.invalid"
STATS_PREFIX = "frontier/"
# RedisSeen names its settings as crawl.yaml keys; a Scrapy user sets these instead
# the revisit settings (frontier.crawl.revisit), checked by the crawl's RevisitConfig: key -> Scrapy setting
_REVISIT_SETTINGS = {"revisit.after": "FRONTIER_REVISIT_AFTER", "revisit.adaptive": "FRONTIER_REVISIT_ADAPTIVE",
                     "revisit.min_after": "FRONTIER_REVISIT_MIN_AFTER", "revisit.max_after": "FRONTIER_REVISIT_MAX_AFTER",
                     "revisit.conditional": "FRONTIER_REVISIT_CONDITIONAL",
                     "revisit.continuous": "FRONTIER_REVISIT_CONTINUOUS"}
_REDIS_SETTINGS = {"storage.redis.url": "FRONTIER_REDIS_URL", "storage.redis.crawl": "FRONTIER_REDIS_CRAWL",
                   "storage.redis.allow_unauthenticated": "FRONTIER_REDIS_ALLOW_UNAUTHENTICATED",
                   "storage.redis.allow_plaintext": "FRONTIER_REDIS_ALLOW_PLAINTEXT"}

T = TypeVar("T")


def fingerprint_url(fingerprint: bytes) -> str:
    """The URL a request checked by Scrapy's fingerprint is recorded as. Its first byte picks one of 256
    host names, so the records spread over a backend partitioned by host (Redis slot groups)."""
    hexed = fingerprint.hex()
    return f"http://fp-{hexed[:2]}.{FINGERPRINT_DOMAIN}/{hexed}"


def request_key(request: Request, fingerprinter: RequestFingerprinterProtocol) -> tuple[str, bool]:
    """What a request is checked by, as spelled (frontier canonicalises it): (its URL, True) for a GET without
    a body under Scrapy's own fingerprinter, else (its fingerprint URL, False): a REQUEST_FINGERPRINTER_CLASS of
    the user's decides for every request. See frontier/scrapy/dupefilter.py."""
    if request.method == "GET" and not request.body and type(fingerprinter) is RequestFingerprinter:
        return request.url, True
    return fingerprint_url(fingerprinter.fingerprint(request)), False


def spider_name(crawler: Crawler) -> str:
    """The spider's name, also before the spider exists (Scrapy builds a scheduler from its crawler alone):
    the spider class's."""
    spider = crawler.spider if crawler.spider is not None else crawler.spidercls
    name = getattr(spider, "name", None)
    if not isinstance(name, str) or not name:
        raise ConfigError(f"the spider {spider!r} has no name", key="SCHEDULER")
    return name


def discard_after(owner: object, scratch: Path | None) -> Callable[[], Any] | None:
    """Remove a fresh crawl's temporary dir (`FrontierSettings.location`) when called (the owner calls it after
    closing its state) or when `owner` is garbage collected; None when there is none."""
    return None if scratch is None else weakref.finalize(owner, shutil.rmtree, scratch, True)


# -- settings ------------------------------------------------------------------------------------------


REFUSED = "frontier_cannot_open"  # the finish reason of a spider whose frontier state could not be opened


def refuse_spider(crawler: Crawler, why: str) -> None:
    """Log `why` in one line and have the spider closed (finish reason REFUSED) once it is open: by CloseSpider
    from spider_opened, as Scrapy lets a component that fails to start ask. Raised while the engine opens the
    spider, the error ends in two tracebacks ("Engine slot not assigned") with the useful line buried."""
    logger.error("frontier: %s", why)

    def refuse(spider: Spider) -> None:
        raise CloseSpider(REFUSED)

    crawler.signals.connect(refuse, signal=signals.spider_opened, weak=False)


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


def revisit_config(settings: BaseSettings) -> RevisitConfig:
    """FRONTIER_REVISIT_* as the crawl's `revisit` section (the same defaults and checks); errors name the Scrapy
    setting. FRONTIER_REVISIT_AFTER None (the default): no revisits, one pass."""
    after = settings.get("FRONTIER_REVISIT_AFTER")
    adaptive = settings.get("FRONTIER_REVISIT_ADAPTIVE", DEFAULT_REVISIT.adaptive)
    try:
        return RevisitConfig(
            after=None if after in (None, "", "None") else _number("FRONTIER_REVISIT_AFTER", after),
            adaptive=adaptive.strip() if isinstance(adaptive, str) else adaptive,
            min_after=_number("FRONTIER_REVISIT_MIN_AFTER",
                              settings.get("FRONTIER_REVISIT_MIN_AFTER", DEFAULT_REVISIT.min_after)),
            max_after=_number("FRONTIER_REVISIT_MAX_AFTER",
                              settings.get("FRONTIER_REVISIT_MAX_AFTER", DEFAULT_REVISIT.max_after)),
            conditional=_flag("FRONTIER_REVISIT_CONDITIONAL",
                              settings.get("FRONTIER_REVISIT_CONDITIONAL", DEFAULT_REVISIT.conditional)),
            continuous=_flag("FRONTIER_REVISIT_CONTINUOUS",
                             settings.get("FRONTIER_REVISIT_CONTINUOUS", DEFAULT_REVISIT.continuous)))
    except ConfigError as e:
        if e.key not in _REVISIT_SETTINGS:
            raise
        message = str(e).removeprefix(f"{e.key}: ")
        for key, name in _REVISIT_SETTINGS.items():
            message = message.replace(key, name)
        raise ConfigError(message.replace("true or false", "True or False"), key=_REVISIT_SETTINGS[e.key]) from None


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
    redis_allow_plaintext: bool = False  # a password over plain redis:// to a server not on this machine
    max_per_host: int | None = None  # Scheduler: None: 1 with a DOWNLOAD_DELAY, else CONCURRENT_REQUESTS_PER_DOMAIN
    fsync: bool = False  # Scheduler: sync LMDB on every commit (power loss; a kill -9 loses nothing without it)
    lease_timeout: float = DEFAULT_LEASE_TIMEOUT  # Scheduler on Redis: see `open_state`
    revisit: RevisitConfig = DEFAULT_REVISIT  # Scheduler: FRONTIER_REVISIT_* (`revisit_config`); after None: off
    persist: bool = False  # keep the state in data_dir across runs; False: each crawl starts fresh (`location`)

    def __post_init__(self) -> None:
        if not isinstance(self.data_dir, str) or not self.data_dir.strip():
            raise ConfigError(f"must be a directory path, got {self.data_dir!r}", key="FRONTIER_DATA_DIR")
        for name, value in (("FRONTIER_EXACT", self.exact), ("FRONTIER_FSYNC", self.fsync),
                            ("FRONTIER_REDIS_ALLOW_UNAUTHENTICATED", self.redis_allow_unauthenticated),
                            ("FRONTIER_REDIS_ALLOW_PLAINTEXT", self.redis_allow_plaintext), ("FRONTIER_PERSIST", self.persist)):
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
        """Read Scrapy's settings (values given as strings on the command line are parsed). The state persists,
        as Scrapy's own does, with a JOBDIR (the data dir is then JOBDIR/frontier) or when asked for: a
        FRONTIER_DATA_DIR, or FRONTIER_PERSIST = True (in the default data dir); FRONTIER_PERSIST = False wins."""
        data_dir = settings.get("FRONTIER_DATA_DIR")
        jobdir = settings.get("JOBDIR")
        persist = settings.get("FRONTIER_PERSIST")
        persist = (data_dir is not None or bool(jobdir)) if persist is None else _flag("FRONTIER_PERSIST", persist)
        if data_dir is None:
            data_dir = os.path.join(os.path.abspath(jobdir), "frontier") if jobdir else DEFAULT_DATA_DIR
        return cls(
            data_dir=os.fspath(data_dir) if isinstance(data_dir, os.PathLike) else data_dir,
            capacity=_whole_number("FRONTIER_CAPACITY", settings.get("FRONTIER_CAPACITY", DEFAULT_CAPACITY)),
            error_rate=_number("FRONTIER_ERROR_RATE", settings.get("FRONTIER_ERROR_RATE", DEFAULT_ERROR_RATE)),
            exact=_flag("FRONTIER_EXACT", settings.get("FRONTIER_EXACT", DEFAULT_EXACT)),
            redis_url=settings.get("FRONTIER_REDIS_URL") or None,
            redis_crawl=settings.get("FRONTIER_REDIS_CRAWL") or None,
            redis_allow_unauthenticated=_flag("FRONTIER_REDIS_ALLOW_UNAUTHENTICATED",
                                              settings.get("FRONTIER_REDIS_ALLOW_UNAUTHENTICATED", False)),
            redis_allow_plaintext=_flag("FRONTIER_REDIS_ALLOW_PLAINTEXT",
                                        settings.get("FRONTIER_REDIS_ALLOW_PLAINTEXT", False)),
            max_per_host=(None if settings.get("FRONTIER_MAX_PER_HOST") is None else
                          _whole_number("FRONTIER_MAX_PER_HOST", settings.get("FRONTIER_MAX_PER_HOST"))),
            fsync=_flag("FRONTIER_FSYNC", settings.get("FRONTIER_FSYNC", False)),
            lease_timeout=_number("FRONTIER_LEASE_TIMEOUT",
                                  settings.get("FRONTIER_LEASE_TIMEOUT", DEFAULT_LEASE_TIMEOUT)),
            revisit=revisit_config(settings),
            persist=persist,
        )

    def data_path(self, spider_name: str) -> Path:
        """The spider's data dir: %(name)s replaced; a relative path under the project's .scrapy dir."""
        return Path(data_path(self.data_dir.replace("%(name)s", spider_name)))

    def location(self, spider_name: str) -> tuple[Path, Path | None]:
        """(where the spider's local state lives, the temporary dir to remove after it is closed, or None): its
        data dir when the state persists, else a new temporary dir (`discard_after` removes it)."""
        if self.persist:
            return self.data_path(spider_name), None
        scratch = Path(tempfile.mkdtemp(prefix=f"frontier-{spider_name}-"))
        return scratch / "state", scratch

    def open_seen(self, spider_name: str, path: Path | None = None) -> URLSeen | RedisSeen:
        """The spider's seen-test: a RedisSeen if FRONTIER_REDIS_URL is set, else a URLSeen at `path` (default:
        the data dir)."""
        if self.redis_url is not None:
            return self._open_redis(spider_name)
        path = self.data_path(spider_name) if path is None else path
        try:
            return URLSeen(path, capacity=self.capacity, error_rate=self.error_rate, exact=self.exact)
        except StorageError as e:
            raise type(e)(f"FRONTIER_DATA_DIR: {e} (a persistent data dir serves one crawler at a time: give "
                          "each crawler running at the same time its own FRONTIER_DATA_DIR or JOBDIR, or share "
                          "one seen-set between them with FRONTIER_REDIS_URL)") from e

    def dedup(self) -> DedupConfig:
        """The seen-test's settings, as a crawl state takes them."""
        return DedupConfig(capacity=self.capacity, error_rate=self.error_rate, exact=self.exact)

    def open_state(self, spider_name: str, policy: StatePolicy, path: Path | None = None) -> CrawlState:
        """The Scheduler's crawl state (seen-set, queues, leases): in the spider's data dir, or in Redis when
        FRONTIER_REDIS_URL is set, where any number of spider processes share one crawl (`path`: the local
        state's dir, default the data dir). There a lease cannot
        last until the engine is done with the request (a killed spider would hold it for ever): it lasts
        FRONTIER_LEASE_TIMEOUT, then the request is queued again for any spider, at most
        REDIS_LEASE_ATTEMPTS times (a request whose spiders keep dying is given up)."""
        if self.redis_url is not None:
            from frontier.state.redis_state import RedisCrawlState

            policy = replace(policy, lease_timeout=self.lease_timeout, max_retries=REDIS_LEASE_ATTEMPTS - 1)
            return self._redis_errors(lambda: RedisCrawlState(
                self.redis_url, policy, crawl=self.redis_crawl or spider_name,  # type: ignore[arg-type]
                allow_unauthenticated=self.redis_allow_unauthenticated, allow_plaintext=self.redis_allow_plaintext))
        try:
            return LmdbCrawlState(self.data_path(spider_name) if path is None else path, policy, dedup=self.dedup(), fsync=self.fsync)
        except StorageError as e:
            raise type(e)(f"FRONTIER_DATA_DIR: {e} (a persistent data dir serves one crawler at a time: give each "
                          "crawler running at the same time its own FRONTIER_DATA_DIR or JOBDIR)") from e

    def _open_redis(self, spider_name: str) -> RedisSeen:
        from frontier.state.redis_seen import RedisSeen

        assert self.redis_url is not None
        return self._redis_errors(lambda: RedisSeen(self.redis_url, crawl=self.redis_crawl or spider_name,
                                                    allow_unauthenticated=self.redis_allow_unauthenticated,
                                                    allow_plaintext=self.redis_allow_plaintext))

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
