"""The URL Frontier gRPC service (grpc.aio) over a FrontierStore.

Every store call runs on one thread, in the order the calls arrive, so the store needs no lock and the
event loop never waits on LMDB. Items of PutURLs and PutDiscovered, from every stream, are grouped: what
arrives while a commit runs is the next commit (group commit), and each ack waits for the commit holding
its item. A stream has at most MAX_IN_FLIGHT items (or batches) unacked before the server stops reading it,
so a fast client is held back by HTTP/2 flow control rather than by the server's memory.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

import grpc

from frontier.errors import InvalidURL, StorageError
from frontier.urlfrontier import urlfrontier_pb2 as pb
from frontier.urlfrontier import urlfrontier_pb2_grpc as pb_grpc
from frontier.urlfrontier.model import PRIORITY_KEY, Item, Record
from frontier.urlfrontier.options import DEFAULT_DELAY
from frontier.urlfrontier.store import FrontierStore

if TYPE_CHECKING:
    from frontier.urlfrontier.redis_store import RedisFrontierStore

log = logging.getLogger(__name__)

DEFAULT_CRAWL = "DEFAULT"  # the crawl of an empty crawlID (upstream's CrawlID.DEFAULT)
DEFAULT_HOLD = 30.0  # delay_requestable when a GetURLs leaves it 0 (upstream's default)
DEFAULT_PAGE = 100  # ListQueues / ListURLs size when left 0
MAX_KEY = 255  # bytes of a queue key or crawl ID; longer ones are SKIPPED (upstream refuses keys past 255)
MAX_URL = 8192  # bytes of a URL; longer ones are SKIPPED
MAX_DATE = 253_402_300_799  # 9999-12-31T23:59:59Z: a later refetch date is SKIPPED, a later block ends there
MAX_IN_FLIGHT = 1024  # unacked items a PutURLs stream may have (upstream's putURLs.max.inflight)
MAX_BATCHES_IN_FLIGHT = 16  # unacked batches a PutDiscovered stream may have (upstream's putDiscovered.max.inflight)
MAX_GROUP = 8192  # items in one commit
UNLIMITED = 2**31

OK, SKIPPED, FAIL = pb.AckMessage.OK, pb.AckMessage.SKIPPED, pb.AckMessage.FAIL
LOG_LEVELS = {pb.LogLevelParams.TRACE: logging.DEBUG - 5, pb.LogLevelParams.DEBUG: logging.DEBUG,
              pb.LogLevelParams.INFO: logging.INFO, pb.LogLevelParams.WARN: logging.WARNING,
              pb.LogLevelParams.ERROR: logging.ERROR}

T = TypeVar("T")


def crawl_id(value: str) -> str:
    return value or DEFAULT_CRAWL


def default_key(url: str) -> str | None:
    """The queue of a URL sent without a key: its host (lowercase, no port), None when it has none."""
    try:
        return urlsplit(url).hostname or None
    except ValueError:
        return None


def _valid_name(name: str) -> bool:
    return "\0" not in name and len(name.encode()) <= MAX_KEY


def priority_of(info: pb.URLInfo) -> float | None:
    """The URL's priority: the first value of its metadata key `priority` as a float (0 without one), None when
    that is not a finite number."""
    values = info.metadata[PRIORITY_KEY].values if PRIORITY_KEY in info.metadata else ()
    if not values:
        return 0.0
    try:
        priority = float(values[0])
    except ValueError:
        return None
    return priority if math.isfinite(priority) else None


def to_item(info: pb.URLInfo, key_of: Callable[[str], bytes], *, discovered: bool, next_fetch: float,
            created: int = 0) -> Item | None:
    """The store item of a URLInfo (`key_of(url)`: its seen-test key), None when it is unusable (no URL or
    host, a URL that cannot be canonicalised, a key or URL too long, NUL, a date past MAX_DATE, a priority
    that is not a number)."""
    url = info.url
    key = info.key or default_key(url)
    crawl = crawl_id(info.crawlID)
    if not url or len(url.encode()) > MAX_URL or key is None or not _valid_name(key) or not _valid_name(crawl):
        return None
    if not (0 <= next_fetch <= MAX_DATE and 0 <= created <= MAX_DATE):
        return None
    priority = priority_of(info)
    if priority is None:
        return None
    try:
        fp = key_of(url)
    except InvalidURL:
        return None
    metadata = b""
    if info.metadata:
        holder = pb.URLInfo()
        holder.metadata.MergeFrom(info.metadata)
        metadata = holder.SerializeToString()
    return Item(discovered=discovered, crawl=crawl, queue=key, url=url, fp=fp, next_fetch=next_fetch,
                created=created, metadata=metadata, priority=priority)


def url_info(crawl: str, queue: str, url: str, metadata: bytes) -> pb.URLInfo:
    info = pb.URLInfo.FromString(metadata)
    info.url, info.key, info.crawlID = url, queue, crawl
    return info


def known_item(record: Record) -> pb.URLItem:
    info = url_info(record.crawl, record.queue, record.url, record.metadata)
    return pb.URLItem(known=pb.KnownURLItem(info=info, refetchable_from_date=int(record.next_fetch)),
                      creation_date=record.created)


def url_filter(text: str, ignore_case: bool) -> Callable[[str], bool]:
    if not text.strip():
        return lambda url: True
    if ignore_case:
        folded = text.casefold()
        return lambda url: folded in url.casefold()
    return lambda url: text in url


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceSettings:
    """What a server answers besides the store: its own address (ListNodes) and the defaults of the API."""

    address: str
    default_delay: float = DEFAULT_DELAY
    default_hold: float = DEFAULT_HOLD


class FrontierServicer(pb_grpc.URLFrontierServicer):
    """The URLFrontier service of one store (LMDB: FrontierStore, or Redis: RedisFrontierStore). `clock`: seconds since the epoch (a test may drive it)."""

    def __init__(self, store: FrontierStore | RedisFrontierStore, settings: ServiceSettings, *,
                 clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._settings = settings
        self._clock = clock
        self._default_delay = settings.default_delay
        self._active = True
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="frontier-store")
        self._groups: deque[tuple[list[Item], asyncio.Future[list[bool]]]] = deque()  # commits to come, in order
        self._committer: asyncio.Task[None] | None = None

    def close(self) -> None:
        """Wait for the store calls under way; the store stays open (its owner closes it)."""
        self._executor.shutdown(wait=True)

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, partial(fn, *args, **kwargs))

    async def _call(self, context: grpc.aio.ServicerContext, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """A store call for an RPC: a StorageError ends the RPC with UNAVAILABLE and its message."""
        try:
            return await self._run(fn, *args, **kwargs)
        except StorageError as e:
            log.error("%s", e)
            await context.abort(grpc.StatusCode.UNAVAILABLE, str(e))
            raise  # not reached: abort raises

    # -- writes: group commit --------------------------------------------------------------------------------

    def _submit(self, items: list[Item]) -> tuple[asyncio.Future[list[bool]], int]:
        """Add `items` to the next commit: (the future of that commit's `FrontierStore.put` answer, where
        `items` start in it)."""
        if not self._groups or len(self._groups[-1][0]) >= MAX_GROUP:
            self._groups.append(([], asyncio.get_running_loop().create_future()))
        group, future = self._groups[-1]
        start = len(group)
        group.extend(items)
        if self._committer is None or self._committer.done():
            self._committer = asyncio.create_task(self._commit_groups())
        return future, start

    async def _commit_groups(self) -> None:
        while self._groups:
            items, future = self._groups.popleft()
            try:
                future.set_result(await self._run(self._store.put, items, self._clock()))
            except Exception as e:  # noqa: BLE001 - every waiting ack must get an answer: FAIL
                log.error("commit of %d URL items failed: %s", len(items), e)
                future.set_exception(e)
                future.exception()  # retrieved here: a group whose streams all ended would warn otherwise

    def _put(self, items: list[Item | None]) -> Callable[[], Awaitable[list[int]]]:
        """Submit the usable `items` now; the returned coroutine function gives one status per item: OK
        (stored), SKIPPED (unusable, or a discovered URL already known) or FAIL (not committed: may be resent)."""
        usable = [item for item in items if item is not None]
        submitted = self._submit(usable) if usable else None

        async def statuses() -> list[int]:
            if submitted is None:
                return [SKIPPED] * len(items)
            future, start = submitted
            try:
                changed = iter((await future)[start:start + len(usable)])
            except Exception:  # noqa: BLE001 - logged by the committer
                return [SKIPPED if item is None else FAIL for item in items]
            return [SKIPPED if item is None else (OK if next(changed) else SKIPPED) for item in items]

        return statuses

    def _url_item(self, request: pb.URLItem) -> Item | None:
        if request.WhichOneof("item") == "known":
            known = request.known
            return to_item(known.info, self._store.key, discovered=False, next_fetch=known.refetchable_from_date,
                           created=request.creation_date)
        if request.WhichOneof("item") == "discovered":
            return to_item(request.discovered.info, self._store.key, discovered=True, next_fetch=self._clock(),
                           created=request.creation_date)
        return None

    @staticmethod
    async def _acked(requests: AsyncIterator[Any], submit: Callable[[Any], Coroutine[Any, Any, Any]],
                     in_flight: int) -> AsyncIterator[Any]:
        """Read `requests`, `submit` each (an awaitable of its answer, started at once), and yield the answers
        in order while reading goes on, with at most `in_flight` unanswered."""
        waiting: asyncio.Queue[Coroutine[Any, Any, Any] | None] = asyncio.Queue(maxsize=in_flight)

        async def read() -> None:
            try:
                async for request in requests:
                    await waiting.put(submit(request))
            finally:
                await waiting.put(None)

        reader = asyncio.create_task(read())
        try:
            while (answer := await waiting.get()) is not None:
                yield await answer
            await reader  # raises what ended the request stream
        finally:
            reader.cancel()
            while not waiting.empty():  # the client went away: its answers will never be awaited
                answer = waiting.get_nowait()
                if answer is not None:
                    answer.close()

    async def PutURLs(self, request_iterator: AsyncIterator[pb.URLItem],
                      context: grpc.aio.ServicerContext) -> AsyncIterator[pb.AckMessage]:
        def submit(request: pb.URLItem) -> Coroutine[Any, Any, pb.AckMessage]:
            item = self._url_item(request)
            statuses = self._put([item])

            async def ack() -> pb.AckMessage:
                [status] = await statuses()
                return pb.AckMessage(ID=request.ID or (item.url if item else _any_url(request)), status=status)

            return ack()

        async for ack in self._acked(request_iterator, submit, MAX_IN_FLIGHT):
            yield ack

    async def PutDiscovered(self, request_iterator: AsyncIterator[pb.DiscoveredBatch],
                            context: grpc.aio.ServicerContext) -> AsyncIterator[pb.BatchAck]:
        def submit(batch: pb.DiscoveredBatch) -> Coroutine[Any, Any, pb.BatchAck]:
            now = self._clock()
            statuses = self._put([to_item(info, self._store.key, discovered=True, next_fetch=now)
                                  for info in batch.items])

            async def ack() -> pb.BatchAck:
                return pb.BatchAck(ID=batch.ID, statuses=await statuses())

            return ack()

        async for ack in self._acked(request_iterator, submit, MAX_BATCHES_IN_FLIGHT):
            yield ack

    # -- URLs out --------------------------------------------------------------------------------------------

    async def GetURLs(self, request: pb.GetParams, context: grpc.aio.ServicerContext) -> AsyncIterator[pb.URLInfo]:
        if not self._active:
            return
        crawl = crawl_id(request.crawlID) if request.WhichOneof("item") == "crawlID" else None
        if request.key and crawl is None:  # upstream: a queue is named within a crawl, even the default one
            return
        leased = await self._call(context, self._store.lease, crawl=crawl, queue=request.key or None,
                                  max_queues=request.max_queues or UNLIMITED,
                                  max_per_queue=request.max_urls_per_queue or UNLIMITED,
                                  hold=request.delay_requestable or self._settings.default_hold,
                                  default_delay=self._default_delay, now=self._clock())
        for url in leased:
            yield url_info(url.crawl, url.queue, url.url, url.metadata)

    # -- crawls and queues -----------------------------------------------------------------------------------

    async def ListNodes(self, request: pb.Empty, context: grpc.aio.ServicerContext) -> pb.StringList:
        return pb.StringList(values=await self.heartbeat(context))

    async def heartbeat(self, context: grpc.aio.ServicerContext | None = None) -> list[str]:
        """Tell the store this node is alive; returns the nodes serving it (every `serve` process sharing a
        Redis store calls this every HEARTBEAT seconds)."""
        if context is None:
            return await self._run(self._store.nodes, self._settings.address, self._clock())
        return await self._call(context, self._store.nodes, self._settings.address, self._clock())

    async def ListCrawls(self, request: pb.Local, context: grpc.aio.ServicerContext) -> pb.StringList:
        return pb.StringList(values=await self._call(context, self._store.crawls))

    async def DeleteCrawl(self, request: pb.DeleteCrawlMessage, context: grpc.aio.ServicerContext) -> pb.Long:
        return pb.Long(value=await self._call(context, self._store.delete_crawl, crawl_id(request.value)))

    async def ListQueues(self, request: pb.Pagination, context: grpc.aio.ServicerContext) -> pb.QueueList:
        crawl = crawl_id(request.crawlID)
        queues = await self._call(context, self._store.queues, crawl, include_inactive=request.include_inactive,
                                  now=self._clock())
        page = queues[request.start:request.start + (request.size or DEFAULT_PAGE)]
        return pb.QueueList(values=page, total=len(queues), start=request.start, size=len(page), crawlID=crawl)

    async def GetStats(self, request: pb.QueueWithinCrawlParams, context: grpc.aio.ServicerContext) -> pb.Stats:
        crawl = crawl_id(request.crawlID)
        s = await self._call(context, self._store.stats, crawl, request.key or None, self._clock())
        return pb.Stats(size=s.size, inProcess=s.in_process, numberOfQueues=s.queues, crawlID=crawl,
                        counts={"completed": s.completed, "active_queues": s.active_queues})

    async def DeleteQueue(self, request: pb.QueueWithinCrawlParams, context: grpc.aio.ServicerContext) -> pb.Long:
        deleted = await self._call(context, self._store.delete_queue, crawl_id(request.crawlID), request.key)
        return pb.Long(value=deleted or 0)

    async def _update_queue(self, context: grpc.aio.ServicerContext, crawl: str, key: str, **change: Any) -> None:
        if not await self._call(context, self._store.update_queue, crawl_id(crawl), key, **change):
            await context.abort(grpc.StatusCode.NOT_FOUND, f"no queue {key!r} in crawl {crawl_id(crawl)!r}")

    async def BlockQueueUntil(self, request: pb.BlockQueueParams, context: grpc.aio.ServicerContext) -> pb.Empty:
        await self._update_queue(context, request.crawlID, request.key, blocked_until=float(min(request.time, MAX_DATE)))
        return pb.Empty()

    async def SetDelay(self, request: pb.QueueDelayParams, context: grpc.aio.ServicerContext) -> pb.Empty:
        if request.key:
            await self._update_queue(context, request.crawlID, request.key, delay=request.delay_requestable)
        else:
            self._default_delay = float(request.delay_requestable)
        return pb.Empty()

    async def SetCrawlLimit(self, request: pb.CrawlLimitParams, context: grpc.aio.ServicerContext) -> pb.Empty:
        await self._update_queue(context, request.crawlID, request.key, limit=request.limit)
        return pb.Empty()

    async def SetActive(self, request: pb.Active, context: grpc.aio.ServicerContext) -> pb.Empty:
        self._active = request.state
        return pb.Empty()

    async def GetActive(self, request: pb.Local, context: grpc.aio.ServicerContext) -> pb.Boolean:
        return pb.Boolean(state=self._active)

    async def SetLogLevel(self, request: pb.LogLevelParams, context: grpc.aio.ServicerContext) -> pb.Empty:
        logging.getLogger(request.package or None).setLevel(LOG_LEVELS[request.level])
        log.info("log level of %r set to %s", request.package, pb.LogLevelParams.Level.Name(request.level))
        return pb.Empty()

    # -- URLs ------------------------------------------------------------------------------------------------

    async def GetURLStatus(self, request: pb.URLStatusRequest, context: grpc.aio.ServicerContext) -> pb.URLItem:
        if not request.url:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "url is empty")
        crawl = crawl_id(request.crawlID)
        try:
            record = await self._call(context, self._store.status, crawl, self._store.key(request.url))
        except InvalidURL:
            record = None
        if record is None or (request.key and request.key != record.queue):
            await context.abort(grpc.StatusCode.NOT_FOUND, f"{request.url!r} is not in crawl {crawl!r}"
                                + (f", queue {request.key!r}" if request.key else ""))
        return known_item(record)

    async def ListURLs(self, request: pb.ListUrlParams, context: grpc.aio.ServicerContext) -> AsyncIterator[pb.URLItem]:
        records = await self._call(context, self._store.records, crawl_id(request.crawlID), request.key or None,
                                   url_filter(request.filter, request.ignoreCase), start=request.start,
                                   limit=request.size or DEFAULT_PAGE)
        for record in records:
            yield known_item(record)

    async def CountURLs(self, request: pb.CountUrlParams, context: grpc.aio.ServicerContext) -> pb.Long:
        count = await self._call(context, self._store.count, crawl_id(request.crawlID), request.key or None,
                                 url_filter(request.filter, request.ignoreCase))
        return pb.Long(value=count)

    async def PurgeURLs(self, request: pb.PurgeUrlParams, context: grpc.aio.ServicerContext) -> pb.Long:
        cutoff = self._clock() - request.days * 86400
        return pb.Long(value=await self._call(context, self._store.purge, crawl_id(request.crawlID),
                                              request.key or None, cutoff))


def _any_url(request: pb.URLItem) -> str:
    kind = request.WhichOneof("item")
    return getattr(request, kind).info.url if kind else ""
