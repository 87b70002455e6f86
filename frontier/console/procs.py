"""The CPU and memory of a crawl's processes, from Linux's /proc (no dependency; elsewhere: an empty list).

    sampler = ProcessSampler(supervisor_pid)
    sampler.sample()   # [{"pid", "name": "frontier" | "worker-3", "cpu": cores used since the last sample, "rss"}]

The crawl's processes are the supervisor's children named "frontier" and "worker-N" (frontier.crawl.child sets
the kernel's process name); the list is found again every RESCAN seconds (a restart brings new ones). `cpu` is
the share of one core each used between two samples (1.0: a whole core), None on its first sample; `in_flight`
is left None here (frontier.console.live fills it in from what the crawl's processes share).
"""

from __future__ import annotations

import os
import time
from typing import Any

RESCAN = 10.0  # seconds between looks for the crawl's processes
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _stat(pid: int) -> tuple[str, int, float] | None:
    """(name, parent pid, CPU seconds used) of a process; None if it is gone or /proc has no such file."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    name = text[text.find("(") + 1:text.rfind(")")]
    fields = text[text.rfind(")") + 2:].split()
    return name, int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICKS  # ppid, utime, stime


def _rss(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return None


class ProcessSampler:
    """CPU and RSS of the crawl's processes (see the module docstring). `parent`: the supervisor's pid; None:
    this process alone."""

    def __init__(self, parent: int | None) -> None:
        self.parent = parent
        self.pids: list[int] = []
        self._rescan_at = 0.0
        self._last: dict[int, tuple[float, float]] = {}  # pid -> (time, CPU seconds)

    def _scan(self) -> list[int]:
        if self.parent is None:
            return [os.getpid()]
        try:
            entries = os.listdir("/proc")
        except OSError:
            return []
        found = []
        for entry in entries:
            if entry.isdigit():
                stat = _stat(int(entry))
                if stat is not None and stat[1] == self.parent and (stat[0] == "frontier" or
                                                                    stat[0].startswith("worker-")):
                    found.append(int(entry))
        return sorted(found)

    def sample(self) -> list[dict[str, Any]]:
        now = time.monotonic()
        if now >= self._rescan_at:
            self.pids = self._scan()
            self._rescan_at = now + RESCAN
        out = []
        last: dict[int, tuple[float, float]] = {}
        for pid in self.pids:
            stat = _stat(pid)
            if stat is None:
                continue
            name, _, cpu_seconds = stat
            before = self._last.get(pid)
            cpu = None if before is None or now <= before[0] else round((cpu_seconds - before[1]) / (now - before[0]), 3)
            last[pid] = (now, cpu_seconds)
            out.append({"pid": pid, "name": name, "cpu": cpu, "cpu_seconds": round(cpu_seconds, 2), "rss": _rss(pid),
                        "in_flight": None})
        self._last = last
        return out
