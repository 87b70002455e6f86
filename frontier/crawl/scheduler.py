"""Frontier: the crawl scheduler as a library. Seeds in, leased jobs out, results back.

    frontier.add_seeds(urls)
    jobs = frontier.lease(64)          # ready URLs, politeness and robots.txt respected
    frontier.report(results)           # one FetchResult per job: ack, retry, or skip; outlinks enqueued

A leased URL stays in the durable queue until its result is reported, so a crash or a dead worker
loses nothing: on restart every queued URL is leasable again, and an expired lease returns the URL
to its host's queue. A report's seen-test, queue writes and acks are one atomic commit of the crawl
state (frontier/state/base.py; one LMDB transaction on one machine).

Politeness per host (host = "name[:port]"): with a delay, one fetch at a time and the next lease
no sooner than `delay` after the previous result; without, up to `max_per_host` in flight. The delay
is the largest of the configured delay, robots.txt Crawl-delay (capped), a Retry-After and, with
politeness.adaptive, delay_factor x the server's latency on the host's last result (capped at max_delay;
carried to the state as the ack's `pause_until`, so both backends apply it unchanged).

Which URL next (frontier.crawl.ordering): each queued URL has a priority; a host's URLs are leased best first
(FIFO among equals), and among the hosts politeness allows now the one whose best URL ranks highest, a host that
had politeness.host_turn leases in a row going behind the others. Seeds take `add_seeds(priority=)` (else the
scorer's seed priority), outlinks the reporter's `FetchResult.priorities` or the scorer's (ordering.scorer);
a scored URL already queued moves in its queue in the same commit; `reprioritize` moves queued URLs.

Crawler traps (frontier.crawl.traps, with a TrapDetector): every page result with an HTTP response is observed
before its links are taken; a soft 404's links, the links of a page with a huge fan-out, and links and redirect
targets of a suspected URL pattern go to the host's low band (link_soft_404, link_fan_out, link_/redirect_
trap_pattern); a normal entry whose pattern was suspected after it was queued moves there when leased
(trap_pattern), and a low entry whose pattern spent its budget while still growing is parked for the run
(trap_budget, Outcome.PARK; `TrapDetector.admit`). Each host's first URL brings its soft-404 probe (outcome
soft_404_probe, links not followed). The detector's per-host state is committed with the results that
changed it (`Commit.host_state`) and loaded at open, so what it learnt survives kill -9, on either backend.

Each page result is an attempt, and so is a page lease that ends without a result (it expired,
or its worker died: `abandon_leases`): a URL gets 1 + limits.max_retries attempts, then it is given
up. Every attempt is one crawl log record.

Counters (persisted, committed with what they count, crawl-wide): `fetched` counts the site's pages that got
an HTTP response (any status code), `attempts` every attempt. The crawler's own requests (robots.txt, a host's
soft-404 probe, sitemaps) are not pages: they are not `fetched` (their attempts are counted), and this process
counts them apart. limits.max_pages and max_pages_per_host count fetched pages, leases in flight included, so
neither is ever exceeded. This process's counts are `Frontier.counts` (frontier.crawl.counts.ProcessCounts;
`instance()` reports them): pages fetched, each attempt's outcome, site pages apart from the crawler's own
requests, and every link refused, by reason.

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

import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from itertools import chain
from dataclasses import replace
from pathlib import Path
from typing import Any

from frontier.config import (DEFAULT_DEDUP, DEFAULT_LIMITS, DEFAULT_POLITENESS, CrawlConfig, DedupConfig,
                             LimitsConfig, PolitenessConfig)
from frontier.crawl.counts import ProcessCounts
from frontier.crawl.events import SOFT_404_PROBE, Event, OnEvent, attempt_record, result_record, skip_record
from frontier.crawl.intake import LinkBatch
from frontier.crawl.messages import NETWORK_ERRORS, FetchJob, FetchResult, Status
from frontier.crawl.ordering import Scorer, load_scorer
from frontier.crawl.priorities import merge_priorities
from frontier.crawl.retry import page_ack
from frontier.crawl.revisit import NOT_MODIFIED, UNCHANGED, RevisitSchedule
from frontier.crawl.robots import RobotsCache
from frontier.crawl.sitemaps import first_interval as sitemap_first
from frontier.crawl.sitemaps import level as sitemap_level
from frontier.crawl.sitemaps import robots_sitemaps, seed_hosts
from frontier.crawl.steering import Steering, steering_for
from frontier.crawl.traps import SOFT_404, TRAP_BUDGET, TRAP_PATTERN, TrapDetector, suspected_counts
from frontier.errors import InvalidURL
from frontier.seen.urlseen import URLSeen
from frontier.state.base import (Ack, Commit, CrawlState, Ended, Lease, Link, Outcome, Rescore, RobotsAck,
                                 RobotsOutcome, StatePolicy, check_priority)
from frontier.state.hosts import HostSchedule
from frontier.state.lmdb import LmdbCrawlState
from frontier.url.canonical import DEFAULT_RULES, CanonicalRules, canonicalize
from frontier.url.scope import Scope

LEASE_ROUNDS = 8  # lease() asks again this often while entries of suspected patterns fill its batches


def state_policy(limits: LimitsConfig, politeness: PolitenessConfig, lease_timeout: float,
                 dedup: DedupConfig = DEFAULT_DEDUP, max_suspect_pages: int | None = None,
                 revisit: bool = False, revisit_continuous: bool = False) -> StatePolicy:
    return StatePolicy(lease_timeout=lease_timeout, max_retries=limits.max_retries,
                       max_per_host=politeness.max_per_host, delay=politeness.delay,
                       obey_robots=politeness.obey_robots, robots_ttl=politeness.robots_ttl,
                       max_pages=limits.max_pages, max_pages_per_host=limits.max_pages_per_host,
                       recrawl_after=dedup.recrawl_after, max_suspect_pages=max_suspect_pages,
                       host_turn=politeness.host_turn, revisit=revisit, revisit_continuous=revisit_continuous)


def crawl_policy(cfg: CrawlConfig) -> StatePolicy:
    """The state policy of a CrawlConfig: its limits, politeness, lease timeout and seen-test. The low band has no
    per-host budget there: the trap detector budgets each suspected pattern (`TrapDetector.admit`)."""
    return state_policy(cfg.limits, cfg.politeness, cfg.workers.lease_timeout, cfg.dedup, None,
                        cfg.revisit.enabled, cfg.revisit.continuous)


def open_state(cfg: CrawlConfig, robots: RobotsCache) -> CrawlState:
    """The crawl state a config names: its data dir's LMDB (storage.backend lmdb; `robots` gets the stored
    robots.txt files at open) or the crawl in storage.redis (backend redis, shared with every instance)."""
    if cfg.storage.backend == "redis":
        from frontier.state.redis_state import RedisCrawlState  # redis-py only when asked for

        return RedisCrawlState.from_config(cfg, crawl_policy(cfg))
    return LmdbCrawlState.from_config(cfg, crawl_policy(cfg), on_robots=robots.loaded)


def _job(lease: Lease, sketch: bool = False, conditional: bool = True) -> FetchJob:
    if lease.robots:
        return FetchJob(lease.url, 0, lease.key, robots=True)
    last = lease.revisit
    if last is None:
        return FetchJob(lease.url, lease.depth, lease.key, lease.attempt, lease.redirects,
                        sitemap=sitemap_level(lease.payload), sketch=sketch)
    return FetchJob(lease.url, lease.depth, lease.key, lease.attempt, lease.redirects,
                    sitemap=sitemap_level(lease.payload), sketch=sketch, etag=last.etag if conditional else "",
                    last_modified=last.last_modified if conditional else "", digest=last.digest,
                    captured_at=last.captured_at)


class Frontier:
    """The crawl frontier over a crawl state: seeds in, leased jobs out, results back; politeness, limits, trap
    defences and priorities applied here, the same for every backend. `Frontier.open` builds one over a data dir's
    LMDB, `from_config` over what a CrawlConfig names (LMDB, or a Redis crawl shared by several instances)."""

    def __init__(self, state: CrawlState, *, scope: Scope, limits: LimitsConfig = DEFAULT_LIMITS,
                 politeness: PolitenessConfig = DEFAULT_POLITENESS, canonical: CanonicalRules = DEFAULT_RULES,
                 max_depth: int | None = None, on_event: OnEvent | None = None,
                 clock: Callable[[], float] = time.time, seeds_from_sitemaps: bool = False,
                 traps: TrapDetector | None = None, scorer: Scorer | None = None,
                 revisit: RevisitSchedule | None = None, conditional: bool = True,
                 robots: RobotsCache | None = None, steering: Steering | None = None) -> None:
        """A frontier over `state`; the rest are its rules (their defaults: frontier.config's).

        Args:
            state: the crawl state it drives (closed by `close`, and here if this fails); its policy
                (`StatePolicy`) holds the limits and politeness it applies.
            scope: which URLs belong to the crawl (seeds, links and redirects outside it are refused).
            limits: retries, redirects and page limits (the state's policy applies the page limits).
            politeness: the delays and robots.txt rules of each host; with `adaptive`, the pause after each
                result.
            canonical: the canonicalisation rules of seeds and re-scored URLs.
            max_depth: links deeper than this are refused (None: no limit).
            on_event: called with each crawl log record (attempts, skips).
            clock: the wall clock (seconds), for calls that are given no `now`.
            seeds_from_sitemaps: queue the seed hosts' sitemaps (from their robots.txt) with the seeds.
            traps: the trap detector; its suspects go to each host's low queue, fetched after every normal
                entry within each suspected pattern's budget (`TrapDetector.admit`; past it, parked for the run).
            scorer: the priority of each page's outlinks (frontier.crawl.ordering); None: fifo (priority 0
                unless the caller gives one).
            revisit: each fetched page's next due time (frontier.crawl.revisit); None: one pass.
            conditional: send the stored validators (ETag, Last-Modified) with a revisit.
            robots: the robots.txt rules cache (None: a new one over `politeness` and the state's stored
                files); `Frontier.open` passes the one whose rules the state loaded at open.
            steering: the operator's orders (frontier.crawl.steering: pause, exclusions, blocks, delays, retired
                hosts), kept in the crawl state; None: none."""
        self._state: CrawlState = state
        self._scorer = scorer
        self._revisit = revisit
        self._conditional = conditional
        self.counts = ProcessCounts()
        self.scope = scope
        self.limits = limits
        self.politeness = politeness
        self.max_depth = max_depth
        self._rules = canonical
        self._on_event = on_event
        self._clock = clock
        self._robots = robots if robots is not None else RobotsCache(politeness, state.robots_text)
        self._seeds_from_sitemaps = seeds_from_sitemaps
        self._sitemap_origins: dict[str, str] = {}  # seed host -> origin, whose robots.txt names sitemaps
        self._traps = traps
        self._probed: set[str] = set()  # origins whose soft-404 probe this process proposed
        self.steering = steering
        if traps is not None:
            try:
                for host, data in state.host_states().items():
                    traps.load_host(host, data)
            except BaseException:
                state.close()
                raise

    @classmethod
    def open(cls, data_dir: str | Path, *, dedup: DedupConfig = DEFAULT_DEDUP, fsync: bool = False,
             lease_timeout: float = 120.0, continuous: bool = False, **options: Any) -> Frontier:
        """A frontier over the LMDB crawl state in `data_dir` (created if missing).

        Args:
            data_dir: the directory of the LMDB env and the Bloom filter's snapshot.
            dedup: the seen-test's settings (capacity, error rate, exact or probabilistic, recrawl_after).
            fsync: sync LMDB to disk on every commit (safe against power loss, slower).
            lease_timeout: seconds a leased URL stays leased without a result before it returns to its queue.
            continuous: with `revisit`, wait for the next due page instead of ending.
            **options: the keyword arguments of `Frontier()` (scope is required)."""
        politeness: PolitenessConfig = options.get("politeness", DEFAULT_POLITENESS)
        clock: Callable[[], float] = options.get("clock", time.time)
        policy = state_policy(options.get("limits", DEFAULT_LIMITS), politeness, lease_timeout, dedup, None,
                              options.get("revisit") is not None, continuous)
        robots = RobotsCache(politeness, lambda host: state.robots_text(host))
        state = LmdbCrawlState(data_dir, policy, dedup=dedup, canonical=options.get("canonical", DEFAULT_RULES),
                               fsync=fsync, on_robots=robots.loaded, now=clock())
        return cls(state, robots=robots, **options)

    @classmethod
    def from_config(cls, cfg: CrawlConfig, on_event: OnEvent | None = None) -> Frontier:
        """The frontier of a crawl config: over the data dir (storage.backend lmdb) or the crawl storage.redis
        names (backend redis, shared with every instance of the same config)."""
        robots = RobotsCache(cfg.politeness, lambda host: state.robots_text(host))
        state = open_state(cfg, robots)
        traps = TrapDetector.from_config(cfg) if cfg.traps.enabled else None
        try:
            steering = steering_for(state, cfg, traps)
        except BaseException:
            state.close()
            raise
        return cls(state, scope=Scope.from_config(cfg), limits=cfg.limits, politeness=cfg.politeness,
                   canonical=cfg.canonical, max_depth=cfg.scope.max_depth, on_event=on_event,
                   seeds_from_sitemaps=cfg.seeds_from_sitemaps, traps=traps,
                   scorer=load_scorer(cfg.ordering.scorer), revisit=RevisitSchedule.from_config(cfg.revisit),
                   conditional=cfg.revisit.conditional, robots=robots, steering=steering)

    # -- this process's counts (frontier.crawl.counts) ------------------------------------------

    @property
    def reasons(self) -> Counter[str]:
        """This process's outcomes and refused links, by reason (`counts.by_reason`)."""
        return self.counts.by_reason

    @property
    def revisits(self) -> Counter[str]:
        """This process's revisit fetches by result (`counts.revisit_fetches`)."""
        return self.counts.revisit_fetches

    def _links(self) -> LinkBatch:
        scope = self.scope if self.steering is None else self.steering.scope(self.scope)
        return LinkBatch(scope, self.counts.by_reason, max_depth=self.max_depth,
                         max_redirects=self.limits.max_redirects, traps=self._traps, probed=self._probed)

    def _emit(self, event: Event) -> None:
        if self._on_event is not None:
            self._on_event(event)

    # -- intake -------------------------------------------------------------------------------

    def add_seeds(self, urls: Iterable[str], priority: float | None = None, force: bool = False) -> int:
        """Canonicalise, scope-check and enqueue seeds (depth 0) at `priority` (None: the scorer's seed priority,
        0 without one); returns how many were new. ValueError for a priority that is not a finite number within
        +-1e12. `force`: queue them even if seen (`Link.force`), each counted new.

        With seeds_from_sitemaps, the seed hosts' sitemaps come with the ack of their robots.txt
        (`report`); those of a host whose robots.txt is stored already (or without obey_robots: its
        /sitemap.xml) are queued here, in the same commit as the seeds."""
        batch = self._links()
        batch.add_seeds(urls, self._rules)
        seeds = len(batch)
        if self._seeds_from_sitemaps:
            for host, origin in seed_hosts([link.url for link in batch.links()]).items():
                self._sitemap_origins[host] = origin
                text = self._state.robots_text(host) if self.politeness.obey_robots else ""
                if text is not None:
                    batch.add_sitemaps(robots_sitemaps(origin, text), 1, self._rules, base=origin + "/")
        if priority is None:
            priority = 0.0 if self._scorer is None else self._scorer.seed_priority
        links = batch.links()
        if (priority := check_priority(priority)) or force:
            links[:seeds] = [link._replace(priority=priority, force=force) for link in links[:seeds]]
        new = self._state.commit(Commit(links=links), self._clock()).new
        return sum(flag for link, flag in zip(links[:seeds], new) if not self._is_probe(link.url))

    def reprioritize(self, urls: Iterable[str], priority: float) -> int:
        """Give queued URLs a new priority: each moves in its host's queue (one entry; a leased one, or one not
        queued, is left alone). Returns how many moved. ValueError for a bad priority; an invalid URL is
        counted (reason invalid_url) and skipped."""
        priority = check_priority(priority)
        rescores = []
        for url in urls:
            try:
                rescores.append(Rescore(canonicalize(url, rules=self._rules), priority))
            except InvalidURL:
                self.counts.by_reason["invalid_url"] += 1
        return self._state.commit(Commit(rescore=rescores), self._clock()).moved if rescores else 0

    def _is_probe(self, url: str) -> bool:
        return self._traps is not None and self._traps.is_probe(url)

    # -- leasing ------------------------------------------------------------------------------

    def lease(self, max_jobs: int, now: float | None = None) -> list[FetchJob]:
        """Up to `max_jobs` jobs that may be fetched now, each leased until now + lease_timeout. A normal entry
        whose URL pattern was suspected after it was queued goes to its host's low queue unfetched (counted
        trap_pattern), and more are leased instead. A job asks for its page's sketch only where the trap
        detector needs one (`TrapDetector.wants_sketch`)."""
        now = self._clock() if now is None else now
        self.expire(now)
        if self.steering is not None:
            self.steering.poll(now)
            if self.steering.paused:
                return []
        traps = self._traps
        jobs: list[FetchJob] = []
        for _ in range(LEASE_ROUNDS):
            batch = self._state.lease(max_jobs - len(jobs), now, self._robots.allows)
            if batch.disallowed:
                self._skip(batch.disallowed, "robots_disallowed", now)
            held = self._steer(batch.leases, now)
            if traps is None:
                jobs.extend(_job(lease, conditional=self._conditional) for lease in batch.leases)
                if not held or len(jobs) >= max_jobs:
                    break
                continue
            later = [lease for lease in batch.leases if not lease.robots and not lease.low
                     and traps.check(lease.url, lease.depth)]
            parked = [lease for lease in batch.leases if lease.low and not traps.admit(lease.url)]
            if later or parked:
                self._state.commit(Commit(acks=[*(Ack(key=lease.key, outcome=Outcome.LOW) for lease in later),
                                                *(Ack(key=lease.key, outcome=Outcome.PARK) for lease in parked)],
                                          host_state=traps.take_dirty()), now)
                self.counts.by_reason[TRAP_PATTERN] += len(later)
                self.counts.by_reason[TRAP_BUDGET] += len(parked)
                keys = {lease.key for lease in chain(later, parked)}
                batch.leases[:] = [lease for lease in batch.leases if lease.key not in keys]
            jobs.extend(_job(lease, not lease.robots and traps.wants_sketch(lease.url), self._conditional)
                        for lease in batch.leases)
            if not (later or parked or held) or len(jobs) >= max_jobs:
                break
        return jobs

    def _steer(self, leases: list[Lease], now: float) -> int:
        """Take the leases the operator's orders hold back (`Steering.hold`) out of `leases`, committed as their
        acks say; an excluded URL is logged as skipped. Returns how many."""
        held = [] if self.steering is None else self.steering.hold(leases, now)
        if not held:
            return 0
        self._state.commit(Commit(acks=[ack for _, ack, _ in held]), now)
        for lease, ack, reason in held:
            self.counts.by_reason[reason] += 1
            if ack.outcome is Outcome.DROP:
                self._emit(skip_record(lease.url, lease.depth, reason, now))
        keys = {lease.key for lease, _, _ in held}
        leases[:] = [lease for lease in leases if lease.key not in keys]
        return len(held)

    def _skip(self, leases: list[Lease], reason: str, now: float) -> None:
        """Dequeue leased URLs without a fetch (robots.txt forbids them), logged as skipped under `reason`."""
        self._state.commit(Commit(acks=[Ack(key=lease.key, outcome=Outcome.DROP) for lease in leases]), now)
        for lease in leases:
            self.counts.by_reason[reason] += 1
            self._emit(skip_record(lease.url, lease.depth, reason, now))

    def expire(self, now: float | None = None) -> int:
        """Return URLs whose lease ran out (a dead or stuck worker) to their queues; returns how many.

        Each counts as an attempt (reason lease_expired) and goes back under a new queue key (the tail
        of its host's FIFO): the key is the lease handle, so a late result of the expired lease matches
        no lease and is dropped as a stale_result; it can neither ack nor fail (and so retry) the URL's
        next lease.
        """
        now = self._clock() if now is None else now
        ended = self._state.expire(now)
        self._log_ended(ended, "lease_expired", now)
        return len(ended)

    def abandon_leases(self, reason: str, now: float | None = None) -> int:
        """End every outstanding lease without a result, e.g. reason "worker_died" before a restart.

        Every leased page counts an attempt under `reason` (requeued with attempt + 1, or given up
        after limits.max_retries), in one transaction; robots.txt leases are only released.
        Returns how many page leases were abandoned.
        """
        now = self._clock() if now is None else now
        return self._log_ended(self._state.abandon(now), reason, now)

    def _log_ended(self, ended: list[Ended], reason: str, now: float) -> int:
        """One attempt record per page lease that ended without a result; returns how many."""
        pages = [e for e in ended if not e.lease.robots]
        for e in pages:
            job = _job(e.lease)
            self.counts.attempt(reason, self._own_request(job))
            self._emit(attempt_record(job, Status.FAIL, reason, retry=e.requeued, fetched_at=now))
        if len(ended) > len(pages):
            self.counts.by_reason[f"robots_{reason}"] += len(ended) - len(pages)
            self.counts.own_requests["robots.txt"] += len(ended) - len(pages)
        return len(pages)

    def _own_request(self, job: FetchJob) -> str | None:
        """"soft_404_probe" or "sitemap" for a job of the crawler's own, else None (a page of the site)."""
        if job.sitemap:
            return "sitemap"
        return SOFT_404_PROBE if self._is_probe(job.url) else None

    # -- results ------------------------------------------------------------------------------

    def report(self, results: Sequence[FetchResult], now: float | None = None) -> int:
        """Ack a batch of results in one commit; returns how many new URLs were queued. The batch's results are
        accepted (a result whose lease ended is stale), acked, committed with their links, then counted."""
        now = self._clock() if now is None else now
        batch = self._links()
        accepted, lows = self._accept(results, batch)
        acks, spans = self._acks(accepted, lows, batch, now)
        links = batch.links()
        rescores = merge_priorities(self._scorer, accepted, acks, links, self.counts.by_reason)
        host_state = self._traps.take_dirty() if self._traps is not None else {}
        committed = self._state.commit(Commit(links=links, acks=acks, host_state=host_state, rescore=rescores), now)
        self._count(accepted, acks, spans, links, committed.new, set(committed.stale))
        if self._traps is not None and self._traps.verdict_changed:  # not one batch later: a kill -9 would lose it
            self._state.commit(Commit(host_state=self._traps.take_dirty()), now)
        return sum(committed.new)

    def _accept(self, results: Sequence[FetchResult],
                batch: LinkBatch) -> tuple[list[tuple[FetchResult, Lease]], set[bytes]]:
        """The results whose lease is still held, each with its lease (the trap detector has judged each page),
        and the lease keys of the soft 404s, whose links go to the low queue. A stale result is counted; its
        page's links still go into `batch` (the seen-set dedups them)."""
        accepted: list[tuple[FetchResult, Lease]] = []
        lows: set[bytes] = set()
        keys: set[bytes] = set()
        for result, lease in zip(results, self._state.leased([r.job.key for r in results])):
            if lease is None or result.job.key in keys:
                self.counts.by_reason["stale_result"] += 1  # its lease expired and the URL was re-leased and acked
                if lease is None and not result.job.robots:
                    batch.add_result(result)
                continue
            keys.add(result.job.key)
            if not lease.robots and self._traps is not None:
                result, low = self._observe(result)
                if low:
                    lows.add(lease.key)
            accepted.append((result, lease))
        return accepted, lows

    def _acks(self, accepted: list[tuple[FetchResult, Lease]], lows: set[bytes], batch: LinkBatch,
              now: float) -> tuple[list[Ack | RobotsAck], list[tuple[int, int]]]:
        """The ack of each accepted result, and the span of `batch`'s links each page result proposed first
        (robots.txt results: their seed host's sitemaps into `batch`, committed with the ack)."""
        acks: list[Ack | RobotsAck] = []
        spans: list[tuple[int, int]] = []
        for result, lease in accepted:
            if lease.robots:
                self.counts.own_requests["robots.txt"] += 1
                robots_ack = self._robots.ack(lease, result, now, self.limits.max_retries, self.counts.by_reason)
                acks.append(robots_ack)
                spans.append((0, 0))
                origin = self._sitemap_origins.get(lease.host)
                if origin is not None and robots_ack.outcome is RobotsOutcome.OK:
                    batch.add_sitemaps(robots_sitemaps(origin, robots_ack.text), 1, self._rules, base=lease.url)
                continue
            ack = self._page_ack(result, now, lease)
            acks.append(ack if self.steering is None else self.steering.paced(ack, lease.host, now))
            first = len(batch)
            batch.add_result(result, low=lease.key in lows, payload=lease.payload, priority=lease.priority)
            spans.append((first, len(batch)))
        return acks, spans

    def _count(self, accepted: list[tuple[FetchResult, Lease]], acks: list[Ack | RobotsAck],
               spans: list[tuple[int, int]], links: list[Link], new: Sequence[bool], stale: set[bytes]) -> None:
        """Count each committed page result, teach the trap detector, and log it; a URL new to the crawl is
        credited to one page: the first of the batch to link it. `stale`: acks whose leases ended between
        `leased` and the commit (a shared state expired them)."""
        if stale:
            self.counts.by_reason["stale_result"] += len(stale)
        for (result, lease), ack, (a, b) in zip(accepted, acks, spans):
            if lease.robots or ack.key in stale:
                continue
            assert isinstance(ack, Ack)  # a page lease's
            if self._traps is not None and result.http_status == 200 and result.status is Status.OK:
                self._traps.learn(result.job.url, result.sketch, [links[i].url for i in range(a, b) if new[i]],
                                  soft_404=result.reason == SOFT_404)
            key = ("ok" if result.reason is None else result.reason) if result.status is Status.OK else \
                (result.reason or result.status.value)
            own = self._own_request(result.job)
            self.counts.attempt(key, own)
            if not own:
                self.counts.pages_fetched += ack.fetched
            self._emit(result_record(result, retry=ack.outcome is Outcome.RETRY, new_links=sum(new[a:b])))

    def _observe(self, result: FetchResult) -> tuple[FetchResult, bool]:
        """The trap detector judges a page result before its links are taken: a host's probe comes back as
        outcome "soft_404_probe" without its links; a soft 404 as outcome "soft_404" with its links to be
        queued low (True)."""
        traps, url = self._traps, result.job.url
        if traps is None or result.http_status is None:
            return result, False
        verdict = traps.observe(url, result.sketch, status=result.http_status, depth=result.job.depth,
                                outlinks=result.outlinks)
        if traps.is_probe(url):
            return replace(result, reason=SOFT_404_PROBE, outlinks=(), redirect_to=None), False
        if verdict == SOFT_404:
            self.counts.by_reason[f"link_{SOFT_404}"] += len(result.outlinks)
            return replace(result, reason=SOFT_404), True
        return result, False

    def _page_ack(self, result: FetchResult, now: float, lease: Lease) -> Ack:
        """The ack of a page result; with politeness.adaptive, the host then waits delay_factor x the
        server's latency (time to headers; the whole attempt without a response), at least politeness.delay
        (the state's per-host delay, or robots.txt Crawl-delay if larger) and at most max_delay. With revisits, a
        site page's response gives its next schedule (frontier.crawl.revisit), stored with the ack."""
        ack = page_ack(result, now, self.limits.max_retries)
        if ack.fetched and self._own_request(result.job):  # not a page of the site: not counted fetched
            ack = replace(ack, fetched=False)
        elif ack.fetched and ack.outcome is Outcome.DONE and self._revisit is not None:
            revisit, unchanged = self._revisit.next(lease.revisit, result, now, sitemap_first(lease.payload))
            ack = replace(ack, revisit=revisit)
            if lease.revisit is not None:
                self.counts.revisit_fetches[NOT_MODIFIED if result.http_status == 304 else UNCHANGED if unchanged else "changed"] += 1
        p = self.politeness
        if not p.adaptive:
            return ack
        latency = result.latency if result.latency is not None else result.elapsed
        pause = now + min(max(latency * p.delay_factor, p.delay), p.max_delay)
        return replace(ack, pause_until=max(ack.pause_until, pause))

    # -- state --------------------------------------------------------------------------------

    @property
    def fetched(self) -> int:
        return self._state.stats().fetched

    @property
    def attempts(self) -> int:
        return self._state.stats().attempts

    @property
    def in_flight(self) -> int:
        """Leases this process holds (of a shared state, not the other instances')."""
        s = self._state.stats()
        return s.in_flight if s.held is None else s.held

    @property
    def queued(self) -> int:
        return self._state.stats().queued

    def next_ready_in(self, now: float | None = None) -> float | None:
        """Seconds until a host may be leased again (0 if one is ready now); None if none has work, or while the
        operator has paused the crawl."""
        if self.steering is not None and self.steering.paused:
            return None
        return self._state.next_ready_in(self._clock() if now is None else now)

    @property
    def done(self) -> bool:
        """True when nothing is leased and no queued URL can still be leased (within the limits); never while
        the operator has paused the crawl."""
        return not (self.steering is not None and self.steering.paused) and self._state.done(self._clock())

    def queued_urls(self) -> list[tuple[str, str]]:
        """(host, URL) of every queued entry, leased ones included (`CrawlState.queued_urls`)."""
        return self._state.queued_urls()

    def knows_host(self, host: str) -> bool:
        """True if a URL of `host` ("name[:port]") was ever queued in this crawl."""
        return self._state.knows_host(host)

    @property
    def trap_detection(self) -> bool:
        return self._traps is not None

    def unreachable_seeds(self) -> list[tuple[str, str]]:
        """(seed URL, plain reason) for each seed that could not be reached in this run: its host's
        robots.txt or the seed itself failed with a network error on every attempt. A seed here is a
        queued URL of depth 0 (a seed, or a URL a seed redirects to). They stay queued: a rerun tries
        them again."""
        return [(url, NETWORK_ERRORS[reason]) for url, reason in self._state.unreachable_seeds()]

    def stats(self) -> dict[str, object]:
        """fetched: the site's page results with an HTTP response; attempts: page results and leases that
        ended without one (both crawl-wide); instance: this process's counts (`instance`); next_due (revisits
        on): the earliest revisit due time (wall clock), None if none; unreachable_hosts:
        hosts held back in this run by
        network errors (their URLs stay queued)."""
        s = self._state.stats()
        return {
            "fetched": s.fetched,
            "attempts": s.attempts,
            "queued": s.queued,
            "in_flight": s.in_flight,
            "hosts": s.hosts,
            "unreachable_hosts": s.unreachable_hosts,
            "reasons": dict(self.counts.by_reason),
            "instance": self.instance(),
            "traps": self._traps.stats() if self._traps is not None else None,
            "seen": self._state.seen_stats(),
            **({"next_due": self._state.next_due()} if self._revisit is not None else {}),  # type: ignore[attr-defined]
        }

    def instance(self) -> dict[str, object]:
        """This process's counts (frontier.crawl.counts): fetched, attempts, outcomes, own (, revisits)."""
        return self.counts.instance(revisits=self._revisit is not None)

    def traps(self) -> list[tuple[str, str, int]]:
        """(host, URL pattern, pages observed) of every pattern the trap detector suspects, this run or before."""
        return [] if self._traps is None else self._traps.traps()

    def suspected(self) -> list[dict[str, object]]:
        """[{"host", "pattern", "urls", and the detector's growth figures when it knows the pattern}] of the URLs
        still in low queues (parked ones included), per pattern whose budget they spend, the most URLs first: at the end of a crawl, the URLs skipped as suspected
        traps (their pattern's budget, traps.max_suspect_pages, spent while it kept growing)."""
        traps = self._traps
        pairs = self._state.suspected()
        if traps is None:
            return suspected_counts(pairs)
        rows = suspected_counts(pairs, traps.budget_of)
        for row in rows:
            figures = traps.growth(str(row["host"]), str(row["pattern"]))
            if figures is not None:
                row.update(figures)
        return rows

    def host_schedule(self) -> HostSchedule | None:
        """The state's live host records (LMDB: one process owns them); None where they live on a server (Redis)."""
        return getattr(self._state, "host_schedule", None)

    def pattern_figures(self) -> list[dict[str, object]]:
        """{"host", "pattern", the detector's growth figures, "budget" (traps.max_suspect_pages), "state": parked
        once its budget is spent while it grows, else suspected} of every pattern it suspects (no queue scan,
        unlike `suspected`: cheap enough for a live page)."""
        traps = self._traps
        if traps is None:
            return []
        budget = traps.max_suspect_pages
        rows: list[dict[str, object]] = []
        for host, pattern, pages in traps.traps():
            figures = traps.growth(host, pattern) or {"fetched": pages, "spent": 0, "growing": False}
            parked = budget is not None and int(figures["spent"]) >= budget and bool(figures["growing"])  # type: ignore[call-overload]
            rows.append({"host": host, "pattern": pattern, **figures, "budget": budget,
                         "state": "parked" if parked else "suspected"})
        return rows

    @property
    def seen(self) -> URLSeen:
        """The seen-test of the data dir (its Bloom filter is shared with the workers); LMDB only."""
        return self._state.seen  # type: ignore[attr-defined]

    def close(self) -> None:
        """Snapshot the Bloom filter and close the data dir. Leased URLs stay queued for the next run."""
        self._state.close()

    def __enter__(self) -> "Frontier":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
