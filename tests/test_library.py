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
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from frontier.config import (CrawlConfig, DedupConfig, LimitsConfig, PolitenessConfig, ScopeConfig, StorageConfig,
                             WorkersConfig)
from frontier.messages import FetchJob, FetchResult, Status
from frontier.scheduler import Frontier
from frontier.scope import Scope
from frontier.testing import MockWeb, PageKind, SiteGraph, SiteSpec
from frontier.testing.sitegraph import QUERIES
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


def crawl_config(web: MockWeb, data_dir: Path) -> CrawlConfig:
    return CrawlConfig(
        seeds=(web.seed,),
        scope=ScopeConfig(allowed_hosts=tuple(f"127.0.0.1:{p}" for p in web.ports)),
        limits=LimitsConfig(max_retries=MAX_RETRIES),
        workers=WorkersConfig(timeout=5.0, lease_timeout=10.0),
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
            # first session: stop (as if crashed) after 300 results, leaving fetches unreported
            with Frontier.from_config(cfg, on_event=events.append) as frontier:
                assert frontier.add_seeds(cfg.seeds) == 1
                abandoned = await crawl(frontier, fetcher.fetch, stop_after=300)
                assert abandoned and not frontier.done
            first = Counter(web.counts)
            first_events = len(events)

            # second session on the same data dir: the seed is known, the queue is where it was
            with Frontier.from_config(cfg, on_event=events.append) as frontier:
                assert frontier.add_seeds(cfg.seeds) == 0
                assert frontier.pages == sum(1 for e in events if e.get("reason") != "robots_disallowed")
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

            # a third session finds nothing to do and fetches nothing
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
                  **politeness: Any) -> Frontier:
    return Frontier(tmp_path / "data", scope=Scope(allowed_hosts=["a.test", "b.test"]),
                    limits=LimitsConfig(max_retries=2), politeness=PolitenessConfig(**politeness), dedup=SMALL_DEDUP,
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
        assert (again.url, again.depth, again.attempt) == (job.url, job.depth, 0)
        assert frontier.reasons["lease_expired"] == 1
        # a late result of the expired lease is stale (Frontier.expire): it does not ack the new lease
        assert frontier.report([ok(job, clock, "http://a.test/late")]) == 0
        assert frontier.reasons["stale_result"] == 1 and frontier.pages == 0 and frontier.in_flight == 1
        frontier.report([ok(again, clock)])
        assert frontier.done and frontier.pages == 1


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
        assert frontier.pages == 1 and frontier.queued == 1 and len(events) == 1
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
        assert frontier.reasons["http_503"] == 3 and frontier.pages == 3


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
