"""Revisits in frontier.scrapy.Scheduler: FRONTIER_REVISIT_* settings, the conditional GET of a revisit request,
and real Scrapy crawls (LMDB and Redis) of a real aiohttp static site that sends ETag / Last-Modified and answers
304, pass after pass.

The passes of one crawl run in one child process (a Twisted reactor cannot restart inside pytest, and one Scrapy
start per pass would cost most of the time budget): pass 1 at the real clock; before each later pass the child
rewrites or touches the site's files as the test planned them and runs the spider again with the Scheduler's clock
moved ahead (CLOCK_SHIFT seconds: `ShiftedScheduler`, the plugin's own Scheduler given a `clock`), so pages come due
without waiting. The site's own request log (headers as received, status as sent) is what the test judges.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("scrapy")

from aiohttp import web  # noqa: E402
from scrapy import Request, Spider  # noqa: E402
from scrapy.http import HtmlResponse  # noqa: E402
from scrapy.settings import Settings  # noqa: E402
from scrapy.utils.test import get_crawler  # noqa: E402

from frontier.crawl.revisit import RevisitSchedule, body_digest  # noqa: E402
from frontier.errors import ConfigError  # noqa: E402
from frontier.scrapy.scheduler import Scheduler, scheduler_policy  # noqa: E402
from frontier.scrapy.settings import FrontierSettings  # noqa: E402
from frontier.seen.fingerprint import fingerprint  # noqa: E402
from frontier.state.base import StatePolicy  # noqa: E402
from frontier.state.lmdb import LmdbCrawlState  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PAGES = 6  # p0..p5 and the index
AFTER = 1000.0  # FRONTIER_REVISIT_AFTER; nutch: unchanged x1.4, changed x0.8
CHANGED, TOUCHED = ("p0.html", "p3.html"), "p1.html"  # rewritten; a new mtime (so a 200) with the same body
CRAWL_TIMEOUT = 120.0

DRIVER = '''
import json, os, sys, time, urllib.request
from pathlib import Path

from scrapy.utils.reactor import install_reactor

install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")

from scrapy import Request, Spider, signals
from scrapy.crawler import CrawlerRunner
from scrapy.linkextractors import LinkExtractor
from scrapy.utils.log import configure_logging
from twisted.internet import defer, reactor

from frontier.scrapy import Scheduler


class ShiftedScheduler(Scheduler):
    """The plugin's Scheduler on a clock CLOCK_SHIFT seconds ahead: a later pass without waiting for it."""

    def __init__(self, state, **kwargs):
        shift = kwargs["crawler"].settings.getfloat("CLOCK_SHIFT")
        super().__init__(state, clock=lambda: time.time() + shift, **kwargs)


class RevisitSpider(Spider):
    name = "revisit"

    def __init__(self, seed, stats_out, **kwargs):
        super().__init__(**kwargs)
        self.seed, self.stats_out, self.links = seed, stats_out, LinkExtractor()

    @classmethod
    def from_crawler(cls, crawler, *args, **kwargs):
        spider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider.dump_stats, signals.engine_stopped)
        return spider

    async def start(self):
        yield Request(self.seed)

    def parse(self, response):
        self.crawler.stats.inc_value(f"revisit/callback/{response.status}")
        if response.status == 304:  # not modified since the last visit: nothing new to follow
            return
        for link in self.links.extract_links(response):
            yield Request(link.url)

    def dump_stats(self):
        Path(self.stats_out).write_text(json.dumps(self.crawler.stats.get_stats(), default=str))


def main(plan_file):
    plan = json.loads(Path(plan_file).read_text())
    configure_logging(plan["settings"])
    runner = CrawlerRunner(plan["settings"])

    @defer.inlineCallbacks
    def passes():
        try:
            for i, step in enumerate(plan["passes"]):
                for name, text in step["edits"]:
                    path = Path(plan["site"], name)
                    if text is not None:
                        path.write_text(text)
                    later = path.stat().st_mtime + 100  # a later Last-Modified and ETag
                    os.utime(path, (later, later))
                urllib.request.urlopen(f"{plan['base']}/__pass__/{i}").read()  # marks the site's log
                spider = type("RevisitSpider", (RevisitSpider,), {"custom_settings": {"CLOCK_SHIFT": step["shift"]}})
                yield runner.crawl(spider, seed=plan["seed"], stats_out=f"{plan['out']}-{i}.json")
        finally:
            reactor.stop()

    reactor.callWhenRunning(passes)
    reactor.run()


main(sys.argv[1])
'''


class Site:
    """A real aiohttp static file site on loopback, in a thread: ETag / Last-Modified on every file, 304 to a
    matching If-None-Match / If-Modified-Since. `log`: (pass, path, If-None-Match, If-Modified-Since, status,
    ETag sent, Last-Modified sent) per request, as the server saw and answered it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.log: list[tuple[int, str, str | None, str | None, int, str | None, str | None]] = []
        self._pass = -1
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self.port = 0

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def mark(request: web.Request) -> web.Response:
            self._pass = int(request.match_info["n"])
            return web.Response(text="ok")

        async def logged(request: web.Request, response: web.StreamResponse) -> None:
            if not request.path.startswith("/__pass__/"):
                self.log.append((self._pass, request.path, request.headers.get("If-None-Match"),
                                 request.headers.get("If-Modified-Since"), response.status,
                                 response.headers.get("ETag"), response.headers.get("Last-Modified")))

        app = web.Application()
        app.router.add_get("/__pass__/{n}", mark)
        app.router.add_static("/", self.root)
        app.on_response_prepare.append(logged)
        self._runner = web.AppRunner(app)
        self._loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        self._loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._ready.set()
        self._loop.run_forever()
        self._loop.run_until_complete(self._runner.cleanup())

    def __enter__(self) -> Site:
        self._thread.start()
        assert self._ready.wait(30)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def requests(self, n: int) -> dict[str, list[tuple[str | None, str | None, int, str | None, str | None]]]:
        """Pass n's requests by path (robots.txt apart)."""
        out: dict[str, list[Any]] = {}
        for p, path, inm, ims, status, etag, modified in self.log:
            if p == n and path != "/robots.txt":
                out.setdefault(path, []).append((inm, ims, status, etag, modified))
        return out


def write_site(root: Path) -> None:
    root.mkdir()
    links = "".join(f'<a href="/p{i}.html">p{i}</a>' for i in range(PAGES))
    (root / "index.html").write_text(f"<html><body>{links}</body></html>")
    for i in range(PAGES):
        (root / f"p{i}.html").write_text(f"<html><body>page {i} <a href='/index.html'>home</a></body></html>")


def crawl(tmp_path: Path, site: Site, settings: dict[str, str], passes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run the passes in one child process; each pass's Scrapy stats."""
    base = {"SCHEDULER": "__main__.ShiftedScheduler", "DUPEFILTER_CLASS": "frontier.scrapy.DupeFilter",
            "FRONTIER_REVISIT_AFTER": AFTER, "FRONTIER_REVISIT_ADAPTIVE": "nutch", "FRONTIER_REVISIT_MIN_AFTER": 1,
            "FRONTIER_REVISIT_MAX_AFTER": 100 * AFTER, "CONCURRENT_REQUESTS": 4, "ROBOTSTXT_OBEY": False,
            "TELNETCONSOLE_ENABLED": False, "LOG_LEVEL": "INFO", "LOG_FILE": str(tmp_path / "crawl.log")}
    plan = {"settings": {**base, **settings}, "passes": passes, "site": str(site.root), "base": site.base,
            "seed": f"{site.base}/index.html", "out": str(tmp_path / "stats")}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    (tmp_path / "driver.py").write_text(DRIVER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, str(tmp_path / "driver.py"), str(tmp_path / "plan.json")], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=CRAWL_TIMEOUT)
    log = (tmp_path / "crawl.log").read_text() if (tmp_path / "crawl.log").exists() else ""
    assert done.returncode == 0, done.stderr[-3000:] + log[-3000:]
    assert "Traceback" not in log and "Traceback" not in done.stderr, log[-3000:] + done.stderr[-3000:]
    stats = [json.loads((tmp_path / f"stats-{i}.json").read_text()) for i in range(len(passes))]
    assert all(s["finish_reason"] == "finished" for s in stats), stats
    return stats


PASSES = [
    {"shift": 0.0, "edits": []},
    # every page due (fetched ~now, due now + AFTER); two rewritten, one touched
    {"shift": 1.5 * AFTER, "edits": [*((name, f"<html><body>{name} changed</body></html>") for name in CHANGED),
                                     (TOUCHED, None)]},
    # the changed pages due again (interval 0.8 AFTER), the unchanged ones not (1.4 AFTER): pass 3 is less than
    # 0.3 AFTER (300 s) after pass 2
    {"shift": 2.6 * AFTER, "edits": []},
]
ALL = {"/index.html", *(f"/p{i}.html" for i in range(PAGES))}


def check_passes(site: Site, stats: list[dict[str, Any]]) -> None:
    first, second, third = site.requests(0), site.requests(1), site.requests(2)
    assert set(first) == ALL and all(len(r) == 1 for r in first.values()), first
    assert all(inm is None and ims is None and status == 200 and etag and modified
               for (inm, ims, status, etag, modified), in first.values())

    # pass 2: every page once, by its schedule (no link leads to it: a 304 has none), conditional with the
    # validators exactly as pass 1 received them
    assert set(second) == ALL and all(len(r) == 1 for r in second.values()), second
    for path, [(inm, ims, status, etag, modified)] in second.items():
        assert (inm, ims) == first[path][0][3:], path
        name = path.lstrip("/")
        assert status == (200 if name in CHANGED or name == TOUCHED else 304), (path, status)
    assert stats[1]["frontier/scheduler/revisit/not_modified"] == PAGES + 1 - len(CHANGED) - 1
    assert stats[1]["frontier/scheduler/revisit/unchanged"] == 1  # the touched page: same body digest
    assert stats[1]["frontier/scheduler/revisit/changed"] == len(CHANGED)
    assert stats[1]["revisit/callback/304"] == PAGES + 1 - len(CHANGED) - 1  # 304s reach the callback
    assert "httperror/response_ignored_count" not in stats[1]

    # pass 3: only the changed pages came due (their interval shrank, the others' grew); their new validators
    # were stored, so they are 304 now
    assert set(third) == {f"/{name}" for name in CHANGED}, third
    for path, [(inm, ims, status, _, _)] in third.items():
        assert (inm, ims) == second[path][0][3:] and status == 304, path
    assert stats[2]["frontier/scheduler/revisit/not_modified"] == len(CHANGED)


@pytest.mark.timeout(180)
def test_revisit_passes_on_lmdb_send_validators_get_304s_and_adapt_intervals(tmp_path: Path) -> None:
    write_site(tmp_path / "site")
    with Site(tmp_path / "site") as site:
        stats = crawl(tmp_path, site, {"FRONTIER_DATA_DIR": str(tmp_path / "data")}, PASSES)
    check_passes(site, stats)

    state = LmdbCrawlState(tmp_path / "data", StatePolicy(revisit=True))
    try:
        urls = sorted(f"{site.base}{path}" for path in ALL)
        stored = dict(zip(urls, state._store.revisits([fingerprint(url) for url in urls])))
    finally:
        state.close()
    for url, record in stored.items():
        name = url.rsplit("/", 1)[1]
        assert record is not None and record.url == url, url
        # nutch: a change x0.8 (pass 2), then unchanged x1.4 (pass 3); unchanged in pass 2 x1.4, not due in pass 3
        assert record.interval == pytest.approx(AFTER * (0.8 * 1.4 if name in CHANGED else 1.4)), url
        assert record.visits == (2.0 if name in CHANGED else 1.0), url
        assert record.digest == body_digest((tmp_path / "site" / name).read_bytes()), url  # the body last seen


@pytest.mark.timeout(180)
def test_revisit_passes_on_redis(tmp_path: Path, redis_node: Any, crawl_name: str) -> None:
    write_site(tmp_path / "site")
    with Site(tmp_path / "site") as site:
        stats = crawl(tmp_path, site, {"FRONTIER_REDIS_URL": redis_node.url, "FRONTIER_REDIS_CRAWL": crawl_name},
                      PASSES)
    check_passes(site, stats)


# -- settings and the conditional request, request by request ----------------------------------------------


def test_revisit_settings_default_to_the_engines_and_bad_values_name_the_setting() -> None:
    revisit = FrontierSettings.from_settings(Settings()).revisit
    assert (revisit.after, revisit.adaptive, revisit.min_after, revisit.max_after, revisit.conditional,
            revisit.continuous) == (None, "poisson", 60.0, 7_776_000.0, True, False)
    given = FrontierSettings.from_settings(Settings({"FRONTIER_REVISIT_AFTER": "3600", "FRONTIER_REVISIT_ADAPTIVE": "nutch",
                                                     "FRONTIER_REVISIT_CONDITIONAL": "false",
                                                     "FRONTIER_REVISIT_CONTINUOUS": "true"})).revisit
    assert (given.after, given.adaptive, given.conditional, given.continuous) == (3600.0, "nutch", False, True)
    for name, value in (("FRONTIER_REVISIT_AFTER", "soon"), ("FRONTIER_REVISIT_AFTER", 0),
                        ("FRONTIER_REVISIT_ADAPTIVE", "daily"), ("FRONTIER_REVISIT_MIN_AFTER", -1),
                        ("FRONTIER_REVISIT_MAX_AFTER", 1), ("FRONTIER_REVISIT_CONDITIONAL", "maybe"),
                        ("FRONTIER_REVISIT_CONTINUOUS", True)):
        with pytest.raises(ConfigError) as caught:
            FrontierSettings.from_settings(Settings({name: value}))
        assert caught.value.key == name and str(caught.value).startswith(f"{name}: "), caught.value
        assert "revisit." not in str(caught.value)


class PageSpider(Spider):
    name = "pages"
    handle_httpstatus_list = [404]

    def parse_page(self, response: Any) -> None:
        return None


def open_revisit_scheduler(where: Path, clock: list[float], *, continuous: bool = False) -> Scheduler:
    """A Scheduler with revisits (nutch, after 100 s) on LMDB, without an engine, on a clock the test moves."""
    crawler = get_crawler(PageSpider, {})
    crawler.spider = PageSpider()
    state = LmdbCrawlState(where, scheduler_policy(crawler.settings, revisit=True, revisit_continuous=continuous),
                           dedup=FrontierSettings(capacity=10_000).dedup())
    scheduler = Scheduler(state, fingerprinter=crawler.request_fingerprinter, stats=crawler.stats, crawler=None,
                          revisit=RevisitSchedule(after=100.0, adaptive="nutch", min_after=1.0),
                          continuous=continuous, clock=lambda: clock[0])
    scheduler.open(crawler.spider)
    return scheduler


@pytest.fixture
def revisit_scheduler(tmp_path: Path) -> Iterator[tuple[Scheduler, list[float]]]:
    clock = [1_800_000_000.0]
    scheduler = open_revisit_scheduler(tmp_path / "data", clock)
    yield scheduler, clock
    scheduler.close("finished")


def respond(scheduler: Scheduler, request: Request, status: int, body: bytes = b"", **headers: str) -> None:
    """What the engine does with a response: response_received, then (callback done) the request leaves it."""
    response = HtmlResponse(request.url, status=status, body=body, headers=headers, request=request)
    scheduler._response_received(response, request, scheduler.spider)  # type: ignore[arg-type]
    scheduler.finished(request)


def test_a_revisit_request_is_conditional_keeps_the_spiders_headers_and_lets_304_through(revisit_scheduler) -> None:
    scheduler, clock = revisit_scheduler
    etag, modified = 'W/"caf\xe9-1"', "Sat, 28 Nov 2026 03:00:00 GMT"  # sent back byte for byte
    assert scheduler.enqueue_request(Request("http://a.example/p", callback=PageSpider().parse_page))
    first = scheduler.next_request()
    assert first is not None and b"If-None-Match" not in first.headers
    assert "handle_httpstatus_list" not in first.meta
    respond(scheduler, first, 200, b"<html>v1</html>", ETag=etag, **{"Last-Modified": modified})
    assert scheduler.next_request() is None and not scheduler.has_pending_requests()  # one pass: nothing due yet

    clock[0] += 100.0
    assert scheduler.has_pending_requests()  # due now: queued by the schedule at the next lease
    again = scheduler.next_request()
    assert again is not None and again.url == "http://a.example/p"
    assert again.headers[b"If-None-Match"] == etag.encode("utf-8") and again.headers[b"If-Modified-Since"] == \
        modified.encode()
    assert again.meta["handle_httpstatus_list"] == [404, 304]  # the spider's own, and 304
    respond(scheduler, again, 304)
    assert scheduler.stats.get_value("frontier/scheduler/revisit/not_modified") == 1

    clock[0] += 10.0  # not due again yet (the interval grew to 140 s): the spider schedules it itself
    assert not scheduler.has_pending_requests()
    assert scheduler.enqueue_request(Request("http://a.example/p", dont_filter=True, headers={"If-None-Match": '"mine"'},
                                             meta={"handle_httpstatus_list": [500]}))
    mine = scheduler.next_request()
    assert mine is not None and mine.headers[b"If-None-Match"] == b'"mine"'  # the spider's header stays
    assert mine.headers[b"If-Modified-Since"] == modified.encode() and mine.meta["handle_httpstatus_list"] == [500, 304]
    respond(scheduler, mine, 200, b"<html>v2</html>", ETag='"v2"')
    assert scheduler.stats.get_value("frontier/scheduler/revisit/changed") == 1
    assert scheduler.next_request() is None and not scheduler.has_pending_requests()


def test_a_continuous_scheduler_stays_open_for_pages_due_later_and_a_plain_one_ends(tmp_path: Path) -> None:
    clock = [1_800_000_000.0]
    for continuous in (False, True):
        scheduler = open_revisit_scheduler(tmp_path / f"data-{continuous}", clock, continuous=continuous)
        try:
            assert scheduler.enqueue_request(Request("http://a.example/p"))
            request = scheduler.next_request()
            assert request is not None
            respond(scheduler, request, 200, b"<html>v1</html>")
            assert scheduler.next_request() is None
            assert scheduler.has_pending_requests() is continuous  # due in 100 s: wait for it, or end the pass
        finally:
            scheduler.close("finished")
