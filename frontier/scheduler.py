"""Frontier: the crawl scheduler as a library. Seeds in, leased jobs out, results back.

    frontier.add_seeds(urls)
    jobs = frontier.lease(64)          # ready URLs, politeness and robots.txt respected
    frontier.report(results)           # one FetchResult per job: ack, retry, or skip; outlinks enqueued

A leased URL stays in the durable queue until its result is reported, so a crash or a dead worker
loses nothing: on restart every queued URL is leasable again, and an expired lease returns the URL
to its host's queue. A report's seen-test, queue writes and acks are one LMDB transaction.

Politeness per host (host = "name[:port]"): with a delay, one fetch at a time and the next lease
no sooner than `delay` after the previous result; without, up to `max_per_host` in flight. The delay
is the largest of the configured delay, robots.txt Crawl-delay (capped) and a Retry-After.
"""

from __future__ import annotations

import heapq
import itertools
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import lmdb

from frontier.canonical import DEFAULT_RULES, CanonicalRules, canonicalize, url_host
from frontier.config import (DEFAULT_DEDUP, DEFAULT_LIMITS, DEFAULT_POLITENESS, DedupConfig, LimitsConfig,
                             PolitenessConfig)
from frontier.crawlstore import CrawlStore, QueueEntry, host_key, host_of_key
from frontier.errors import InvalidURL, StorageError
from frontier.fingerprint import fingerprints
from frontier.messages import FetchJob, FetchResult, Status
from frontier.robots import RobotsRules
from frontier.scope import Scope
from frontier.seen import URLSeen

MAX_BACKOFF = 300.0
ROBOTS_KEY_PREFIX = b"R"

Event = dict[str, object]


@dataclass(slots=True)
class _Host:
    hid: int
    name: str
    fetches: int = 0  # page requests made so far (persisted)
    queued: int = 0  # entries in the durable queue, leased ones included
    leased: set[bytes] = field(default_factory=set)
    next_time: float = 0.0
    retry_after_until: float = 0.0
    robots: RobotsRules | None = None
    robots_leased: bool = False
    robots_failures: int = 0
    in_heap: bool = False


@dataclass(frozen=True, slots=True)
class _Lease:
    hid: int
    deadline: float
    job: FetchJob


class Frontier:
    """The crawl frontier over a data dir: de-dup state, durable per-host queues, leases, politeness."""

    def __init__(self, data_dir: str | Path, *, scope: Scope, limits: LimitsConfig = DEFAULT_LIMITS,
                 politeness: PolitenessConfig = DEFAULT_POLITENESS, dedup: DedupConfig = DEFAULT_DEDUP,
                 canonical: CanonicalRules = DEFAULT_RULES, fsync: bool = False, lease_timeout: float = 120.0,
                 max_depth: int | None = None, on_event: Callable[[Event], None] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.scope = scope
        self.limits = limits
        self.politeness = politeness
        self.max_depth = max_depth
        self.lease_timeout = lease_timeout
        self._rules = canonical
        self._on_event = on_event
        self._clock = clock
        self._seen: URLSeen | None = None
        self._seen = URLSeen(Path(data_dir) / "state", capacity=dedup.capacity, error_rate=dedup.error_rate,
                             exact=dedup.exact, lru_size=dedup.lru_size, partitions=dedup.partitions,
                             rules=canonical, fsync=fsync)
        try:
            self._store = CrawlStore(self._seen.log)
            self._hosts: dict[int, _Host] = {}
            self._heap: list[tuple[float, int, int]] = []
            self._tick = itertools.count()
            self._leases: dict[bytes, _Lease] = {}
            self._lease_heap: list[tuple[float, bytes]] = []
            self._page_leases = 0
            self.reasons: Counter[str] = Counter()
            self._load()
        except BaseException:
            self._seen.close()
            raise

    @classmethod
    def from_config(cls, cfg: "object", on_event: Callable[[Event], None] | None = None) -> "Frontier":
        """Build from a CrawlConfig (frontier.config)."""
        return cls(cfg.storage.data_dir, scope=Scope.from_config(cfg), limits=cfg.limits,  # type: ignore[attr-defined]
                   politeness=cfg.politeness, dedup=cfg.dedup, canonical=cfg.canonical,  # type: ignore[attr-defined]
                   fsync=cfg.storage.fsync, lease_timeout=cfg.workers.lease_timeout,  # type: ignore[attr-defined]
                   max_depth=cfg.scope.max_depth, on_event=on_event)  # type: ignore[attr-defined]

    def _load(self) -> None:
        hosts, queued, robots = self._store.load()
        now = self._clock()
        for hid, (name, fetches) in hosts.items():
            host = _Host(hid, name, fetches=fetches, queued=queued.get(hid, 0))
            cached = robots.get(hid)
            if cached and cached[0] + self.politeness.robots_ttl > now:
                host.robots = RobotsRules.parse(cached[1], self.politeness.user_agent)
            self._hosts[hid] = host
            self._schedule(host, now)
        self.pages = self._store.counters.get("pages", 0)

    # -- intake -------------------------------------------------------------------------------

    def add_seeds(self, urls: Iterable[str]) -> int:
        """Canonicalise, scope-check and enqueue seeds (depth 0); returns how many were new."""
        candidates: dict[str, tuple[int, int]] = {}
        for url in urls:
            try:
                canon = canonicalize(url, rules=self._rules)
            except InvalidURL:
                self.reasons["invalid_seed"] += 1
                continue
            reason = self.scope.check(canon)
            if reason:
                self.reasons[f"seed_{reason}"] += 1
                continue
            candidates.setdefault(canon, (0, 0))
        return self._commit(candidates, acks=[], robots=[])[0]

    # -- leasing ------------------------------------------------------------------------------

    def lease(self, max_jobs: int, now: float | None = None) -> list[FetchJob]:
        """Up to `max_jobs` jobs that may be fetched now, each leased until now + lease_timeout."""
        now = self._clock() if now is None else now
        self.expire(now)
        jobs: list[FetchJob] = []
        disallowed: list[tuple[_Host, QueueEntry]] = []
        heap = self._heap
        while heap and len(jobs) < max_jobs and heap[0][0] <= now:
            _, _, hid = heapq.heappop(heap)
            host = self._hosts[hid]
            host.in_heap = False
            if max(host.next_time, host.retry_after_until) > now:
                # queued before a result pushed its time on (report enqueues links, then sets the delay)
                self._schedule(host, now)
                continue
            if self.politeness.obey_robots and host.robots is None:
                if not host.robots_leased:
                    jobs.append(self._lease_robots(host, now))
                continue
            slots = self._slots(host, max_jobs - len(jobs))
            if slots > 0 and not self._lease_pages(host, slots, now, jobs, disallowed):
                # nothing leasable now (entries backing off or held): look again later, not in this call
                host.next_time = max(host.next_time, now + 0.05)
            self._schedule(host, now)
        if disallowed:
            self._ack_disallowed(disallowed, now)
        return jobs

    def _slots(self, host: _Host, wanted: int) -> int:
        limits = self.limits
        in_flight = len(host.leased)
        slots = (1 if self._delay(host) > 0 else self.politeness.max_per_host) - in_flight
        if limits.max_pages is not None:
            slots = min(slots, limits.max_pages - self.pages - self._page_leases)
        if limits.max_pages_per_host is not None:
            slots = min(slots, limits.max_pages_per_host - host.fetches - in_flight)
        return min(slots, wanted)

    def _lease_pages(self, host: _Host, slots: int, now: float, jobs: list[FetchJob],
                     disallowed: list[tuple[_Host, QueueEntry]]) -> int:
        """Lease up to `slots` of a host's queued URLs in FIFO order; returns how many were leased."""
        leased = 0
        backing_off = float("inf")
        for entry in self._store.scan_host(host.hid, slots + 64, skip=host.leased):
            if entry.not_before > now:
                backing_off = min(backing_off, entry.not_before)
                continue
            if host.robots is not None and not host.robots.allows(entry.url):
                disallowed.append((host, entry))
                host.leased.add(entry.key)  # held until the skip is committed below
                continue
            job = FetchJob(entry.url, entry.depth, entry.key, entry.attempt, entry.redirects)
            self._add_lease(host, job, now)
            self._page_leases += 1
            jobs.append(job)
            leased += 1
            if leased == slots:
                break
        if not leased and backing_off != float("inf"):
            host.next_time = max(host.next_time, backing_off)
        return leased

    def _lease_robots(self, host: _Host, now: float) -> FetchJob:
        entries = self._store.scan_host(host.hid, 1)
        scheme = entries[0].url.split(":", 1)[0] if entries else "http"
        job = FetchJob(f"{scheme}://{host.name}/robots.txt", 0, ROBOTS_KEY_PREFIX + host_key(host.hid), robots=True)
        host.robots_leased = True
        self._add_lease(host, job, now)
        return job

    def _add_lease(self, host: _Host, job: FetchJob, now: float) -> None:
        deadline = now + self.lease_timeout
        self._leases[job.key] = _Lease(host.hid, deadline, job)
        if not job.robots:
            host.leased.add(job.key)
        heapq.heappush(self._lease_heap, (deadline, job.key))

    def _release(self, key: bytes) -> _Lease | None:
        lease = self._leases.pop(key, None)
        if lease is None:
            return None
        host = self._hosts[lease.hid]
        if lease.job.robots:
            host.robots_leased = False
        else:
            host.leased.discard(key)
            self._page_leases -= 1
        return lease

    def expire(self, now: float | None = None) -> int:
        """Return URLs whose lease ran out (a dead or stuck worker) to their queues.

        Each goes back under a new queue key (the tail of its host's FIFO): the key is the lease
        handle, so a late result of the expired lease matches no lease and is dropped as a
        stale_result; it can neither ack nor fail (and so retry) the URL's next lease.
        """
        now = self._clock() if now is None else now
        expired: list[_Lease] = []
        while self._lease_heap and self._lease_heap[0][0] <= now:
            deadline, key = heapq.heappop(self._lease_heap)
            lease = self._leases.get(key)
            if lease is None or lease.deadline != deadline:
                continue
            self._release(key)
            expired.append(lease)
        pages = [(lease.job, self._store.next_key(lease.hid)) for lease in expired if not lease.job.robots]
        if pages:

            def body(txn: lmdb.Transaction) -> None:
                for job, key in pages:
                    if self._store.delete(txn, job.key):
                        self._store.push(txn, key, job.url, job.depth, attempt=job.attempt, redirects=job.redirects)

            self.seen.log.write(body)
        for lease in expired:
            self._schedule(self._hosts[lease.hid], now)
        self.reasons["lease_expired"] += len(expired)
        return len(expired)

    # -- results ------------------------------------------------------------------------------

    def report(self, results: Sequence[FetchResult], now: float | None = None) -> int:
        """Ack a batch of results in one transaction; returns how many new URLs were queued."""
        now = self._clock() if now is None else now
        accepted: list[tuple[FetchResult, _Lease]] = []
        for result in results:
            lease = self._release(result.job.key)
            if lease is None:
                self.reasons["stale_result"] += 1  # its lease expired and the URL was re-leased and acked
                continue
            accepted.append((result, lease))
        candidates: dict[str, tuple[int, int]] = {}
        acks: list[tuple[FetchResult, bool]] = []  # (result, retry?)
        robots: list[FetchResult] = []
        spans: list[tuple[FetchResult, int, int]] = []  # the candidates each result proposed first
        for result, _ in accepted:
            if result.job.robots:
                robots.append(result)
                continue
            retry = result.status is Status.FAIL and result.job.attempt < self.limits.max_retries
            acks.append((result, retry))
            first = len(candidates)
            self._collect_links(result, candidates)
            spans.append((result, first, len(candidates)))
        new, new_urls = self._commit(candidates, acks, robots, now)
        # a URL new to the crawl is credited to one page: the first of the batch to link it
        urls = list(candidates)
        new_links = {id(r): sum(1 for u in urls[a:b] if u in new_urls) for r, a, b in spans}
        self._after_report(accepted, acks, new_links, now)
        return new

    def _collect_links(self, result: FetchResult, candidates: dict[str, tuple[int, int]]) -> None:
        job = result.job
        if result.redirect_to:
            reason = self.scope.check(result.redirect_to)
            if job.redirects + 1 > self.limits.max_redirects:
                reason = "too_many_redirects"
            if reason:
                self.reasons[f"redirect_{reason}"] += 1
            else:
                candidates.setdefault(result.redirect_to, (job.depth, job.redirects + 1))
        if result.status is not Status.OK or not result.outlinks:
            return
        if self.max_depth is not None and job.depth + 1 > self.max_depth:
            self.reasons["link_max_depth"] += len(result.outlinks)
            return
        check = self.scope.check
        for url in result.outlinks:
            reason = check(url)
            if reason:
                self.reasons[f"link_{reason}"] += 1
            else:
                candidates.setdefault(url, (job.depth + 1, 0))

    def _commit(self, candidates: dict[str, tuple[int, int]], acks: list[tuple[FetchResult, bool]],
                robots: list[FetchResult], now: float | None = None) -> tuple[int, set[str]]:
        """One write transaction: seen-test, enqueue the new, delete or requeue the acked, store robots."""
        now = self._clock() if now is None else now
        urls = list(candidates)
        by_fp = dict(zip(fingerprints(urls), urls))
        store = self._store
        pushed: list[tuple[int, bytes]] = []
        requeued: list[tuple[int, bytes, float]] = []
        pages = self.pages + len(acks)
        fetches: Counter[int] = Counter(host_of_key(r.job.key) for r, _ in acks)

        def body(txn: lmdb.Transaction, new_fps: list[bytes]) -> None:
            store.rolled_back()
            pushed.clear()
            requeued.clear()
            for fp in new_fps:
                url = by_fp[fp]
                depth, redirects = candidates[url]
                hid = store.host_id(txn, url_host(url))
                key = store.next_key(hid)
                store.push(txn, key, url, depth, redirects=redirects)
                pushed.append((hid, key))
            for result, retry in acks:
                job = result.job
                store.delete(txn, job.key)
                if retry:
                    hid = host_of_key(job.key)
                    not_before = now + self._backoff(result)
                    key = store.next_key(hid)
                    store.push(txn, key, job.url, job.depth, attempt=job.attempt + 1, redirects=job.redirects,
                               not_before=not_before)
                    requeued.append((hid, key, not_before))
            for hid, count in fetches.items():
                host = self._hosts[hid]
                store.set_host_fetches(txn, hid, host.name, host.fetches + count)
            for result in robots:
                if result.status is Status.OK:
                    store.put_robots(txn, host_of_key(result.job.key[len(ROBOTS_KEY_PREFIX):]),
                                     result.fetched_at or time.time(), result.robots_txt or "")
            if acks:
                store.put_counters(txn, {"pages": pages})

        new_flags = self.seen.add_fingerprints(list(by_fp), also=body)
        for name, hid in store.committed().items():
            self._hosts[hid] = _Host(hid, name)
        self.pages = pages
        for hid, count in fetches.items():
            self._hosts[hid].fetches += count
        for hid, _ in pushed:
            self._hosts[hid].queued += 1
        for hid, _, _ in requeued:
            self._hosts[hid].queued += 1
        for result, _ in acks:
            self._hosts[host_of_key(result.job.key)].queued -= 1
        for hid in {hid for hid, _ in pushed} | {hid for hid, _, _ in requeued}:
            self._schedule(self._hosts[hid], now)
        return len(pushed), {by_fp[fp] for fp, new in zip(by_fp, new_flags) if new}

    def _backoff(self, result: FetchResult) -> float:
        if result.retry_after is not None:
            return min(max(result.retry_after, 0.0), MAX_BACKOFF)
        return min(2.0 ** result.job.attempt, MAX_BACKOFF) * (0.5 + random.random() / 2)

    def _after_report(self, accepted: list[tuple[FetchResult, _Lease]], acks: list[tuple[FetchResult, bool]],
                      new_links: dict[int, int], now: float) -> None:
        retried = {id(r) for r, retry in acks if retry}
        for result, lease in accepted:
            host = self._hosts[lease.hid]
            if result.retry_after:
                host.retry_after_until = max(host.retry_after_until, now + min(result.retry_after, MAX_BACKOFF))
            if result.job.robots:
                self._robots_result(host, result, now)
            else:
                host.next_time = max(host.next_time, now + self._delay(host))
                self._event_for(result, id(result) in retried, new_links.get(id(result), 0))
            self._schedule(host, now)

    def _robots_result(self, host: _Host, result: FetchResult, now: float) -> None:
        if result.status is Status.OK:
            host.robots = RobotsRules.parse(result.robots_txt or "", self.politeness.user_agent)
            self.reasons["robots_fetched"] += 1
        else:
            host.robots_failures += 1
            if host.robots_failures > self.limits.max_retries:
                host.robots = RobotsRules.disallow_all()
                self.reasons["robots_unreachable"] += 1
            else:
                host.next_time = now + self._backoff(result)
        host.next_time = max(host.next_time, now + self._delay(host))

    def _event_for(self, result: FetchResult, retried: bool, new_links: int) -> None:
        reason = result.reason
        if result.status is Status.OK:
            self.reasons["ok" if reason is None else reason] += 1
        else:
            self.reasons[reason or result.status.value] += 1
        if self._on_event is None:
            return
        self._on_event({
            "url": result.job.url, "status": result.status.value, "http_status": result.http_status,
            "reason": reason, "retry": retried, "attempt": result.job.attempt, "depth": result.job.depth,
            "content_type": result.content_type, "bytes": result.bytes, "elapsed": round(result.elapsed, 4),
            "links": len(result.outlinks), "new_links": new_links,
            "redirect_to": result.redirect_to, "fetched_at": result.fetched_at, "worker": result.worker,
        })

    def _ack_disallowed(self, disallowed: list[tuple[_Host, QueueEntry]], now: float) -> None:
        """Skip URLs robots.txt forbids: dequeue them without a fetch, logged as robots_disallowed."""

        def body(txn: lmdb.Transaction) -> None:
            for _, entry in disallowed:
                self._store.delete(txn, entry.key)

        self.seen.log.write(body)
        for host, entry in disallowed:
            host.leased.discard(entry.key)
            host.queued -= 1
            self.reasons["robots_disallowed"] += 1
            if self._on_event is not None:
                self._on_event({"url": entry.url, "status": "skip", "reason": "robots_disallowed",
                                "depth": entry.depth, "fetched_at": now})
            self._schedule(host, now)

    # -- host scheduling ----------------------------------------------------------------------

    def _delay(self, host: _Host) -> float:
        delay = self.politeness.delay
        if host.robots is not None and host.robots.crawl_delay:
            delay = max(delay, min(host.robots.crawl_delay, self.politeness.max_crawl_delay))
        return delay

    def _has_work(self, host: _Host) -> bool:
        limits = self.limits
        if host.queued - len(host.leased) <= 0:
            return False
        if limits.max_pages is not None and self.pages + self._page_leases >= limits.max_pages:
            return False
        if limits.max_pages_per_host is not None and host.fetches + len(host.leased) >= limits.max_pages_per_host:
            return False
        return True

    def _schedule(self, host: _Host, now: float) -> None:
        """Put a host with leasable work on the ready heap at its next allowed time."""
        if host.in_heap or host.robots_leased or not self._has_work(host):
            return  # a robots result or a returning lease reschedules it
        if len(host.leased) >= (1 if self._delay(host) > 0 else self.politeness.max_per_host):
            return
        host.in_heap = True
        heapq.heappush(self._heap, (max(host.next_time, host.retry_after_until), next(self._tick), host.hid))

    # -- state --------------------------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        return len(self._leases)

    @property
    def queued(self) -> int:
        return sum(h.queued for h in self._hosts.values())

    def next_ready_in(self, now: float | None = None) -> float | None:
        """Seconds until a host may be leased again (0 if one is ready now); None if none has work."""
        now = self._clock() if now is None else now
        while self._heap:
            when, _, hid = self._heap[0]
            host = self._hosts[hid]
            if self._has_work(host) and max(host.next_time, host.retry_after_until) <= when:
                break
            heapq.heappop(self._heap)
            host.in_heap = False
            self._schedule(host, now)  # no work: stays out; queued too early (see lease): back at its time
        if not self._heap:
            return None
        return max(0.0, self._heap[0][0] - now)

    @property
    def done(self) -> bool:
        """True when nothing is leased and no queued URL can still be leased (within the limits)."""
        return not self._leases and self.next_ready_in() is None

    def stats(self) -> dict[str, object]:
        return {
            "pages": self.pages,
            "queued": self.queued,
            "in_flight": self.in_flight,
            "hosts": len(self._hosts),
            "reasons": dict(self.reasons),
            "seen": self.seen.stats(),
        }

    @property
    def seen(self) -> URLSeen:
        if self._seen is None:
            raise StorageError("the frontier is closed")
        return self._seen

    def close(self) -> None:
        """Snapshot the Bloom filter and close the data dir. Leased URLs stay queued for the next run."""
        if self._seen is not None:
            seen, self._seen = self._seen, None
            seen.close()

    def __enter__(self) -> "Frontier":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
