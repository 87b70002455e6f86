"""The URL Frontier state of one machine: every crawl of a `serve` process, each a seen-test data dir.

A crawl (crawlID) is a URLSeen data dir (frontier.seen: LRU, Bloom filter and LMDB fingerprint log; exact or
probabilistic by `dedup.exact`) in crawls/<xxh3_128 of the crawl ID>/. "Is this discovered URL new?" is that
seen-test's answer, on the fingerprint of the URL canonicalised by the config's canonical rules; the URL
stored and handed back is the one the client sent. The crawl's URLs, queues and leases are named databases
of the same LMDB environment, written inside the seen-test's transaction (`URLSeen.add_fingerprints(also=)`),
so a URL's seen entry and its queue entry commit together; an ack is sent only after that commit, so a kill
-9 of the server loses no acknowledged item. A URL handed out by `lease` is rescheduled at the end of its
lease (delay_requestable) and recorded as held: after a crash it comes back then, not before, unless an
update (a KnownURLItem) for it arrives first.

Deleting URLs (DeleteQueue, DeleteCrawl, PurgeURLs) forgets them in the seen-test where it can forget (exact
mode, or `dedup.deletable`), in the same transaction; a plain probabilistic filter cannot, so there a
deleted URL stays seen (a DiscoveredURLItem of it is SKIPPED; a KnownURLItem stores it again). DeleteCrawl
removes the crawl's data dir whole.

Named databases of a crawl (Q = queue key + NUL, fp = the 16-byte fingerprint of the canonical URL):
    ufmeta   b"crawl" -> the crawl ID; b"seq" -> the next sequence number
    index    fp -> queue key                    where a URL's record is
    urls     Q fp -> record                     next fetch (ms, 0 = done), due (ms), seq, created (s),
                                                priority, URL as sent, metadata (a serialised URLInfo)
    sched    Q due seq -> fp                    waiting: a future refetch date, or leased until `due`
    ready    Q rank due seq -> fp               due: higher priority first (rank), then due time, then arrival
    held     Q fp -> until (ms)                 URLs handed out; in flight while until > now
    queues   queue key -> queue record          delay, blocked until, crawl limit, completed, active
A URL not done is in `sched` or in `ready`; `lease` moves a queue's URLs from sched to ready once due.
Queue keys hold no NUL (the caller refuses them), so every prefix scan stays in its queue. Times are passed in
(`now`, seconds) so a test can drive the clock.
"""

from __future__ import annotations

import shutil
import struct
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import islice
from pathlib import Path
from typing import Any, TypeVar

import lmdb
import xxhash

from frontier.config import DEFAULT_CANONICAL, DEFAULT_DEDUP, DedupConfig
from frontier.errors import StorageError
from frontier.seen.datadir import DirLock, prepare_data_dir
from frontier.seen.fingerprint import fingerprint
from frontier.seen.urlseen import URLSeen
from frontier.url.canonical import CanonicalRules, canonicalize

LOCK_FILE = "serve.lock"
CRAWLS_DIR = "crawls"
DELETING = "deleting-"  # a crawl dir renamed so, then removed: a leftover (a crash in between) goes at open
PRIORITY_KEY = "priority"  # the metadata key whose first value (a float) orders a queue: higher first

_REC = struct.Struct(">QQQQdI")  # next_ms, due_ms, seq, created_s, priority, len(url)
_DUE = 8  # offset of due_ms in a record
_QUEUE = struct.Struct(">iQIQQ")  # delay (-1: the default), blocked_until_ms, limit (0: none), completed, active
_U64 = struct.Struct(">Q")
_F64 = struct.Struct(">d")
_DBS = ("ufmeta", "index", "urls", "sched", "ready", "held", "queues")
_ALL = (1 << 64) - 1

T = TypeVar("T")


def url_key(url: str, rules: CanonicalRules) -> bytes:
    """The seen-test key of a URL: the fingerprint of its canonical form (InvalidURL if it has none)."""
    return fingerprint(canonicalize(url, rules=rules))


def rank(priority: float) -> bytes:
    """8 bytes that sort ascending as `priority` descends (a finite float; -0.0 ranks as 0.0)."""
    (bits,) = _U64.unpack(_F64.pack(priority + 0.0))
    ascending = bits ^ _ALL if bits >> 63 else bits | 1 << 63
    return _U64.pack(ascending ^ _ALL)


@dataclass(frozen=True, slots=True, kw_only=True)
class Item:
    """One checked URLItem: a discovered URL (added if the seen-test finds it new) or a known one (replaced).
    `fp`: its `url_key`. `next_fetch`: seconds since the epoch when it may be fetched, 0 = done for good.
    `created`: 0 = now (a known URL keeps the creation date it has). `priority`: higher is served first."""

    discovered: bool
    crawl: str
    queue: str
    url: str
    fp: bytes
    next_fetch: float
    created: int = 0
    metadata: bytes = b""
    priority: float = 0.0


@dataclass(frozen=True, slots=True)
class Record:
    """A URL as stored: `next_fetch` in seconds (0 = done)."""

    crawl: str
    queue: str
    url: str
    next_fetch: float
    created: int
    metadata: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueInfo:
    """A queue's settings and counters. `delay` -1: the server's default delay."""

    delay: int = -1
    blocked_until: float = 0.0
    limit: int = 0
    completed: int = 0
    active: int = 0

    def pack(self) -> bytes:
        return _QUEUE.pack(self.delay, int(self.blocked_until * 1000), self.limit, self.completed, self.active)

    @classmethod
    def unpack(cls, data: bytes) -> QueueInfo:
        delay, blocked, limit, completed, active = _QUEUE.unpack(data)
        return cls(delay=delay, blocked_until=blocked / 1000, limit=limit, completed=completed, active=active)


@dataclass(frozen=True, slots=True)
class Stats:
    """GetStats' figures over one queue or one crawl."""

    size: int
    in_process: int
    queues: int
    active_queues: int
    completed: int

    @classmethod
    def of(cls, queues: Iterable[tuple[QueueInfo | None, Callable[[], int]]]) -> Stats:
        """The figures over queues given as (its record, None if there is no such queue; how many of its URLs
        are in flight now)."""
        size = in_process = count = active_queues = completed = 0
        for info, in_flight in queues:
            if info is None:
                continue
            busy = in_flight()
            count += 1
            size += info.active
            in_process += busy
            completed += info.completed
            active_queues += bool(info.active or busy)
        return cls(size, in_process, count, active_queues, completed)


@dataclass(frozen=True, slots=True)
class Leased:
    """A URL handed out by `lease`."""

    crawl: str
    queue: str
    url: str
    metadata: bytes


@dataclass(frozen=True, slots=True)
class _Stored:
    """A record with where it is scheduled."""

    record: Record
    due_ms: int
    seq: int
    priority: float


def queue_prefix(queue: str) -> bytes:
    return queue.encode() + b"\0"


def _ms(seconds: float) -> int:
    return int(round(seconds * 1000))


def _scan(txn: lmdb.Transaction, db: Any, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
    cursor = txn.cursor(db)
    if not cursor.set_range(prefix):
        return
    for key, value in cursor:
        if not key.startswith(prefix):
            return
        yield key, value


def _delete_prefix(txn: lmdb.Transaction, db: Any, prefix: bytes) -> None:
    cursor = txn.cursor(db)
    if cursor.set_range(prefix):
        while cursor.key().startswith(prefix):
            if not cursor.delete():  # moves to the next record; False at the end of the database
                break


class CrawlState:
    """One crawl: its seen-test (URLSeen over `path`) and its URLs, queues and leases beside the fingerprint
    log. Every method is one transaction; the caller serialises the calls."""

    def __init__(self, path: Path, name: str | None, *, dedup: DedupConfig, rules: CanonicalRules,
                 sync: bool) -> None:
        self.path = path
        self.seen = URLSeen.from_dedup(path, dedup, rules=rules, fsync=sync)
        try:
            log = self.seen.log
            self._db = {n: log.open_db(n.encode()) for n in _DBS}
            stored = log.read(lambda txn: txn.get(b"crawl", db=self._db["ufmeta"]))
            if name is not None and stored is None:
                log.write(lambda txn: txn.put(b"crawl", name.encode(), db=self._db["ufmeta"]))
            self.name = stored.decode() if stored is not None else name
        except BaseException:
            self.seen.close()
            raise

    @property
    def forgets(self) -> bool:
        """True if the seen-test can forget a URL (exact mode, or a counting filter)."""
        return self.seen.exact or self.seen.deletable

    def close(self) -> None:
        self.seen.close()

    def read(self, step: Callable[[lmdb.Transaction], T]) -> T:
        return self.seen.log.read(step)

    def queue_names(self, txn: lmdb.Transaction) -> list[str]:
        return [key.decode() for key, _ in _scan(txn, self._db["queues"], b"")]

    def queue_info(self, txn: lmdb.Transaction, queue: str) -> QueueInfo | None:
        data = txn.get(queue.encode(), db=self._db["queues"])
        return None if data is None else QueueInfo.unpack(data)

    def _set_queue(self, txn: lmdb.Transaction, queue: str, info: QueueInfo) -> None:
        txn.put(queue.encode(), info.pack(), db=self._db["queues"])

    def _stored(self, queue: str, value: bytes) -> _Stored:
        next_ms, due_ms, seq, created, priority, n = _REC.unpack_from(value)
        start = _REC.size
        url = bytes(value[start:start + n]).decode()
        return _Stored(Record(self.name, queue, url, next_ms / 1000, created, bytes(value[start + n:])), due_ms, seq,
                       priority)

    # -- writes ----------------------------------------------------------------------------------------------

    def put(self, items: Sequence[Item], now: float) -> tuple[list[bool], list[str]]:
        """Apply `items` (all of this crawl) in order in one commit: (for each, True if it changed the frontier:
        a discovered URL the seen-test found new, or a known URL stored; the queues it created)."""
        out: list[tuple[list[bool], list[str]]] = []

        def also(txn: lmdb.Transaction, new_fps: list[bytes]) -> None:
            fresh = set(new_fps)
            seq = _U64.unpack(txn.get(b"seq", db=self._db["ufmeta"]) or _U64.pack(0))[0]
            counts: dict[str, QueueInfo] = {}
            created: list[str] = []
            changed = []
            for item in items:
                if item.discovered and item.fp not in fresh:
                    changed.append(False)  # seen before (or twice in this batch): ignored
                    continue
                fresh.discard(item.fp)
                self._put_one(txn, item, now, seq, counts, created)
                seq += 1
                changed.append(True)
            for queue, info in counts.items():
                self._set_queue(txn, queue, info)
            txn.put(b"seq", _U64.pack(seq), db=self._db["ufmeta"])
            out[:] = [(changed, created)]  # a rerun (the map grew) replaces what the void run found

        # A URL with a record is seen (its record was written in its seen-test's transaction): a known item of
        # one (an ack) needs no seen-test, whose fixed cost per call dominates a commit of a few acks.
        known = [item.fp for item in items if not item.discovered]
        recorded = set(self.read(lambda txn: [fp for fp in known if txn.get(fp, db=self._db["index"]) is not None]))
        fps = [item.fp for item in items if item.discovered or item.fp not in recorded]
        if fps:
            self.seen.add_fingerprints(fps, also=also)
        else:
            self.seen.log.write(lambda txn: also(txn, []))
        return out[0]

    def _counts(self, txn: lmdb.Transaction, counts: dict[str, QueueInfo], queue: str, created: list[str]) -> QueueInfo:
        """A queue's record as this transaction has it so far (a new queue's when it has none)."""
        info = counts.get(queue)
        if info is None:
            info = self.queue_info(txn, queue)
            if info is None:
                info = QueueInfo()
                created.append(queue)
        return info

    def _put_one(self, txn: lmdb.Transaction, item: Item, now: float, seq: int, counts: dict[str, QueueInfo],
                 created_queues: list[str]) -> None:
        old_queue = txn.get(item.fp, db=self._db["index"])
        created = item.created or int(now)
        if old_queue is not None:
            old = self._remove(txn, old_queue.decode(), item.fp, counts, created_queues)
            created = item.created or old.created
        next_ms = _ms(item.next_fetch)
        prefix = queue_prefix(item.queue)
        url = item.url.encode()
        txn.put(item.fp, item.queue.encode(), db=self._db["index"])
        txn.put(prefix + item.fp, _REC.pack(next_ms, next_ms, seq, created, item.priority, len(url)) + url
                + item.metadata, db=self._db["urls"])
        info = self._counts(txn, counts, item.queue, created_queues)
        if next_ms:
            if next_ms <= _ms(now):
                txn.put(prefix + rank(item.priority) + _U64.pack(next_ms) + _U64.pack(seq), item.fp,
                        db=self._db["ready"])
            else:
                txn.put(prefix + _U64.pack(next_ms) + _U64.pack(seq), item.fp, db=self._db["sched"])
            info = replace(info, active=info.active + 1)
        else:
            info = replace(info, completed=info.completed + 1)
        counts[item.queue] = info

    def _remove(self, txn: lmdb.Transaction, queue: str, fp: bytes, counts: dict[str, QueueInfo],
                created: list[str]) -> Record:
        """Delete one URL's rows in `queue` (not its seen entry) and count it out in `counts`; returns its
        record. The caller stores `counts`."""
        prefix = queue_prefix(queue)
        stored = self._stored(queue, txn.pop(prefix + fp, db=self._db["urls"]))
        txn.delete(fp, db=self._db["index"])
        txn.delete(prefix + fp, db=self._db["held"])
        info = self._counts(txn, counts, queue, created)
        if stored.record.next_fetch:
            when = _U64.pack(stored.due_ms) + _U64.pack(stored.seq)
            if not txn.delete(prefix + when, db=self._db["sched"]):
                txn.delete(prefix + rank(stored.priority) + when, db=self._db["ready"])
            info = replace(info, active=info.active - 1)
        else:
            info = replace(info, completed=info.completed - 1)
        counts[queue] = info
        return stored.record

    def lease(self, queues: list[str], *, max_queues: int, max_per_queue: int, hold: float,
              may_serve: Callable[[str, QueueInfo], bool], now: float) -> tuple[list[Leased], list[str], int]:
        """Hand out the URLs due now, up to `max_per_queue` from each of up to `max_queues` of `queues` (in that
        order), each held `hold` seconds. `may_serve(queue, info)`: False while the queue is within its delay
        since it last served. A queue is skipped while blocked, past its crawl limit or
        with `max_per_queue` URLs in flight. Returns (the URLs, the queues that served some, how many of
        `queues` were tried)."""
        return self.seen.log.write(lambda txn: self._lease(txn, queues, max_queues, max_per_queue, hold,
                                                             may_serve, now))

    def _lease(self, txn: lmdb.Transaction, queues: list[str], max_queues: int, max_per_queue: int, hold: float,
               may_serve: Callable[[str, QueueInfo], bool], now: float) -> tuple[list[Leased], list[str], int]:
        out: list[Leased] = []
        served: list[str] = []
        now_ms, until_ms = _ms(now), _ms(now + hold)
        urls, sched, ready = self._db["urls"], self._db["sched"], self._db["ready"]
        tried = 0
        for queue in queues:
            if len(served) >= max_queues:
                break
            tried += 1
            info = self.queue_info(txn, queue)
            if info is None or not info.active or now < info.blocked_until:
                continue
            if (info.limit and info.completed >= info.limit) or not may_serve(queue, info):
                continue
            prefix = queue_prefix(queue)
            self._promote(txn, prefix, now_ms)
            room = max_per_queue - self.in_process(txn, prefix, now_ms)
            due = list(islice(_scan(txn, ready, prefix), max(room, 0)))
            for ready_key, fp in due:
                value = txn.get(prefix + fp, db=urls)
                stored = self._stored(queue, value)
                txn.delete(ready_key, db=ready)
                txn.put(prefix + _U64.pack(until_ms) + _U64.pack(stored.seq), fp, db=sched)
                txn.put(prefix + fp, value[:_DUE] + _U64.pack(until_ms) + value[_DUE + 8:], db=urls)
                txn.put(prefix + fp, _U64.pack(until_ms), db=self._db["held"])
                out.append(Leased(self.name, queue, stored.record.url, stored.record.metadata))
            if due:
                served.append(queue)
        return out, served, tried

    def _promote(self, txn: lmdb.Transaction, prefix: bytes, now_ms: int) -> None:
        """Move a queue's URLs due by `now_ms` from `sched` to `ready` (ranked by their priority)."""
        sched = self._db["sched"]
        moving = []
        for key, fp in _scan(txn, sched, prefix):
            if _U64.unpack_from(key, len(prefix))[0] > now_ms:
                break
            moving.append((key, fp))
        for key, fp in moving:
            priority = _F64.unpack_from(txn.get(prefix + fp, db=self._db["urls"]), 32)[0]
            txn.delete(key, db=sched)
            txn.put(prefix + rank(priority) + key[len(prefix):], fp, db=self._db["ready"])

    def in_process(self, txn: lmdb.Transaction, prefix: bytes, now_ms: int) -> int:
        return sum(1 for _, until in _scan(txn, self._db["held"], prefix) if _U64.unpack(until)[0] > now_ms)

    def update_queue(self, queue: str, changes: dict[str, Any]) -> bool:
        def step(txn: lmdb.Transaction) -> bool:
            info = self.queue_info(txn, queue)
            if info is None:
                return False
            self._set_queue(txn, queue, replace(info, **changes))
            return True

        return self.seen.log.write(step)

    def delete(self, doomed: Callable[[lmdb.Transaction], list[tuple[str, bytes]]],
               then: Callable[[lmdb.Transaction], None] = lambda txn: None) -> int:
        """Delete the URLs `doomed(txn)` names ((queue, fp) pairs, read first), forgetting them in the seen-test
        where it can forget, then run `then(txn)`, in one transaction; returns how many URLs were deleted."""
        fps = [fp for _, fp in self.read(doomed)]

        def step(txn: lmdb.Transaction) -> None:
            counts: dict[str, QueueInfo] = {}
            for queue, fp in doomed(txn):  # read again in this transaction: the same pairs (one thread writes)
                self._remove(txn, queue, fp, counts, [])
            for queue, info in counts.items():
                self._set_queue(txn, queue, info)
            then(txn)

        if self.forgets:
            self.seen.discard_fingerprints(fps, also=step)
        else:
            self.seen.log.write(step)
        return len(fps)

    def drop_queue(self, txn: lmdb.Transaction, queue: str) -> None:
        """Delete a queue's record (its URLs must be gone)."""
        for name in ("sched", "ready", "held"):
            _delete_prefix(txn, self._db[name], queue_prefix(queue))
        txn.delete(queue.encode(), db=self._db["queues"])

    # -- reads -----------------------------------------------------------------------------------------------

    def fps_of(self, txn: lmdb.Transaction, queue: str) -> list[tuple[str, bytes]]:
        prefix = queue_prefix(queue)
        return [(queue, key[len(prefix):]) for key, _ in _scan(txn, self._db["urls"], prefix)]

    def records(self, txn: lmdb.Transaction, queue: str | None) -> Iterator[tuple[Record, bytes]]:
        """(record, fp) of every URL of the crawl, queue by queue in key order (or of one queue)."""
        for q in self.queue_names(txn) if queue is None else [queue]:
            prefix = queue_prefix(q)
            for key, value in _scan(txn, self._db["urls"], prefix):
                yield self._stored(q, value).record, key[len(prefix):]

    def status(self, txn: lmdb.Transaction, fp: bytes) -> Record | None:
        queue = txn.get(fp, db=self._db["index"])
        if queue is None:
            return None
        value = txn.get(queue_prefix(queue.decode()) + fp, db=self._db["urls"])
        return self._stored(queue.decode(), value).record


class FrontierStore:
    """Every crawl of one server in `path` (locked against a second server). Single-threaded: the server calls
    it from one thread. `sync`: fsync every commit (power loss safe). `dedup` and `rules`: the seen-test of
    each crawl (crawl.yaml's dedup and canonical sections)."""

    def __init__(self, path: str | Path, *, sync: bool = False, dedup: DedupConfig = DEFAULT_DEDUP,
                 rules: CanonicalRules = DEFAULT_CANONICAL) -> None:
        self._lock: DirLock | None = None
        self._crawls: dict[str, CrawlState] = {}
        self.path = Path(path)
        self.rules = rules
        self._sync = sync
        self._dedup = dedup
        prepare_data_dir(self.path)
        self._lock = DirLock(self.path / LOCK_FILE, f"{self.path} is in use by another frontier serve process")
        try:
            if (self.path / "data.mdb").exists():
                raise StorageError(f"{self.path} holds a URL Frontier store of an older layout (one LMDB "
                                   "environment for every crawl), which this version does not read; use a new data dir")
            crawls = self.path / CRAWLS_DIR
            prepare_data_dir(crawls)
            for leftover in crawls.glob(DELETING + "*"):
                shutil.rmtree(leftover)
            for path in sorted(crawls.iterdir()):
                crawl = CrawlState(path, None, dedup=dedup, rules=rules, sync=sync)
                if crawl.name is None:  # created, killed before its name was stored: it holds nothing
                    crawl.close()
                    shutil.rmtree(path)
                    continue
                self._crawls[crawl.name] = crawl
            self._order: OrderedDict[tuple[str, str], None] = OrderedDict(
                ((crawl.name, q), None) for crawl in self._crawls.values() for q in crawl.read(crawl.queue_names))
        except BaseException:
            self.close()
            raise
        self._last_served: dict[tuple[str, str], float] = {}  # politeness clock, in memory like upstream's

    def key(self, url: str) -> bytes:
        """The seen-test key of a URL (`url_key` with this store's rules); InvalidURL if it has none."""
        return url_key(url, self.rules)

    def close(self) -> None:
        crawls, self._crawls = self._crawls, {}
        try:
            for crawl in crawls.values():
                crawl.close()
        finally:
            if self._lock is not None:
                self._lock.close()
                self._lock = None

    def __enter__(self) -> FrontierStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _crawl(self, name: str) -> CrawlState:
        """The crawl of that name, created if new."""
        crawl = self._crawls.get(name)
        if crawl is None:
            path = self.path / CRAWLS_DIR / xxhash.xxh3_128_hexdigest(name.encode())
            crawl = self._crawls[name] = CrawlState(path, name, dedup=self._dedup, rules=self.rules, sync=self._sync)
        return crawl

    # -- writes ----------------------------------------------------------------------------------------------

    def put(self, items: Sequence[Item], now: float) -> list[bool]:
        """Apply `items` in order, one commit per crawl; returns, for each, True if it changed the frontier (a
        discovered URL new to the seen-test, or a known URL stored) and False for a discovered URL seen before."""
        by_crawl: dict[str, list[int]] = {}
        for i, item in enumerate(items):
            by_crawl.setdefault(item.crawl, []).append(i)
        out = [False] * len(items)
        for name, positions in by_crawl.items():
            changed, created = self._crawl(name).put([items[i] for i in positions], now)
            for i, flag in zip(positions, changed):
                out[i] = flag
            for queue in created:
                self._order[(name, queue)] = None
        return out

    def lease(self, *, crawl: str | None, queue: str | None, max_queues: int, max_per_queue: int,
              hold: float, default_delay: float, now: float) -> list[Leased]:
        """Hand out the URLs due now, up to `max_per_queue` from each of up to `max_queues` queues (of `crawl`,
        or of every crawl when None; only `queue` when given), each held `hold` seconds: not handed out again
        before then unless updated. Within a queue the highest priority goes first, then the earliest due,
        then the earliest arrival. A queue is skipped while blocked, past its crawl limit, within its delay
        since it last served URLs, or with `max_per_queue` URLs in flight. Queues take turns across calls."""
        if queue is not None:
            assert crawl is not None
            candidates = [(crawl, queue)] if (crawl, queue) in self._order else []
        else:
            candidates = [key for key in self._order if crawl is None or key[0] == crawl]
        by_crawl: dict[str, list[str]] = {}
        for c, q in candidates:
            by_crawl.setdefault(c, []).append(q)
        out: list[Leased] = []
        left = max_queues
        for name, queues in by_crawl.items():
            if left <= 0:
                break

            def may_serve(q: str, info: QueueInfo, name: str = name) -> bool:
                delay = info.delay if info.delay >= 0 else default_delay
                return now >= self._last_served.get((name, q), float("-inf")) + delay

            leased, served, tried = self._crawls[name].lease(queues, max_queues=left, max_per_queue=max_per_queue,
                                                             hold=hold, may_serve=may_serve, now=now)
            out += leased
            for q in queues[:tried]:
                self._order.move_to_end((name, q))  # its turn is taken
            for q in served:
                self._last_served[(name, q)] = now
            left -= len(served)
        return out

    def update_queue(self, crawl: str, queue: str, *, delay: int | None = None, blocked_until: float | None = None,
                     limit: int | None = None) -> bool:
        """Change a queue's delay, block or crawl limit; False if the queue does not exist."""
        handle = self._crawls.get(crawl)
        changes = {k: v for k, v in {"delay": delay, "blocked_until": blocked_until, "limit": limit}.items()
                   if v is not None}
        return handle is not None and handle.update_queue(queue, changes)

    def delete_queue(self, crawl: str, queue: str) -> int | None:
        """Delete a queue and its URLs; returns how many were active (not done), None if no such queue."""
        handle = self._crawls.get(crawl)
        info = None if handle is None else handle.read(lambda txn: handle.queue_info(txn, queue))
        if handle is None or info is None:
            return None
        handle.delete(lambda txn: handle.fps_of(txn, queue), lambda txn: handle.drop_queue(txn, queue))
        self._order.pop((crawl, queue), None)
        self._last_served.pop((crawl, queue), None)
        return info.active

    def delete_crawl(self, crawl: str) -> int:
        """Delete a crawl (its data dir); returns how many URLs were active."""
        handle = self._crawls.pop(crawl, None)
        if handle is None:
            return 0
        active = handle.read(lambda txn: sum(handle.queue_info(txn, q).active for q in handle.queue_names(txn)))
        for key in [key for key in self._order if key[0] == crawl]:
            self._order.pop(key)
            self._last_served.pop(key, None)
        handle.close()
        doomed = handle.path.with_name(DELETING + handle.path.name)
        handle.path.rename(doomed)
        shutil.rmtree(doomed)
        return active

    def purge(self, crawl: str, queue: str | None, created_before: float) -> int:
        """Delete the URLs of a crawl (or of one queue) created before `created_before`; returns how many."""
        handle = self._crawls.get(crawl)
        if handle is None:
            return 0
        return handle.delete(lambda txn: [(record.queue, fp) for record, fp in handle.records(txn, queue)
                                          if record.created < created_before])

    def nodes(self, address: str, now: float) -> list[str]:
        """The nodes serving this store: only this one (`address`), the store being this process's own."""
        return [address]

    # -- reads -----------------------------------------------------------------------------------------------

    def crawls(self) -> list[str]:
        return sorted({crawl for crawl, _ in self._order})

    def queues(self, crawl: str, *, include_inactive: bool, now: float) -> list[str]:
        """The queues of a crawl in key order; without include_inactive, only those with URLs queued and not
        blocked."""
        handle = self._crawls.get(crawl)
        if handle is None:
            return []

        def step(txn: lmdb.Transaction) -> list[str]:
            out = []
            for q in handle.queue_names(txn):
                info = handle.queue_info(txn, q)
                if include_inactive or (info.active and now >= info.blocked_until):
                    out.append(q)
            return out

        return handle.read(step)

    def queue_info(self, crawl: str, queue: str) -> QueueInfo | None:
        handle = self._crawls.get(crawl)
        return None if handle is None else handle.read(lambda txn: handle.queue_info(txn, queue))

    def stats(self, crawl: str, queue: str | None, now: float) -> Stats:
        handle = self._crawls.get(crawl)
        if handle is None:
            return Stats(0, 0, 0, 0, 0)

        def step(txn: lmdb.Transaction) -> Stats:
            return Stats.of((handle.queue_info(txn, q), lambda q=q: handle.in_process(txn, queue_prefix(q), _ms(now)))
                            for q in (handle.queue_names(txn) if queue is None else [queue]))

        return handle.read(step)

    def status(self, crawl: str, fp: bytes) -> Record | None:
        """The URL whose `key` is `fp`, None if the crawl holds none."""
        handle = self._crawls.get(crawl)
        return None if handle is None else handle.read(lambda txn: handle.status(txn, fp))

    def records(self, crawl: str, queue: str | None, match: Callable[[str], bool], *, start: int = 0,
                limit: int | None = None) -> list[Record]:
        """The URLs of a crawl (or one queue), queued or done, whose URL `match`es: queue by queue, in
        fingerprint order, from the `start`-th match, at most `limit`."""
        handle = self._crawls.get(crawl)
        if handle is None:
            return []

        def step(txn: lmdb.Transaction) -> list[Record]:
            matching = (record for record, _ in handle.records(txn, queue) if match(record.url))
            return list(islice(matching, start, None if limit is None else start + limit))

        return handle.read(step)

    def count(self, crawl: str, queue: str | None, match: Callable[[str], bool]) -> int:
        handle = self._crawls.get(crawl)
        if handle is None:
            return 0
        return handle.read(lambda txn: sum(1 for record, _ in handle.records(txn, queue) if match(record.url)))
