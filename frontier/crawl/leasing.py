"""Leasing: the jobs a frontier hands out, and the page leases that end without a result.

A lease is asked of the crawl state with the robots.txt rules of each host (`RobotsCache.allows`); a URL they
forbid is dequeued unfetched (robots_disallowed). With a trap detector, a normal entry whose URL pattern was
suspected after it was queued goes to its host's low queue unfetched (trap_pattern), a low entry whose pattern
spent its budget is parked for the run (trap_budget), and more are leased instead, up to LEASE_ROUNDS asks.
A page lease that ends without a result (expired, or abandoned when its worker died) is an attempt: counted
and logged here, requeued or given up by the state.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import chain

from frontier.crawl.counts import ProcessCounts
from frontier.crawl.events import SOFT_404_PROBE, Event, attempt_record, skip_record
from frontier.crawl.messages import FetchJob, Status
from frontier.crawl.robots import RobotsCache
from frontier.crawl.sitemaps import level as sitemap_level
from frontier.crawl.steering import Steering
from frontier.crawl.traps import TRAP_BUDGET, TRAP_PATTERN, TrapDetector
from frontier.state.base import Ack, Commit, CrawlState, Ended, Lease, Outcome

LEASE_ROUNDS = 8  # lease() asks again this often while entries of suspected patterns fill its batches


def job_of(lease: Lease, sketch: bool = False, conditional: bool = True) -> FetchJob:
    """The fetch job of a lease; `sketch`: ask for the page's sketch; `conditional`: send its stored validators."""
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


def own_request(job: FetchJob, traps: TrapDetector | None) -> str | None:
    """"soft_404_probe" or "sitemap" for a job of the crawler's own, else None (a page of the site)."""
    if job.sitemap:
        return "sitemap"
    return SOFT_404_PROBE if traps is not None and traps.is_probe(job.url) else None


class Leasing:
    """Leases out of a crawl state, rerouted past the trap detector's suspects; leases ended without a result."""

    def __init__(self, state: CrawlState, robots: RobotsCache, counts: ProcessCounts, *,
                 traps: TrapDetector | None, conditional: bool, emit: Callable[[Event], None],
                 steering: Steering | None = None) -> None:
        """Over `state`, asking `robots` which URLs may be fetched, counting into `counts` and logging with
        `emit`; `traps`: the detector whose suspects are rerouted (None: none); `conditional`: jobs send
        their stored validators; `steering`: the operator's orders (a pause leases nothing; the leases they
        hold back are taken out, `Steering.hold`)."""
        self._state = state
        self._robots = robots
        self._counts = counts
        self._traps = traps
        self._conditional = conditional
        self._emit = emit
        self._steering = steering

    def lease(self, max_jobs: int, now: float) -> list[FetchJob]:
        """Up to `max_jobs` jobs that may be fetched now (see the module docstring)."""
        if self._steering is not None:
            self._steering.poll(now)
            if self._steering.paused:
                return []
        traps = self._traps
        jobs: list[FetchJob] = []
        for _ in range(LEASE_ROUNDS):
            batch = self._state.lease(max_jobs - len(jobs), now, self._robots.allows)
            for reason, refused in self._robots.refusals(batch.disallowed).items():
                self._skip(refused, reason, now)
            held = self._steer(batch.leases, now)
            if traps is None:
                jobs.extend(job_of(lease, conditional=self._conditional) for lease in batch.leases)
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
                self._counts.by_reason[TRAP_PATTERN] += len(later)
                self._counts.by_reason[TRAP_BUDGET] += len(parked)
                keys = {lease.key for lease in chain(later, parked)}
                batch.leases[:] = [lease for lease in batch.leases if lease.key not in keys]
            jobs.extend(job_of(lease, not lease.robots and traps.wants_sketch(lease.url), self._conditional)
                        for lease in batch.leases)
            if not (later or parked or held) or len(jobs) >= max_jobs:
                break
        return jobs

    def _steer(self, leases: list[Lease], now: float) -> int:
        """Take the leases the operator's orders hold back (`Steering.hold`) out of `leases`, committed as their
        acks say; an excluded URL is logged as skipped. Returns how many."""
        held = [] if self._steering is None else self._steering.hold(leases, now)
        if not held:
            return 0
        self._state.commit(Commit(acks=[ack for _, ack, _ in held]), now)
        for lease, ack, reason in held:
            self._counts.by_reason[reason] += 1
            if ack.outcome is Outcome.DROP:
                self._emit(skip_record(lease.url, lease.depth, reason, now))
        keys = {lease.key for lease, _, _ in held}
        leases[:] = [lease for lease in leases if lease.key not in keys]
        return len(held)

    def _skip(self, leases: list[Lease], reason: str, now: float) -> None:
        """Dequeue leased URLs without a fetch (robots.txt forbids them), logged as skipped under `reason`."""
        self._state.commit(Commit(acks=[Ack(key=lease.key, outcome=Outcome.DROP) for lease in leases]), now)
        for lease in leases:
            self._counts.by_reason[reason] += 1
            self._emit(skip_record(lease.url, lease.depth, reason, now))

    def expire(self, now: float) -> int:
        """Return the URLs whose lease ran out to their queues, each an attempt (lease_expired); how many."""
        ended = self._state.expire(now)
        self._log_ended(ended, "lease_expired", now)
        return len(ended)

    def abandon(self, reason: str, now: float) -> int:
        """End every outstanding lease without a result, each page's an attempt under `reason`; how many pages."""
        return self._log_ended(self._state.abandon(now), reason, now)

    def _log_ended(self, ended: list[Ended], reason: str, now: float) -> int:
        """One attempt record per page lease that ended without a result; returns how many."""
        pages = [e for e in ended if not e.lease.robots]
        for e in pages:
            job = job_of(e.lease)
            self._counts.attempt(reason, own_request(job, self._traps))
            self._emit(attempt_record(job, Status.FAIL, reason, retry=e.requeued, fetched_at=now))
        if len(ended) > len(pages):
            self._counts.by_reason[f"robots_{reason}"] += len(ended) - len(pages)
            self._counts.own_requests["robots.txt"] += len(ended) - len(pages)
        return len(pages)
