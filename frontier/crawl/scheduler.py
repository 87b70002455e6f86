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
carried to the state as the ack's `pause_until`, so both backends apply it unchanged; frontier.crawl.adaptive).

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
from pathlib import Path
from typing import Any

from frontier.config import (DEFAULT_DEDUP, DEFAULT_LIMITS, DEFAULT_POLITENESS, CrawlConfig, DedupConfig,
                             LimitsConfig, PolitenessConfig)
from frontier.crawl.counts import ProcessCounts
from frontier.crawl.events import Event, OnEvent
from frontier.crawl.intake import LinkBatch
from frontier.crawl.leasing import Leasing
from frontier.crawl.messages import NETWORK_ERRORS, FetchJob, FetchResult
from frontier.crawl.ordering import Scorer, load_scorer
from frontier.crawl.reporting import Reporting
from frontier.crawl.revisit import RevisitSchedule
from frontier.crawl.robots import RobotsCache
from frontier.crawl.sitemaps import robots_sitemaps, seed_hosts
from frontier.crawl.steering import Steering, steering_for
from frontier.crawl.traps import TrapDetector, suspected_rows
from frontier.errors import InvalidURL
from frontier.seen.urlseen import URLSeen
from frontier.state.base import Commit, CrawlState, Rescore, StatePolicy, check_priority
from frontier.state.lmdb import LmdbCrawlState
from frontier.url.canonical import DEFAULT_RULES, CanonicalRules, canonicalize
from frontier.url.scope import Scope


def state_policy(limits: LimitsConfig, politeness: PolitenessConfig, lease_timeout: float,
                 dedup: DedupConfig = DEFAULT_DEDUP, max_suspect_pages: int | None = None,
                 revisit: bool = False, revisit_continuous: bool = False) -> StatePolicy:
    return StatePolicy(lease_timeout=lease_timeout, max_retries=limits.max_retries,
                       max_per_host=politeness.max_per_host, delay=politeness.delay,
                       obey_robots=politeness.obey_robots, robots_ttl=politeness.robots_ttl,
                       max_pages=limits.max_pages, max_pages_per_host=limits.max_pages_per_host,
                       recrawl_after=dedup.recrawl_after, max_suspect_pages=max_suspect_pages,
                       host_turn=politeness.host_turn, revisit=revisit, revisit_continuous=revisit_continuous,
                       queue_by=politeness.queue_by, backoff_max=politeness.max_delay)


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


def _no_event(event: Event) -> None:
    """The crawl log of a frontier built without `on_event`: records go nowhere."""


class Frontier:
    """The crawl frontier over a crawl state: seeds in, leased jobs out, results back; politeness, limits, trap
    defences and priorities applied here, the same for every backend. `Frontier.open` builds one over a data dir's
    LMDB, `from_config` over what a CrawlConfig names (LMDB, or a Redis crawl shared by several instances). It
    takes seeds and re-scores itself, leases through a `Leasing` (frontier.crawl.leasing), reports through a
    `Reporting` (frontier.crawl.reporting), and reads the state's counts for its views."""

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
        self.counts = ProcessCounts()
        self.scope = scope
        self.limits = limits
        self.politeness = politeness
        self.max_depth = max_depth
        self._rules = canonical
        self._clock = clock
        self._robots = robots if robots is not None else RobotsCache(politeness, state.robots_text)
        self._seeds_from_sitemaps = seeds_from_sitemaps
        self._sitemap_origins: dict[str, str] = {}  # seed host -> origin, whose robots.txt names sitemaps
        self._traps = traps
        self._probed: set[str] = set()  # origins whose soft-404 probe this process proposed
        self.steering = steering
        emit = on_event if on_event is not None else _no_event
        self._leasing = Leasing(state, self._robots, self.counts, traps=traps, conditional=conditional, emit=emit,
                                steering=steering)
        self._reporting = Reporting(state, self._robots, self.counts, links=self._links, limits=limits,
                                    politeness=politeness, rules=canonical, traps=traps, scorer=scorer,
                                    revisit=revisit, sitemap_origins=self._sitemap_origins, emit=emit,
                                    steering=steering)
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
        traps = self._traps
        return sum(flag for link, flag in zip(links[:seeds], new) if traps is None or not traps.is_probe(link.url))

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

    # -- leasing ------------------------------------------------------------------------------

    def lease(self, max_jobs: int, now: float | None = None) -> list[FetchJob]:
        """Up to `max_jobs` jobs that may be fetched now, each leased until now + lease_timeout, after the expired
        leases are returned (`expire`). A normal entry whose URL pattern was suspected after it was queued goes
        to its host's low queue unfetched (counted trap_pattern), and more are leased instead. A job asks for
        its page's sketch only where the trap detector needs one (`TrapDetector.wants_sketch`)."""
        now = self._clock() if now is None else now
        self.expire(now)
        return self._leasing.lease(max_jobs, now)

    def expire(self, now: float | None = None) -> int:
        """Return URLs whose lease ran out (a dead or stuck worker) to their queues; returns how many.

        Each counts as an attempt (reason lease_expired) and goes back under a new queue key (the tail
        of its host's FIFO): the key is the lease handle, so a late result of the expired lease matches
        no lease and is dropped as a stale_result; it can neither ack nor fail (and so retry) the URL's
        next lease."""
        return self._leasing.expire(self._clock() if now is None else now)

    def abandon_leases(self, reason: str, now: float | None = None) -> int:
        """End every outstanding lease without a result, e.g. reason "worker_died" before a restart.

        Every leased page counts an attempt under `reason` (requeued with attempt + 1, or given up
        after limits.max_retries), in one transaction; robots.txt leases are only released.
        Returns how many page leases were abandoned."""
        return self._leasing.abandon(reason, self._clock() if now is None else now)

    # -- results ------------------------------------------------------------------------------

    def report(self, results: Sequence[FetchResult], now: float | None = None) -> int:
        """Ack a batch of results in one commit; returns how many new URLs were queued. The batch's results are
        accepted (a result whose lease ended is stale), acked, committed with their links, then counted
        (frontier.crawl.reporting)."""
        return self._reporting.report(results, self._clock() if now is None else now)

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

    def unreachable_seeds(self) -> list[tuple[str, str]]:
        """(seed URL, plain reason) for each seed that could not be reached in this run: its host's robots.txt or
        the seed itself failed with a network error on every attempt. A seed here is a queued URL of depth 0 (a
        seed, or a URL a seed redirects to). They stay queued: a rerun tries them again."""
        return [(url, NETWORK_ERRORS[reason]) for url, reason in self._state.unreachable_seeds()]

    def stats(self) -> dict[str, object]:
        """fetched: the site's page results with an HTTP response; attempts: page results and leases that ended
        without one (both crawl-wide); instance: this process's counts (`instance`); next_due (revisits on): the
        earliest revisit due time (wall clock), None if none; unreachable_hosts: hosts held back in this run by
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

    def long_crawl_delay(self) -> dict[str, object]:
        """politeness.long_crawl_delay and the hosts whose robots.txt Crawl-delay is over max_crawl_delay."""
        return self._robots.report()

    def suspected(self) -> list[dict[str, object]]:
        """The URLs still in low queues (parked ones included) per pattern whose budget they spend, with the
        detector's growth figures (`suspected_rows`): at the end of a crawl, the URLs skipped as suspected traps."""
        return suspected_rows(self._state.suspected(), self._traps)

    @property
    def state(self) -> CrawlState:
        """The crawl state it drives, for the views it adds nothing to (`state.queued_urls()`,
        `state.knows_host(host)`, LMDB's `state.host_schedule`); write through the frontier, never here."""
        return self._state

    @property
    def detector(self) -> TrapDetector | None:
        """The trap detector (frontier.crawl.traps); None while trap detection is off."""
        return self._traps

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
