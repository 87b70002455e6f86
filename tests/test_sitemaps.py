"""Sitemaps as a source of URLs (seeds_from_sitemaps): the streaming reader on its own (an example table), then
whole crawls (Frontier + the real Fetcher, in one process) of frontier.testing.sitemapweb on loopback."""

from __future__ import annotations

import asyncio
import gzip
from pathlib import Path
from typing import Any

import pytest

from frontier.config import CrawlConfig, load_config
from frontier.crawl.messages import FetchJob, Status
from frontier.crawl.scheduler import Frontier
from frontier.crawl.sitemaps import MAX_LEVEL, level, payload, robots_sitemaps
from frontier.testing.sitemapweb import SitemapWeb, sitemapindex, urlset
from frontier.url.canonical import CanonicalRules
from frontier.url.scope import Scope
from workers.fetcher import Fetcher
from workers.sitemaps import CHUNK, MAX_BYTES, SitemapError, SitemapReader

pytestmark = pytest.mark.timeout(60)

RULES = CanonicalRules()
BASE = "http://h.example/sitemap.xml"


def read(body: bytes, *, chunk: int = 1000, **kw: Any) -> Any:
    """The Sitemap, or the SitemapError's reason."""
    reader = SitemapReader(BASE, rules=RULES, max_url_length=kw.pop("max_url_length", 2048), **kw)
    try:
        for i in range(0, len(body), chunk):
            reader.feed(body[i:i + chunk])
        return reader.close()
    except SitemapError as exc:
        return exc.reason


# -- the reader ----------------------------------------------------------------------------------------


def test_urlset_locs_canonical_in_order_and_extensions_ignored() -> None:
    sm = read(urlset(["http://h.example/a", "HTTP://H.example:80/b?z=1&amp;a=2", "http://h.example/a"]))
    assert not sm.index
    assert sm.urls == ("http://h.example/a", "http://h.example/b?a=2&z=1")  # image:loc (.png) is not a page
    assert sm.skipped == 1  # the repeat


def test_sitemap_index() -> None:
    sm = read(sitemapindex(["http://h.example/1.xml.gz", "/2.xml"]))
    assert sm.index and sm.urls == ("http://h.example/1.xml.gz", "http://h.example/2.xml")


@pytest.mark.parametrize("chunk", [1, 7, 100_000])
def test_gzip_file_and_several_members_in_any_chunking(chunk: int) -> None:
    body = gzip.compress(urlset(["http://h.example/a"])[:60]) + gzip.compress(urlset(["http://h.example/a"])[60:])
    assert read(body, chunk=chunk).urls == ("http://h.example/a",)
    assert read(body + b"trailing junk", chunk=chunk).urls == ("http://h.example/a",)


def test_no_namespace_and_whitespace_are_fine() -> None:
    assert read(b"<urlset>\n <url>\n  <loc>\n   /x\n  </loc>\n </url>\n</urlset>").urls == ("http://h.example/x",)


@pytest.mark.parametrize(("body", "reason"), [
    (b"", "sitemap_malformed"),
    (b"<html><body><a href=/x>x</a></body></html>", "sitemap_malformed"),  # a soft 404 page
    (b"<urlset><url><loc>http://h.example/a</loc></url>", "sitemap_malformed"),  # cut short
    (b"<urlset><url><loc>x</url></urlset>", "sitemap_malformed"),
    (b'<?xml version="1.0"?><!DOCTYPE u [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;">]>'
     b"<urlset><url><loc>http://h.example/&b;</loc></url></urlset>", "sitemap_malformed"),  # billion laughs
    (b'<?xml version="1.0"?><!DOCTYPE u [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
     b"<urlset><url><loc>&x;</loc></url></urlset>", "sitemap_malformed"),  # external entity
    (gzip.compress(urlset(["http://h.example/a"]))[:-12], "sitemap_malformed"),  # truncated .gz
    (b"\x1f\x8b\x08\x00garbage-not-deflate", "sitemap_malformed"),
])
def test_malformed_is_a_named_skip(body: bytes, reason: str) -> None:
    assert read(body) == reason


def test_gzip_bomb_stops_at_the_cap_in_bounded_steps() -> None:
    bomb = gzip.compress(b" " * (2 * 1024 * 1024))
    assert read(bomb, max_bytes=1024 * 1024) == "sitemap_too_large"
    reader = SitemapReader(BASE, rules=RULES, max_url_length=2048, max_bytes=1024 * 1024)
    with pytest.raises(SitemapError):
        reader.feed(bomb)
    assert reader.size <= 1024 * 1024 + CHUNK  # never more than one step past the cap
    assert MAX_BYTES == 50 * 1024 * 1024


def test_plain_body_past_the_cap_is_too_large() -> None:
    reader = SitemapReader(BASE, rules=RULES, max_url_length=2048, max_bytes=100)
    assert reader.room() == 101
    with pytest.raises(SitemapError) as err:
        reader.feed(b"<urlset>" + b" " * 200)
    assert err.value.reason == "sitemap_too_large"


def test_entries_capped_and_long_or_bad_locs_skipped() -> None:
    urls = [f"http://h.example/{i}" for i in range(10)] + ["javascript:alert(1)", "http://h.example/" + "x" * 100]
    sm = read(urlset(urls[10:] + urls[:10]), max_entries=4, max_url_length=64)
    assert sm.urls == tuple(urls[:4])
    assert sm.skipped == 2 + 6  # the two bad ones, then the six past the cap


def test_payload_marks_a_sitemap_and_nothing_else() -> None:
    assert level(payload(2)) == 2
    assert level(None) == level(b"") == level(b"\x80\x05pickled") == level(b"frontier:sitemap:x") == 0


def test_robots_sitemap_lines_or_the_fallback() -> None:
    text = "User-agent: *\nDisallow: /p\nSitemap: http://h.example/a.xml\nsitemap: http://h.example/b.xml\n"
    assert robots_sitemaps("http://h.example", text) == ["http://h.example/a.xml", "http://h.example/b.xml"]
    assert robots_sitemaps("http://h.example", "User-agent: *\nDisallow:\n") == ["http://h.example/sitemap.xml"]
    assert robots_sitemaps("http://h.example", "") == ["http://h.example/sitemap.xml"]


# -- crawls of the sitemap web ---------------------------------------------------------------------------------


def config(web: SitemapWeb, data_dir: Path, **extra: Any) -> CrawlConfig:
    data: dict[str, Any] = {
        "seeds": web.seeds, "seeds_from_sitemaps": True,
        "workers": {"timeout": 5.0, "concurrency": 16}, "politeness": {"delay": 0.0},
        "storage": {"data_dir": str(data_dir)}, "limits": {"max_retries": 0},
    }
    for key, value in extra.items():
        if isinstance(value, dict):
            data.setdefault(key, {}).update(value)
        else:
            data[key] = value
    return load_config(data)


async def crawl(cfg: CrawlConfig, *, max_reports: int | None = None) -> dict[str, Any]:
    """Crawl to the end (or stop after `max_reports` report calls, leaving the rest queued); the stats."""
    with Frontier.from_config(cfg) as frontier:
        frontier.add_seeds(cfg.seeds)
        reports = 0
        async with Fetcher(cfg, Scope.from_config(cfg)) as fetcher:
            running: set[asyncio.Task[Any]] = set()
            while running or not frontier.done:
                for job in frontier.lease(16 - len(running)):
                    running.add(asyncio.create_task(fetcher.fetch(job)))
                if not running:
                    await asyncio.sleep(frontier.next_ready_in() or 0.01)
                    continue
                done, running = await asyncio.wait(running, timeout=0.1, return_when=asyncio.FIRST_COMPLETED)
                frontier.report([task.result() for task in done])
                reports += 1
                if max_reports is not None and reports >= max_reports:
                    for task in running:
                        task.cancel()
                    break
        return frontier.stats()


def fetched(web: SitemapWeb) -> set[tuple[int, str]]:
    """What was requested of what the web serves (a trap detector's soft-404 probes left out)."""
    return {key for key, n in web.counts.items() if n} & web.routes()


async def test_pages_only_in_sitemaps_are_fetched_once(tmp_path: Path) -> None:
    async with SitemapWeb() as web:
        stats = await crawl(config(web, tmp_path / "d"))
        got = fetched(web)
        assert web.expected_hidden <= got
        assert not got & web.never()
        assert all(web.counts[key] == 1 for key in web.expected_hidden)
        reasons = stats["reasons"]
        # index, enc, gz, nested-index, nested, nested2-index, moved-here; b's /sitemap.xml
        assert reasons["sitemap"] == 5 and reasons["sitemap_index"] == 3
        assert reasons["sitemap_too_large"] == 1  # the bomb: a counted skip
        assert reasons["sitemap_malformed"] == 1
        assert reasons["sitemap_too_deep"] == 1  # the level-4 sitemap is never queued
        assert reasons["robots_disallowed"] == 2  # /private/1 and /private/sitemap.xml
        assert reasons["sitemap_out_of_scope"] == 1  # robots.txt names a sitemap on another port
        assert reasons["redirect"] == 2  # /sm/moved.xml -> /sm/moved-here.xml, still read as a sitemap; b's b-moved
        assert (0, "/sitemap.xml") not in got  # host a names its sitemaps: no fallback
        assert web.counts[(1, "/sitemap.xml")] == 1  # host b names none


async def test_without_seeds_from_sitemaps_no_sitemap_is_read(tmp_path: Path) -> None:
    async with SitemapWeb() as web:
        stats = await crawl(config(web, tmp_path / "d", seeds_from_sitemaps=False))
        got = fetched(web)
        assert got == {(0, "/robots.txt"), (0, "/"), (1, "/robots.txt"), (1, "/")}
        assert "sitemap" not in stats["reasons"]


async def test_max_depth_zero_queues_no_sitemap(tmp_path: Path) -> None:
    async with SitemapWeb() as web:
        stats = await crawl(config(web, tmp_path / "d", scope={"max_depth": 0}))
        assert fetched(web) == {(0, "/robots.txt"), (0, "/"), (1, "/robots.txt"), (1, "/")}
        assert stats["reasons"]["sitemap_max_depth"] == 3  # a's two Sitemap lines, b's fallback


async def test_without_robots_the_fallback_is_queued_with_the_seeds(tmp_path: Path) -> None:
    async with SitemapWeb() as web:
        await crawl(config(web, tmp_path / "d", politeness={"obey_robots": False}))
        got = fetched(web)
        assert (0, "/robots.txt") not in got
        assert web.counts[(0, "/sitemap.xml")] == 1  # 404: a's sitemaps are named only in its robots.txt
        assert {(1, f"/hidden/b-{i}") for i in range(web.pages)} <= got


async def test_sitemaps_survive_a_stop_and_are_read_after_it(tmp_path: Path) -> None:
    """The sitemaps queued with a robots.txt ack are durable queue entries marked as sitemaps: a crawl stopped
    right after the robots.txt results resumes and reads them as XML."""
    async with SitemapWeb() as web:
        cfg = config(web, tmp_path / "d")
        await crawl(cfg, max_reports=1)
        first = fetched(web)
        assert not first & web.expected_hidden
        stats = await crawl(cfg)
        assert web.expected_hidden <= fetched(web)
        assert stats["reasons"]["sitemap_index"] >= 1


async def test_a_sitemap_job_that_is_not_xml_is_a_counted_skip(tmp_path: Path) -> None:
    async with SitemapWeb() as web:
        cfg = config(web, tmp_path / "d")
        async with Fetcher(cfg, Scope.from_config(cfg)) as fetcher:
            result = await fetcher.fetch(FetchJob(web.url(0, "/"), 1, b"k", sitemap=1))
            assert (result.status, result.reason) == (Status.SKIP, "sitemap_malformed")
            result = await fetcher.fetch(FetchJob(web.url(0, "/sm/bomb.xml.gz"), 1, b"k", sitemap=1))
            assert (result.status, result.reason) == (Status.SKIP, "sitemap_too_large")
            assert result.bytes <= MAX_BYTES + CHUNK
            result = await fetcher.fetch(FetchJob(web.url(0, "/nowhere.xml"), 1, b"k", sitemap=1))
            assert (result.status, result.reason) == (Status.SKIP, "http_404")
            result = await fetcher.fetch(FetchJob(web.url(0, "/sm/gz.xml.gz"), 1, b"k", sitemap=MAX_LEVEL))
            assert result.reason == "sitemap" and len(result.outlinks) == web.pages


# -- <priority>: the score of the URLs a sitemap lists ------------------------------------------------


def test_priorities_kept_with_their_urls_in_any_order_within_an_entry() -> None:
    body = (b"<urlset><url><priority>0.9</priority><loc>/a</loc></url>"
            b"<url><loc>/b</loc></url>"  # none: the protocol's default
            b"<url><loc>/c</loc><priority> 0.1 </priority></url>"
            b"<url><loc>/d</loc><priority>high</priority></url>"  # not a number: counted, the default
            b"<url><loc>/e</loc><priority>7</priority></url>"  # beyond 1.0: counted, the default
            b"<url><loc>/a</loc><priority>0.2</priority></url></urlset>")  # a repeat: skipped, its first stands
    sm = read(body, chunk=5)
    assert sm.urls == tuple(f"http://h.example/{p}" for p in "abcde")
    assert sm.priorities == (0.9, 0.5, 0.1, 0.5, 0.5)
    assert (sm.bad_priorities, sm.skipped) == (2, 1)


def test_a_sitemap_without_priorities_leaves_the_scorer_to_decide() -> None:
    assert read(urlset(["http://h.example/a", "http://h.example/b"])).priorities is None
    assert read(sitemapindex(["/1.xml"])).priorities is None


async def test_sitemap_priorities_order_the_pages_they_list(tmp_path: Path) -> None:
    """A real server's sitemap lists /p0../p7 with rising priorities: with the fifo scorer (every other URL at 0)
    the frontier leases them best first, and the fetcher's result carries them for the in-scope URLs only."""
    from aiohttp import web as aioweb

    pages = [f"/p{i}" for i in range(8)]

    async def handle(request: aioweb.Request) -> aioweb.Response:
        path = request.path
        if path == "/robots.txt":
            return aioweb.Response(text=f"Sitemap: {origin}/sm.xml\n")
        if path == "/sm.xml":
            items = "".join(f"<url><loc>{origin}{p}</loc><priority>{i / 10}</priority></url>"
                            for i, p in enumerate(pages))
            items += "<url><loc>http://elsewhere.example/x</loc><priority>1.0</priority></url>"  # out of scope
            return aioweb.Response(body=f"<urlset>{items}</urlset>".encode(), content_type="application/xml")
        return aioweb.Response(text="<html><body>page</body></html>", content_type="text/html")

    app = aioweb.Application()
    app.router.add_get("/{tail:.*}", handle)
    runner = aioweb.AppRunner(app)
    await runner.setup()
    site = aioweb.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    origin = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        cfg = load_config({"seeds": [origin + "/"], "seeds_from_sitemaps": True, "ordering": {"scorer": "fifo"},
                           "workers": {"timeout": 5.0}, "politeness": {"delay": 0.0},
                           "storage": {"data_dir": str(tmp_path / "d")}, "limits": {"max_retries": 0}})
        order: list[str] = []
        with Frontier.from_config(cfg) as frontier:
            frontier.add_seeds(cfg.seeds)
            async with Fetcher(cfg, Scope.from_config(cfg)) as fetcher:
                for _ in range(100):  # one job at a time: the lease order is the queue's order
                    jobs = frontier.lease(1)
                    if not jobs:
                        if frontier.done:
                            break
                        await asyncio.sleep(frontier.next_ready_in() or 0.01)
                        continue
                    result = await fetcher.fetch(jobs[0])
                    if result.reason == "sitemap":
                        assert result.priorities == tuple(i / 10 for i in range(8))
                    order.append(jobs[0].url.removeprefix(origin))
                    frontier.report([result])
        assert [p for p in order if p in pages] == pages[::-1]
    finally:
        await runner.cleanup()


# -- <changefreq> / <lastmod>: a listed page's first revisit interval ----------------------------------


def test_changefreq_or_else_lastmod_gives_a_first_interval() -> None:
    import time as clock

    two_days_ago = clock.strftime("%Y-%m-%dT%H:%M:%SZ", clock.gmtime(clock.time() - 2 * 86_400))
    body = (f"<urlset><url><loc>/daily</loc><changefreq>Daily</changefreq><lastmod>2001-01-01</lastmod></url>"
            f"<url><lastmod>{two_days_ago}</lastmod><loc>/old</loc></url>"
            f"<url><loc>/plain</loc></url>"
            f"<url><loc>/bad</loc><changefreq>sometimes</changefreq><lastmod>yesterday</lastmod></url>"
            f"<url><loc>/future</loc><lastmod>2999-01-01</lastmod></url></urlset>").encode()
    sm = read(body, chunk=3)
    first = dict(zip((u.rsplit("/", 1)[1] for u in sm.urls), sm.first_intervals))
    assert first["daily"] == 86_400.0  # changefreq wins over lastmod
    assert first["old"] == pytest.approx(2 * 86_400, abs=120)
    assert first["plain"] is None and first["bad"] is None and first["future"] is None
    assert sm.bad_hints == 2
    assert read(urlset(["http://h.example/a"])).first_intervals == (pytest.approx(
        clock.time() - 1_704_067_200, abs=120),)  # urlset()'s <lastmod>2024-01-01</lastmod>
    assert read(b"<urlset><url><loc>/a</loc></url></urlset>").first_intervals is None


def test_a_sitemap_hint_sets_only_the_first_adaptive_interval_within_the_bounds() -> None:
    from frontier.crawl.messages import FetchJob, FetchResult, Status
    from frontier.crawl.revisit import RevisitSchedule

    result = FetchResult(FetchJob("http://a.example/", 1, b"k"), Status.OK, http_status=200, digest=b"d" * 8)
    schedule = RevisitSchedule(after=1000.0, adaptive="nutch", min_after=100.0, max_after=50_000.0)
    assert schedule.next(None, result, 0.0, 86_400.0)[0].interval == 50_000.0  # daily, bounded by max_after
    assert schedule.next(None, result, 0.0, 0.0)[0].interval == 100.0  # always, bounded by min_after
    assert schedule.next(None, result, 0.0, None)[0].interval == 1000.0  # no hint: after
    first = schedule.next(None, result, 0.0, 3600.0)[0]
    assert schedule.next(first, result, 3600.0, 60.0)[0].interval == pytest.approx(3600.0 * 1.4)  # no longer first
    fixed = RevisitSchedule(after=1000.0, adaptive="off")
    assert fixed.next(None, result, 0.0, 3600.0)[0].interval == 1000.0  # not adaptive: every interval is after


async def test_a_crawl_schedules_sitemap_pages_by_their_hints(tmp_path: Path) -> None:
    """A real server's sitemap: /daily (changefreq), /old (lastmod two days ago), /plain (neither) and the seed
    page linking /linked: after one pass on LMDB each stored schedule has the hint's interval, the others after's."""
    import time as clock

    from aiohttp import web as aioweb

    from frontier.seen.fingerprint import fingerprint
    from frontier.state.base import StatePolicy
    from frontier.state.lmdb import LmdbCrawlState

    two_days_ago = clock.strftime("%Y-%m-%dT%H:%M:%SZ", clock.gmtime(clock.time() - 2 * 86_400))

    async def handle(request: aioweb.Request) -> aioweb.Response:
        path = request.path
        if path == "/robots.txt":
            return aioweb.Response(text=f"Sitemap: {origin}/sm.xml\n")
        if path == "/sm.xml":
            items = (f"<url><loc>{origin}/daily</loc><changefreq>daily</changefreq></url>"
                     f"<url><loc>{origin}/old</loc><lastmod>{two_days_ago}</lastmod></url>"
                     f"<url><loc>{origin}/plain</loc></url>"
                     f"<url><loc>{origin}/bad</loc><changefreq>sometimes</changefreq><priority>x</priority></url>")
            return aioweb.Response(body=f"<urlset>{items}</urlset>".encode(), content_type="application/xml")
        links = '<a href="/linked">l</a>' if path == "/" else ""
        return aioweb.Response(text=f"<html><body>{links}</body></html>", content_type="text/html")

    app = aioweb.Application()
    app.router.add_get("/{tail:.*}", handle)
    runner = aioweb.AppRunner(app)
    await runner.setup()
    await aioweb.TCPSite(runner, "127.0.0.1", 0).start()
    origin = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        cfg = load_config({"seeds": [origin + "/"], "seeds_from_sitemaps": True,
                           "revisit": {"after": 1000, "min_after": 60, "max_after": 10_000_000},
                           "workers": {"timeout": 5.0}, "politeness": {"delay": 0.0},
                           "storage": {"data_dir": str(tmp_path / "d")}, "limits": {"max_retries": 0}})
        stats = await crawl(cfg)
    finally:
        await runner.cleanup()
    assert stats["reasons"]["sitemap_bad_hint"] == 2  # counted, ignored: /bad is fetched and scheduled at `after`
    names = ["daily", "old", "plain", "bad", "linked", ""]
    state = LmdbCrawlState(tmp_path / "d", StatePolicy(revisit=True), canonical=cfg.canonical)
    try:
        stored = state._store.revisits([fingerprint(f"{origin}/{name}") for name in names])  # type: ignore[attr-defined]
    finally:
        state.close()
    interval = {name: r.interval for name, r in zip(names, stored) if r is not None}
    assert interval == {"daily": 86_400.0, "old": pytest.approx(2 * 86_400, abs=300), "plain": 1000.0,
                        "bad": 1000.0, "linked": 1000.0, "": 1000.0}


async def test_sitemap_hints_follow_a_listed_page_over_its_redirect(tmp_path: Path) -> None:
    """The mock web's host b lists /hidden/b-moved (<priority>0.9</priority>, <changefreq>hourly</changefreq>),
    which answers 301 -> /hidden/b-target. Leased one at a time, the target comes right after the moved page,
    before b's other pages (priority 0.5): it kept 0.9. Its stored revisit interval is the hint's hour, not after."""
    from frontier.seen.fingerprint import fingerprint
    from frontier.state.base import StatePolicy
    from frontier.state.lmdb import LmdbCrawlState

    async with SitemapWeb(pages=4) as web:
        cfg = config(web, tmp_path / "d", ordering={"scorer": "fifo"},
                     revisit={"after": 1000, "min_after": 60, "max_after": 10_000_000})
        order: list[str] = []
        with Frontier.from_config(cfg) as frontier:
            frontier.add_seeds(cfg.seeds)
            async with Fetcher(cfg, Scope.from_config(cfg)) as fetcher:
                for _ in range(500):  # one job at a time: the lease order is the queue's order
                    jobs = frontier.lease(1)
                    if not jobs:
                        if frontier.done:
                            break
                        await asyncio.sleep(frontier.next_ready_in() or 0.01)
                        continue
                    order.append(jobs[0].url)
                    frontier.report([await fetcher.fetch(jobs[0])])
        moved, target = web.url(1, "/hidden/b-moved"), web.url(1, "/hidden/b-target")
        others = [web.url(1, f"/hidden/b-{i}") for i in range(web.pages)]
        assert set(others) | {moved, target} <= set(order) and order.count(target) == 1
        assert order.index(moved) + 1 == order.index(target) < min(map(order.index, others))
        state = LmdbCrawlState(tmp_path / "d", StatePolicy(revisit=True), canonical=cfg.canonical)
        try:
            (stored,) = state._store.revisits([fingerprint(target)])  # type: ignore[attr-defined]
        finally:
            state.close()
        assert stored.interval == 3600.0  # hourly, carried over the 301 (without it: after, 1000)
