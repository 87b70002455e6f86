"""Reporting: a batch of fetch results into the crawl state, in one commit.

A report reads accept -> ack -> commit -> count. A result is accepted while its lease is held (else it is
stale: counted, and its page's links still offered, the seen-set dedups them); the trap detector judges each
page first (a soft 404's links go to the low queue; a host's probe comes back without its links). Each accepted
result gets its ack (frontier.crawl.retry; with revisits, its next due time; with politeness.adaptive, its
host's pause, frontier.crawl.adaptive; robots.txt results, the RobotsCache's), the outlinks their priorities
(frontier.crawl.priorities), and acks, links, re-scores and the detector's changed host state go in one commit.
Then each committed page is counted, taught to the detector and logged; an ack whose lease a shared state
expired before the commit is counted stale instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from frontier.config import LimitsConfig, PolitenessConfig
from frontier.crawl.adaptive import adaptive_pause_until
from frontier.crawl.counts import ProcessCounts
from frontier.crawl.events import SOFT_404_PROBE, Event, result_record
from frontier.crawl.intake import LinkBatch
from frontier.crawl.leasing import own_request
from frontier.crawl.messages import FetchResult, Status
from frontier.crawl.ordering import Scorer
from frontier.crawl.priorities import merge_priorities
from frontier.crawl.retry import page_ack
from frontier.crawl.revisit import NOT_MODIFIED, UNCHANGED, RevisitSchedule
from frontier.crawl.robots import RobotsCache
from frontier.crawl.sitemaps import first_interval as sitemap_first
from frontier.crawl.sitemaps import robots_sitemaps
from frontier.crawl.steering import Steering
from frontier.crawl.traps import SOFT_404, TrapDetector
from frontier.state.base import Ack, Commit, CrawlState, Lease, Link, Outcome, RobotsAck, RobotsOutcome
from frontier.url.canonical import CanonicalRules


class Reporting:
    """Commits fetch results to a crawl state: acks, outlinks, priorities, trap verdicts; counts and logs them."""

    def __init__(self, state: CrawlState, robots: RobotsCache, counts: ProcessCounts, *,
                 links: Callable[[], LinkBatch], limits: LimitsConfig, politeness: PolitenessConfig,
                 rules: CanonicalRules, traps: TrapDetector | None, scorer: Scorer | None,
                 revisit: RevisitSchedule | None, sitemap_origins: dict[str, str],
                 emit: Callable[[Event], None], steering: Steering | None = None) -> None:
        """Over `state`, counting into `counts` and logging with `emit`: `links` makes a report's link batch
        (scope, depth and trap rules), `robots` acks robots.txt results, `sitemap_origins` (seed host ->
        origin, filled as seeds are added) says whose robots.txt brings sitemaps, `steering` (the operator's
        orders) paces the hosts given a delay; the rest are the frontier's rules (`Frontier()`)."""
        self._state = state
        self._robots = robots
        self._counts = counts
        self._links = links
        self._limits = limits
        self._politeness = politeness
        self._rules = rules
        self._traps = traps
        self._scorer = scorer
        self._revisit = revisit
        self._sitemap_origins = sitemap_origins
        self._emit = emit
        self._steering = steering

    def report(self, results: Sequence[FetchResult], now: float) -> int:
        """Ack a batch of results in one commit (see the module docstring); how many new URLs were queued."""
        batch = self._links()
        accepted, lows = self._accept(results, batch)
        acks, spans = self._acks(accepted, lows, batch, now)
        links = batch.links()
        rescores = merge_priorities(self._scorer, accepted, acks, links, self._counts.by_reason)
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
                self._counts.by_reason["stale_result"] += 1  # its lease expired and the URL was re-leased and acked
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
                self._counts.own_requests["robots.txt"] += 1
                robots_ack = self._robots.ack(lease, result, now, self._limits.max_retries, self._counts.by_reason)
                acks.append(robots_ack)
                spans.append((0, 0))
                origin = self._sitemap_origins.get(lease.host)
                if origin is not None and robots_ack.outcome is RobotsOutcome.OK:
                    batch.add_sitemaps(robots_sitemaps(origin, robots_ack.text), 1, self._rules, base=lease.url)
                continue
            ack = self._page_ack(result, now, lease)
            acks.append(ack if self._steering is None else self._steering.paced(ack, lease.host, now))
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
            self._counts.by_reason["stale_result"] += len(stale)
        for (result, lease), ack, (a, b) in zip(accepted, acks, spans):
            if lease.robots or ack.key in stale:
                continue
            assert isinstance(ack, Ack)  # a page lease's
            if self._traps is not None and result.http_status == 200 and result.status is Status.OK:
                self._traps.learn(result.job.url, result.sketch, [links[i].url for i in range(a, b) if new[i]],
                                  soft_404=result.reason == SOFT_404)
            key = ("ok" if result.reason is None else result.reason) if result.status is Status.OK else \
                (result.reason or result.status.value)
            own = own_request(result.job, self._traps)
            self._counts.attempt(key, own)
            if not own:
                self._counts.pages_fetched += ack.fetched
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
            self._counts.by_reason[f"link_{SOFT_404}"] += len(result.outlinks)
            return replace(result, reason=SOFT_404), True
        return result, False

    def _page_ack(self, result: FetchResult, now: float, lease: Lease) -> Ack:
        """The ack of a page result: with revisits, a site page's response gives its next schedule
        (frontier.crawl.revisit), stored with the ack; with politeness.adaptive, its host's pause."""
        ack = page_ack(result, now, self._limits.max_retries)
        if ack.fetched and own_request(result.job, self._traps):  # not a page of the site: not counted fetched
            ack = replace(ack, fetched=False)
        elif ack.fetched and ack.outcome is Outcome.DONE and self._revisit is not None:
            revisit, unchanged = self._revisit.next(lease.revisit, result, now, sitemap_first(lease.payload))
            ack = replace(ack, revisit=revisit)
            if lease.revisit is not None:
                self._counts.revisit_fetches[NOT_MODIFIED if result.http_status == 304
                                             else UNCHANGED if unchanged else "changed"] += 1
        if not self._politeness.adaptive:
            return ack
        return replace(ack, pause_until=max(ack.pause_until, adaptive_pause_until(self._politeness, result, now)))
