"""The Frontier as a library, in-process, without run_frontier.py.

A custom crawler loop (asyncio, the aiohttp `Fetcher` of workers.fetcher) drives a `Frontier` over a
loopback `MockWeb`: seeds in, ready URLs leased, results reported with their outlinks. It must fetch the
mock web exactly (the graph's own oracle), and a Frontier reopened on the same data dir resumes the
crawl without refetching anything it was told about.

The scheduling rules are then checked one by one with hand-built `FetchResult`s (the seam a custom
fetcher uses) and an injected clock: lease expiry, politeness delay, robots.txt gating, retries with
backoff, stale results.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import lmdb
import pytest

from frontier.config import (load_config, CrawlConfig, DedupConfig, LimitsConfig, PolitenessConfig, ScopeConfig, StorageConfig,
                             TrapsConfig, WorkersConfig)
from frontier.crawl.messages import FetchJob, FetchResult, Status
from frontier.crawl.retry import MAX_BACKOFF
from frontier.crawl.scheduler import Frontier
from frontier.testing import MockWeb, PageKind, SiteGraph, SiteSpec
from frontier.testing.sitegraph import QUERIES
from frontier.url.scope import Scope
from workers.fetcher import Fetcher

MAX_RETRIES = 1  # the 500 pages' retry backoff (0.5-1 s) is the tail of the crawl
SMALL_DEDUP = DedupConfig(capacity=10_000)  # a small shared-memory Bloom filter per test


# -- a custom crawler loop -------------------------------------------------------------------------------


async def crawl(frontier: Frontier, fetch: Callable[[FetchJob], Awaitable[FetchResult]], *, concurrency: int = 16,
                stop_after: int | None = None) -> list[FetchJob]:
    """Lease, fetch, report until the frontier is done. With `stop_after`, stop once that many results
    were reported: the fetches then under way finish on the server but are never reported (a crash);
    returns their jobs."""
    tasks: dict[asyncio.Task[FetchResult], FetchJob] = {}
    reported = 0
    while True:
        if stop_after is not None and reported >= stop_after:
            if tasks:
                await asyncio.wait(tasks)
            return list(tasks.values())
        for job in frontier.lease(concurrency - len(tasks)):
            tasks[asyncio.create_task(fetch(job))] = job
        if not tasks:
            if frontier.done:
                return []
            ready_in = frontier.next_ready_in()
            await asyncio.sleep(min(ready_in if ready_in is not None else 0.05, 0.05))
            continue
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            del tasks[task]
        frontier.report([task.result() for task in done])
        reported += len(done)


def expected_counts(graph: SiteGraph, ports: list[int]) -> Counter[str]:
    """What the server counts after a correct crawl: each permanent 500 requested 1 + MAX_RETRIES times."""
    expected = graph.expected_requests(ports)
    for url in expected:
        page = graph.page_at(urlsplit(url).path)
        if page is not None and graph.kind(page) == PageKind.SERVER_ERROR:
            expected[url] = 1 + MAX_RETRIES
    return expected


def disallowed_urls(graph: SiteGraph, ports: list[int]) -> set[str]:
    """URLs linked from fetched pages that robots.txt disallows: each one is logged, never fetched."""
    origins = [f"http://127.0.0.1:{p}" for p in ports]
    out = set()
    for url in graph.reachable(ports):
        page = graph.page_at(urlsplit(url).path)
        if page is None or graph.kind(page) != PageKind.NORMAL:
            continue
        for target, q in graph.outlinks(page):
            path = graph.path(target) + ("?" + QUERIES[q] if q else "")
            if graph.is_disallowed(path):
                out.add(origins[graph.host_of(target)] + path)
    return out


NO_DELAY = PolitenessConfig(delay=0.0)
NO_TRAPS = TrapsConfig(patterns=False, soft_404=False)


def crawl_config(web: MockWeb, data_dir: Path) -> CrawlConfig:
    return CrawlConfig(
        seeds=(web.seed,),
        scope=ScopeConfig(allowed_hosts=tuple(f"127.0.0.1:{p}" for p in web.ports)),
        limits=LimitsConfig(max_retries=MAX_RETRIES),
        workers=WorkersConfig(timeout=5.0, lease_timeout=10.0),
        politeness=NO_DELAY,
        traps=NO_TRAPS,  # exact request counts; see faultkit.mock_config
        dedup=SMALL_DEDUP,
        storage=StorageConfig(data_dir=data_dir),
    )


async def test_custom_loop_crawls_mock_web_exactly_and_resumes(tmp_path: Path) -> None:
    spec = SiteSpec(pages=800, hosts=3, links_per_page=20, seed=17)
    async with MockWeb(spec) as web:
        cfg = crawl_config(web, tmp_path / "data")
        graph, ports = web.graph, web.ports
        expected = expected_counts(graph, ports)
        events: list[dict[str, Any]] = []

        async with Fetcher(cfg, Scope.from_config(cfg)) as fetcher:
            # first run: stop (as if crashed) after 300 results, leaving fetches unreported
            with Frontier.from_config(cfg, on_event=events.append) as frontier:
                assert frontier.add_seeds(cfg.seeds) == 1
                abandoned = await crawl(frontier, fetcher.fetch, stop_after=300)
                assert abandoned and not frontier.done
            first = Counter(web.counts)
            first_events = len(events)

            # second run on the same data dir: the seed is known, the queue is where it was
            with Frontier.from_config(cfg, on_event=events.append) as frontier:
                assert frontier.add_seeds(cfg.seeds) == 0
                fetches = sum(1 for e in events if e.get("reason") != "robots_disallowed")
                assert frontier.attempts == frontier.fetched == fetches  # every result had a response
                assert await crawl(frontier, fetcher.fetch) == []
                assert frontier.done and frontier.queued == 0 and frontier.in_flight == 0

            # exactly the expected requests, plus one for each fetch that was never reported
            assert Counter(web.counts) == expected + Counter(job.url for job in abandoned)
            again = [e["url"] for e in events[first_events:]]
            acked = {e["url"] for e in events[:first_events] if not e.get("retry")}
            assert not acked & set(again)
            assert all(web.counts[u] == first[u] for u in acked)

            # one event per page fetch; one robots_disallowed event per disallowed URL, never fetched
            fetches = [e for e in events if e.get("reason") != "robots_disallowed"]
            assert Counter(e["url"] for e in fetches) == Counter(
                {u: n for u, n in expected.items() if not u.endswith("/robots.txt")})
            skipped = Counter(e["url"] for e in events if e.get("reason") == "robots_disallowed")
            assert skipped == Counter(disallowed_urls(graph, ports))
            assert not set(skipped) & set(web.counts)

            # a third run finds nothing to do and fetches nothing
            before = sum(web.counts.values())
            with Frontier.from_config(cfg) as frontier:
                frontier.add_seeds(cfg.seeds)
                assert frontier.done and frontier.lease(100) == []
                assert await crawl(frontier, fetcher.fetch) == []
            assert sum(web.counts.values()) == before


# -- the rules, one by one, with an injected clock ------------------------------------------------------


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now


def make_frontier(tmp_path: Path, clock: Clock, *, events: list[dict[str, Any]] | None = None,
                  limits: LimitsConfig = LimitsConfig(max_retries=2), **politeness: Any) -> Frontier:
    return Frontier.open(tmp_path / "data", scope=Scope(allowed_hosts=["a.test", "b.test"]),
                    limits=limits, politeness=PolitenessConfig(**{"delay": 0.0, **politeness}), dedup=SMALL_DEDUP,
                    lease_timeout=10.0, clock=clock, on_event=None if events is None else events.append)


def ok(job: FetchJob, clock: Clock, *outlinks: str, **fields: Any) -> FetchResult:
    """The result a custom fetcher reports for a page it fetched (outlinks canonical)."""
    return FetchResult(job=job, status=Status.OK, http_status=200, content_type="text/html", bytes=100,
                       elapsed=0.01, fetched_at=clock(), outlinks=outlinks, **fields)


def test_expired_lease_returns_the_url(tmp_path: Path) -> None:
    clock = Clock()
    with make_frontier(tmp_path, clock, obey_robots=False) as frontier:
        frontier.add_seeds(["http://a.test/1"])
        [job] = frontier.lease(10)
        assert job.url == "http://a.test/1" and frontier.in_flight == 1
        clock.advance(9.9)
        assert frontier.lease(10) == []  # leased, not yet expired: not handed out twice
        clock.advance(0.2)
        [again] = frontier.lease(10)  # never reported, past lease_timeout: back in its queue
        # the expired lease was an attempt (a URL that hangs its worker is not retried forever)
        assert (again.url, again.depth, again.attempt) == (job.url, job.depth, 1)
        assert frontier.reasons["lease_expired"] == 1
        # a late result of the expired lease is stale (Frontier.expire): it does not ack the new lease, but the
        # page was fetched, so its links are queued (a slow worker's outlinks are not lost)
        assert frontier.report([ok(job, clock, "http://a.test/late")]) == 1
        assert frontier.reasons["stale_result"] == 1 and frontier.fetched == 0 and frontier.in_flight == 1
        frontier.report([ok(again, clock, "http://a.test/late")])  # already queued: not new
        [late] = frontier.lease(10)
        assert late.url == "http://a.test/late"
        frontier.report([ok(late, clock)])
        assert frontier.done and (frontier.fetched, frontier.attempts) == (2, 3)  # the expiry was an attempt


def test_expired_lease_survives_reopening(tmp_path: Path) -> None:
    clock = Clock()
    with make_frontier(tmp_path, clock, obey_robots=False) as frontier:
        frontier.add_seeds(["http://a.test/1"])
        [job] = frontier.lease(10)
    with make_frontier(tmp_path, clock, obey_robots=False) as frontier:  # the lease died with the process
        [again] = frontier.lease(10)
        assert again.url == job.url


def test_stale_result_is_ignored(tmp_path: Path) -> None:
    clock = Clock()
    events: list[dict[str, Any]] = []
    with make_frontier(tmp_path, clock, events=events, obey_robots=False) as frontier:
        frontier.add_seeds(["http://a.test/1"])
        [job] = frontier.lease(10)
        result = ok(job, clock, "http://a.test/2")
        assert frontier.report([result]) == 1
        assert frontier.report([result]) == 0  # reported twice: the second is stale
        assert frontier.reasons["stale_result"] == 1
        assert frontier.fetched == 1 and frontier.queued == 1 and len(events) == 1
        [job2] = frontier.lease(10)
        assert job2.url == "http://a.test/2" and job2.depth == 1
        assert frontier.lease(10) == []


def test_politeness_delay_with_injected_clock(tmp_path: Path) -> None:
    clock = Clock()
    with make_frontier(tmp_path, clock, delay=1.0, obey_robots=False) as frontier:
        frontier.add_seeds(["http://a.test/1", "http://a.test/2", "http://b.test/1"])
        first = frontier.lease(10)
        # one fetch at a time per host with a delay; the other host is not held back
        assert sorted(j.url for j in first) == ["http://a.test/1", "http://b.test/1"]
        a1 = next(j for j in first if j.url == "http://a.test/1")
        assert frontier.lease(10) == []
        reported_at = clock.advance(0.3)
        # the result also brings a new link on the same host (that enqueue must not bring the delay forward)
        assert frontier.report([ok(a1, clock, "http://a.test/3")]) == 1
        assert frontier.next_ready_in() == pytest.approx(1.0)
        clock.now = reported_at + 0.999
        assert frontier.lease(10) == []
        clock.now = reported_at + 1.0
        [a2] = frontier.lease(10)
        assert a2.url == "http://a.test/2"
        reported_at = clock.advance(0.1)
        frontier.report([ok(a2, clock)])
        clock.now = reported_at + 0.5
        assert frontier.lease(10) == []
        clock.now = reported_at + 1.0
        assert [j.url for j in frontier.lease(10)] == ["http://a.test/3"]


def test_robots_gate_and_disallow(tmp_path: Path) -> None:
    clock = Clock()
    events: list[dict[str, Any]] = []
    with make_frontier(tmp_path, clock, events=events) as frontier:
        frontier.add_seeds(["http://a.test/x", "http://a.test/private/y"])
        [robots] = frontier.lease(10)
        assert robots.robots and robots.url == "http://a.test/robots.txt"
        clock.advance(5.0)
        assert frontier.lease(10) == []  # no page of the host before its robots.txt is reported
        frontier.report([FetchResult(job=robots, status=Status.OK, http_status=200, fetched_at=clock(),
                                     robots_txt="User-agent: *\nDisallow: /private/\n")])
        leased = frontier.lease(10)
        assert [j.url for j in leased] == ["http://a.test/x"]
        assert [e for e in events if e["reason"] == "robots_disallowed"] == [
            {"url": "http://a.test/private/y", "status": "skip", "reason": "robots_disallowed", "depth": 0,
             "fetched_at": clock()}]
        frontier.report([ok(leased[0], clock, "http://a.test/private/z", "http://a.test/w")])
        rest = frontier.lease(10)
        assert [j.url for j in rest] == ["http://a.test/w"]
        frontier.report([ok(rest[0], clock)])
        assert frontier.lease(10) == [] and frontier.done
        assert {e["url"] for e in events if e["reason"] == "robots_disallowed"} == {
            "http://a.test/private/y", "http://a.test/private/z"}
        assert frontier.reasons["robots_disallowed"] == 2 and frontier.queued == 0


def test_fail_is_retried_with_backoff_then_dropped(tmp_path: Path) -> None:
    clock = Clock()
    events: list[dict[str, Any]] = []
    with make_frontier(tmp_path, clock, events=events, obey_robots=False) as frontier:  # max_retries=2
        frontier.add_seeds(["http://a.test/flaky"])
        [job] = frontier.lease(10)
        for attempt in range(3):
            assert job.attempt == attempt
            reported_at = clock()
            frontier.report([FetchResult(job=job, status=Status.FAIL, reason="http_503", http_status=503,
                                         fetched_at=clock())])
            if attempt == 2:
                break
            # backoff is 2**attempt seconds times a jitter in [0.5, 1]
            clock.now = reported_at + 0.5 * 2**attempt - 0.001
            assert frontier.lease(10) == []
            clock.now = reported_at + 2**attempt + 0.001
            [job] = frontier.lease(10)
        assert frontier.lease(10) == [] and frontier.done and frontier.queued == 0
        assert [(e["attempt"], e["retry"]) for e in events] == [(0, True), (1, True), (2, False)]
        assert frontier.reasons["http_503"] == 3 and frontier.fetched == frontier.attempts == 3


def test_retry_after_holds_the_host(tmp_path: Path) -> None:
    clock = Clock()
    with make_frontier(tmp_path, clock, obey_robots=False) as frontier:  # no delay, 8 per host
        frontier.add_seeds(["http://a.test/1", "http://a.test/2", "http://b.test/1"])
        jobs = {j.url: j for j in frontier.lease(10)}
        assert set(jobs) == {"http://a.test/1", "http://a.test/2", "http://b.test/1"}
        reported_at = clock.advance(0.1)
        # one batch: a 429 with Retry-After, and a page of the same host with a new link
        frontier.report([
            FetchResult(job=jobs["http://a.test/1"], status=Status.FAIL, reason="http_429", http_status=429,
                        retry_after=5.0, fetched_at=clock()),
            ok(jobs["http://a.test/2"], clock, "http://a.test/3", "http://b.test/2"),
        ])
        assert [j.url for j in frontier.lease(10)] == ["http://b.test/2"]  # the other host goes on
        clock.now = reported_at + 4.99
        assert frontier.lease(10) == []
        clock.now = reported_at + 5.0
        assert sorted(j.url for j in frontier.lease(10)) == ["http://a.test/1", "http://a.test/3"]


# -- page limits and counters across reopening ----------------------------------------------------------


def fail(job: FetchJob, clock: Clock, reason: str, http_status: int | None = None) -> FetchResult:
    """A FAIL result: with `http_status` the server answered (5xx); without, the network failed."""
    return FetchResult(job=job, status=Status.FAIL, reason=reason, http_status=http_status, fetched_at=clock())


def robots_ok(job: FetchJob, clock: Clock) -> FetchResult:
    return FetchResult(job=job, status=Status.OK, http_status=200, fetched_at=clock(), robots_txt="")


def test_max_pages_crawl_reopens_and_resumes_when_the_limit_is_raised(tmp_path: Path) -> None:
    clock = Clock()
    links = [f"http://a.test/{i}" for i in range(1, 6)]

    def session(max_pages: int) -> Frontier:
        return make_frontier(tmp_path, clock, limits=LimitsConfig(max_retries=2, max_pages=max_pages),
                             obey_robots=False)

    with session(2) as frontier:
        frontier.add_seeds(["http://a.test/"])
        [seed] = frontier.lease(10)
        frontier.report([ok(seed, clock, *links)])
        [job] = frontier.lease(10)  # the seed and one more: leases in flight count toward max_pages
        frontier.report([ok(job, clock)])
        assert frontier.done and frontier.fetched == 2 and frontier.queued == 4
    with session(2) as frontier:  # the same limit again: nothing to do
        assert frontier.done and frontier.lease(10) == [] and frontier.stats()["fetched"] == 2
    with session(4) as frontier:  # raised: exactly the additional pages, in FIFO order
        jobs = frontier.lease(10)
        assert [j.url for j in jobs] == links[1:3]
        frontier.report([ok(j, clock) for j in jobs])
        assert frontier.done and frontier.fetched == 4 and frontier.queued == 2


@pytest.mark.parametrize("limit", ["max_pages", "max_pages_per_host"])
def test_page_limits_count_fetched_pages_not_attempts(tmp_path: Path, limit: str) -> None:
    clock = Clock()
    limits = LimitsConfig(max_retries=1, **{limit: 4})
    with make_frontier(tmp_path, clock, limits=limits, obey_robots=False) as frontier:
        frontier.add_seeds(["http://a.test/"])
        [seed] = frontier.lease(10)
        frontier.report([ok(seed, clock, *(f"http://a.test/{p}" for p in ("down", "404", "500", "more")))])
        jobs = {j.url.rsplit("/", 1)[1]: j for j in frontier.lease(10)}
        assert set(jobs) == {"down", "404", "500"}  # 1 fetched + 3 leased = the limit
        frontier.report([
            fail(jobs["down"], clock, "connect_error"),
            FetchResult(job=jobs["404"], status=Status.SKIP, reason="http_404", http_status=404, fetched_at=clock()),
            fail(jobs["500"], clock, "http_500", http_status=500),
        ])
        assert (frontier.fetched, frontier.attempts) == (3, 4)  # the refused connection got no response
        [more] = frontier.lease(10)  # so one more page may be fetched ("down" and "500" back off)
        assert more.url == "http://a.test/more"
        frontier.report([ok(more, clock)])
        stats = frontier.stats()
        assert (stats["fetched"], stats["attempts"]) == (4, 5) and "pages" not in stats
        clock.advance(MAX_BACKOFF)
        assert frontier.done and frontier.lease(10) == [] and frontier.queued == 2
    with make_frontier(tmp_path, clock, limits=limits, obey_robots=False) as frontier:
        assert (frontier.fetched, frontier.attempts) == (4, 5) and frontier.done


def test_a_data_dir_with_the_legacy_pages_counter_opens(tmp_path: Path) -> None:
    """Before "fetched" and "attempts", one "pages" counter counted every page result: it opens as
    attempts = fetched = pages (an upper bound of fetched: a page limit is never exceeded)."""
    clock = Clock()
    with make_frontier(tmp_path, clock, obey_robots=False) as frontier:
        frontier.add_seeds(["http://a.test/1", "http://a.test/2"])
        job = frontier.lease(10)[0]
        frontier.report([ok(job, clock)])
    env = lmdb.open(str(tmp_path / "data" / "state"), max_dbs=16, subdir=True)
    try:
        with env.begin(write=True) as txn:
            counters = env.open_db(b"counters", txn=txn)
            txn.drop(counters, delete=False)
            txn.put(b"pages", struct.pack("<Q", 7), db=counters)
    finally:
        env.close()
    limits = LimitsConfig(max_retries=2, max_pages=8)
    with make_frontier(tmp_path, clock, limits=limits, obey_robots=False) as frontier:
        assert (frontier.fetched, frontier.attempts) == (7, 7)
        [job] = frontier.lease(10)
        frontier.report([ok(job, clock)])
        assert (frontier.fetched, frontier.attempts) == (8, 8) and frontier.done
    with make_frontier(tmp_path, clock, limits=limits, obey_robots=False) as frontier:
        assert (frontier.fetched, frontier.attempts) == (8, 8)
    env = lmdb.open(str(tmp_path / "data" / "state"), max_dbs=16, subdir=True, readonly=True)
    try:
        with env.begin() as txn:
            stored = dict(txn.cursor(db=env.open_db(b"counters", txn=txn)))
    finally:
        env.close()
    assert stored == {b"attempts": struct.pack("<Q", 8), b"fetched": struct.pack("<Q", 8)}


# -- unreachable hosts and seeds ---------------------------------------------------------------------------


def test_unreachable_robots_keeps_the_hosts_urls_for_a_rerun(tmp_path: Path) -> None:
    clock = Clock()
    events: list[dict[str, Any]] = []
    with make_frontier(tmp_path, clock, events=events) as frontier:  # robots.txt obeyed, max_retries=2
        frontier.add_seeds(["http://a.test/", "http://b.test/"])
        jobs = {j.url: j for j in frontier.lease(10)}
        assert set(jobs) == {"http://a.test/robots.txt", "http://b.test/robots.txt"}
        frontier.report([robots_ok(jobs["http://b.test/robots.txt"], clock)])
        [b_seed] = frontier.lease(10)
        frontier.report([ok(b_seed, clock, "http://a.test/linked")])
        robots = jobs["http://a.test/robots.txt"]
        for attempt in range(3):  # a.test refuses every connection
            frontier.report([fail(robots, clock, "connect_error")])
            clock.advance(2.0)  # past the backoff
            leased = frontier.lease(10)
            if attempt < 2:
                [robots] = leased
                assert robots.robots
        assert leased == [] and frontier.done, "a host that cannot be reached must end the crawl"
        # nothing was skipped as robots_disallowed: the seed and the linked page stay queued
        assert [e["url"] for e in events] == ["http://b.test/"]
        assert frontier.queued == 2 and frontier.reasons["host_unreachable"] == 1
        assert frontier.unreachable_seeds() == [("http://a.test/", "connection refused or host unreachable")]
        assert frontier.stats()["unreachable_hosts"] == 1
    with make_frontier(tmp_path, clock, events=events) as frontier:  # a rerun tries the host again
        [robots] = frontier.lease(10)
        assert robots.url == "http://a.test/robots.txt"
        frontier.report([robots_ok(robots, clock)])
        pages = frontier.lease(10)
        assert sorted(j.url for j in pages) == ["http://a.test/", "http://a.test/linked"]
        frontier.report([ok(j, clock) for j in pages])
        assert frontier.done and frontier.queued == 0 and frontier.unreachable_seeds() == []


def test_robots_5xx_after_retries_still_disallows_the_host(tmp_path: Path) -> None:
    """RFC 9309: a server error is not an unreachable host; its URLs are skipped for good."""
    clock = Clock()
    events: list[dict[str, Any]] = []
    with make_frontier(tmp_path, clock, events=events) as frontier:
        frontier.add_seeds(["http://a.test/"])
        for _ in range(3):
            [robots] = frontier.lease(10)
            frontier.report([fail(robots, clock, "http_503", http_status=503)])
            clock.advance(2.0)
        assert frontier.lease(10) == [] and frontier.done and frontier.queued == 0
        assert [(e["url"], e["reason"]) for e in events] == [("http://a.test/", "robots_disallowed")]
        assert frontier.unreachable_seeds() == [] and frontier.reasons["robots_unreachable"] == 1


def test_unreachable_seed_stays_queued_other_pages_are_given_up(tmp_path: Path) -> None:
    clock = Clock()
    events: list[dict[str, Any]] = []
    with make_frontier(tmp_path, clock, events=events, obey_robots=False) as frontier:  # max_retries=2
        frontier.add_seeds(["http://a.test/", "http://b.test/"])
        jobs = {j.url: j for j in frontier.lease(10)}
        frontier.report([ok(jobs["http://b.test/"], clock, "http://a.test/page")])
        pending = [jobs["http://a.test/"]]
        for _ in range(10):  # a.test's name does not resolve: every fetch of it fails
            frontier.report([fail(job, clock, "dns_error") for job in pending])
            clock.advance(MAX_BACKOFF)
            pending = frontier.lease(10)
            if not pending:
                break
        assert frontier.done
        tried = Counter(e["url"] for e in events if e["reason"] == "dns_error")
        assert tried == {"http://a.test/": 3, "http://a.test/page": 3}  # 1 + max_retries each
        # the page is given up like any failure; the seed stays queued, its attempts reset
        assert frontier.queued == 1
        assert frontier.unreachable_seeds() == [("http://a.test/", "DNS failure")]
    with make_frontier(tmp_path, clock, events=events, obey_robots=False) as frontier:
        [again] = frontier.lease(10)
        assert (again.url, again.attempt) == ("http://a.test/", 0)
        frontier.report([ok(again, clock)])
        assert frontier.done and frontier.queued == 0 and frontier.unreachable_seeds() == []


def free_port() -> int:
    """A loopback port nobody listens on (connections to it are refused) until a server binds it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_real_unreachable_seed_then_rerun_once_the_host_is_up(tmp_path: Path) -> None:
    spec = SiteSpec(pages=60, hosts=1, seed=5, errors=False, redirects=False)
    port = free_port()
    seed = f"http://127.0.0.1:{port}{SiteGraph(spec).path(0)}"
    cfg = CrawlConfig(
        seeds=(seed,),
        scope=ScopeConfig(allowed_hosts=(f"127.0.0.1:{port}",)),
        limits=LimitsConfig(max_retries=1),
        workers=WorkersConfig(timeout=5.0, connect_timeout=2.0, lease_timeout=10.0),
        politeness=NO_DELAY,
        traps=NO_TRAPS,
        dedup=SMALL_DEDUP,
        storage=StorageConfig(data_dir=tmp_path / "data"),
    )
    async with Fetcher(cfg, Scope.from_config(cfg)) as fetcher:
        with Frontier.from_config(cfg) as frontier:
            frontier.add_seeds(cfg.seeds)
            assert await asyncio.wait_for(crawl(frontier, fetcher.fetch), 30) == []
            assert frontier.done and frontier.queued == 1
            assert frontier.unreachable_seeds() == [(seed, "connection refused or host unreachable")]
            assert frontier.stats()["fetched"] == 0
            assert frontier.reasons["robots_disallowed"] == 0
        async with MockWeb(spec, ports=[port]) as web:
            with Frontier.from_config(cfg) as frontier:
                frontier.add_seeds(cfg.seeds)
                assert await asyncio.wait_for(crawl(frontier, fetcher.fetch), 30) == []
                assert frontier.done and frontier.queued == 0 and frontier.unreachable_seeds() == []
            assert Counter(web.counts) == web.graph.expected_requests(web.ports)


# -- attempts that bring no result: lease expiry, a dead worker --------------------------------------------


def test_a_lease_that_keeps_expiring_is_given_up(tmp_path: Path) -> None:
    clock = Clock()
    events: list[dict[str, Any]] = []
    with make_frontier(tmp_path, clock, events=events, obey_robots=False) as frontier:  # max_retries=2
        frontier.add_seeds(["http://a.test/hang", "http://a.test/ok"])
        for attempt in range(3):
            jobs = {j.url: j for j in frontier.lease(10)}  # lease() expires what ran out first
            assert jobs["http://a.test/hang"].attempt == attempt
            if "http://a.test/ok" in jobs:
                frontier.report([ok(jobs["http://a.test/ok"], clock)])
            clock.advance(10.1)  # past lease_timeout: the hung fetch never reports
        assert frontier.expire() == 1
        assert frontier.lease(10) == [] and frontier.done and frontier.queued == 0
        assert [(e["status"], e["reason"], e["attempt"], e["retry"]) for e in events if e["url"].endswith("/hang")] == [
            ("fail", "lease_expired", 0, True), ("fail", "lease_expired", 1, True), ("fail", "lease_expired", 2, False)]
        assert frontier.reasons["lease_expired"] == 3 and frontier.attempts == 4 and frontier.fetched == 1


def test_abandon_leases_counts_an_attempt_and_gives_up_after_max_retries(tmp_path: Path) -> None:
    clock = Clock()
    events: list[dict[str, Any]] = []
    with make_frontier(tmp_path, clock, events=events) as frontier:  # robots.txt obeyed, max_retries=2
        frontier.add_seeds(["http://a.test/1", "http://a.test/2", "http://b.test/1"])
        robots = {j.url: j for j in frontier.lease(10)}
        frontier.report([robots_ok(robots["http://a.test/robots.txt"], clock)])
        assert sorted(j.url for j in frontier.lease(10)) == ["http://a.test/1", "http://a.test/2"]
        assert frontier.in_flight == 3  # b.test's robots.txt is still out
        assert frontier.abandon_leases("worker_died") == 2
        assert frontier.in_flight == 0 and frontier.reasons["worker_died"] == 2
        assert (frontier.attempts, frontier.fetched) == (2, 0)
        jobs = frontier.lease(10)  # the robots.txt lease was only released: leased again at once
        assert sorted((j.url, j.attempt) for j in jobs) == [
            ("http://a.test/1", 1), ("http://a.test/2", 1), ("http://b.test/robots.txt", 0)]
    with make_frontier(tmp_path, clock, events=events) as frontier:  # the attempt counts are durable
        assert frontier.attempts == 2
        for attempt in (1, 2):
            jobs = frontier.lease(10)
            assert sorted((j.url, j.attempt) for j in jobs) == [
                ("http://a.test/1", attempt), ("http://a.test/2", attempt), ("http://b.test/robots.txt", 0)]
            assert frontier.abandon_leases("worker_died") == 2
        # 1 + max_retries attempts: given up, logged with the reason
        assert [j.url for j in frontier.lease(10)] == ["http://b.test/robots.txt"]
        assert frontier.queued == 1  # b.test/1, waiting for its robots.txt
        assert frontier.attempts == 6 == sum(e["reason"] == "worker_died" for e in events)
        assert [(e["url"], e["attempt"], e["retry"]) for e in events if e["reason"] == "worker_died"
                and e["url"].endswith("/1")] == [("http://a.test/1", 0, True), ("http://a.test/1", 1, True),
                                                 ("http://a.test/1", 2, False)]


def test_config_whitelist_and_deletable_reach_the_seen_test(tmp_path: Path) -> None:
    """dedup.whitelist and dedup.deletable from a crawl config are the crawl's seen-test's, not only URLSeen's."""
    whitelist = tmp_path / "keep.txt"
    whitelist.write_text("# known pages\nhttp://a.example/keep\n\nhttp://a.example/also\n")
    cfg = load_config({"seeds": ["http://a.example/"], "storage": {"data_dir": str(tmp_path / "crawl")},
                       "dedup": {"exact": False, "deletable": True, "whitelist": str(whitelist), "capacity": 1000}})
    with Frontier.from_config(cfg) as frontier:
        stats = frontier.stats()["seen"]
        assert stats["deletable"] is True
        assert stats["whitelisted"] == 2
