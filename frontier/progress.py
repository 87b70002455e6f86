"""The live progress line: rich on a terminal, plain periodic lines otherwise, or nothing.

  12.0s  fetched 2610 (2788 attempts)  217.5/s  queue 1001  in flight 8/128 (capped: politeness.max_per_host 8 x 1 host)

`fetched` counts pages that got an HTTP response, `attempts` every fetch attempt (retries and
network errors included); the rate is fetched pages per second of this run. `known-in-workers`
(probabilistic mode) counts links the workers left out because the shared Bloom filter held them. `in flight` shows the
fetches under way out of the worker slots (workers.processes x workers.concurrency), and what caps
them below the slots when politeness does (a crawl of few hosts): `politeness.max_per_host 8 x 1 host`, or
`politeness.delay 1.0 s adaptive x 1 host` (a delay: one fetch per host at a time, and a pause after each).

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


def _line(stats: dict, elapsed: float, fetched_at_start: int) -> str:
    seen = stats.get("seen", {})
    reasons = stats.get("reasons", {})
    fails = sum(v for k, v in reasons.items() if k.startswith(("http_5", "timeout", "connect", "connection", "dns")))
    rate = (stats["fetched"] - fetched_at_start) / elapsed if elapsed > 0 else 0.0
    in_flight = f"{stats['in_flight']:>4}"
    if "slots" in stats:
        in_flight += f"/{stats['slots']}"
    if stats.get("in_flight_cap"):
        in_flight += f" (capped: {stats['in_flight_cap']})"
    return (f"{elapsed:7.1f}s  fetched {stats['fetched']:>8} ({stats['attempts']} attempts)  {rate:8.1f}/s  "
            f"queue {stats['queued']:>8}  in flight {in_flight}  hosts {stats['hosts']:>5}  "
            f"seen: lru {seen.get('lru_hit_rate', 0.0):.0%} bloom-new {seen.get('bloom_negative', 0)} "
            f"log-hit {seen.get('log_confirmed', 0)} fp-caught {seen.get('false_positives_caught', 0)}"
            + (f" known-in-workers {seen['worker_known']}" if "worker_known" in seen else "")
            + f"  errors {fails}")


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
    robots = "obeyed" if pol.obey_robots else "ignored"
    return (f"frontier: crawling {len(cfg.seeds)} seed{'s' if len(cfg.seeds) != 1 else ''}: {seeds}\n"
            f"  data dir  {storage.data_dir}  backend {backend}\n"
            f"  pace      {pace}; workers {cfg.workers.processes} x {cfg.workers.concurrency}\n"
            f"  traps     {traps}; robots.txt {robots}")


class Progress:
    """Call `update(stats)` often; it prints at most every `interval` seconds."""

    def __init__(self, mode: str = "auto", interval: float = 2.0, stream: TextIO | None = None,
                 fetched_at_start: int = 0) -> None:
        self._stream = stream or sys.stdout
        if mode == "auto":
            mode = "rich" if self._stream.isatty() else "plain"
        self.mode = mode
        self.interval = interval
        self._started = time.monotonic()
        self._last = 0.0
        self._fetched_at_start = fetched_at_start
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
            self._live.update(_line(stats, now - self._started, self._fetched_at_start))
            return
        if force or now - self._last >= self.interval:
            self._last = now
            print(_line(stats, now - self._started, self._fetched_at_start), file=self._stream, flush=True)

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
