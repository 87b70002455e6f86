"""A benchmark crawl judged: what one crawl left (`CrawlRun`) against what a correct crawl of the site graph
requests (`Judgement`): pages, duplicates, misses, robots, CPU and memory per page. frontier.bench.crawl runs the
crawls; frontier.bench.site judges a crawl of a real static site with `canonical_or_raw`."""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from frontier.errors import InvalidURL
from frontier.url.canonical import canonicalize

ROBOTS_PATH = "/robots.txt"
MB = 2**20


@dataclass(slots=True)
class CrawlRun:
    """What one crawl left: its timing, the mock web's counts and the crawler's own figures."""

    crawler: str
    exit_code: int
    wall: float
    peak_rss: int
    counts: dict[str, int]
    times: dict[str, list[float]]
    ports: list[int]
    links_found: int = 0  # links found (frontier: per page distinct, in scope; Scrapy: dupefilter calls)
    crawl_seconds: float = 0.0  # the crawler's own crawl time (for links/s)
    cpu: list[tuple[str, float]] = field(default_factory=list)  # (process, CPU seconds) of the crawler's tree
    server_cpu: float = 0.0  # CPU seconds the mock web spent serving this crawl
    machine_busy: float = 0.0  # share of the machine's CPU time in use (by anything) during the crawl
    started: float = 0.0  # time.monotonic() when the crawler was spawned
    tree_cpu: float = 0.0  # CPU seconds of the crawler's whole process tree
    queue_messages: int | None = None  # frontier: jobs sent + results received by the frontier process
    notes: dict[str, Any] = field(default_factory=dict)
    log: Path | None = None


@dataclass(frozen=True, slots=True)
class Judgement:
    """One crawl measured against the site graph (see the module docstring for each figure)."""

    crawler: str
    ok: bool  # exit code 0
    pages: int
    wall: float
    pages_per_s: float
    active_pages_per_s: float
    links_per_s: float
    peak_rss_mb: float
    duplicates: int
    retries_5xx: int
    missed: int
    unexpected: int
    robots_disallowed: int  # canonical URLs requested that robots.txt disallows
    first_request: float  # seconds from spawn to the first request; nan if none
    cpu_ms_per_page: float
    frontier_ms_per_page: float  # nan: not frontier
    messages_per_page: float  # nan: not frontier, or not reported


def canonical_or_raw(url: str) -> str:
    """The canonical form of a URL the mock web received, the URL itself if it is invalid (it still counts)."""
    try:
        return canonicalize(url)
    except InvalidURL:
        return url


def judge(run: CrawlRun, graph: Any) -> Judgement:
    """Compare the mock web's counts after `run` with what a correct crawl of `graph` requests."""
    from frontier.testing import PageKind

    expected = graph.expected_requests(run.ports)
    by_canonical: Counter[str] = Counter()
    pages = 0
    for url, n in run.counts.items():
        by_canonical[canonical_or_raw(url)] += n
        if urlsplit(url).path != ROBOTS_PATH:
            pages += n
    host_index = {f"127.0.0.1:{port}": i for i, port in enumerate(run.ports)}

    def server_error(url: str) -> bool:  # a permanent 500, also one a correct crawl never reaches
        parts = urlsplit(url)
        page = graph.page_at(parts.path)
        return (page is not None and graph.kind(page) == PageKind.SERVER_ERROR
                and host_index.get(parts.netloc) == graph.host_of(page))

    duplicates = retries = 0
    for url, n in by_canonical.items():
        if n > 1:
            if server_error(url):
                retries += n - 1
            else:
                duplicates += n - 1
    missed = sum(1 for url in expected if url not in by_canonical)
    unexpected = sum(1 for url in by_canonical if url not in expected)
    disallowed = 0
    for url in by_canonical:
        parts = urlsplit(url)
        if graph.is_disallowed(parts.path + (f"?{parts.query}" if parts.query else "")):
            disallowed += 1
    stamps = [t for times in run.times.values() for t in times]
    active = max(stamps) - min(stamps) if len(stamps) > 1 else 0.0
    per_page = 1000.0 / pages if pages else math.nan
    frontier_cpu = [cpu for label, cpu in run.cpu if label == "frontier process"]
    return Judgement(
        crawler=run.crawler,
        ok=run.exit_code == 0,
        pages=pages,
        wall=run.wall,
        pages_per_s=pages / run.wall if run.wall > 0 else 0.0,
        active_pages_per_s=pages / active if active > 0 else 0.0,
        links_per_s=run.links_found / run.crawl_seconds if run.crawl_seconds > 0 else 0.0,
        peak_rss_mb=run.peak_rss / MB,
        duplicates=duplicates,
        retries_5xx=retries,
        missed=missed,
        unexpected=unexpected,
        robots_disallowed=disallowed,
        first_request=min(stamps) - run.started if stamps and run.started else math.nan,
        cpu_ms_per_page=run.tree_cpu * per_page,
        frontier_ms_per_page=sum(frontier_cpu) * per_page if frontier_cpu else math.nan,
        messages_per_page=run.queue_messages / 1000.0 * per_page if run.queue_messages is not None else math.nan,
    )


def median_judgement(judgements: Sequence[Judgement]) -> Judgement:
    """Field-wise median of several runs of one crawler (ok only if every run was ok)."""
    first = judgements[0]
    values: dict[str, Any] = {"crawler": first.crawler, "ok": all(j.ok for j in judgements)}
    for f in dataclasses.fields(Judgement):
        if f.name in values:
            continue
        column = [getattr(j, f.name) for j in judgements]
        med = statistics.median(column)
        values[f.name] = type(column[0])(med) if isinstance(column[0], int) else med
    return Judgement(**values)


