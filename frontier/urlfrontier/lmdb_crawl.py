"""One crawl of the LMDB URL Frontier store (frontier/urlfrontier/store.py): its seen-test and, beside its
fingerprint log, its URLs, queues and leases.

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

import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import islice
from pathlib import Path
from typing import Any, TypeVar

import lmdb

from frontier.config import DedupConfig
from frontier.seen.urlseen import URLSeen
from frontier.url.canonical import CanonicalRules
from frontier.urlfrontier.model import Item, Leased, QueueInfo, Record

_REC = struct.Struct(">QQQQdI")  # next_ms, due_ms, seq, created_s, priority, len(url)
_DUE = 8  # offset of due_ms in a record
_U64 = struct.Struct(">Q")
_F64 = struct.Struct(">d")
_DBS = ("ufmeta", "index", "urls", "sched", "ready", "held", "queues")
_ALL = (1 << 64) - 1

T = TypeVar("T")


def rank(priority: float) -> bytes:
    """8 bytes that sort ascending as `priority` descends (a finite float; -0.0 ranks as 0.0)."""
    (bits,) = _U64.unpack(_F64.pack(priority + 0.0))
    ascending = bits ^ _ALL if bits >> 63 else bits | 1 << 63
    return _U64.pack(ascending ^ _ALL)


@dataclass(frozen=True, slots=True)
class _Stored:
    """A record with where it is scheduled."""

    record: Record
    due_ms: int
    seq: int
    priority: float


def queue_prefix(queue: str) -> bytes:
    return queue.encode() + b"\0"


def ms(seconds: float) -> int:
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


class LmdbCrawl:
    """One crawl of the LMDB store (not the crawl engine's `frontier.state.base.CrawlState`): its seen-test
    (URLSeen over `path`) and its URLs, queues and leases beside the fingerprint log. Every method is one transaction; the caller serialises the calls."""

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
        next_ms = ms(item.next_fetch)
        prefix = queue_prefix(item.queue)
        url = item.url.encode()
        txn.put(item.fp, item.queue.encode(), db=self._db["index"])
        txn.put(prefix + item.fp, _REC.pack(next_ms, next_ms, seq, created, item.priority, len(url)) + url
                + item.metadata, db=self._db["urls"])
        info = self._counts(txn, counts, item.queue, created_queues)
        if next_ms:
            if next_ms <= ms(now):
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
        now_ms, until_ms = ms(now), ms(now + hold)
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
