"""Scrapy's scheduler on frontier's crawl state: a spider killed with kill -9 resumes with nothing lost.

    SCHEDULER = "frontier.scrapy.Scheduler"        # in settings.py; FRONTIER_* settings: see frontier/scrapy/dupefilter.py

Every request the engine schedules is checked against the seen-set and queued, with the request itself
(`Request.to_dict`, pickled) as the queue entry's payload, in the spider's data dir (FRONTIER_DATA_DIR: one
LMDB environment, `frontier.state.lmdb`), when the state persists (Scrapy's rules: a JOBDIR, an explicit
FRONTIER_DATA_DIR or FRONTIER_PERSIST = True; see FrontierSettings.from_settings). Otherwise the crawl starts
fresh in a temporary dir, removed at close, and nothing is serialised. Either way the engine gets back the very
Request object it scheduled while the process lives (`Scheduler._token`). A request handed to the engine is a lease: it stays queued until
the engine is done with it (its response or failure went through the callback or errback, and what they
yielded was scheduled); then the lease is acked, in the same transaction as the requests scheduled since the
last commit. So a kill -9 at any moment loses no request, and the only requests fetched twice after it are
those the engine held: after a restart every queued request is leasable again. A persistent scheduler hands the
engine at most CONCURRENT_REQUESTS requests at a time (downloading, or downloaded and waiting for their
callback), so that is the bound per crash; a fresh one leaves that to the engine, as Scrapy's own does.

Who does what:
  * de-duplication: the crawl state's seen-set, keyed as frontier.scrapy's DupeFilter keys requests (a GET
    without a body by its canonical URL, any other by Scrapy's fingerprint); DUPEFILTER_CLASS is not used.
    A duplicate is refused at enqueue_request (the canonical form against the recent ones), so the engine
    sends request_dropped; one the seen-set finds at the commit gets that signal from the scheduler.
    dont_filter requests are queued every time and not recorded (`Link.force`).
  * order: Request.priority, higher first, as in Scrapy's own scheduler; among equal priorities FIFO or LIFO as
    the project's SCHEDULER_MEMORY_QUEUE (SCHEDULER_DISK_QUEUE for a persistent crawl) says: LIFO by Scrapy's
    default (`queue_orders`; a Scheduler built without a crawler is FIFO). Start requests go after the other
    requests of their priority, as their own queue (SCHEDULER_START_*_QUEUE) orders them
    (START_BEHIND), unless it is None. Per host (host = host[:port]) a queue in priority order; among
    the hosts below their cap, the one whose best request ranks highest goes first. A priority beyond +-1e12
    is clamped (frontier/scheduler/priority_clamped).
  * politeness: frontier caps the requests of one host the engine holds at FRONTIER_MAX_PER_HOST (default: none
    with DOWNLOAD_SLOTS, whose slots Scrapy's downloader keeps; else 1 with a DOWNLOAD_DELAY, else
    CONCURRENT_REQUESTS_PER_DOMAIN), so one slow or delayed host cannot fill every
    slot of CONCURRENT_REQUESTS with requests that wait in its downloader slot. Delays (DOWNLOAD_DELAY,
    RANDOMIZE_DOWNLOAD_DELAY, AutoThrottle) stay Scrapy's downloader's: a scheduler that returned nothing
    while a host waits out its delay would leave the engine idle until its 5-second heartbeat.
  * robots.txt, retries, redirects, depth: Scrapy's middlewares. A retry or a redirect is a new request
    (dont_filter, or a new URL) queued like any other; the original is done.

Ack point: Scrapy tells a scheduler nothing about a request it handed out. The request leaves the engine's
set of requests in progress when everything above is done, which no signal marks (response_received fires
before the callback runs; a download error or a redirect fires none), so the scheduler watches that set
(`ExecutionEngine._slot.inprogress`: private, but long-lived in Scrapy's engine; the real-crawl tests run
against the installed Scrapy): `_InProgress` calls `finished(request)` when the engine removes a request.
The scheduler refuses to start if the engine has no such set. Items go through the item pipelines before
their page leaves that set, so a page is acked after its items were processed.

Shared by spider processes (FRONTIER_REDIS_URL): the crawl state is a `RedisCrawlState`, so any number of
spiders, on any machines, share one crawl (FRONTIER_REDIS_CRAWL, default the spider's name): each request is
handed to one of them, and a spider stops when the crawl has nothing left that is not leased to another. A
lease lasts FRONTIER_LEASE_TIMEOUT there (see FrontierSettings.open_state), renewed every third of it while the
engine holds the request (one waiting in a download slot stays this spider's): the requests a killed spider held
are fetched again by any spider once it has passed, not at the next start.

Revisits (FRONTIER_REVISIT_AFTER): a request that got a response is acked with its next schedule, and a due
URL is queued again; frontier/scrapy/revisits.py (`ScrapyRevisits`) holds that job and says how.

Requests that cannot be serialised (a callback that is not a method of the spider, unpicklable meta) are kept
in memory, as Scrapy's own scheduler does with JOBDIR: not durable, de-duplicated within the run only; the
first is logged, all are counted (scheduler/unserializable).

Stats: scheduler/enqueued (/disk: queued in the crawl state, /memory), scheduler/dequeued (/disk, /memory),
dupefilter/filtered (requests already seen: answered by the cache of recent spellings when enqueued, or by the
seen-set when committed), frontier/scheduler/acked, frontier/scheduler/queued_at_open (requests a previous run
left queued), frontier/scheduler/queued_at_close, frontier/scheduler/undecodable (queued requests this spider
cannot rebuild: a callback it lacks; they stay queued) and frontier/seen/* at close.
"""

from __future__ import annotations

import logging
import math
import os
import pickle
import shutil
import time
from collections import deque
from collections.abc import Callable
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals
from scrapy.core.scheduler import BaseScheduler
from scrapy.utils.defer import deferred_from_coro
from scrapy.utils.misc import load_object
from scrapy.utils.request import RequestFingerprinter, RequestFingerprinterProtocol, request_from_dict

from frontier.crawl.revisit import RevisitSchedule
from frontier.errors import ConfigError, FrontierError, InvalidURL, StorageError
from frontier.scrapy.revisits import ScrapyRevisits
from frontier.scrapy.settings import (DEFAULT_CACHE_SIZE, STATS_PREFIX, FrontierSettings, discard_after,
                                      fingerprint_url, refuse_spider, request_key, spider_name)
from frontier.seen.fingerprint import fingerprint
from frontier.seen.lru import FingerprintLRU
from frontier.state.base import PRIORITY_LIMIT, Ack, Commit, CrawlState, Lease, Link, Outcome, Revisit, StatePolicy
from frontier.url.canonical import canonicalize

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.settings import BaseSettings
    from scrapy.spiders import Spider
    from scrapy.statscollectors import StatsCollector

__all__ = ["Scheduler", "scheduler_policy"]

logger = logging.getLogger(__name__)

EXPIRE_EVERY = 1.0  # seconds between looks for leases past their deadline (a Redis crawl's dead spiders)
RENEW_SHARE = 3  # the leases of requests the engine holds are renewed every lease_timeout / RENEW_SHARE seconds
PICKLE_PROTOCOL = 4  # what Scrapy's disk queues use
MAX_UNCOMMITTED = 1024  # requests scheduled before they are committed anyway (start() may yield millions)
MAX_DEPTH = 2**32 - 1  # a queue entry's depth is a u32
MAX_IN_FLIGHT_FRESH = 2**31  # a fresh crawl's max_in_flight: no cap of the scheduler's own
TOKEN_SIZE = 16  # the end of a queue entry's payload: Scheduler._token
MAX_LIVE = 100_000  # queued requests a persistent crawl keeps as live objects; past it, rebuilt when leased
START_BEHIND = 0.5  # a start request's priority offset: behind the callbacks' requests of its priority
LIFO_SPAN, LIFO_SCALE = 0.25, 1e6  # LIFO among equals: a rising offset below LIFO_SPAN (Scheduler._rank)
UNSUPPORTED = ("SCHEDULER_PRIORITY_QUEUE",)  # a queue setting of Scrapy's own scheduler frontier does not use


def scheduler_policy(settings: BaseSettings, max_per_host: int | None = None, *, revisit: bool = False,
                     revisit_continuous: bool = False) -> StatePolicy:
    """The crawl state's rules under Scrapy: no robots.txt or retries of its own (Scrapy's middlewares do
    both), no delay (Scrapy's downloader), leases that last until the engine is done with the request;
    `revisit`: store each fetched request's schedule and queue it again when due (FRONTIER_REVISIT_AFTER).
    The host cap (`max_per_host`, FRONTIER_MAX_PER_HOST) counts by URL host; a project that configures
    DOWNLOAD_SLOTS gets none by default: its slots, not hosts, are the politeness unit, and Scrapy's downloader
    enforces them."""
    if max_per_host is None and settings.getdict("DOWNLOAD_SLOTS"):
        max_per_host = max(1, settings.getint("CONCURRENT_REQUESTS"))  # per-slot politeness: the downloader's
    elif max_per_host is None:
        delayed = settings.getfloat("DOWNLOAD_DELAY") > 0
        max_per_host = 1 if delayed else max(1, settings.getint("CONCURRENT_REQUESTS_PER_DOMAIN"))
    return StatePolicy(lease_timeout=math.inf, max_retries=0, max_per_host=max_per_host, delay=0.0,
                       obey_robots=False, revisit=revisit, revisit_continuous=revisit_continuous)


def queue_orders(settings: BaseSettings, persist: bool) -> tuple[str, str | None]:
    """(order of the requests among equal priorities, order of the start requests, None: in with the others),
    each "lifo" or "fifo", read from the queue classes Scrapy's own scheduler would use (SCHEDULER_MEMORY_QUEUE,
    or SCHEDULER_DISK_QUEUE for a persistent crawl, and their SCHEDULER_START_* twins), as their classes' names say. One
    warning names the queue settings a project set that frontier does not honour (another kind of queue:
    FIFO then, or SCHEDULER_PRIORITY_QUEUE: frontier's own order by priority, hosts taking turns)."""
    kind = "DISK" if persist else "MEMORY"
    ignored = [name for name in UNSUPPORTED if (settings.getpriority(name) or 0) > 0]

    def order(name: str) -> str | None:
        value = settings.get(name)
        if not value:
            return None
        for cls in getattr(load_object(value), "__mro__", ()):  # Scrapy's queues are subclasses made by factories
            if "Lifo" in cls.__name__ or "Fifo" in cls.__name__:
                return "lifo" if "Lifo" in cls.__name__ else "fifo"
        ignored.append(name)
        return "fifo"

    orders = (order(f"SCHEDULER_{kind}_QUEUE") or "fifo", order(f"SCHEDULER_START_{kind}_QUEUE"))
    if ignored:
        logger.warning("frontier: the Scheduler does not use %s (its order: priority, then FIFO or LIFO as "
                       "SCHEDULER_*_QUEUE say, start requests after the others of their priority)", ", ".join(ignored))
    return orders


def _allow_all(host: str, url: str) -> bool:
    return True


class _InProgress(set):  # type: ignore[type-arg]
    """The engine's set of requests in progress, telling `on_done` when the engine removes one."""

    def __init__(self, items: set[Request], on_done: Any) -> None:
        super().__init__(items)
        self._on_done = on_done

    def remove(self, request: Request) -> None:
        super().remove(request)
        self._on_done(request)


class _Refused(BaseScheduler):
    """The scheduler of a spider whose crawl state could not be opened: it refuses the spider at open
    (frontier.scrapy.dupefilter.refuse_spider: one error line, finish reason frontier_cannot_open)."""

    def __init__(self, why: str, crawler: Crawler) -> None:
        self.why = why
        self.crawler = crawler

    def open(self, spider: Spider) -> None:
        refuse_spider(self.crawler, self.why)

    def has_pending_requests(self) -> bool:
        return False

    def enqueue_request(self, request: Request) -> bool:
        return False

    def next_request(self) -> Request | None:
        return None


class Scheduler(BaseScheduler):
    """`SCHEDULER = "frontier.scrapy.Scheduler"`: Scrapy's scheduler interface on a `CrawlState` (see the
    module docstring). The scheduler owns `state` and closes it in `close()`.

    `finished(request)` is the ack; `open()` arranges for the engine of `crawler` to call it. Without a crawler
    (a test, or another engine) the caller calls it when it is done with each request `next_request` returned.
    At most `max_in_flight` requests are handed out and not finished at a time.

    A lease is taken per `next_request`, one request at a time, so that hosts take turns (a batch would be
    one host's); a lease of one costs about 30 us, an ack's commit about 60 us (2-core development machine).

    Args:
        state: the crawl state it owns.
        fingerprinter: Scrapy's request fingerprinter (None: Scrapy's default).
        stats: Scrapy's stats collector, for the scheduler's counts.
        crawler: the crawler whose engine calls `finished` (None: the caller does).
        max_in_flight: requests handed out and not finished, at most.
        cache_size: spellings kept in the approximate LRU of checked URLs (as DupeFilter's).
        revisit: each request that got a response is acked with its next schedule (FRONTIER_REVISIT_*; the
            state's policy must have `revisit` on); None: one pass.
        conditional: send the stored validators with a revisit (see `ScrapyRevisits`, which does that job).
        continuous: wait for the next due request instead of ending (see `ScrapyRevisits`).
        serialize: store each request in its queue entry (False: no entry outlives the process, a fresh crawl).
        order: among equal priorities, "fifo" or "lifo" (Scrapy's default).
        start_order: the start requests' order, after the others of their priority; None: with them.
        clock: wall-clock seconds (a test moves it on to a later pass).
    """

    def __init__(self, state: CrawlState, *, fingerprinter: RequestFingerprinterProtocol | None = None,
                 stats: StatsCollector | None = None, crawler: Crawler | None = None, max_in_flight: int = 16,
                 cache_size: int = DEFAULT_CACHE_SIZE, revisit: RevisitSchedule | None = None,
                 conditional: bool = True, continuous: bool = False, serialize: bool = True,
                 order: str = "fifo", start_order: str | None = "fifo",
                 clock: Callable[[], float] = time.time) -> None:
        if revisit is not None and not state.policy.revisit:
            raise ConfigError("revisits need a crawl state whose policy stores them (scheduler_policy(revisit=True))",
                              key="FRONTIER_REVISIT_AFTER")
        self.state = state
        self._revisits = None if revisit is None else ScrapyRevisits(intervals=revisit, conditional=conditional,
                                                                    continuous=continuous)
        self._clock = clock
        self.max_in_flight = max_in_flight
        self.fingerprinter = fingerprinter or RequestFingerprinter()
        self.stats = stats
        self.crawler = crawler
        self.spider: Spider | None = None
        self._recent = FingerprintLRU(cache_size)  # spellings scheduled before: recorded as seen
        self._links: list[Link] = []  # scheduled since the last commit
        self._acks: list[Ack] = []  # finished since the last commit (kept if a commit fails)
        self._out: dict[Request, Lease] = {}  # handed to the engine: request -> its lease
        self._responded: dict[Request, Revisit | None] = {}  # ... those that got a response: their next schedule
        self._memory: deque[Request] = deque()  # requests that cannot be serialised
        self._memory_seen: set[bytes] = set()
        self._unserializable = 0
        self._failed = False
        self._next_expiry = 0.0
        self._next_renewal = 0.0
        self._renewer: Any = None  # the reactor's LoopingCall of _renew_held, while the engine runs
        self._undecodable: set[bytes] = set()  # lease keys of queued requests this spider cannot rebuild
        self.serialize = serialize  # False: no queue entry outlives the process (a fresh crawl): none serialised
        self.order = order  # among equal priorities: "fifo" or "lifo" (Scrapy's default)
        self.start_order = start_order  # the start requests': after the others of their priority; None: with them
        self._pushes = 0
        self._live: dict[bytes, Request] = {}  # token -> the request scheduled in this process (see _token)
        self._tokens: list[bytes] = []  # the token of each of self._links
        self._run = os.urandom(8)  # this process's token prefix: no entry of an earlier run matches
        self._count = 0
        self.discard: Callable[[], Any] | None = None  # a fresh crawl's temporary dir (FrontierSettings.location)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Scheduler | _Refused:
        """A data dir in use (or any crawl state that cannot be opened) gives a `_Refused` scheduler: it closes
        the spider at open with one error line, where raising here ends in Scrapy's tracebacks."""
        settings = FrontierSettings.from_settings(crawler.settings)
        revisit = settings.revisit
        name = spider_name(crawler)
        path, scratch = settings.location(name)
        try:
            state = settings.open_state(name, scheduler_policy(
                crawler.settings, settings.max_per_host, revisit=revisit.enabled,
                revisit_continuous=revisit.continuous), path)
        except StorageError as e:
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)
            return _Refused(str(e), crawler)
        order, start_order = queue_orders(crawler.settings, settings.persist)
        serialize = settings.persist or settings.redis_url is not None or revisit.enabled
        # the bound on what a crash makes a resumed crawl fetch again; a fresh crawl has no resume to bound, and
        # its engine alone decides how many requests it holds, as with Scrapy's own scheduler
        in_flight = max(1, crawler.settings.getint("CONCURRENT_REQUESTS")) if serialize else MAX_IN_FLIGHT_FRESH
        scheduler = cls(state, fingerprinter=crawler.request_fingerprinter, stats=crawler.stats, crawler=crawler,
                        max_in_flight=in_flight,
                        revisit=RevisitSchedule.from_config(revisit), conditional=revisit.conditional,
                        continuous=revisit.continuous, serialize=serialize,
                        order=order, start_order=start_order)
        scheduler.discard = discard_after(scheduler, scratch)
        return scheduler

    # -- lifetime -----------------------------------------------------------------------------------------

    def open(self, spider: Spider) -> None:
        self.spider = spider
        if self.crawler is not None:
            self._watch(self.crawler)
            if math.isfinite(self.state.policy.lease_timeout):  # Redis: FRONTIER_LEASE_TIMEOUT
                from twisted.internet.task import LoopingCall

                self._renewer = LoopingCall(self._renew_held)
                self._renewer.start(self.state.policy.lease_timeout / RENEW_SHARE, now=False)
        queued = self.state.stats().queued
        self._set("frontier/scheduler/queued_at_open", queued)
        logger.info("frontier: scheduler on %d requests queued by earlier runs", queued)

    def _watch(self, crawler: Crawler) -> None:
        """Have the engine call `finished` for each request it is done with; note which got a response."""
        slot = getattr(crawler.engine, "_slot", None)
        inprogress = getattr(slot, "inprogress", None)
        if type(inprogress) is not set:
            import scrapy

            raise ConfigError(f"this Scrapy ({scrapy.__version__}) has no ExecutionEngine._slot.inprogress set: "
                              "frontier.scrapy.Scheduler cannot tell when a request is done", key="SCHEDULER")
        slot.inprogress = _InProgress(inprogress, self.finished)  # type: ignore[union-attr]
        crawler.signals.connect(self._response_received, signal=signals.response_received)

    def close(self, reason: str) -> None:
        """Commit what was scheduled since the last commit, put the figures into the stats, close the state.
        Requests still queued (and any lease) stay for the next run."""
        if self._renewer is not None and self._renewer.running:
            self._renewer.stop()
        try:
            if not self._failed:
                self._commit()
        finally:
            if self.stats is not None:
                self._set("frontier/scheduler/queued_at_close", self.state.stats().queued)
                for name, value in self.state.seen_stats().items():
                    if isinstance(value, (int, float, str)):
                        self.stats.set_value(f"{STATS_PREFIX}seen/{name}", value)
            try:
                self.state.close()
            finally:
                self._live.clear()
                if self.discard is not None:
                    self.discard()

    # -- requests in --------------------------------------------------------------------------------------

    def enqueue_request(self, request: Request) -> bool:
        """False if the request was seen before (Scrapy drops it); True if it is kept. It is committed with the
        next ack or lease; until then a crash loses it, but also the ack of the request that yielded it.

        Requests are compared in their canonical form here, against the cache of recent ones, so that nearly
        every duplicate is refused now; one the cache no longer holds is found at the commit, which sends
        `request_dropped` for it as the engine does for a refused one."""
        key, by_url = request_key(request, self.fingerprinter)
        if by_url:
            try:
                key = canonicalize(key)
            except InvalidURL:  # a URL frontier does not crawl (data:, file:, ...): by Scrapy's fingerprint
                key = fingerprint_url(self.fingerprinter.fingerprint(request))
        canonical = fingerprint(key)
        if not request.dont_filter and canonical in self._recent:
            self._inc("dupefilter/filtered")
            return False
        token = self._token()
        if self.serialize:
            try:
                payload = pickle.dumps(request.to_dict(spider=self._methods(request)), protocol=PICKLE_PROTOCOL)
            except (ValueError, TypeError, AttributeError, pickle.PicklingError) as e:
                return self._keep_in_memory(request, canonical, e)
            payload += token  # pickle.loads ignores what follows the pickle
        else:
            payload = token
        depth = min(max(int(request.meta.get("depth", 0)), 0), MAX_DEPTH)
        priority = request.priority
        if not -PRIORITY_LIMIT <= priority <= PRIORITY_LIMIT:
            priority = -PRIORITY_LIMIT if priority < 0 else PRIORITY_LIMIT
            self._inc("frontier/scheduler/priority_clamped")
        self._links.append(Link(key, depth, payload=payload, force=request.dont_filter,
                                priority=self._rank(priority, bool(request.meta.get("is_start_request")))))
        self._tokens.append(token)
        if not self.serialize or len(self._live) < MAX_LIVE:
            self._live[token] = request
        if not request.dont_filter:
            self._recent.add_many((canonical,))
        if len(self._links) >= MAX_UNCOMMITTED and not self._failed:
            self._commit()
        return True

    def _rank(self, priority: float, start: bool) -> float:
        """The queue priority of a request: its own, then (below 1) its place among equals. The crawl state is
        FIFO among equal priorities; a start request kept apart goes START_BEHIND lower (after every other
        request of its priority, before those of the next), and LIFO adds an offset that rises with each request
        pushed, below LIFO_SPAN (ties, FIFO, only past float precision: about 10^8 requests at priority 0)."""
        apart = start and self.start_order is not None
        order = self.start_order if apart else self.order
        rank = float(priority) - (START_BEHIND if apart else 0.0)
        if order == "lifo":
            self._pushes += 1
            rank += LIFO_SPAN * (1.0 - 1.0 / (1.0 + self._pushes / LIFO_SCALE))
        return rank

    def _token(self) -> bytes:
        """A key unique to one scheduled request of this process, stored at the end of its queue entry: the
        lease of the entry gives back the live request (the same object, as Scrapy's own scheduler does: a
        callback set after scheduling, shared cb_kwargs, later meta changes all hold), and only an entry
        of another run or another spider process is rebuilt from its serialised form. A persistent crawl keeps
        at most MAX_LIVE of them (its queue may hold millions); those past it come back rebuilt, as Scrapy's
        own scheduler hands out requests from its JOBDIR disk queue."""
        self._count += 1
        return self._run + self._count.to_bytes(8, "big")

    def _methods(self, request: Request) -> Any:
        """What `Request.to_dict` looks callbacks up in: a stand-in holding just the request's callback and
        errback when they are methods of the spider under their own names (to_dict searches every member
        of the object: 100 us per request on a plain Spider), else the spider."""
        found: dict[str, Any] = {}
        for method in (request.callback, request.errback):
            if method is None or isinstance(method, str):
                continue
            name = getattr(getattr(method, "__func__", None), "__name__", None)
            if getattr(method, "__self__", None) is not self.spider or name is None or \
                    getattr(getattr(self.spider, name, None), "__func__", None) is not method.__func__:
                return self.spider
            found[name] = method
        return SimpleNamespace(**found)

    def _keep_in_memory(self, request: Request, canonical: bytes, error: Exception) -> bool:
        if not request.dont_filter:
            if canonical in self._memory_seen:
                self._inc("dupefilter/filtered")
                return False
            self._memory_seen.add(canonical)
        if not self._unserializable:
            logger.warning("Unable to serialize request: %s - reason: %s - kept in memory only (lost if the "
                           "spider is killed); no more will be logged (scheduler/unserializable counts them)",
                           request, error)
        self._unserializable += 1
        self._inc("scheduler/unserializable")
        self._inc("scheduler/enqueued/memory")
        self._inc("scheduler/enqueued")
        self._memory.append(request)
        return True

    # -- requests out -------------------------------------------------------------------------------------

    def has_pending_requests(self) -> bool:
        """Asked by the engine before it closes an idle spider: with nothing left, the crawl state answers its
        deferred seen-tests first (frontier.seen.parked), which may queue requests."""
        if len(self) > 0:
            return True
        if self._failed:
            return False
        self._commit()
        now = self._clock()
        if self.state.done(now):
            return False
        return len(self) > 0 or (self._revisits is not None and self._revisits.keeps_open(self.state, now))

    def __len__(self) -> int:
        """Requests not handed to this engine yet: scheduled, or queued and not leased here (on Redis, those
        other spiders hold count: their spider may die, and what their callbacks yield is this crawl's too)."""
        queued = self.state.stats().queued - len(self._out) - len(self._undecodable)
        return len(self._memory) + len(self._links) + queued

    def next_request(self) -> Request | None:
        """The next request of a host below its cap, leased until `finished`; None if none may go now (the
        engine asks again when it is done with a request, which frees a place)."""
        if self._memory:
            self._inc("scheduler/dequeued/memory")
            self._inc("scheduler/dequeued")
            return self._memory.popleft()
        if self._failed or len(self._out) >= self.max_in_flight:
            return None
        if self._links:  # scheduled since the last commit: leasable once committed, and they may rank first
            self._commit()
        request = self._lease()
        if request is not None:
            self._inc("scheduler/dequeued/disk")
            self._inc("scheduler/dequeued")
        return request

    def _lease(self) -> Request | None:
        now = self._clock()
        if now >= self._next_expiry:  # Redis: requests held past their lease by a spider that died
            self.state.expire(now)
            self._next_expiry = now + EXPIRE_EVERY
        if now >= self._next_renewal:
            self._renew_held()
        while True:
            leases = self.state.lease(1, now, _allow_all).leases
            if not leases:
                return None
            request = self._rebuild(leases[0])
            if request is None:
                self._undecodable.add(leases[0].key)
            else:
                if self._revisits is not None:
                    self._revisits.prepare(request, leases[0], self.spider,
                                           self.crawler.settings if self.crawler else None)
                self._out[request] = leases[0]
                return request

    def _renew_held(self) -> None:
        """Renew the leases of the requests the engine still holds: a request that waits in a download slot
        (DOWNLOAD_DELAY, a busy slot) longer than the lease is not handed to another spider of the crawl too. A
        lease that had already ended is counted (frontier/scheduler/leases_lost): another spider may fetch it."""
        now = self._clock()
        self._next_renewal = now + self.state.policy.lease_timeout / RENEW_SHARE
        if not self._out or self._failed or not math.isfinite(self.state.policy.lease_timeout):
            return
        try:
            renewed = self.state.renew([lease.key for lease in self._out.values()], now)
        except FrontierError as e:
            logger.warning("frontier: cannot renew the leases of the requests in progress: %s", e)
            return
        if not all(renewed):
            self._inc("frontier/scheduler/leases_lost", renewed.count(False))

    def _rebuild(self, lease: Lease) -> Request | None:
        """The queued request; None if this spider cannot rebuild it (it stays leased, and queued for a later
        run of a spider that can)."""
        if lease.payload is None:  # queued by another program (Frontier.add_seeds): a plain GET
            return Request(lease.url)
        live = self._live.pop(lease.payload[-TOKEN_SIZE:], None)
        if live is not None:
            return live
        if len(lease.payload) == TOKEN_SIZE:  # a fresh crawl's entry of a process that is gone
            logger.error("frontier: a queued request of another process cannot be rebuilt (%s): it stays queued",
                         lease.url)
            self._inc("frontier/scheduler/undecodable")
            return None
        try:
            return request_from_dict(pickle.loads(lease.payload), spider=self.spider)
        except (ValueError, AttributeError, TypeError, ImportError, pickle.UnpicklingError) as e:
            logger.error("frontier: a queued request cannot be rebuilt by this spider (%s: %s); it stays queued",
                         lease.url, e)
            self._inc("frontier/scheduler/undecodable")
            return None

    # -- the ack ------------------------------------------------------------------------------------------

    def finished(self, request: Request) -> None:
        """The engine is done with a request: ack its lease, with what was scheduled since the last commit
        (the requests its callback yielded among them). Requests this scheduler did not hand out are ignored."""
        lease = self._out.pop(request, None)
        if lease is None:
            return
        responded = request in self._responded
        revisit = self._responded.pop(request, None)
        self._acks.append(Ack(key=lease.key, outcome=Outcome.DONE, fetched=responded, revisit=revisit))
        if not self._failed:
            try:
                self._commit()
            except FrontierError:
                pass  # logged; the spider is stopping (the engine is calling us: do not break its bookkeeping)

    def _response_received(self, response: Response, request: Request, spider: Spider) -> None:
        """Note that a request this scheduler handed out got a response (its ack says fetched), with its next
        schedule (revisits)."""
        lease = self._out.get(request)
        if lease is None:
            return
        revisit, stat = None, None
        if self._revisits is not None:
            revisit, stat = self._revisits.schedule(lease, response, self._clock())
        self._responded[request] = revisit
        if stat is not None:
            self._inc(stat)

    def _commit(self) -> None:
        """One atomic commit of the requests scheduled and the acks since the last one. A storage error (a
        full disk) stops the spider: what was committed stands, and a rerun resumes from it."""
        if not (self._links or self._acks):
            return
        try:
            committed = self.state.commit(Commit(links=self._links, acks=self._acks), self._clock())
        except FrontierError as e:
            self._failed = True
            logger.error("frontier: cannot record the crawl, stopping the spider: %s", e)
            if self.crawler is not None and self.crawler.engine is not None:
                deferred_from_coro(self.crawler.engine.close_spider_async(reason="frontier_storage_error"))
            raise
        new = sum(committed.new)
        self._inc("scheduler/enqueued/disk", new)
        self._inc("scheduler/enqueued", new)
        self._inc("dupefilter/filtered", len(self._links) - new)
        self._inc("frontier/scheduler/acked", len(self._acks))
        dropped = [(self._live.pop(token, None), link) for token, link, kept
                   in zip(self._tokens, self._links, committed.new) if not kept]
        self._links, self._acks, self._tokens = [], [], []
        for request, link in dropped:
            if self.crawler is not None and self.spider is not None:
                request = request or request_from_dict(pickle.loads(link.payload), spider=self.spider)
                self.crawler.signals.send_catch_log(signals.request_dropped, request=request, spider=self.spider)

    # -- stats --------------------------------------------------------------------------------------------

    def _inc(self, name: str, count: int = 1) -> None:
        if self.stats is not None and count:
            self.stats.inc_value(name, count)

    def _set(self, name: str, value: int) -> None:
        if self.stats is not None:
            self.stats.set_value(name, value)
