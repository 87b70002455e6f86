"""The URL Frontier state of one machine: every crawl of a `serve` process in one LMDB environment.

An item's effects (its seen-set entry, its queue entry, its queue's counters) are one write transaction, and
a group of items from every stream is one commit: an ack is sent only after the commit that holds its item,
so a kill -9 of the server loses no acknowledged item. A URL handed out by `lease` is rescheduled in the
same store at the end of its lease (delay_requestable) and recorded as held: after a crash it comes back at
that time, not before, unless an update (a KnownURLItem) for it arrives first.

Layout (named databases; `C` = crawl ID + NUL, `Q` = C + queue key + NUL, fp = 16-byte xxh3_128 of the URL):
    seen    C fp            -> queue key             the seen-test: one URL once per crawl
    urls    Q fp            -> URL record            next fetch (ms, 0 = done), due (ms), seq, created (s), url,
                                                     metadata (a serialised URLInfo holding only its metadata)
    sched   Q due seq       -> fp                    the URLs not done, by due time then arrival (FIFO)
    held    Q fp            -> until (ms)            URLs handed out; in flight while until > now
    queues  C queue key     -> queue record          delay, blocked until, crawl limit, completed, active
    meta    b"seq"          -> next sequence number
Crawl IDs and queue keys hold no NUL (the caller refuses them), so every prefix scan stays in its crawl/queue.
Times are passed in (`now`, seconds) so a test can drive the clock.
"""

from __future__ import annotations

import fcntl
import os
import struct
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import islice
from pathlib import Path
from typing import Any, TypeVar

import lmdb

from frontier.errors import StorageError
from frontier.seen.datadir import prepare_data_dir

DEFAULT_MAP_SIZE = 1 << 30  # bytes; doubled whenever a commit finds the map full
LOCK_FILE = "serve.lock"

_REC = struct.Struct(">QQQQI")  # next_fetch_ms, due_ms, seq, created_s, len(url)
_QUEUE = struct.Struct(">iQIQQ")  # delay (-1: the default), blocked_until_ms, limit (0: none), completed, active
_U64 = struct.Struct(">Q")
_DBS = ("seen", "urls", "sched", "held", "queues", "meta")

T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class Item:
    """One checked URLItem: a discovered URL (added unless known) or a known one (replaced). `next_fetch`:
    seconds since the epoch when it may be fetched, 0 = done for good. `created`: 0 = now (a known URL keeps
    the creation date it has)."""

    discovered: bool
    crawl: str
    queue: str
    url: str
    fp: bytes
    next_fetch: float
    created: int = 0
    metadata: bytes = b""


@dataclass(frozen=True, slots=True)
class Record:
    """A URL as stored: `next_fetch` in seconds (0 = done), `held_until` 0 when not in flight."""

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


@dataclass(frozen=True, slots=True)
class Leased:
    """A URL handed out by `lease`."""

    crawl: str
    queue: str
    url: str
    metadata: bytes


def crawl_prefix(crawl: str) -> bytes:
    return crawl.encode() + b"\0"


def queue_prefix(crawl: str, queue: str) -> bytes:
    return crawl.encode() + b"\0" + queue.encode() + b"\0"


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


def _delete_prefix(txn: lmdb.Transaction, db: Any, prefix: bytes) -> int:
    cursor = txn.cursor(db)
    removed = 0
    if cursor.set_range(prefix):
        while cursor.key().startswith(prefix):
            removed += 1
            if not cursor.delete():  # moves to the next record; False at the end of the database
                break
    return removed


class FrontierStore:
    """Every crawl of one server in `path` (an LMDB environment, locked against a second server).
    Single-threaded: the server calls it from one thread. `sync`: fsync every commit (power loss safe)."""

    def __init__(self, path: str | Path, *, sync: bool = False, map_size: int = DEFAULT_MAP_SIZE) -> None:
        self._env: lmdb.Environment | None = None
        self._lock_fd: int | None = None
        self.path = Path(path)
        prepare_data_dir(self.path)
        self._lock_fd = os.open(self.path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.close()
            raise StorageError(f"{self.path} is in use by another frontier serve process") from None
        try:
            self._env = lmdb.open(str(self.path), map_size=map_size, max_dbs=len(_DBS), sync=sync,
                                  metasync=sync, subdir=True, lock=True)
            self._db = {name: self._env.open_db(name.encode()) for name in _DBS}
            with self._env.begin() as txn:
                seq = txn.get(b"seq", db=self._db["meta"])
                self._order: OrderedDict[tuple[str, str], None] = OrderedDict(
                    (self._split_queue(key), None) for key, _ in _scan(txn, self._db["queues"], b""))
        except lmdb.Error as e:
            self.close()
            raise StorageError(f"cannot open the URL Frontier store in {self.path}: {e}") from None
        self._seq = _U64.unpack(seq)[0] if seq else 0
        self._last_served: dict[tuple[str, str], float] = {}  # politeness clock, in memory like upstream's

    @staticmethod
    def _split_queue(key: bytes) -> tuple[str, str]:
        crawl, _, queue = key.partition(b"\0")
        return crawl.decode(), queue.decode()

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> FrontierStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transactions ----------------------------------------------------------------------------------------

    def _write(self, step: Callable[[lmdb.Transaction], T]) -> T:
        """Run `step` in one write transaction, growing the map when it is full (the step is rerun)."""
        assert self._env is not None, "store closed"
        while True:
            try:
                with self._env.begin(write=True) as txn:
                    return step(txn)
            except lmdb.MapFullError:
                self._env.set_mapsize(self._env.info()["map_size"] * 2)
            except lmdb.Error as e:
                raise StorageError(f"URL Frontier store {self.path}: {e}") from None

    def _read(self, step: Callable[[lmdb.Transaction], T]) -> T:
        assert self._env is not None, "store closed"
        try:
            with self._env.begin() as txn:
                return step(txn)
        except lmdb.Error as e:
            raise StorageError(f"URL Frontier store {self.path}: {e}") from None

    def _queue_info(self, txn: lmdb.Transaction, crawl: str, queue: str) -> QueueInfo | None:
        data = txn.get(crawl_prefix(crawl) + queue.encode(), db=self._db["queues"])
        return None if data is None else QueueInfo.unpack(data)

    def _set_queue(self, txn: lmdb.Transaction, crawl: str, queue: str, info: QueueInfo) -> None:
        txn.put(crawl_prefix(crawl) + queue.encode(), info.pack(), db=self._db["queues"])

    @staticmethod
    def _record(crawl: str, queue: str, value: bytes) -> tuple[Record, int, int]:
        """(record, due_ms, seq) of a stored URL record."""
        next_ms, due_ms, seq, created, n = _REC.unpack_from(value)
        start = _REC.size
        url = value[start:start + n].decode()
        return Record(crawl, queue, url, next_ms / 1000, created, value[start + n:]), due_ms, seq

    # -- writes ----------------------------------------------------------------------------------------------

    def put(self, items: Sequence[Item], now: float) -> list[bool]:
        """Apply `items` in order in one commit; returns, for each, True if it changed the frontier (a new
        discovered URL, or a known URL stored) and False for a discovered URL already known (ignored)."""

        def step(txn: lmdb.Transaction) -> list[bool]:
            first = self._seq
            counts: dict[tuple[str, str], QueueInfo] = {}
            try:
                changed = [self._put_one(txn, item, now, counts) for item in items]
            except BaseException:
                self._seq = first  # the transaction is aborted: so are its numbers
                raise
            for (crawl, queue), info in counts.items():
                self._set_queue(txn, crawl, queue, info)
            txn.put(b"seq", _U64.pack(self._seq), db=self._db["meta"])
            return changed

        return self._write(step)

    def _counts(self, txn: lmdb.Transaction, counts: dict[tuple[str, str], QueueInfo], crawl: str,
                queue: str) -> QueueInfo:
        """A queue's record as this transaction has it so far (a new queue's when it has none)."""
        info = counts.get((crawl, queue))
        if info is None:
            info = self._queue_info(txn, crawl, queue)
            if info is None:
                info = QueueInfo()
                self._order[(crawl, queue)] = None
        return info

    def _put_one(self, txn: lmdb.Transaction, item: Item, now: float,
                 counts: dict[tuple[str, str], QueueInfo]) -> bool:
        seen_key = crawl_prefix(item.crawl) + item.fp
        old_queue = txn.get(seen_key, db=self._db["seen"])
        if old_queue is not None and item.discovered:
            return False
        created = item.created or int(now)
        if old_queue is not None:
            old = self._remove(txn, item.crawl, old_queue.decode(), item.fp, counts)
            created = item.created or old.created
        next_ms = _ms(item.next_fetch)
        seq = self._seq
        self._seq += 1
        prefix = queue_prefix(item.crawl, item.queue)
        url = item.url.encode()
        txn.put(seen_key, item.queue.encode(), db=self._db["seen"])
        txn.put(prefix + item.fp, _REC.pack(next_ms, next_ms, seq, created, len(url)) + url + item.metadata,
                db=self._db["urls"])
        info = self._counts(txn, counts, item.crawl, item.queue)
        if next_ms:
            txn.put(prefix + _U64.pack(next_ms) + _U64.pack(seq), item.fp, db=self._db["sched"])
            info = replace(info, active=info.active + 1)
        else:
            info = replace(info, completed=info.completed + 1)
        counts[(item.crawl, item.queue)] = info
        return True

    def _remove(self, txn: lmdb.Transaction, crawl: str, queue: str, fp: bytes,
                counts: dict[tuple[str, str], QueueInfo]) -> Record:
        """Delete one URL's rows in `queue` (not its seen entry) and count it out in `counts`; returns its
        record. The caller stores `counts`."""
        prefix = queue_prefix(crawl, queue)
        value = txn.pop(prefix + fp, db=self._db["urls"])
        record, due_ms, seq = self._record(crawl, queue, value)
        txn.delete(prefix + fp, db=self._db["held"])
        info = self._counts(txn, counts, crawl, queue)
        if record.next_fetch:
            txn.delete(prefix + _U64.pack(due_ms) + _U64.pack(seq), db=self._db["sched"])
            info = replace(info, active=info.active - 1)
        else:
            info = replace(info, completed=info.completed - 1)
        counts[(crawl, queue)] = info
        return record

    def lease(self, *, crawl: str | None, queue: str | None, max_queues: int, max_per_queue: int,
              hold: float, default_delay: float, now: float) -> list[Leased]:
        """Hand out the URLs due now, up to `max_per_queue` from each of up to `max_queues` queues (of `crawl`,
        or of every crawl when None; only `queue` when given), each held `hold` seconds: not handed out again
        before then unless updated. A queue is skipped while blocked, past its crawl limit, within its delay
        since it last served URLs, or with `max_per_queue` URLs in flight. Queues take turns across calls."""
        if queue is not None:
            assert crawl is not None
            candidates = [(crawl, queue)] if (crawl, queue) in self._order else []
        else:
            candidates = [key for key in self._order if crawl is None or key[0] == crawl]
        return self._write(lambda txn: self._lease(txn, candidates, max_queues, max_per_queue, hold,
                                                   default_delay, now))

    def _lease(self, txn: lmdb.Transaction, candidates: list[tuple[str, str]], max_queues: int, max_per_queue: int,
               hold: float, default_delay: float, now: float) -> list[Leased]:
        out: list[Leased] = []
        served = 0
        now_ms, until_ms = _ms(now), _ms(now + hold)
        for key in candidates:
            if served >= max_queues:
                break
            self._order.move_to_end(key)
            crawl, queue = key
            info = self._queue_info(txn, crawl, queue)
            if info is None or not info.active or now < info.blocked_until:
                continue
            if info.limit and info.completed >= info.limit:
                continue
            delay = info.delay if info.delay >= 0 else default_delay
            if now < self._last_served.get(key, float("-inf")) + delay:
                continue
            prefix = queue_prefix(crawl, queue)
            room = max_per_queue - self._in_process(txn, prefix, now_ms)
            due = []
            for sched_key, fp in _scan(txn, self._db["sched"], prefix):
                if len(due) >= room or _U64.unpack_from(sched_key, len(prefix))[0] > now_ms:
                    break
                due.append((sched_key, fp))
            for sched_key, fp in due:
                value = txn.get(prefix + fp, db=self._db["urls"])
                record, _, seq = self._record(crawl, queue, value)
                txn.delete(sched_key, db=self._db["sched"])
                txn.put(prefix + _U64.pack(until_ms) + _U64.pack(seq), fp, db=self._db["sched"])
                txn.put(prefix + fp, value[:8] + _U64.pack(until_ms) + value[16:], db=self._db["urls"])
                txn.put(prefix + fp, _U64.pack(until_ms), db=self._db["held"])
                out.append(Leased(crawl, queue, record.url, record.metadata))
            if due:
                served += 1
                self._last_served[key] = now
        return out

    def _in_process(self, txn: lmdb.Transaction, prefix: bytes, now_ms: int) -> int:
        return sum(1 for _, until in _scan(txn, self._db["held"], prefix) if _U64.unpack(until)[0] > now_ms)

    def update_queue(self, crawl: str, queue: str, *, delay: int | None = None, blocked_until: float | None = None,
                     limit: int | None = None) -> bool:
        """Change a queue's delay, block or crawl limit; False if the queue does not exist."""

        def step(txn: lmdb.Transaction) -> bool:
            info = self._queue_info(txn, crawl, queue)
            if info is None:
                return False
            changes = {"delay": delay, "blocked_until": blocked_until, "limit": limit}
            self._set_queue(txn, crawl, queue, replace(info, **{k: v for k, v in changes.items() if v is not None}))
            return True

        return self._write(step)

    def delete_queue(self, crawl: str, queue: str) -> int | None:
        """Delete a queue and its URLs; returns how many were active (not done), None if no such queue."""
        return self._write(lambda txn: self._delete_queue(txn, crawl, queue))

    def _delete_queue(self, txn: lmdb.Transaction, crawl: str, queue: str) -> int | None:
        info = self._queue_info(txn, crawl, queue)
        if info is None:
            return None
        prefix, seen_prefix = queue_prefix(crawl, queue), crawl_prefix(crawl)
        for key, _ in _scan(txn, self._db["urls"], prefix):
            txn.delete(seen_prefix + key[len(prefix):], db=self._db["seen"])
        for name in ("urls", "sched", "held"):
            _delete_prefix(txn, self._db[name], prefix)
        txn.delete(seen_prefix + queue.encode(), db=self._db["queues"])
        self._order.pop((crawl, queue), None)
        self._last_served.pop((crawl, queue), None)
        return info.active

    def delete_crawl(self, crawl: str) -> int:
        """Delete every queue of a crawl; returns how many URLs were active."""

        def step(txn: lmdb.Transaction) -> int:
            return sum(self._delete_queue(txn, crawl, queue) or 0 for queue in self._queues_of(txn, crawl))

        return self._write(step)

    def purge(self, crawl: str, queue: str | None, created_before: float) -> int:
        """Delete the URLs of a crawl (or of one queue) created before `created_before`; returns how many."""

        def step(txn: lmdb.Transaction) -> int:
            doomed = [(record.queue, fp) for record, fp in self._records(txn, crawl, queue)
                      if record.created < created_before]
            counts: dict[tuple[str, str], QueueInfo] = {}
            for q, fp in doomed:
                self._remove(txn, crawl, q, fp, counts)
                txn.delete(crawl_prefix(crawl) + fp, db=self._db["seen"])
            for (c, q), info in counts.items():
                self._set_queue(txn, c, q, info)
            return len(doomed)

        return self._write(step)

    def nodes(self, address: str, now: float) -> list[str]:
        """The nodes serving this store: only this one (`address`), the store being this process's own."""
        return [address]

    # -- reads -----------------------------------------------------------------------------------------------

    def _queues_of(self, txn: lmdb.Transaction, crawl: str) -> list[str]:
        prefix = crawl_prefix(crawl)
        return [key[len(prefix):].decode() for key, _ in _scan(txn, self._db["queues"], prefix)]

    def _records(self, txn: lmdb.Transaction, crawl: str, queue: str | None) -> Iterator[tuple[Record, bytes]]:
        """(record, fp) of every URL of a crawl, queue by queue (or of one queue)."""
        queues = self._queues_of(txn, crawl) if queue is None else [queue]
        for q in queues:
            prefix = queue_prefix(crawl, q)
            for key, value in _scan(txn, self._db["urls"], prefix):
                yield self._record(crawl, q, value)[0], key[len(prefix):]

    def crawls(self) -> list[str]:
        return sorted({crawl for crawl, _ in self._order})

    def queues(self, crawl: str, *, include_inactive: bool, now: float) -> list[str]:
        """The queues of a crawl in key order; without include_inactive, only those with URLs queued and not
        blocked."""

        def step(txn: lmdb.Transaction) -> list[str]:
            prefix = crawl_prefix(crawl)
            out = []
            for key, value in _scan(txn, self._db["queues"], prefix):
                info = QueueInfo.unpack(value)
                if include_inactive or (info.active and now >= info.blocked_until):
                    out.append(key[len(prefix):].decode())
            return out

        return self._read(step)

    def queue_info(self, crawl: str, queue: str) -> QueueInfo | None:
        return self._read(lambda txn: self._queue_info(txn, crawl, queue))

    def stats(self, crawl: str, queue: str | None, now: float) -> Stats:
        def step(txn: lmdb.Transaction) -> Stats:
            queues = self._queues_of(txn, crawl) if queue is None else [queue]
            size = in_process = count = active_queues = completed = 0
            for q in queues:
                info = self._queue_info(txn, crawl, q)
                if info is None:
                    continue
                busy = self._in_process(txn, queue_prefix(crawl, q), _ms(now))
                count += 1
                size += info.active
                in_process += busy
                completed += info.completed
                active_queues += bool(info.active or busy)
            return Stats(size, in_process, count, active_queues, completed)

        return self._read(step)

    def status(self, crawl: str, url: str, fp: bytes) -> Record | None:
        def step(txn: lmdb.Transaction) -> Record | None:
            queue = txn.get(crawl_prefix(crawl) + fp, db=self._db["seen"])
            if queue is None:
                return None
            value = txn.get(queue_prefix(crawl, queue.decode()) + fp, db=self._db["urls"])
            return self._record(crawl, queue.decode(), value)[0]

        return self._read(step)

    def records(self, crawl: str, queue: str | None, match: Callable[[str], bool], *, start: int = 0,
                limit: int | None = None) -> list[Record]:
        """The URLs of a crawl (or one queue), queued or done, whose URL `match`es: queue by queue, in
        fingerprint order, from the `start`-th match, at most `limit`."""

        def step(txn: lmdb.Transaction) -> list[Record]:
            matching = (record for record, _ in self._records(txn, crawl, queue) if match(record.url))
            return list(islice(matching, start, None if limit is None else start + limit))

        return self._read(step)

    def count(self, crawl: str, queue: str | None, match: Callable[[str], bool]) -> int:
        return self._read(lambda txn: sum(1 for record, _ in self._records(txn, crawl, queue) if match(record.url)))
