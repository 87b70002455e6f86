"""`python -m frontier.bench crawl`: frontier against Scrapy, crawling the same mock web on loopback.

    python -m frontier.bench crawl [--pages 20000] [--links 60] [--repeat 0.8] [--hosts 4]
                                   [--concurrency 64] [--processes 2] [--repeat-runs 1] [--quick | --small]
                                   [--probabilistic] [--console]

For each crawler, a fresh mock web (`MockWebProcess`, same spec and seed, so the same site; hostile
off, robots.txt on, redirects, 404s and permanent 500s in) is started in its own process, and the
crawler runs as a child process, timed wall-clock from spawn to exit while a sampler adds up the RSS
of its whole process tree every 0.2 s:

  frontier  `python run_frontier.py --config crawl.yaml` (a temporary data dir; workers.processes =
            --processes, workers.concurrency = --concurrency / --processes, politeness.delay 0,
            max_per_host = --concurrency, obey_robots true, progress off, dedup.exact false with
            --probabilistic (the workers then leave out links the shared Bloom filter holds), every other
            key its default)
  Scrapy    `python -m frontier.bench.scrapy_peer` (a CrawlSpider, see that module)

Then the mock web's request counts are judged with one yardstick: every counted URL is put through
`frontier.url.canonical.canonicalize`, since the two crawlers do not send the same spelling of a URL
(Scrapy requests "/x/../p/5.html" as written; frontier canonicalises first). Against
`SiteGraph.expected_requests` (canonical URLs):
  pages             requests other than robots.txt, retries included
  duplicate fetches sum of count-1 over canonical URLs fetched more than once, except the permanent-500
                    pages (both crawlers retry those; their extra requests are "5xx retries")
  missed pages      expected URLs never requested
  unexpected        canonical URLs requested that a correct crawl does not request
  pages/s           pages / wall seconds (interpreter start to exit), and "active": pages / (last
                    request - first request) by the server's clock, which leaves out startup/shutdown
  links/s           links found / crawl seconds: frontier's summary.json links_received (each page's distinct
                    in-scope outlinks) over its elapsed_seconds; Scrapy's dupefilter calls over its spider
                    open-to-close time
  peak RSS          largest sum of RSS over the crawler's process tree (shared pages count once per
                    process that maps them; the mock web is not included)
  first request     seconds from the crawler's spawn to the mock web's first request (robots.txt)
  CPU ms/page       CPU time of the crawler's whole process tree (user + system, from getrusage of the
                    reaped children) per page
  frontier ms/page  frontier: CPU time of the frontier process alone per page (sampled every 0.2 s)
  msgs/page         frontier: queue messages per page (jobs sent + results received by the frontier
                    process, from summary.json queue_messages)
Besides the table: robots.txt-disallowed URLs requested, and the CPU seconds of each process of the
crawler's tree and of the mock web (the server shares the cores), with the load average before and
after (other work on the machine skews every figure; compare runs made under similar load).

`--small` is a small site, as a documentation site is: SMALL_PAGES pages on one host, SMALL_LINKS links a
page, no permanent-500 pages (their retries back off for up to 7 s, which would be the crawl's wall time);
start-up and shutdown dominate, so its target is on wall time (>= 5x faster than Scrapy), not pages/s.

`--console` adds a "frontier+console" row: the same crawl with the operator's console on and a poller playing
its open page (frontier.bench.console: /api/snapshot and /api/hosts every second); the "frontier" row always
runs with the console off. The line under the table gives the console's share of the crawl's CPU.

`--repeat-runs N` runs each crawler N times (alternating) and reports medians. Setting the environment
variable FRONTIER_BENCH_PROFILE=DIR runs frontier's processes under cProfile (for finding
bottlenecks; timings are then not comparable): DIR/frontier.prof, DIR/worker-N.prof, DIR/supervisor.prof.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from frontier.bench import profiling
from frontier.bench.judge import ROBOTS_PATH, CrawlRun, Judgement, judge, median_judgement
from frontier.bench.profiling import PACKAGES, PROFILE_ENV
from frontier.cli.commands import crawl_command

__all__ = ["HELP", "CrawlRun", "Judgement", "add_arguments", "judge", "main", "run"]

HELP = "crawl the mock web with frontier and with Scrapy; pages/s, links/s, peak RSS, duplicates, misses"

DEFAULT_PAGES = 20_000
DEFAULT_LINKS = 60
DEFAULT_REPEAT = 0.8
DEFAULT_HOSTS = 4
DEFAULT_CONCURRENCY = 64
DEFAULT_PROCESSES = 2
DEFAULT_SEED = 1
DEFAULT_TIMEOUT = 1800.0  # seconds per crawl before it is killed
SITE_TIMEOUT = 300.0  # the same with --site-dir
SITE_MAX_LINKS = 1_000_000  # frontier's limits.max_links_per_page with --site-dir
QUICK_PAGES, QUICK_LINKS = 2000, 20
SMALL_PAGES, SMALL_LINKS = 1000, 20
SAMPLE_SECONDS = 0.2
TARGET_RATIO = 5.0



# -- measuring a process tree ------------------------------------------------------------------------


class TreeRSS:
    """Samples the summed RSS of a process and all its descendants every `interval` s; keeps the peak.

    Also keeps each process's last CPU time (user + system), labelled by `label(proc, root)`, so a
    report can say where the CPU went.
    """

    def __init__(self, pid: int, interval: float = SAMPLE_SECONDS) -> None:
        import psutil

        self._psutil = psutil
        self._root = psutil.Process(pid)
        self._known: dict[int, Any] = {pid: self._root}
        self.interval = interval
        self.peak = 0
        self.samples = 0
        self.cpu: dict[int, tuple[float, str, float]] = {}  # pid -> (create time, label, cpu seconds)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def start(self) -> TreeRSS:
        self._thread.start()
        return self

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak

    def sample(self) -> int:
        psutil = self._psutil
        try:
            procs = [self._root, *self._root.children(recursive=True)]
        except psutil.Error:
            return 0
        total = 0
        for proc in procs:
            proc = self._known.setdefault(proc.pid, proc)  # reuse the object: psutil caches per-process state
            try:
                with proc.oneshot():
                    total += proc.memory_info().rss
                    times = proc.cpu_times()
                    if proc.pid not in self.cpu:
                        self.cpu[proc.pid] = (proc.create_time(), self._label(proc), 0.0)
                created, label, _ = self.cpu[proc.pid]
                self.cpu[proc.pid] = (created, label, times.user + times.system)
            except psutil.Error:
                pass
        return total

    def _label(self, proc: Any) -> str:
        if proc.pid == self._root.pid:
            return "main"
        try:
            cmdline = " ".join(proc.cmdline())
        except self._psutil.Error:
            return "child"
        if "resource_tracker" in cmdline:
            return "resource_tracker"
        if cmdline.startswith("frontier: "):  # a crawl process that has named itself (frontier.crawl.child)
            return cmdline.split()[1]  # "frontier" or "worker-N"
        return "spawned" if "multiprocessing" in cmdline else "child"

    def cpu_seconds(self) -> list[tuple[str, float]]:
        """(label, CPU seconds at the last sample) per process, in order of creation."""
        return [(label, cpu) for _, label, cpu in sorted(self.cpu.values())]

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.sample())
            self.samples += 1
            self._stop.wait(self.interval)


@dataclass(slots=True)
class Timed:
    exit_code: int
    wall: float
    peak_rss: int
    cpu: list[tuple[str, float]]  # (label, CPU seconds) per process of the tree, in order of creation
    machine_busy: float  # share of all cores' time that any process used while it ran, 0..1
    started: float  # time.monotonic() at the spawn (the mock web's request times are on the same clock)
    tree_cpu: float  # CPU seconds of the whole tree: getrusage of the children reaped meanwhile


def _children_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _machine_times() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far, all cores."""
    import psutil

    times = psutil.cpu_times()
    total = sum(times)
    return total - times.idle - getattr(times, "iowait", 0.0), total


def run_measured(argv: Sequence[str], *, cwd: Path, log: Path, timeout: float,
                 env: dict[str, str] | None = None) -> Timed:
    """Run `argv` to its end (stdout+stderr to `log`), timing it and sampling its tree's RSS."""
    busy_before, total_before = _machine_times()
    cpu_before = _children_cpu()
    with open(log, "wb") as out:
        started = time.monotonic()
        proc = subprocess.Popen(list(argv), cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env)
        sampler = TreeRSS(proc.pid).start()
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            code = -1
        finally:
            wall = time.monotonic() - started
            peak = sampler.stop()
    busy_after, total_after = _machine_times()
    busy = (busy_after - busy_before) / (total_after - total_before) if total_after > total_before else 0.0
    return Timed(code, wall, peak, sampler.cpu_seconds(), busy, started, _children_cpu() - cpu_before)


# -- the two crawlers --------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class BenchSettings:
    """One benchmark's knobs, as given on the command line."""

    pages: int = DEFAULT_PAGES
    links: int = DEFAULT_LINKS
    repeat: float = DEFAULT_REPEAT
    hosts: int = DEFAULT_HOSTS
    concurrency: int = DEFAULT_CONCURRENCY
    processes: int = DEFAULT_PROCESSES
    seed: int = DEFAULT_SEED
    runs: int = 1
    timeout: float = DEFAULT_TIMEOUT
    errors: bool = True  # permanent 500s and 404s in the site (off for --small)
    small: bool = False  # judge by wall time (--small)
    exact: bool = True  # frontier's dedup.exact (--probabilistic: false)
    site: bool = False  # a real site (--site-dir): no depth limit, as wget --level=inf and Scrapy's DEPTH_LIMIT 0
    traps: bool = False  # frontier's trap defences at their defaults (--traps), else off as Scrapy has none
    console: bool = False  # also the "frontier+console" row (--console): the console on and polled every second

    def __post_init__(self) -> None:
        if self.processes < 1 or self.concurrency < self.processes:
            raise ValueError("need --processes >= 1 and --concurrency >= --processes")
        if self.runs < 1:
            raise ValueError("--repeat-runs must be >= 1")

    @property
    def per_process(self) -> int:
        return self.concurrency // self.processes

    def spec(self) -> Any:
        from frontier.testing import SiteSpec

        return SiteSpec(pages=self.pages, hosts=self.hosts, links_per_page=self.links, repeat_share=self.repeat,
                        seed=self.seed, hostile=False, errors=self.errors)


def _server_cpu(web: Any) -> float:
    import psutil

    try:
        times = psutil.Process(web.proc.pid).cpu_times()
    except (psutil.Error, AttributeError):
        return 0.0
    return times.user + times.system


def _frontier_yaml(settings: BenchSettings, web: Any, data_dir: Path, console: bool = False) -> dict[str, Any]:
    hosts = [url.split("://", 1)[1] for url in web.base_urls]
    return {
        "seeds": [web.seed],
        "scope": {"allowed_hosts": hosts, **({"max_depth": None} if settings.site else {})},
        "workers": {"processes": settings.processes, "concurrency": settings.per_process},
        "politeness": {"delay": 0.0, "max_per_host": settings.concurrency, "obey_robots": True},
        # as Scrapy: no probe requests, no pattern verdicts (--traps: the default config's defences)
        **({} if settings.traps else {"traps": {"patterns": False, "soft_404": False}}),
        # a real site's index pages may link more pages than the default cap (6,000); wget and Scrapy have none
        **({"limits": {"max_links_per_page": SITE_MAX_LINKS}} if settings.site else {}),
        "storage": {"data_dir": str(data_dir)},
        "output": {"progress": "off"},
        "console": {"enabled": console},  # the "frontier" row without it; "frontier+console" with it, polled
        **({} if settings.exact else {"dedup": {"exact": False}}),
    }


def _frontier_labels(cpu: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """Name run_frontier's processes: by the names they give themselves, or, for one first seen before it
    named itself, by order: the first one spawned is the frontier process, the rest workers."""
    out, spawned = [], 0
    named_frontier = any(label == "frontier" for label, _ in cpu)
    for label, seconds in cpu:
        if label == "main":
            label = "supervisor"
        elif label == "frontier":
            label = "frontier process"
        elif label.startswith("worker-"):
            label = "worker"
        elif label == "spawned":
            label = "frontier process" if spawned == 0 and not named_frontier else "worker"
            spawned += 1
        out.append((label, seconds))
    return out


def crawl_frontier(settings: BenchSettings, web: Any, workdir: Path, console: bool = False) -> CrawlRun:
    """frontier's run; with `console`, its console on and a ConsolePoller playing the open page."""
    import yaml

    from frontier.bench.console import ConsolePoller

    data_dir = workdir / "frontier-data"
    config = workdir / "crawl.yaml"
    config.write_text(yaml.safe_dump(_frontier_yaml(settings, web, data_dir, console), sort_keys=False))
    log = workdir / "frontier.log"
    profile_dir = os.environ.get(PROFILE_ENV)
    if profile_dir:
        argv = profiling.command(Path(profile_dir), config)
    else:
        argv = [*crawl_command(), "--config", str(config)]
    server_before = _server_cpu(web)
    poller = ConsolePoller(data_dir)
    with poller if console else contextlib.nullcontext():
        timed = run_measured(argv, cwd=PACKAGES, log=log, timeout=settings.timeout)
    server_cpu = _server_cpu(web) - server_before
    stats = web.stats()
    summary_file = data_dir / "summary.json"
    summary = json.loads(summary_file.read_text()) if summary_file.exists() else {}
    seen = summary.get("seen", {})
    messages = summary.get("queue_messages")
    return CrawlRun("frontier+console" if console else "frontier", timed.exit_code, timed.wall, timed.peak_rss,
                    stats["counts"], stats["times"],
                    list(web.ports), links_found=int(summary.get("links_received", seen.get("checked", 0))),
                    crawl_seconds=float(summary.get("elapsed_seconds", 0.0)), cpu=_frontier_labels(timed.cpu),
                    server_cpu=server_cpu, machine_busy=timed.machine_busy, started=timed.started,
                    tree_cpu=timed.tree_cpu, queue_messages=sum(messages.values()) if messages else None, log=log,
                    notes={"lru_hit_rate": seen.get("lru_hit_rate"), "reasons": summary.get("reasons", {}),
                           "worker_known": seen.get("worker_known", 0), "console_polls": poller.polls,
                           "console_errors": poller.errors})


def crawl_scrapy(settings: BenchSettings, web: Any, workdir: Path) -> CrawlRun:
    from frontier.config import DEFAULT_LIMITS, DEFAULT_WORKERS

    hosts = ",".join(url.split("://", 1)[1] for url in web.base_urls)
    stats_file = workdir / "scrapy-stats.json"
    log = workdir / "scrapy.log"
    argv = [sys.executable, "-m", "frontier.bench.scrapy_peer", "--seed", web.seed, "--hosts", hosts,
            "--concurrency", str(settings.concurrency), "--per-host", str(settings.concurrency),
            "--retries", str(DEFAULT_LIMITS.max_retries), "--timeout", str(DEFAULT_WORKERS.timeout),
            "--stats-out", str(stats_file)]
    server_before = _server_cpu(web)
    timed = run_measured(argv, cwd=PACKAGES, log=log, timeout=settings.timeout)
    server_cpu = _server_cpu(web) - server_before
    stats = web.stats()
    scrapy_stats = json.loads(stats_file.read_text()) if stats_file.exists() else {}
    return CrawlRun("Scrapy", timed.exit_code, timed.wall, timed.peak_rss, stats["counts"], stats["times"],
                    list(web.ports), links_found=int(scrapy_stats.get("bench/seen_checked", 0)),
                    crawl_seconds=float(scrapy_stats.get("bench/crawl_seconds", 0.0)),
                    cpu=[("scrapy" if label == "main" else label, cpu) for label, cpu in timed.cpu],
                    server_cpu=server_cpu, machine_busy=timed.machine_busy, started=timed.started,
                    tree_cpu=timed.tree_cpu, log=log,
                    notes={"reactor": scrapy_stats.get("bench/reactor"),
                           "asyncio_loop": scrapy_stats.get("bench/asyncio_loop"),
                           "links_extracted": scrapy_stats.get("bench/links_extracted", 0),
                           "finish_reason": scrapy_stats.get("finish_reason")})


WGET = "/usr/bin/wget"
WGET_ARGS = ("--recursive", "--level=inf", "--no-parent", "--delete-after", "--no-verbose")
WGET_SERVER_ERROR = 8  # wget's exit status when a request got an error response (a 404), the crawl complete


def wget_path() -> str | None:
    import shutil

    return shutil.which("wget") or (WGET if os.access(WGET, os.X_OK) else None)


def crawl_wget(settings: BenchSettings, web: Any, workdir: Path) -> CrawlRun:
    """`wget --recursive --level=inf --no-parent --delete-after --no-verbose SEED` in a scratch dir: one
    connection, robots.txt obeyed (wget's default), the downloaded files deleted as it goes."""
    wget = wget_path()
    assert wget is not None, "no wget"
    files = workdir / "wget-files"
    files.mkdir()
    log = workdir / "wget.log"
    timed = run_measured([wget, *WGET_ARGS, web.seed], cwd=files, log=log, timeout=settings.timeout)
    stats = web.stats()
    code = 0 if timed.exit_code == WGET_SERVER_ERROR else timed.exit_code  # the site's dead links are 404s
    return CrawlRun("wget", code, timed.wall, timed.peak_rss, stats["counts"], stats["times"],
                    list(web.ports), cpu=timed.cpu, machine_busy=timed.machine_busy, started=timed.started,
                    tree_cpu=timed.tree_cpu, log=log)


def crawl_frontier_console(settings: BenchSettings, web: Any, workdir: Path) -> CrawlRun:
    return crawl_frontier(settings, web, workdir, console=True)


CRAWLERS: dict[str, Callable[[BenchSettings, Any, Path], CrawlRun]] = {
    "frontier": crawl_frontier,
    "frontier+console": crawl_frontier_console,  # --console
    "Scrapy": crawl_scrapy,
    "wget": crawl_wget,  # --site-dir only
}


# -- the report --------------------------------------------------------------------------------------

COLUMNS = ("crawler", "pages", "wall s", "pages/s", "links/s", "peak RSS MB", "duplicate fetches", "missed pages",
           "active pages/s", "5xx retries", "unexpected", "first request s", "CPU ms/page", "frontier ms/page",
           "msgs/page")


def _figure(value: float, spec: str) -> str:
    return "-" if math.isnan(value) else format(value, spec)


def _row(j: Judgement) -> list[str]:
    name = j.crawler if j.ok else f"{j.crawler} (FAILED)"
    return [name, f"{j.pages:,}", f"{j.wall:.2f}" if j.wall < 10 else f"{j.wall:.1f}", f"{j.pages_per_s:,.0f}",
            f"{j.links_per_s:,.0f}", f"{j.peak_rss_mb:,.0f}", f"{j.duplicates:,}", f"{j.missed:,}",
            f"{j.active_pages_per_s:,.0f}", f"{j.retries_5xx:,}", f"{j.unexpected:,}", _figure(j.first_request, ".2f"),
            _figure(j.cpu_ms_per_page, ".2f"), _figure(j.frontier_ms_per_page, ".3f"),
            _figure(j.messages_per_page, ".2f")]


def format_table(rows: Sequence[Judgement]) -> str:
    cells = [list(COLUMNS), *(_row(j) for j in rows)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(COLUMNS))]

    def line(r: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) + " |"

    sep = "|" + "|".join("-" * (w + 2) if i == 0 else "-" * (w + 1) + ":" for i, w in enumerate(widths)) + "|"
    return "\n".join([line(cells[0]), sep, *(line(r) for r in cells[1:])])


def verdict(frontier: Judgement, scrapy: Judgement, *, wall_time: bool = False) -> tuple[float, bool, str]:
    """The target: >= TARGET_RATIO x Scrapy's pages/s (a small site, `wall_time`: its wall time / frontier's),
    with zero duplicate fetches and zero missed pages."""
    if wall_time:
        ratio = scrapy.wall / frontier.wall if frontier.wall > 0 else float("inf")
        what = "faster than Scrapy in wall time"
    else:
        ratio = frontier.pages_per_s / scrapy.pages_per_s if scrapy.pages_per_s > 0 else float("inf")
        what = "Scrapy's pages/s"
    passed = frontier.ok and ratio >= TARGET_RATIO and frontier.duplicates == 0 and frontier.missed == 0
    line = (f"target: >= {TARGET_RATIO:g}x {what} with zero duplicate fetches and zero missed pages: "
            f"{'PASS' if passed else 'MISS'} ({ratio:.2f}x)")
    return ratio, passed, line


def console_line(off: Judgement, on: Judgement, runs: Sequence[CrawlRun]) -> str:
    """What the console with an open page costs, from the medians' CPU per page, on against off: over the whole
    process tree, and in the frontier process (the console runs there alone; the workers' CPU varies from run to
    run by more than the console costs), both as a share of the whole crawl's CPU without the console."""
    polls = sorted(int(r.notes.get("console_polls", 0)) for r in runs)
    errors = sum(int(r.notes.get("console_errors", 0)) for r in runs)
    base = off.cpu_ms_per_page if off.cpu_ms_per_page > 0 else math.nan
    tree = on.cpu_ms_per_page / base - 1
    frontier = (on.frontier_ms_per_page - off.frontier_ms_per_page) / base
    return (f"console: CPU ms/page {on.cpu_ms_per_page:.3f} polled vs {off.cpu_ms_per_page:.3f} off ({tree:+.1%}); "
            f"in the frontier process {on.frontier_ms_per_page:.3f} vs {off.frontier_ms_per_page:.3f} ({frontier:+.1%} "
            f"of the crawl's CPU); {polls[len(polls) // 2]} answered requests per run (median), {errors} failed "
            "(a crawl's end)")


def machine_line() -> str:
    try:
        import psutil

        physical = psutil.cpu_count(logical=False)
        mem = f", {psutil.virtual_memory().total / 2**30:.0f} GiB RAM"
    except ImportError:  # pragma: no cover - psutil is a bench dependency
        physical, mem = None, ""
    cores = f"{os.cpu_count()} logical cores" + (f" ({physical} physical)" if physical else "")
    return (f"machine: {cores}{mem}, {platform.machine()} {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}; {load_line()}")


def load_line() -> str:
    """The load average: other work on the machine shares the cores with the crawlers and the mock web."""
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:  # pragma: no cover - not on Linux
        return "load average unknown"
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"


# -- the command -------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pages", type=int, default=None, help=f"pages in the mock web (default {DEFAULT_PAGES})")
    parser.add_argument("--links", type=int, default=None, help=f"links per page (default {DEFAULT_LINKS})")
    parser.add_argument("--repeat", type=float, default=DEFAULT_REPEAT,
                        help=f"share of a page's links that repeat popular pages (default {DEFAULT_REPEAT})")
    parser.add_argument("--hosts", type=int, default=None, help=f"mock hosts (default {DEFAULT_HOSTS})")
    parser.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY,
                        help=f"fetches in flight in all, for both crawlers (default {DEFAULT_CONCURRENCY})")
    parser.add_argument("--processes", type=int, default=DEFAULT_PROCESSES,
                        help=f"frontier worker processes (default {DEFAULT_PROCESSES})")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="mock web seed (same seed, same site)")
    parser.add_argument("--repeat-runs", type=int, default=1, help="runs per crawler; medians are reported")
    parser.add_argument("--timeout", type=float, default=None,
                        help=f"seconds per crawl before it is killed (default {DEFAULT_TIMEOUT:g}; "
                             f"{SITE_TIMEOUT:g} with --site-dir)")
    parser.add_argument("--site-dir", type=Path, default=None,
                        help="crawl a real static site instead of the mock web: this directory, served on 127.0.0.1 "
                             "by frontier.bench.site; rows for frontier, Scrapy and wget")
    parser.add_argument("--server", choices=("auto", "nginx", "aiohttp"), default="auto",
                        help="with --site-dir: what serves the directory (default auto: nginx when installed, else "
                             "aiohttp's frontier.bench.site)")
    parser.add_argument("--site-entry", default="index.html",
                        help="with --site-dir: the seed page, relative to the directory (default index.html)")
    parser.add_argument("--only", choices=sorted(CRAWLERS), action="append", default=None,
                        help="run only this crawler (repeatable; no ratio without both)")
    parser.add_argument("--traps", action="store_true",
                        help="frontier with its trap defences at their defaults (traps.patterns, traps.soft_404), as "
                             "a crawl with the default config runs; off by default, as Scrapy and wget have none")
    parser.add_argument("--console", action="store_true",
                        help="also a frontier+console row: the console on and polled every second (/api/snapshot and "
                             "/api/hosts, as an open page); the frontier row runs without it")
    parser.add_argument("--probabilistic", action="store_true",
                        help="frontier with dedup.exact false: the workers drop links the shared Bloom filter holds")
    parser.add_argument("--plot", type=Path, default=None, metavar="FILE.svg",
                        help="also draw each crawler's CPU ms per page as bars (needs matplotlib)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (configs, logs, data)")
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true",
                      help=f"a smaller site: {QUICK_PAGES} pages, {QUICK_LINKS} links per page (unless given)")
    size.add_argument("--small", action="store_true",
                      help=f"a small site judged by wall time: {SMALL_PAGES} pages on 1 host, {SMALL_LINKS} links per "
                           "page, no permanent 500s (unless given)")


def settings_from_args(args: argparse.Namespace) -> BenchSettings:
    pages, links, hosts = ((SMALL_PAGES, SMALL_LINKS, 1) if args.small else
                           (QUICK_PAGES, QUICK_LINKS, DEFAULT_HOSTS) if args.quick else
                           (DEFAULT_PAGES, DEFAULT_LINKS, DEFAULT_HOSTS))
    return BenchSettings(pages=pages if args.pages is None else args.pages,
                         links=links if args.links is None else args.links, repeat=args.repeat,
                         hosts=hosts if args.hosts is None else args.hosts, concurrency=args.concurrency,
                         processes=args.processes, seed=args.seed, runs=args.repeat_runs,
                         timeout=args.timeout or (SITE_TIMEOUT if args.site_dir else DEFAULT_TIMEOUT),
                         errors=not args.small, small=args.small, exact=not args.probabilistic,
                         site=args.site_dir is not None, traps=args.traps, console=args.console)


def _say(text: str = "") -> None:
    print(text, flush=True)


class WorkRoot:
    """A benchmark's temporary directory, one sub-directory per crawl run; removed at the end unless kept
    (--keep, or a crawl that did not end with exit status 0: its logs are what to look at)."""

    def __init__(self, prefix: str, keep: bool) -> None:
        self.path = Path(tempfile.mkdtemp(prefix=prefix))
        self.keep = keep

    def run_dir(self, name: str) -> Path:
        path = self.path / name
        path.mkdir()
        return path

    def report(self, name: str, i: int, result: Any) -> None:
        """Say how run i of crawler `name` went (a CrawlRun: exit_code, wall, log)."""
        status = "" if result.exit_code == 0 else f", EXIT {result.exit_code} (log: {result.log})"
        _say(f"  {name} run {i + 1}: {result.wall:.1f} s{status}")
        self.keep = self.keep or result.exit_code != 0

    def __enter__(self) -> "WorkRoot":
        return self

    def __exit__(self, *exc: object) -> None:
        if self.keep:
            _say(f"work dir kept: {self.path}")
        else:
            shutil.rmtree(self.path, ignore_errors=True)


def run(args: argparse.Namespace) -> int:
    """Run the benchmark and print the table; exit status 0 if every crawl ran to its end, else 1."""
    from frontier.testing import SiteGraph
    from frontier.testing.mockweb import MockWebProcess

    try:
        settings = settings_from_args(args)
        spec = settings.spec()
    except ValueError as exc:  # ConfigError is a ValueError too
        print(f"crawl bench: {exc}", file=sys.stderr)
        return 2
    argv = getattr(args, "argv", None)
    if argv is not None:
        command = "python -m frontier.bench crawl" + "".join(" " + shlex.quote(a) for a in argv)
    else:  # run by a dispatcher: sys.argv is [".../frontier/bench/__main__.py", "crawl", ...]
        command = "python -m frontier.bench" + "".join(" " + shlex.quote(a) for a in sys.argv[1:])
    compile_bytecode()
    if args.site_dir is not None:
        return run_site(args, settings, command)
    names = args.only or [name for name in CRAWLERS if name not in ("wget", "frontier+console")]
    if settings.console and "frontier+console" not in names:
        names.append("frontier+console")
    if "wget" in names:
        print("crawl bench: wget crawls only a real site (--site-dir)", file=sys.stderr)
        return 2
    _say(f"command: {command}")
    _say(machine_line())
    _say(f"mock web: {spec.pages:,} pages, {spec.links_per_page} links per page, {spec.repeat_share:g} repeated, "
         f"{spec.hosts} hosts, seed {spec.seed}, robots.txt on, permanent 500s and 404s "
         f"{'on' if spec.errors else 'off'}, hostile off (served by its own process)")
    _say(f"crawlers: concurrency {settings.concurrency} in all; frontier {settings.processes} worker processes x "
         f"{settings.per_process}, dedup {'exact' if settings.exact else 'probabilistic'}; {settings.runs} run(s) each")
    graph = SiteGraph(spec)
    runs: dict[str, list[CrawlRun]] = {name: [] for name in names}
    with WorkRoot("frontier-bench-crawl-", args.keep) as work:
        for i in range(settings.runs):
            for name in names:
                workdir = work.run_dir(f"{name.lower()}-{i}")
                with MockWebProcess(spec) as web:
                    result = CRAWLERS[name](settings, web, workdir)
                (workdir / "mockweb-counts.json").write_text(json.dumps(result.counts, indent=0, sort_keys=True))
                runs[name].append(result)
                work.report(name, i, result)

    _say(f"after the runs: {load_line()}")
    judged = {name: median_judgement([judge(r, graph) for r in rs]) for name, rs in runs.items()}
    _say()
    _say(format_table(list(judged.values())))
    _say()
    expected = graph.expected_requests(runs[names[0]][0].ports)
    pages_expected = sum(n for url, n in expected.items() if not url.endswith(ROBOTS_PATH))
    _say(f"expected: {pages_expected:,} page requests without retries ({len(expected) - pages_expected} robots.txt "
         f"requests besides); medians of {settings.runs} run(s)")
    if "frontier" in judged and "frontier+console" in judged:
        _say(console_line(judged["frontier"], judged["frontier+console"], runs["frontier+console"]))
    if "frontier" in judged and "Scrapy" in judged:
        f, sc = judged["frontier"], judged["Scrapy"]
        _say(f"frontier / Scrapy pages/s: {f.pages_per_s / max(sc.pages_per_s, 1e-9):.2f}x (active: "
             f"{f.active_pages_per_s / max(sc.active_pages_per_s, 1e-9):.2f}x); Scrapy / frontier wall time: "
             f"{sc.wall / max(f.wall, 1e-9):.2f}x")
        _say(verdict(f, sc, wall_time=settings.small)[2])
    _say()
    _say("notes:")
    _say("  * both crawls are judged on canonical URLs (frontier.url.canonical.canonicalize of every URL the server"
         " counted), so two spellings of one page fetched twice are a duplicate fetch. Scrapy requests hrefs as"
         " written (\"/x/../p/5.html\", \"/p/%35.html\", \"?b=2&a=1\"); its fingerprint (w3lib"
         f" {_version('w3lib')} canonicalize_url) folds those spellings, but its seed request is dont_filter and"
         " is fetched again when a page links back to it.")
    _say("  * pages = requests other than robots.txt, 5xx retries included; the permanent-500 pages are retried by both"
         " (frontier: limits.max_retries with backoff; Scrapy: RETRY_TIMES = the same, no backoff)")
    _say("  * links/s = links found per second of crawl: frontier summary.json links_received (per-page"
         " de-duplicated, in-scope outlinks) / elapsed_seconds; Scrapy dupefilter calls / spider open-to-close time")
    if "Scrapy" in runs:
        note = runs["Scrapy"][0].notes
        loop = note.get("asyncio_loop")
        _say(f"  * Scrapy {_version('scrapy')}: reactor {note.get('reactor')}" + (f" on {loop}" if loop else "")
             + f"; LinkExtractor found {note.get('links_extracted', 0):,} links (per page unique, before the"
             " host:port filter); download slots are per host name, so the mock's ports share one slot")
    _say("  * unexpected = canonical URLs requested that a correct crawl does not request; of them robots.txt-"
         "disallowed: " + ", ".join(f"{j.crawler} {j.robots_disallowed:,}" for j in judged.values())
         + " (an href \"/x/../private/p/5.html\" is not under \"Disallow: /private/\" until its dot-segments are"
         " removed; the others are pages linked only from such pages)")
    for name, rs in runs.items():
        r = rs[0]
        procs = ", ".join(f"{label} {cpu:.1f}" for label, cpu in r.cpu if label != "resource_tracker")
        cores = os.cpu_count() or 1
        ours = (sum(cpu for _, cpu in r.cpu) + r.server_cpu) / (r.wall * cores) if r.wall > 0 else 0.0
        _say(f"  * CPU seconds, {name} run 1 ({r.wall:.1f} s wall x {cores} cores): {procs}; mock web "
             f"{r.server_cpu:.1f}. Machine busy {r.machine_busy:.0%} of its cores, {ours:.0%} by this crawl and its"
             f" mock web")
    _say("  * peak RSS = sum of RSS over the crawler's process tree, sampled every 0.2 s (frontier: supervisor,"
         " frontier process, workers, resource tracker; the Bloom filter is sized by dedup.capacity's default)")
    _say("  * first request = seconds from the crawler's spawn to the mock web's first request (robots.txt); CPU"
         " ms/page = the whole process tree's CPU (getrusage) per page; frontier ms/page = the frontier process's"
         " CPU per page; msgs/page = queue messages (job batches sent + result batches received) per page")
    if args.plot is not None:
        plot_cpu(args.plot, {name: j.cpu_ms_per_page for name, j in judged.items()},
                 f"the mock web ({spec.pages:,} pages)", command)
    return 0 if all(r.exit_code == 0 for rs in runs.values() for r in rs) else 1


def plot_cpu(path: Path, cpu_ms_per_page: dict[str, float], site: str, command: str) -> None:
    """Each crawler's CPU ms per page (its whole process tree) as bars: the figure of `--plot`."""
    from frontier.bench import plot

    plot.bars(path, list(cpu_ms_per_page), {"CPU ms per page": list(cpu_ms_per_page.values())},
              title=f"CPU per page crawling {site}", ylabel="CPU ms per page (lower is better)", command=command)
    _say(f"plot: {path}")


def compile_bytecode() -> None:
    """Write the project's bytecode caches before anything is timed, as `pip install` does for an installed
    package: a checkout run with PYTHONDONTWRITEBYTECODE set (or after edits) would otherwise compile about
    70 modules from source in each of the crawl's processes at every start (0.1-0.2 s of the first request)."""
    import compileall

    for package in ("frontier", "workers"):
        compileall.compile_dir(PACKAGES / package, quiet=2)


def run_site(args: argparse.Namespace, settings: BenchSettings, command: str) -> int:
    """--site-dir: frontier, Scrapy and wget crawl the same directory served on loopback, each on a fresh server."""
    from frontier.bench.nginx import NginxSite, nginx_path
    from frontier.bench.site import StaticSiteProcess, format_site_table, judge_site, median_site

    root = args.site_dir
    if not (root / args.site_entry).is_file():
        print(f"crawl bench: {root / args.site_entry} is not a file", file=sys.stderr)
        return 2
    names = args.only or [name for name in CRAWLERS if name != "frontier+console" or settings.console]
    notes = []
    if "wget" in names and wget_path() is None:
        names.remove("wget")
        notes.append("wget: not installed, no row")
    _say(f"command: {command}")
    _say(machine_line())
    server = args.server
    if server == "nginx" and nginx_path() is None:
        print("crawl bench: --server nginx, but nginx is not installed", file=sys.stderr)
        return 2
    if server == "auto":
        server = "nginx" if nginx_path() is not None else "aiohttp"
        if server == "aiohttp":
            notes.append("server: nginx is not installed, the site was served by aiohttp (frontier.bench.site)")
    serving = {"nginx": f"nginx ({nginx_path()}, worker_processes 1, keep-alive, sendfile)",
               "aiohttp": "frontier.bench.site (aiohttp)"}[server]
    site_class = NginxSite if server == "nginx" else StaticSiteProcess
    _say(f"site: {root} (seed /{args.site_entry}), served by {serving} on 127.0.0.1 (its own process)")
    _say(f"crawlers: frontier {settings.processes} worker processes x {settings.per_process}, politeness.delay 0, "
         f"max_per_host {settings.concurrency}, scope.max_depth null, limits.max_links_per_page {SITE_MAX_LINKS:,}, "
         f"traps {'on (defaults)' if settings.traps else 'off'}, dedup {'exact' if settings.exact else 'probabilistic'}; "
         f"Scrapy CONCURRENT_REQUESTS and _PER_DOMAIN {settings.concurrency}; wget {' '.join(WGET_ARGS)} (one "
         f"connection); {settings.runs} run(s) each, at most {settings.timeout:g} s a crawl")
    judged: dict[str, list[Any]] = {name: [] for name in names}
    with WorkRoot("frontier-bench-site-", args.keep) as work:
        for i in range(settings.runs):
            for name in names:
                workdir = work.run_dir(f"{name.lower()}-{i}")
                with site_class(root, entry=args.site_entry) as site:
                    result = CRAWLERS[name](settings, site, workdir)
                    statuses = site.stats(times=False)["statuses"]
                judged[name].append(judge_site(result, statuses))
                work.report(name, i, result)
    _say(f"after the runs: {load_line()}")
    rows = {name: median_site(js) for name, js in judged.items()}
    _say()
    _say(format_site_table(list(rows.values())))
    _say()
    f = rows.get("frontier")
    if f is not None and "wget" in rows:
        _say(f"frontier / wget pages/s: {f.pages_per_s / max(rows['wget'].pages_per_s, 1e-9):.2f}x")
    if f is not None and "wget" in rows and rows["wget"].cpu > 0:
        _say(f"frontier / wget CPU per page: {f.cpu_ms_per_page / rows['wget'].cpu_ms_per_page:.2f}x")
    if f is not None and "Scrapy" in rows:
        _say(f"Scrapy / frontier wall time: {rows['Scrapy'].wall / max(f.wall, 1e-9):.2f}x; frontier / Scrapy pages/s: "
             f"{f.pages_per_s / max(rows['Scrapy'].pages_per_s, 1e-9):.2f}x")
    _say()
    _say("notes:")
    for note in notes:
        _say(f"  * {note}")
    _say(f"  * medians of {settings.runs} run(s); pages = HTML pages served 200 (repeats included), requests = all"
         " but robots.txt (404s, scripts, style sheets, images: wget also fetches what <link>/<script>/<img> name),"
         " duplicate fetches = repeats of a canonical URL; pages/s = pages / wall (process start to exit)")
    _say("  * first request = seconds from the crawler's spawn to the site's first request (robots.txt); CPU s = the"
         " crawler's whole process tree (user + system, getrusage of the reaped children); CPU ms/page = CPU s per"
         " page; the site's server is not included")
    _say("  * wget's exit status 8 (a request got an error response: the site's dead links are 404s) counts as done")
    if args.plot is not None:
        plot_cpu(args.plot, {name: r.cpu_ms_per_page for name, r in rows.items()}, str(root), command)
    return 0 if all(r.ok for r in rows.values()) else 1


def _version(package: str) -> str:
    try:
        from importlib.metadata import version

        return version(package)
    except Exception:  # noqa: BLE001 - only for a note
        return "?"


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m frontier.bench crawl", description=HELP)
    add_arguments(parser)
    args = parser.parse_args(argv)
    args.argv = argv
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
