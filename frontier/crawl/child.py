"""What every spawned crawl process does first: die with its supervisor, carry a name, log in one format.

    supervised(name, supervisor_pid, on_orphaned, exit_after, log_level=...)   first call in a child's target
    configure_logging(level, name)        stdlib logging of a crawl process (the supervisor calls it itself)

A kill -9 of run_frontier.py alone (an OOM kill, a plain `kill -9 PID`) used to leave the frontier
process and the workers running, the frontier holding the data dir's lock. Two layers stop that:

1. Linux PR_SET_PDEATHSIG: the kernel sends the child SIGTERM the moment its parent dies, so the
   child's own SIGTERM path runs (the frontier process stops cleanly, a worker exits).
2. A daemon thread polls os.getppid() every PARENT_POLL seconds (the backstop where prctl is
   missing or the signal was lost): when the supervisor is gone it calls `on_orphaned()` and,
   if the process is still alive `exit_after()` seconds later, ends it with os._exit. That is the
   supervisor's "kill after the grace" done by the orphan itself, so no process holds the data dir
   for good.

`name` is shown by ps: the command line becomes "frontier: <name> <detail>" and the kernel's
process name (ps -o comm, top, pgrep) becomes `name`, e.g. "frontier" or "worker-3".

Garbage collection: `supervised` freezes what the process's imports made (gc.freeze: the full collections no
longer walk aiohttp's and the crawl's modules) and raises the first generation's threshold to GC_THRESHOLD
(a page's fetch and parse make and free thousands of objects; at CPython's 700 the young generation was
collected about 800 times per 10,000 pages). Measured on the 21,635-page rust-doc crawl
(docs/benchmarks.md): time in the collector fell from 1.28 to 0.11 CPU s of about 50 (2.3% of the crawl's CPU).
Cyclic garbage waits for at most GC_THRESHOLD[0] net allocations before it is collected.

Logging: every process of a crawl (the supervisor, the frontier process, the workers) logs with stdlib
logging to stderr in one format, LOG_FORMAT, at the level of run_frontier.py --log-level (LOG_LEVELS;
"warning" by default), so the lines of all processes interleave readably:

    2024-05-01 12:00:00,123 worker-3[4242] DEBUG frontier.crawl.child: started (supervisor 4200)
"""

from __future__ import annotations

import ctypes
import gc
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable

import setproctitle

__all__ = ["GC_THRESHOLD", "LOG_FORMAT", "LOG_LEVELS", "PARENT_POLL", "configure_logging", "orphaned",
           "set_death_signal", "supervised", "tune_gc"]

PARENT_POLL = 0.5  # seconds between two looks at os.getppid()
GC_THRESHOLD = (10_000, 10, 10)  # gc.set_threshold of a crawl process (CPython's default: 700, 10, 10)
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
LOG_LEVELS = ("debug", "info", "warning")
LOG_FORMAT = "%(asctime)s {name}[%(process)d] %(levelname)s %(name)s: %(message)s"

log = logging.getLogger(__name__)


def configure_logging(level: str, name: str) -> None:
    """Log records of `level` and above (one of LOG_LEVELS) to stderr, each line naming this process
    (`name`: "supervisor", "frontier", "worker-3") and its PID. Replaces any handler set before."""
    logging.basicConfig(level=level.upper(), format=LOG_FORMAT.replace("{name}", name), force=True)


def tune_gc() -> None:
    """Freeze the objects made so far (imports) out of the collector's sight and raise its first threshold
    (GC_THRESHOLD; see the module docstring): a crawl process makes many short-lived objects per page."""
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)


def set_death_signal(sig: int) -> bool:
    """Ask the kernel to send `sig` to this process when its parent dies; False where that is not available.
    Also the `preexec_fn` of a server a benchmark starts (nginx), so a SIGKILLed benchmark leaves none behind."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def orphaned(supervisor_pid: int) -> bool:
    """True once the supervisor has died (this process was re-parented to init or a subreaper)."""
    return os.getppid() != supervisor_pid


def _watch(supervisor_pid: int, on_orphaned: Callable[[], None], exit_after: Callable[[], float],
           exit_code: int) -> None:
    while not orphaned(supervisor_pid):
        time.sleep(PARENT_POLL)
    on_orphaned()
    time.sleep(exit_after())
    os._exit(exit_code)  # the clean stop did not finish in time: end as the supervisor would have


def supervised(name: str, supervisor_pid: int, *, on_orphaned: Callable[[], None],
               exit_after: Callable[[], float], exit_code: int, detail: str = "", log_level: str = "warning") -> None:
    """Name this process, set up its logging, tie its life to the supervisor's, and exit at once if it is
    already gone.

    Call it first in a spawned child's target. The death signal is SIGTERM, so the child's own
    SIGTERM handler is its reaction to the supervisor's death; `on_orphaned` is the backstop's.
    """
    configure_logging(log_level, name)
    tune_gc()
    log.debug("started (supervisor %d)%s", supervisor_pid, f": {detail}" if detail else "")
    setproctitle.setproctitle(f"frontier: {name} {detail}".rstrip())
    setproctitle.setthreadtitle(name)  # the main thread's name is the process name (15 bytes at most)
    set_death_signal(signal.SIGTERM)
    if orphaned(supervisor_pid):  # died before the death signal was set: nobody will send it
        os._exit(exit_code)
    threading.Thread(target=_watch, args=(supervisor_pid, on_orphaned, exit_after, exit_code),
                     name="parent-watch", daemon=True).start()
