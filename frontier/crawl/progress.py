"""The live progress line: rich on a terminal, plain periodic lines otherwise, or nothing.

  12.0s  fetched 2610 (2788 attempts)  217.5/s  queue 1001  in flight 8/128 (capped: politeness.max_per_host 8 x 1 host)

`fetched` counts pages that got an HTTP response, `attempts` every fetch attempt (retries and
network errors included); the rate is fetched pages per second of this run. `known-in-workers`
(probabilistic mode) counts links the workers left out because the shared Bloom filter held them. `in flight` shows the
fetches under way out of the worker slots (workers.processes x workers.concurrency), and what caps
them below the slots when politeness does (a crawl of few hosts).
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


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
