"""frontier.scrapy's Scheduler and DupeFilter behave as Scrapy's own where a project can tell: persistence only
by Scrapy's rules, construction before the spider exists, the project's fingerprinter, request_dropped for every
duplicate, callback requests before the remaining start requests, nothing left behind by an object that was
never closed. (Scrapy's own test files run against them in CI: .ci/scrapy-suite.)"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("scrapy")

from scrapy import Request, Spider, signals  # noqa: E402
from scrapy.utils.test import get_crawler  # noqa: E402

from frontier.scrapy.dupefilter import DupeFilter  # noqa: E402
from frontier.scrapy.scheduler import Scheduler, scheduler_policy  # noqa: E402
from frontier.scrapy.settings import FrontierSettings  # noqa: E402
from frontier.state.lmdb import LmdbCrawlState  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


class BookSpider(Spider):
    name = "books"


class LowercaseFingerprinter:
    """A project's REQUEST_FINGERPRINTER_CLASS: URLs that differ in case are one request."""

    def fingerprint(self, request: Request) -> bytes:
        return hashlib.sha1(request.url.lower().encode()).digest()


def filter_for(settings: dict[str, Any]) -> Any:
    """A DupeFilter built as Scrapy's scheduler builds it: from the crawler alone, before any spider exists."""
    crawler = get_crawler(BookSpider, settings)
    assert crawler.spider is None
    dupefilter = DupeFilter.from_crawler(crawler)
    dupefilter.open()
    return dupefilter


def test_a_crawl_starts_fresh_without_jobdir_and_leaves_nothing_behind(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    page = Request("http://a.example/1")
    for _ in range(2):
        dupefilter = filter_for({})
        assert dupefilter.request_seen(page) is False  # each crawl new
        assert dupefilter.request_seen(page) is True
        dupefilter.close("finished")
    assert not (tmp_path / ".scrapy").exists() and os.listdir(tmp_path / "tmp") == []


@pytest.mark.parametrize("setting", ["JOBDIR", "FRONTIER_DATA_DIR", "FRONTIER_PERSIST"])
def test_jobdir_or_an_explicit_setting_keeps_the_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      setting: str) -> None:
    monkeypatch.chdir(tmp_path)
    value: Any = {"JOBDIR": str(tmp_path / "job"), "FRONTIER_DATA_DIR": str(tmp_path / "seen"),
                  "FRONTIER_PERSIST": True}[setting]
    first = filter_for({setting: value})
    assert first.request_seen(Request("http://a.example/1")) is False
    first.close("finished")
    second = filter_for({setting: value})
    assert second.request_seen(Request("http://a.example/1")) is True
    second.close("finished")
    where = {"JOBDIR": tmp_path / "job" / "frontier", "FRONTIER_DATA_DIR": tmp_path / "seen",
             "FRONTIER_PERSIST": tmp_path / ".scrapy" / "frontier" / "books"}[setting]
    assert where.is_dir()


def test_two_crawlers_of_one_spider_in_one_process(tmp_path: Path) -> None:
    """Fresh: both work. Persistent on one dir: the second is refused, and the message names this process as the
    holder, not "another frontier process"."""
    one, two = filter_for({}), filter_for({})
    assert one.request_seen(Request("http://a.example/1")) is False
    assert two.request_seen(Request("http://a.example/1")) is False
    one.close("finished")
    two.close("finished")
    persistent = {"FRONTIER_DATA_DIR": str(tmp_path / "seen")}
    holder = filter_for(persistent)
    refused = DupeFilter.from_crawler(get_crawler(BookSpider, persistent))
    assert not isinstance(refused, DupeFilter)
    assert f"in use by this very process (pid {os.getpid()})" in refused.why
    holder.close("finished")


def test_the_projects_fingerprinter_decides_for_get_requests_too() -> None:
    dupefilter = filter_for({"REQUEST_FINGERPRINTER_CLASS": LowercaseFingerprinter})
    assert dupefilter.request_seen(Request("http://a.example/index.html")) is False
    assert dupefilter.request_seen(Request("http://a.example/INDEX.html")) is True
    dupefilter.close("finished")


def test_the_scheduler_is_built_before_the_spider_exists(tmp_path: Path) -> None:
    crawler = get_crawler(BookSpider, {"JOBDIR": str(tmp_path / "job")})
    scheduler = Scheduler.from_crawler(crawler)
    assert isinstance(scheduler, Scheduler) and scheduler.serialize
    scheduler.close("finished")
    assert (tmp_path / "job" / "frontier").is_dir()


def open_scheduler(tmp_path: Path, **kwargs: Any) -> tuple[Scheduler, list[Request]]:
    """A Scheduler without an engine (the test acks with finished()), with a crawler whose request_dropped
    signals are collected in the returned list."""
    crawler = get_crawler(BookSpider, {})
    spider = BookSpider()
    state = LmdbCrawlState(tmp_path / "crawl", scheduler_policy(crawler.settings, 8),
                           dedup=FrontierSettings(capacity=10_000).dedup())
    scheduler = Scheduler(state, stats=crawler.stats, max_in_flight=16, **kwargs)
    scheduler.open(spider)
    scheduler.crawler, scheduler.spider = crawler, spider  # the signals only: open() above had no engine to watch
    dropped: list[Request] = []
    crawler.signals.connect(lambda request, spider: dropped.append(request), signal=signals.request_dropped,
                            weak=False)
    return scheduler, dropped


def test_a_duplicate_spelled_differently_is_refused_when_scheduled(tmp_path: Path) -> None:
    scheduler, dropped = open_scheduler(tmp_path)
    assert scheduler.enqueue_request(Request("http://a.example/p/60")) is True
    assert scheduler.enqueue_request(Request("http://a.example/p/60#frag")) is False  # the engine signals it
    assert scheduler.enqueue_request(Request("HTTP://A.EXAMPLE:80/x/../p/60")) is False
    assert dropped == []
    scheduler.close("finished")


def test_a_duplicate_found_at_the_commit_is_signalled_dropped(tmp_path: Path) -> None:
    """With no cache of recent requests the seen-set decides at the commit: request_dropped is sent then, for the
    very request, so scheduled = dropped + fetched still holds."""
    scheduler, dropped = open_scheduler(tmp_path, cache_size=0)
    first, again = Request("http://a.example/p/60"), Request("http://a.example/p/60#frag")
    assert scheduler.enqueue_request(first) is True and scheduler.enqueue_request(again) is True
    out = []
    while (request := scheduler.next_request()) is not None:
        out.append(request)
        scheduler.finished(request)
    assert out == [first] and dropped == [again]
    scheduler.close("finished")


def test_callback_requests_go_before_the_remaining_start_requests(tmp_path: Path) -> None:
    scheduler, _ = open_scheduler(tmp_path)
    for n in (1, 2, 3):
        assert scheduler.enqueue_request(Request(f"http://a.example/s{n}", meta={"is_start_request": True}))
    order = []

    def take() -> None:
        request = scheduler.next_request()
        assert request is not None
        order.append(request.url.rsplit("/", 1)[1])
        scheduler.finished(request)

    take()
    take()
    scheduler.enqueue_request(Request("http://a.example/c1"))
    scheduler.enqueue_request(Request("http://a.example/c2", priority=1))
    for _ in range(3):
        take()
    assert order == ["s1", "s2", "c2", "c1", "s3"]  # priority first; then callbacks before start requests
    assert scheduler.next_request() is None
    scheduler.close("finished")


def test_objects_never_closed_leave_no_shared_memory_and_raise_nothing(tmp_path: Path) -> None:
    """A filter and a scheduler garbage collected without close(): no BufferError, no /dev/shm segment left,
    no temporary dir left, and a persistent data dir is free again."""
    script = textwrap.dedent(f"""
        import gc, os, sys
        from scrapy import Request, Spider
        from scrapy.utils.test import get_crawler
        from frontier.scrapy.dupefilter import DupeFilter
        from frontier.scrapy.scheduler import Scheduler

        class BookSpider(Spider):
            name = "books"

        def ours():
            return {{name for name in os.listdir("/dev/shm") if name.startswith("frontier")}}

        def others():  # segments other live processes map (tests running beside this one): not ours to judge
            names = set()
            for pid in filter(str.isdigit, os.listdir("/proc")):
                if int(pid) != os.getpid():
                    try:
                        with open(f"/proc/{{pid}}/maps") as maps:
                            names |= {{line.split("/dev/shm/")[1].split()[0] for line in maps if "/dev/shm/frontier" in line}}
                    except OSError:
                        pass
            return names

        before = ours()
        for settings in ({{}}, {{"FRONTIER_DATA_DIR": {str(tmp_path / "seen")!r}}}):
            for cls in (DupeFilter, Scheduler):
                built = cls.from_crawler(get_crawler(BookSpider, settings))
                assert type(built) is cls, built
                if cls is DupeFilter:
                    built.request_seen(Request("http://a.example/1"))
                else:
                    built.enqueue_request(Request("http://a.example/1"))
                del built
                gc.collect()
        print(sorted(ours() - before - others()))
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    assert "BufferError" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
    assert "leaked shared_memory" not in done.stderr, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["seen"]  # the fresh crawls' temporary dirs are gone


@pytest.mark.parametrize(("settings", "expected"), [
    ({}, ["c3", "c2", "c1", "s1", "s2"]),  # Scrapy's defaults: LIFO, start requests FIFO and after the others
    ({"SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.FifoMemoryQueue"}, ["c1", "c2", "c3", "s1", "s2"]),
    ({"SCHEDULER_START_MEMORY_QUEUE": None}, ["c3", "s2", "c2", "c1", "s1"]),  # one LIFO queue for all
])
def test_the_order_among_equal_priorities_follows_scrapys_queue_settings(settings: dict[str, Any],
                                                                        expected: list[str]) -> None:
    scheduler = Scheduler.from_crawler(get_crawler(BookSpider, settings))
    assert isinstance(scheduler, Scheduler)
    for name in ("s1", "c1", "c2", "s2", "c3"):
        scheduler.enqueue_request(Request(f"http://a.example/{name}", meta={"is_start_request": name[0] == "s"}))
    order = []
    while (request := scheduler.next_request()) is not None:
        order.append(request.url.rsplit("/", 1)[1])
        scheduler.finished(request)
    assert order == expected
    scheduler.close("finished")


def test_a_persistent_crawl_keeps_a_bounded_number_of_live_requests(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the bound, a queued request comes back rebuilt from its queue entry (a persistent queue may hold
    millions), and a duplicate found at the commit is still signalled."""
    from frontier.scrapy import scheduler as module

    monkeypatch.setattr(module, "MAX_LIVE", 1)
    scheduler, dropped = open_scheduler(tmp_path, cache_size=0)
    first, second, again = (Request(f"http://a.example/{n}") for n in ("1", "2", "2#frag"))
    assert all(scheduler.enqueue_request(r) for r in (first, second, again))
    out = []
    while (request := scheduler.next_request()) is not None:
        out.append(request)
        scheduler.finished(request)
    assert out[0] is first and out[1] is not second and out[1].url == second.url
    assert [r.url for r in dropped] == [again.url]
    scheduler.close("finished")
