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

Each page result is an attempt, and so is a page lease that ends without a result (it expired,
or its worker died: `abandon_leases`): a URL gets 1 + limits.max_retries attempts, then it is given
up. Every attempt is one crawl log record.

Counters (persisted, committed with what they count): `fetched` counts page results that got an
HTTP response (any status code), `attempts` every attempt. limits.max_pages and max_pages_per_host
count fetched pages, leases in flight included, so neither is ever exceeded.

Unreachable hosts (network errors: connection refused, DNS failure, timeout, reset; not an HTTP
5xx, see messages.NETWORK_ERRORS) are not done for good. A host whose robots.txt fails with one on
every attempt keeps all its queued URLs (none is skipped as robots_disallowed) and is not tried
again in this run; a seed (depth 0: a seed or a URL a seed redirects to) whose fetch fails with one
on every attempt stays queued with its attempts reset. A rerun tries both again.
`unreachable_seeds()` names the seeds concerned. Other pages that fail with a network error on
every attempt are given up like any failure, so dead hosts met during a crawl never keep it from
finishing.
"""

from __future__ import annotations

import enum
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
from frontier.messages import NETWORK_ERRORS, FetchJob, FetchResult, Status
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
    fetched: int = 0  # pages fetched so far, with an HTTP response (persisted)
    queued: int = 0  # entries in the durable queue, leased and held ones included
    leased: set[bytes] = field(default_factory=set)
    held: dict[bytes, tuple[str, str]] = field(default_factory=dict)  # unreachable seeds: key -> (url, reason)
    unreachable: str | None = None  # the network error its robots.txt failed with: not tried again this run
    next_time: float = 0.0
    retry_after_until: float = 0.0
    robots: RobotsRules | None = None
    robots_leased: bool = False
    robots_failures: int = 0
    in_heap: bool = False


class _Ack(enum.Enum):
    """What a page result does to its queue entry."""

    DONE = "done"  # deleted
    RETRY = "retry"  # requeued at the tail with attempt + 1, after a backoff
    HOLD = "hold"  # an unreachable seed: requeued with attempt 0, not leased again in this run


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
        self.fetched = self._store.counters.get("fetched", 0)
        self.attempts = self._store.counters.get("attempts", 0)
        now = self._clock()
        for hid, (name, fetched) in hosts.items():
            host = _Host(hid, name, fetched=fetched, queued=queued.get(hid, 0))
            cached = robots.get(hid)
            if cached and cached[0] + self.politeness.robots_ttl > now:
                host.robots = RobotsRules.parse(cached[1], self.politeness.user_agent)
            self._hosts[hid] = host
            self._schedule(host, now)

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
            slots = min(slots, limits.max_pages - self.fetched - self._page_leases)
        if limits.max_pages_per_host is not None:
            slots = min(slots, limits.max_pages_per_host - host.fetched - in_flight)
        return min(slots, wanted)

    def _lease_pages(self, host: _Host, slots: int, now: float, jobs: list[FetchJob],
                     disallowed: list[tuple[_Host, QueueEntry]]) -> int:
        """Lease up to `slots` of a host's queued URLs in FIFO order; returns how many were leased."""
        leased = 0
        backing_off = float("inf")
        skip = host.leased | host.held.keys() if host.held else host.leased
        for entry in self._store.scan_host(host.hid, slots + 64, skip=skip):
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
        """Return URLs whose lease ran out (a dead or stuck worker) to their queues; returns how many.

        Each counts as an attempt (reason lease_expired, see `_return_leases`) and goes back under a
        new queue key (the tail of its host's FIFO): the key is the lease handle, so a late result
        of the expired lease matches no lease and is dropped as a stale_result; it can neither ack
        nor fail (and so retry) the URL's next lease.
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
        self._return_leases(expired, "lease_expired", now)
        return len(expired)

    def abandon_leases(self, reason: str, now: float | None = None) -> int:
        """End every outstanding lease without a result, e.g. reason "worker_died" before a restart.

        Every leased page counts an attempt under `reason` (requeued with attempt + 1, or given up
        after limits.max_retries), in one transaction; robots.txt leases are only released.
        Returns how many page leases were abandoned.
        """
        now = self._clock() if now is None else now
        leases = [lease for lease in map(self._release, list(self._leases)) if lease is not None]
        self._lease_heap.clear()
        return self._return_leases(leases, reason, now)

    def _return_leases(self, leases: list[_Lease], reason: str, now: float) -> int:
        """Leases that ended without a result, counted as an attempt each: a page goes back to the
        tail of its host's queue with attempt + 1 under a new key, or is given up (logged with
        `reason`) once it has had 1 + max_retries attempts. Returns how many were pages."""
        store = self._store
        jobs = [lease.job for lease in leases if not lease.job.robots]
        new_keys = {job.key: store.next_key(host_of_key(job.key))
                    for job in jobs if job.attempt < self.limits.max_retries}
        if jobs:
            attempts = self.attempts + len(jobs)

            def body(txn: lmdb.Transaction) -> None:
                for job in jobs:
                    if store.delete(txn, job.key) and job.key in new_keys:
                        store.push(txn, new_keys[job.key], job.url, job.depth, attempt=job.attempt + 1,
                                   redirects=job.redirects)
                store.put_counters(txn, {"attempts": attempts})

            self.seen.log.write(body)
            self.attempts = attempts
        for job in jobs:
            if job.key not in new_keys:
                self._hosts[host_of_key(job.key)].queued -= 1
            self.reasons[reason] += 1
            self._log_event(job, Status.FAIL, reason, retry=job.key in new_keys, fetched_at=now)
        if len(leases) > len(jobs):
            self.reasons[f"robots_{reason}"] += len(leases) - len(jobs)
        for lease in leases:
            self._schedule(self._hosts[lease.hid], now)
        return len(jobs)

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
        acks: list[tuple[FetchResult, _Ack]] = []
        robots: list[FetchResult] = []
        spans: list[tuple[FetchResult, int, int]] = []  # the candidates each result proposed first
        for result, _ in accepted:
            if result.job.robots:
                robots.append(result)
                continue
            acks.append((result, self._ack_for(result)))
            first = len(candidates)
            self._collect_links(result, candidates)
            spans.append((result, first, len(candidates)))
        new, new_urls = self._commit(candidates, acks, robots, now)
        # a URL new to the crawl is credited to one page: the first of the batch to link it
        urls = list(candidates)
        new_links = {id(r): sum(1 for u in urls[a:b] if u in new_urls) for r, a, b in spans}
        self._after_report(accepted, acks, new_links, now)
        return new

    def _ack_for(self, result: FetchResult) -> _Ack:
        if result.status is not Status.FAIL:
            return _Ack.DONE
        if result.job.attempt < self.limits.max_retries:
            return _Ack.RETRY
        if result.job.depth == 0 and result.reason in NETWORK_ERRORS:
            return _Ack.HOLD
        return _Ack.DONE

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

    def _commit(self, candidates: dict[str, tuple[int, int]], acks: list[tuple[FetchResult, _Ack]],
                robots: list[FetchResult], now: float | None = None) -> tuple[int, set[str]]:
        """One write transaction: seen-test, enqueue the new, delete or requeue the acked, store robots
        and the counters."""
        now = self._clock() if now is None else now
        urls = list(candidates)
        by_fp = dict(zip(fingerprints(urls), urls))
        store = self._store
        pushed: list[tuple[int, bytes]] = []
        requeued: list[tuple[FetchResult, _Ack, bytes]] = []
        fetched: Counter[int] = Counter(host_of_key(r.job.key) for r, _ in acks if r.http_status is not None)
        counters = {"fetched": self.fetched + fetched.total(), "attempts": self.attempts + len(acks)}

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
            for result, ack in acks:
                job = result.job
                store.delete(txn, job.key)
                if ack is _Ack.DONE:
                    continue
                key = store.next_key(host_of_key(job.key))
                if ack is _Ack.RETRY:
                    store.push(txn, key, job.url, job.depth, attempt=job.attempt + 1, redirects=job.redirects,
                               not_before=now + self._backoff(result))
                else:  # HOLD: a rerun gives it every attempt again
                    store.push(txn, key, job.url, job.depth, redirects=job.redirects)
                requeued.append((result, ack, key))
            for hid, count in fetched.items():
                host = self._hosts[hid]
                store.set_host_fetched(txn, hid, host.name, host.fetched + count)
            for result in robots:
                if result.status is Status.OK:
                    store.put_robots(txn, host_of_key(result.job.key[len(ROBOTS_KEY_PREFIX):]),
                                     result.fetched_at or time.time(), result.robots_txt or "")
            if acks:
                store.put_counters(txn, counters)

        new_flags = self.seen.add_fingerprints(list(by_fp), also=body)
        for name, hid in store.committed().items():
            self._hosts[hid] = _Host(hid, name)
        if acks:
            self.fetched, self.attempts = counters["fetched"], counters["attempts"]
        for hid, count in fetched.items():
            self._hosts[hid].fetched += count
        for hid, _ in pushed:
            self._hosts[hid].queued += 1
        for result, _ in acks:
            self._hosts[host_of_key(result.job.key)].queued -= 1
        for result, ack, key in requeued:
            host = self._hosts[host_of_key(key)]
            host.queued += 1
            if ack is _Ack.HOLD:
                host.held[key] = (result.job.url, result.reason or "")
        for hid in {hid for hid, _ in pushed} | {host_of_key(key) for _, _, key in requeued}:
            self._schedule(self._hosts[hid], now)
        return len(pushed), {by_fp[fp] for fp, new in zip(by_fp, new_flags) if new}

    def _backoff(self, result: FetchResult) -> float:
        if result.retry_after is not None:
            return min(max(result.retry_after, 0.0), MAX_BACKOFF)
        return min(2.0 ** result.job.attempt, MAX_BACKOFF) * (0.5 + random.random() / 2)

    def _after_report(self, accepted: list[tuple[FetchResult, _Lease]], acks: list[tuple[FetchResult, _Ack]],
                      new_links: dict[int, int], now: float) -> None:
        retried = {id(r) for r, ack in acks if ack is _Ack.RETRY}
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
            if host.robots_failures <= self.limits.max_retries:
                host.next_time = now + self._backoff(result)
            elif result.reason in NETWORK_ERRORS:  # its URLs stay queued for a rerun, none is skipped
                host.unreachable = result.reason
                self.reasons["host_unreachable"] += 1
            else:
                host.robots = RobotsRules.disallow_all()
                self.reasons["robots_unreachable"] += 1
        host.next_time = max(host.next_time, now + self._delay(host))

    def _event_for(self, result: FetchResult, retried: bool, new_links: int) -> None:
        reason = result.reason
        if result.status is Status.OK:
            self.reasons["ok" if reason is None else reason] += 1
        else:
            self.reasons[reason or result.status.value] += 1
        self._log_event(result.job, result.status, reason, retry=retried, fetched_at=result.fetched_at,
                        http_status=result.http_status, content_type=result.content_type, bytes=result.bytes,
                        elapsed=round(result.elapsed, 4), links=len(result.outlinks), new_links=new_links,
                        redirect_to=result.redirect_to, worker=result.worker)

    def _log_event(self, job: FetchJob, status: Status, reason: str | None, *, retry: bool, fetched_at: float,
                   **result: object) -> None:
        """One crawl log record per attempt. `result` holds what a fetch result adds; without it the
        record is that of an attempt that brought no result (a lease that expired or was abandoned)."""
        if self._on_event is None:
            return
        record: Event = {
            "url": job.url, "status": status.value, "http_status": None,
            "reason": reason, "retry": retry, "attempt": job.attempt, "depth": job.depth,
            "content_type": None, "bytes": 0, "elapsed": 0.0, "links": 0, "new_links": 0,
            "redirect_to": None, "fetched_at": fetched_at, "worker": -1,
        }
        record.update(result)
        self._on_event(record)

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
        if host.unreachable is not None or host.queued - len(host.leased) - len(host.held) <= 0:
            return False
        if limits.max_pages is not None and self.fetched + self._page_leases >= limits.max_pages:
            return False
        if limits.max_pages_per_host is not None and host.fetched + len(host.leased) >= limits.max_pages_per_host:
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

    def unreachable_seeds(self) -> list[tuple[str, str]]:
        """(seed URL, plain reason) for each seed that could not be reached in this run: its host's
        robots.txt or the seed itself failed with a network error on every attempt. A seed here is a
        queued URL of depth 0 (a seed, or a URL a seed redirects to). They stay queued: a rerun tries
        them again."""
        out: list[tuple[str, str]] = []
        for host in self._hosts.values():
            if host.unreachable is not None:
                why = NETWORK_ERRORS[host.unreachable]
                out.extend((e.url, why) for e in self._store.scan_host(host.hid, host.queued) if e.depth == 0)
            out.extend((url, NETWORK_ERRORS[reason]) for url, reason in host.held.values())
        return out

    def stats(self) -> dict[str, object]:
        """fetched: page results with an HTTP response; attempts: page results and leases that ended
        without one (both for the whole crawl); unreachable_hosts: hosts held back in this run by
        network errors (their URLs stay queued)."""
        return {
            "fetched": self.fetched,
            "attempts": self.attempts,
            "queued": self.queued,
            "in_flight": self.in_flight,
            "hosts": len(self._hosts),
            "unreachable_hosts": sum(1 for h in self._hosts.values() if h.unreachable is not None),
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
