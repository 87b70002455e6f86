"""The frontier process: owns the de-dup state and the fetch queue, feeds workers, takes their results.

    results queue --(batch of FetchResult)--> Frontier.report   (one LMDB transaction per batch)
    Frontier.lease --(FetchJob)--> jobs queue  (at most processes x concurrency in flight)

It tells the supervisor "ready" (with the Bloom filter's name, for the workers) or a startup error
over a pipe, then loops until the crawl is done or a stop is requested; then it stops leasing,
takes the results of fetches already under way for a short grace period, sends each worker a
`None`, snapshots the Bloom filter and writes summary.json. Exit codes: see EXIT_*.
"""

from __future__ import annotations

import errno
import json
import queue
import signal
import sys
import time
import traceback
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event as EventType
from pathlib import Path

from frontier.config import CrawlConfig
from frontier.crawllog import CrawlLog
from frontier.errors import DiskFull, FrontierError
from frontier.messages import FetchJob, FetchResult
from frontier.progress import Progress
from frontier.scheduler import Frontier

EXIT_DONE = 0
EXIT_CRASH = 1
EXIT_CONFIG = 2
EXIT_DISK_FULL = 3
EXIT_STOPPED = 130

MAX_RESULTS_PER_BATCH = 2048
RICH_REFRESH = 0.25  # seconds between stats for a rich progress line (it redraws 4 times a second)
STOP_GRACE = 3.0  # seconds to wait for in-flight results after a stop request


def summary_path(cfg: CrawlConfig) -> Path:
    return Path(cfg.storage.data_dir) / "summary.json"


def disk_full_message(cfg: CrawlConfig, e: BaseException) -> str | None:
    """The message for an out-of-space error (DiskFull, or an OSError from the crawl log or a snapshot), else None."""
    if isinstance(e, DiskFull):
        return str(e)
    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"{e.filename or cfg.storage.data_dir}: the disk is full ({e.strerror}); free space and rerun to resume"
    return None


class FrontierService:
    """The frontier process's loop around a `Frontier`, its queues, crawl log and progress line."""

    def __init__(self, cfg: CrawlConfig, jobs: "queue.Queue[FetchJob | None]", results: "queue.Queue[FetchResult]",
                 stop: EventType) -> None:
        self.cfg = cfg
        self.jobs = jobs
        self.results = results
        self.stop = stop
        self.log = CrawlLog(cfg.log_path)
        try:
            self.frontier = Frontier.from_config(cfg, on_event=self.log.write)
        except BaseException:
            self.log.close()
            raise
        self.target_in_flight = cfg.workers.processes * cfg.workers.concurrency
        self.started = time.monotonic()
        self.pages_at_start = self.frontier.pages
        self.progress = Progress(cfg.output.progress, cfg.output.progress_interval, pages_at_start=self.pages_at_start)
        self._next_progress = 0.0

    def run(self) -> int:
        """Crawl until done (EXIT_DONE) or stopped (EXIT_STOPPED)."""
        self.frontier.add_seeds(self.cfg.seeds)
        while not self.stop.is_set():
            self._take_results(self._wait_time())
            self._hand_out_jobs()
            self._update_progress()
            if self.frontier.done:
                return EXIT_DONE
        deadline = time.monotonic() + STOP_GRACE
        while self.frontier.in_flight and time.monotonic() < deadline:
            self._take_results(0.1)
        return EXIT_STOPPED

    def _update_progress(self) -> None:
        # Not on every loop turn: stats() counts the Bloom filter's set bits, tens of ms at the
        # default capacity, which once cut the crawl rate about fivefold.
        now = time.monotonic()
        if self.progress.mode == "off" or now < self._next_progress:
            return
        interval = RICH_REFRESH if self.progress.mode == "rich" else self.cfg.output.progress_interval
        self._next_progress = now + interval
        self.progress.update(self.frontier.stats(), force=True)  # the throttle is here

    def _wait_time(self) -> float:
        if self.frontier.in_flight:
            return 0.05
        ready_in = self.frontier.next_ready_in()
        return 0.2 if ready_in is None else min(max(ready_in, 0.0), 0.2)

    def _take_results(self, timeout: float) -> None:
        batch: list[FetchResult] = []
        try:
            batch.append(self.results.get(timeout=timeout) if timeout > 0 else self.results.get_nowait())
            while len(batch) < MAX_RESULTS_PER_BATCH:
                batch.append(self.results.get_nowait())
        except queue.Empty:
            pass
        if batch:
            self.frontier.report(batch)
            self.log.flush()

    def _hand_out_jobs(self) -> None:
        self.frontier.expire()  # even with every slot taken: a stuck worker may hold them all
        free = self.target_in_flight - self.frontier.in_flight
        if free <= 0:
            return
        jobs = self.frontier.lease(free)
        for job in jobs:
            self.jobs.put(job)
        self.log.flush()  # robots skips are logged at lease time

    def summary(self, exit_code: int) -> dict[str, object]:
        stats = self.frontier.stats()
        elapsed = time.monotonic() - self.started
        pages = stats["pages"] - self.pages_at_start  # type: ignore[operator]
        return {
            "done": exit_code == EXIT_DONE,
            "exit_code": exit_code,
            "elapsed_seconds": round(elapsed, 3),
            "pages_this_run": pages,
            "pages_per_second": round(pages / elapsed, 2) if elapsed > 0 else 0.0,
            **stats,
            "crawl_log": str(self.cfg.log_path),
        }

    def close(self, exit_code: int) -> None:
        """Tell workers to finish, snapshot the frontier, write summary.json."""
        for _ in range(self.cfg.workers.processes):
            self.jobs.put(None)
        self.progress.update(self.frontier.stats(), force=True)
        self.progress.close()
        summary = self.summary(exit_code)
        try:
            self.frontier.close()
        finally:
            self.log.close()
        path = summary_path(self.cfg)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(summary, indent=2, default=str))
        tmp.replace(path)


def run_frontier_process(cfg: CrawlConfig, jobs: "queue.Queue[FetchJob | None]",
                         results: "queue.Queue[FetchResult]", ready: Connection, stop: EventType) -> None:
    """Target of the spawned frontier process."""

    def request_stop(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    try:
        service = FrontierService(cfg, jobs, results, stop)
    except (FrontierError, OSError) as e:
        full = disk_full_message(cfg, e)
        if full is None and not isinstance(e, FrontierError):
            raise
        code = EXIT_CONFIG if full is None else EXIT_DISK_FULL
        ready.send(("error", full or str(e), code))
        sys.exit(code)
    ready.send(("ready", service.frontier.seen.bloom.name, None))
    code = EXIT_CRASH
    try:
        code = service.run()
    except (FrontierError, OSError) as e:
        full = disk_full_message(cfg, e)
        if full is None and not isinstance(e, FrontierError):
            traceback.print_exc()
            code = EXIT_CRASH
        else:
            print(f"frontier: {full or e}", file=sys.stderr, flush=True)
            code = EXIT_CONFIG if full is None else EXIT_DISK_FULL
    except BaseException:
        traceback.print_exc()
        code = EXIT_CRASH
    finally:
        try:
            service.close(code)
        except (DiskFull, OSError) as e:  # the log, the Bloom snapshot or summary.json did not fit
            full = disk_full_message(cfg, e)
            if full is None:
                raise
            if code != EXIT_DISK_FULL:
                print(f"frontier: {full}", file=sys.stderr, flush=True)
            code = EXIT_DISK_FULL
    sys.exit(code)
