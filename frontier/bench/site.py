"""A real static site on loopback for the crawl benchmark: a directory served by aiohttp, every request counted.

    python -m frontier.bench.site DIR [--entry index.html]
        prints one JSON line {"ports": [port], "base_urls": [...], "seed": ..., "stats_url": ...} and serves
        DIR on 127.0.0.1 until SIGTERM/SIGINT or until its parent process dies
    with StaticSiteProcess(DIR, entry="index.html") as site:   that, as a child process
        site.seed, site.base_urls, site.ports; site.stats() -> {"counts": {url: n}, "times": {host: [t, ...]},
                                                                "statuses": {url: status}, "html": n}

`python -m frontier.bench crawl --site-dir DIR` crawls it with frontier, Scrapy and wget (frontier.bench.crawl).
What is served: GET of a path under DIR (percent-decoded; a directory means its index.html; anything outside
DIR, or missing, is a 404), with the Content-Type of its extension (text/html for .html). Counted as in
frontier.testing.mockweb: every request keyed "http://127.0.0.1:PORT" + the target exactly as received, with
time.monotonic() at its start (comparable across processes on one machine); "GET /__stats__" is not counted.
`statuses` keeps each URL's last status and `html` counts the 200 responses of HTML pages (what a crawler
came for: the pages of the site, not its 404s, scripts or style sheets).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import mimetypes
import os
import signal
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from aiohttp import web

from frontier.bench.judge import ROBOTS_PATH, CrawlRun, canonical_or_raw
from frontier.testing.mockweb import MockWebProcess

__all__ = ["SiteJudgement", "StaticSite", "StaticSiteProcess", "format_site_table", "judge_site", "main", "median_site"]

STATS_PATH = "/__stats__"
LOOPBACK = "127.0.0.1"
HTML = "text/html"


class StaticSite:
    """The aiohttp application serving `root`, with its request counts."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.counts: Counter[str] = Counter()
        self.times: list[float] = []
        self.statuses: dict[str, int] = {}
        self.html = 0
        self.base = ""  # "http://127.0.0.1:PORT" once listening

    def file_for(self, path: str) -> Path | None:
        """The file a request path names, or None (missing, or outside the root)."""
        target = (self.root / unquote(path).lstrip("/")).resolve()
        if target != self.root and self.root not in target.parents:
            return None
        if target.is_dir():
            target = target / "index.html"
        return target if target.is_file() else None

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        if request.path == STATS_PATH:
            return web.json_response({"counts": dict(self.counts), "times": {self.base.split("://", 1)[1]: self.times},
                                      "statuses": self.statuses, "html": self.html})
        url = self.base + request.raw_path
        self.counts[url] += 1
        self.times.append(time.monotonic())
        file = self.file_for(request.path)
        if file is None:
            self.statuses[url] = 404
            return web.Response(status=404, text="not found")
        content_type = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
        self.statuses[url] = 200
        if content_type == HTML:
            self.html += 1
        return web.Response(body=file.read_bytes(), content_type=content_type)


async def _serve(root: Path, entry: str) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    parent = os.getppid()
    site = StaticSite(root)
    server = web.Server(site.handle, access_log=None)
    runner = web.ServerRunner(server)
    await runner.setup()
    tcp = web.TCPSite(runner, LOOPBACK, 0)
    await tcp.start()
    port = tcp._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    site.base = f"http://{LOOPBACK}:{port}"
    info = {"ports": [port], "base_urls": [site.base], "seed": f"{site.base}/{entry.lstrip('/')}",
            "stats_url": site.base + STATS_PATH, "pid": os.getpid(), "root": str(site.root)}
    sys.stdout.write(json.dumps(info) + "\n")
    sys.stdout.flush()
    try:
        while not stop.is_set() and os.getppid() == parent:
            try:
                async with asyncio.timeout(1.0):
                    await stop.wait()
            except TimeoutError:
                pass
    finally:
        await runner.cleanup()


class StaticSiteProcess(MockWebProcess):
    """`python -m frontier.bench.site DIR` as a child process (the MockWebProcess plumbing: a JSON line with
    its address, `stats()`, `close()` with SIGTERM); exits by itself when this process dies."""

    def __init__(self, root: Path, *, entry: str = "index.html", startup_timeout: float = 60.0) -> None:
        self._spawn([sys.executable, "-m", "frontier.bench.site", str(root), "--entry", entry], startup_timeout)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m frontier.bench.site", description="serve DIR on 127.0.0.1")
    parser.add_argument("root", type=Path, help="the site's directory")
    parser.add_argument("--entry", default="index.html", help="the seed page, relative to the root")
    args = parser.parse_args(argv)
    if not (args.root / args.entry).is_file():
        print(f"site: {args.root / args.entry} is not a file", file=sys.stderr)
        return 2
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency of the workers
        asyncio.run(_serve(args.root, args.entry))
    else:
        uvloop.run(_serve(args.root, args.entry))
    return 0



# -- judging a crawl of the site (frontier.bench.crawl --site-dir) ---------------------------------------------

SITE_COLUMNS = ("crawler", "pages", "requests", "404s", "duplicate fetches", "wall s", "pages/s", "first request s",
                "CPU s", "CPU ms/page", "peak RSS MB")


@dataclass(frozen=True, slots=True)
class SiteJudgement:
    """One crawl of the static site: `pages` are HTML pages served 200 (the site's pages), `requests` every
    request but robots.txt (404s, scripts, style sheets and repeats included), `duplicates` the repeats of
    canonical URLs; pages/s = pages / wall (interpreter start to exit)."""

    crawler: str
    ok: bool
    pages: int
    requests: int
    not_found: int
    duplicates: int
    wall: float
    first_request: float  # seconds from the crawler's spawn to the site's first request; nan if none
    cpu: float  # CPU seconds of the crawler's whole process tree
    peak_rss_mb: float

    @property
    def pages_per_s(self) -> float:
        return self.pages / self.wall if self.wall > 0 else 0.0

    @property
    def cpu_ms_per_page(self) -> float:
        """CPU of the whole process tree per page: what decides how many cores a crawl needs."""
        return 1000 * self.cpu / self.pages if self.pages else math.nan


def judge_site(run: CrawlRun, statuses: dict[str, int]) -> SiteJudgement:
    """`run` against the site's statuses (StaticSiteProcess.stats())."""
    by_canonical: Counter[str] = Counter()
    pages = requests = not_found = 0
    for url, n in run.counts.items():
        if urlsplit(url).path == ROBOTS_PATH:
            continue
        requests += n
        by_canonical[canonical_or_raw(url)] += n
        status = statuses.get(url, 0)
        if status == 404:
            not_found += n
        elif status == 200 and (mimetypes.guess_type(urlsplit(url).path)[0] == HTML or urlsplit(url).path.endswith("/")):
            pages += n
    stamps = [t for times in run.times.values() for t in times]
    return SiteJudgement(crawler=run.crawler, ok=run.exit_code == 0, pages=pages, requests=requests,
                         not_found=not_found, duplicates=sum(n - 1 for n in by_canonical.values() if n > 1),
                         wall=run.wall, first_request=min(stamps) - run.started if stamps else math.nan,
                         cpu=run.tree_cpu, peak_rss_mb=run.peak_rss / 2**20)


def median_site(judgements: Sequence[SiteJudgement]) -> SiteJudgement:
    """Field-wise median of several runs of one crawler (ok only if every run was ok)."""
    first = judgements[0]
    values: dict[str, Any] = {"crawler": first.crawler, "ok": all(j.ok for j in judgements)}
    for f in dataclasses.fields(SiteJudgement):
        if f.name not in values:
            column = [getattr(j, f.name) for j in judgements]
            med = statistics.median(column)
            values[f.name] = type(column[0])(med) if isinstance(column[0], int) else med
    return SiteJudgement(**values)


def format_site_table(rows: Sequence[SiteJudgement]) -> str:
    def figure(value: float, spec: str) -> str:
        return "-" if math.isnan(value) else format(value, spec)

    cells = [list(SITE_COLUMNS)] + [
        [j.crawler if j.ok else f"{j.crawler} (FAILED)", f"{j.pages:,}", f"{j.requests:,}", f"{j.not_found:,}",
         f"{j.duplicates:,}", f"{j.wall:.2f}", f"{j.pages_per_s:,.0f}", figure(j.first_request, ".2f"),
         f"{j.cpu:.2f}", figure(j.cpu_ms_per_page, ".2f"), f"{j.peak_rss_mb:,.0f}"] for j in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(SITE_COLUMNS))]

    def line(r: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) + " |"

    sep = "|" + "|".join("-" * (w + 2) if i == 0 else "-" * (w + 1) + ":" for i, w in enumerate(widths)) + "|"
    return "\n".join([line(cells[0]), sep, *(line(r) for r in cells[1:])])


if __name__ == "__main__":
    sys.exit(main())
