"""The live progress line: rich on a terminal, plain periodic lines otherwise, or nothing."""

from __future__ import annotations

import sys
import time
from typing import TextIO


def _line(stats: dict, elapsed: float, pages_at_start: int) -> str:
    seen = stats.get("seen", {})
    reasons = stats.get("reasons", {})
    fails = sum(v for k, v in reasons.items() if k.startswith(("http_5", "timeout", "connect", "connection", "dns")))
    rate = (stats["pages"] - pages_at_start) / elapsed if elapsed > 0 else 0.0
    return (f"{elapsed:7.1f}s  pages {stats['pages']:>8}  {rate:8.1f}/s  queue {stats['queued']:>8}  "
            f"in flight {stats['in_flight']:>4}  hosts {stats['hosts']:>5}  "
            f"seen: lru {seen.get('lru_hit_rate', 0.0):.0%} bloom-new {seen.get('bloom_negative', 0)} "
            f"log-hit {seen.get('log_confirmed', 0)} fp-caught {seen.get('false_positives_caught', 0)}  "
            f"errors {fails}")


class Progress:
    """Call `update(stats)` often; it prints at most every `interval` seconds."""

    def __init__(self, mode: str = "auto", interval: float = 2.0, stream: TextIO | None = None,
                 pages_at_start: int = 0) -> None:
        self._stream = stream or sys.stdout
        if mode == "auto":
            mode = "rich" if self._stream.isatty() else "plain"
        self.mode = mode
        self.interval = interval
        self._started = time.monotonic()
        self._last = 0.0
        self._pages_at_start = pages_at_start
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
            self._live.update(_line(stats, now - self._started, self._pages_at_start))
            return
        if force or now - self._last >= self.interval:
            self._last = now
            print(_line(stats, now - self._started, self._pages_at_start), file=self._stream, flush=True)

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
