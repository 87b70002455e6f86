"""The live progress line: rich on a terminal, plain periodic lines otherwise, or nothing.

  12.0s  this instance: fetched 2610 (2788 attempts) 217.5/s errors 0  crawl-wide: fetched 2610 queue 1001
         in flight 8/128 (capped: politeness.max_per_host 8 x 1 host)  hosts 1  seen: lru 80% bloom-new ...
  (one line)

Each count says whose it is. "this instance": this frontier process (since it started): `fetched` counts the
site's pages that got an HTTP response, `attempts` every fetch attempt (retries and network errors included, and
the crawler's own soft-404 probes and sitemaps; robots.txt is not a page attempt); the rate is its fetched pages
per second; `errors` its failed attempts (5xx, timeouts, network errors). "crawl-wide": the crawl's state,
every run and, with Redis, every instance: pages fetched, URLs queued. `in flight` shows the fetches this
process has under way out of the worker slots (workers.processes x workers.concurrency), and what caps them
below the slots when politeness does (a crawl of few hosts): `politeness.max_per_host 8 x 1 host`, or
`politeness.delay 1.0 s adaptive x 1 host` (a delay: one fetch per host at a time, and a pause after each).
`seen`: the seen-test's own counts; with LMDB the LRU hit rate, the links the Bloom filter proved new, those
the log confirmed seen, the false positives it caught (`known-in-workers`, probabilistic mode: links the workers
left out as held by the shared filter); with Redis the LRU hit rate, the links found new of those checked, and
the crawl's URLs.

`banner(cfg)` is what a crawl prints before it starts (unless output.progress is "off"): the seeds, the data
dir and backend, what paces each host, and the trap defences, so a slow crawl says why from its first line.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from frontier.config import CrawlConfig

BANNER_SEEDS = 3  # seeds shown by name; the rest are counted


def _line(stats: dict, elapsed: float) -> str:
    here = stats["instance"]
    fails = sum(v for k, v in here["outcomes"].items()
                if k.startswith(("http_5", "timeout", "connect", "connection", "dns")))
    rate = here["fetched"] / elapsed if elapsed > 0 else 0.0
    in_flight = f"{stats['in_flight']:>4}"
    if "slots" in stats:
        in_flight += f"/{stats['slots']}"
    if stats.get("in_flight_cap"):
        in_flight += f" (capped: {stats['in_flight_cap']})"
    return (f"{elapsed:7.1f}s  this instance: fetched {here['fetched']:>8} ({here['attempts']} attempts) {rate:8.1f}/s "
            f"errors {fails}  crawl-wide: fetched {stats['fetched']:>8} queue {stats['queued']:>8}  "
            f"in flight {in_flight}  hosts {stats['hosts']:>5}  {_seen(stats.get('seen', {}))}{_due(stats)}")


def _due(stats: dict) -> str:
    """Revisits on: when the next page is due (a continuous crawl waits for it)."""
    if "next_due" not in stats:
        return ""
    due = stats["next_due"]
    if due is None:
        return "  revisits: none due"
    wait = due - time.time()
    return "  revisits: due now" if wait <= 0 else f"  revisits: next due in {wait:.0f}s"


def _seen(seen: dict) -> str:
    """What the seen-test knows: the backend's own counts, never the other backend's as zeros."""
    if seen.get("backend") == "redis":
        return (f"seen: lru {seen.get('lru_hit_rate', 0.0):.0%} new {seen.get('new', 0)} of {seen.get('checked', 0)} "
                f"checked, {seen.get('urls', 0)} URLs crawl-wide")
    return (f"seen: lru {seen.get('lru_hit_rate', 0.0):.0%} bloom-new {seen.get('bloom_negative', 0)} "
            f"log-hit {seen.get('log_confirmed', 0)} fp-caught {seen.get('false_positives_caught', 0)}"
            + (f" known-in-workers {seen['worker_known']}" if "worker_known" in seen else ""))


def banner(cfg: CrawlConfig) -> str:
    """The start-up lines of a crawl (see the module docstring)."""
    seeds = ", ".join(cfg.seeds[:BANNER_SEEDS]) + (f" and {len(cfg.seeds) - BANNER_SEEDS} more"
                                                    if len(cfg.seeds) > BANNER_SEEDS else "")
    storage = cfg.storage
    if storage.backend == "redis":  # the URL without its password
        where = storage.redis.url.split("://", 1)[0] + "://" + storage.redis.url.split("@")[-1].split("://")[-1]
        backend = f"redis {where} crawl {storage.redis.crawl!r} (this instance's log and runs in the data dir)"
    else:
        backend = "lmdb (a rerun resumes)"
    pol = cfg.politeness
    pace = pol.host_cap
    if pol.delay > 0:
        adaptive = f" ({pol.delay_factor:g} x the server's latency, up to {pol.max_delay:g} s)" if pol.adaptive else ""
        pace += f"{adaptive}; one fetch per host at a time"
    else:
        pace += " fetches per host at a time, no delay"
    traps = ", ".join(f"{name} {'on' if getattr(cfg.traps, name) else 'off'}" for name in ("patterns", "soft_404"))
    robots = (f"obeyed (a Crawl-delay over {pol.max_crawl_delay:g} s: {pol.long_crawl_delay})" if pol.obey_robots
              else "ignored")
    return (f"frontier: crawling {len(cfg.seeds)} seed{'s' if len(cfg.seeds) != 1 else ''}: {seeds}\n"
            f"  data dir  {storage.data_dir}  backend {backend}\n"
            f"  pace      {pace}; workers {cfg.workers.processes} x {cfg.workers.concurrency}\n"
            f"  traps     {traps}; robots.txt {robots}")


class Progress:
    """Call `update(stats)` often; it prints at most every `interval` seconds."""

    def __init__(self, mode: str = "auto", interval: float = 2.0, stream: TextIO | None = None) -> None:
        self._stream = stream or sys.stdout
        if mode == "auto":
            mode = "rich" if self._stream.isatty() else "plain"
        self.mode = mode
        self.interval = interval
        self._started = time.monotonic()
        self._last = 0.0
        self._live = None
        if mode == "rich":
            from rich.console import Console
            from rich.live import Live

            self._live = Live(console=Console(file=self._stream), refresh_per_second=4, transient=False)
            self._live.start()

    def update(self, stats: dict, *, force: bool = False) -> None:
        if self.mode == "off":
            return
        now = time.monotonic()
        if self._live is not None:
            self._live.update(_line(stats, now - self._started))
            return
        if force or now - self._last >= self.interval:
            self._last = now
            print(_line(stats, now - self._started), file=self._stream, flush=True)

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
