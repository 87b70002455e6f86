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
removes the crawl's data dir whole. One crawl, and the layout of its databases: frontier/urlfrontier/lmdb_crawl.py.
"""

from __future__ import annotations

import shutil
from collections import OrderedDict
from collections.abc import Callable, Sequence
from itertools import islice
from pathlib import Path

import lmdb
import xxhash

from frontier.config import DEFAULT_CANONICAL, DEFAULT_DEDUP, DedupConfig
from frontier.errors import StorageError
from frontier.seen.datadir import DirLock, prepare_data_dir
from frontier.url.canonical import CanonicalRules
from frontier.urlfrontier.lmdb_crawl import LmdbCrawl, ms, queue_prefix
from frontier.urlfrontier.model import Item, Leased, QueueInfo, Record, Stats, url_key

LOCK_FILE = "serve.lock"
CRAWLS_DIR = "crawls"
DELETING = "deleting-"  # a crawl dir renamed so, then removed: a leftover (a crash in between) goes at open


class FrontierStore:
    """Every crawl of one server in `path` (locked against a second server). Single-threaded: the server calls
    it from one thread. `sync`: fsync every commit (power loss safe). `dedup` and `rules`: the seen-test of
    each crawl (crawl.yaml's dedup and canonical sections)."""

    def __init__(self, path: str | Path, *, sync: bool = False, dedup: DedupConfig = DEFAULT_DEDUP,
                 rules: CanonicalRules = DEFAULT_CANONICAL) -> None:
        self._lock: DirLock | None = None
        self._crawls: dict[str, LmdbCrawl] = {}
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
                crawl = LmdbCrawl(path, None, dedup=dedup, rules=rules, sync=sync)
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

    def _crawl(self, name: str) -> LmdbCrawl:
        """The crawl of that name, created if new."""
        crawl = self._crawls.get(name)
        if crawl is None:
            path = self.path / CRAWLS_DIR / xxhash.xxh3_128_hexdigest(name.encode())
            crawl = self._crawls[name] = LmdbCrawl(path, name, dedup=self._dedup, rules=self.rules, sync=self._sync)
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
            return Stats.of((handle.queue_info(txn, q), lambda q=q: handle.in_process(txn, queue_prefix(q), ms(now)))
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
