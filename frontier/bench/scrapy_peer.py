"""The Scrapy peer of the crawl benchmark: a generic CrawlSpider over the mock web, in its own process.

    python -m frontier.bench.scrapy_peer --seed URL --hosts 127.0.0.1:P1,127.0.0.1:P2 \
        [--concurrency 64] [--per-host 64] [--retries 3] [--timeout 30] --stats-out stats.json

Run by `frontier.bench.crawl`; nothing in `frontier` imports this module except the benchmark (Scrapy is
a bench extra, not a dependency). The spider is what a Scrapy user writes for "crawl this site":
`Rule(LinkExtractor(), follow=True)` and the default RFPDupeFilter, with Scrapy's settings set to match
frontier's crawl (see `settings()`). Scope is the mock's exact host:port set, applied in `process_links`
(Scrapy's `allowed_domains` ignores ports, so "127.0.0.1" would also admit the mock's closed port).

Two counters are added to Scrapy's stats, which are written to `--stats-out` as JSON when the crawl ends:
    bench/links_extracted   links the LinkExtractor returned (unique per page, before the scope filter)
    bench/seen_checked      requests the dupefilter was asked about (the seen-test's input; robots.txt
                            requests bypass the scheduler and are not in it)
plus bench/reactor (the Twisted reactor class) and bench/asyncio_loop (its event loop class, if any).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import urlsplit

from scrapy import signals
from scrapy.crawler import CrawlerProcess
from scrapy.dupefilters import RFPDupeFilter
from scrapy.http import Request
from scrapy.link import Link
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule

DEFAULT_CONCURRENCY = 64
DEFAULT_RETRIES = 3  # frontier's limits.max_retries default
DEFAULT_TIMEOUT = 30.0  # frontier's workers.timeout default
USER_AGENT = "scrapy-bench (+frontier)"


class CountingDupeFilter(RFPDupeFilter):
    """Scrapy's default dupefilter, counting the requests it is asked about in `bench/seen_checked`."""

    stats: Any = None

    @classmethod
    def from_crawler(cls, crawler: Any) -> CountingDupeFilter:
        dupefilter = super().from_crawler(crawler)
        dupefilter.stats = crawler.stats
        return dupefilter

    def request_seen(self, request: Request) -> bool:
        if self.stats is not None:
            self.stats.inc_value("bench/seen_checked")
        return super().request_seen(request)


class BenchSpider(CrawlSpider):
    """Follow every link on the mock hosts; no items, no callbacks."""

    name = "bench"
    rules = (Rule(LinkExtractor(), follow=True, process_links="keep_in_scope"),)

    def __init__(self, seed: str, hosts: Sequence[str], *args: Any, **kwargs: Any) -> None:
        self.start_urls = [seed]
        self.scope_hosts = frozenset(h.lower() for h in hosts)
        super().__init__(*args, **kwargs)

    def keep_in_scope(self, links: list[Link]) -> list[Link]:
        """Only links to the mock's exact host:port set (what frontier's scope.allowed_hosts does)."""
        self.crawler.stats.inc_value("bench/links_extracted", len(links))
        hosts = self.scope_hosts
        kept = []
        for link in links:
            try:
                netloc = urlsplit(link.url).netloc.lower()
            except ValueError:
                continue
            if netloc in hosts:
                kept.append(link)
        return kept


def settings(*, concurrency: int, per_host: int, retries: int, timeout: float) -> dict[str, Any]:
    """Scrapy settings matched to frontier's crawl.yaml of the benchmark (everything else: Scrapy's default).

    Note that Scrapy's download slots are keyed by host name without the port, so the mock's hosts
    (all 127.0.0.1) share one slot: CONCURRENT_REQUESTS_PER_DOMAIN = CONCURRENT_REQUESTS keeps that
    slot from throttling, as frontier's max_per_host does per host:port.
    """
    return {
        "CONCURRENT_REQUESTS": concurrency,
        "CONCURRENT_REQUESTS_PER_DOMAIN": per_host,
        "DOWNLOAD_DELAY": 0,
        "ROBOTSTXT_OBEY": True,
        "DUPEFILTER_CLASS": "frontier.bench.scrapy_peer.CountingDupeFilter",  # not __name__: "__main__" under -m
        "RETRY_ENABLED": True,
        "RETRY_TIMES": retries,
        "DOWNLOAD_TIMEOUT": timeout,
        "LOG_LEVEL": "WARNING",
        "TELNETCONSOLE_ENABLED": False,
        "USER_AGENT": USER_AGENT,
    }


def _reactor_names() -> tuple[str, str | None]:
    from twisted.internet import reactor

    loop = getattr(reactor, "_asyncioEventloop", None)
    return type(reactor).__name__, (type(loop).__module__ + "." + type(loop).__name__) if loop is not None else None


def crawl(seed: str, hosts: Sequence[str], *, concurrency: int = DEFAULT_CONCURRENCY, per_host: int | None = None,
          retries: int = DEFAULT_RETRIES, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
    """Run the spider to the end in this process (CrawlerProcess starts the reactor); return Scrapy's stats."""
    process = CrawlerProcess(settings(concurrency=concurrency, per_host=per_host or concurrency, retries=retries,
                                      timeout=timeout), install_root_handler=True)
    crawler = process.create_crawler(BenchSpider)
    times: dict[str, float] = {}

    def opened(spider: Any) -> None:
        times["opened"] = time.monotonic()
        times["reactor"], times["asyncio_loop"] = _reactor_names()  # type: ignore[assignment]

    def closed(spider: Any, reason: str) -> None:
        times["closed"] = time.monotonic()

    crawler.signals.connect(opened, signal=signals.spider_opened)
    crawler.signals.connect(closed, signal=signals.spider_closed)
    process.crawl(crawler, seed=seed, hosts=list(hosts))
    process.start()
    stats = dict(crawler.stats.get_stats())
    stats["bench/reactor"] = times.get("reactor")
    stats["bench/asyncio_loop"] = times.get("asyncio_loop")
    if "opened" in times and "closed" in times:
        stats["bench/crawl_seconds"] = times["closed"] - times["opened"]  # type: ignore[operator]
    return stats


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m frontier.bench.scrapy_peer", description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", required=True, help="start URL")
    p.add_argument("--hosts", required=True, help="comma-separated host:port set the crawl may fetch from")
    p.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY, help="CONCURRENT_REQUESTS")
    p.add_argument("--per-host", type=int, default=None, help="CONCURRENT_REQUESTS_PER_DOMAIN (default: concurrency)")
    p.add_argument("--retries", type=int, default=DEFAULT_RETRIES, help="RETRY_TIMES")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="DOWNLOAD_TIMEOUT in seconds")
    p.add_argument("--stats-out", default=None, help="write Scrapy's final stats here as JSON")
    return p


def main(argv: Iterable[str] | None = None) -> int:
    args = _parser().parse_args(None if argv is None else list(argv))
    hosts = [h.strip() for h in args.hosts.split(",") if h.strip()]
    stats = crawl(args.seed, hosts, concurrency=args.concurrency, per_host=args.per_host, retries=args.retries,
                  timeout=args.timeout)
    text = json.dumps(stats, default=str, indent=1, sort_keys=True)
    if args.stats_out:
        with open(args.stats_out, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        print(text)
    return 0 if stats.get("finish_reason") == "finished" else 1


if __name__ == "__main__":
    sys.exit(main())
