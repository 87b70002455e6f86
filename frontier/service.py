"""The frontier process: owns the de-dup state and the fetch queue, feeds workers, takes their results.

    results queue --(batch of FetchResult)--> Frontier.report   (one LMDB transaction per batch)
    Frontier.lease --(FetchJob)--> jobs queue  (at most processes x concurrency in flight)

It tells the supervisor "ready" (with the Bloom filter's name, for the workers) or a startup error
over a pipe, then loops until the crawl is done or a stop is requested; then it stops leasing,
takes the results of fetches already under way for a short grace period, sends each worker a
`None`, snapshots the Bloom filter and writes summary.json. Exit codes: see EXIT_*.
"""

from __future__ import annotations

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
STOP_GRACE = 3.0  # seconds to wait for in-flight results after a stop request


def summary_path(cfg: CrawlConfig) -> Path:
    return Path(cfg.storage.data_dir) / "summary.json"


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

    def run(self) -> int:
        """Crawl until done (EXIT_DONE) or stopped (EXIT_STOPPED)."""
        self.frontier.add_seeds(self.cfg.seeds)
        while not self.stop.is_set():
            self._take_results(self._wait_time())
            self._hand_out_jobs()
            self.progress.update(self.frontier.stats())
            if self.frontier.done:
                return EXIT_DONE
        deadline = time.monotonic() + STOP_GRACE
        while self.frontier.in_flight and time.monotonic() < deadline:
            self._take_results(0.1)
        return EXIT_STOPPED

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
    except FrontierError as e:
        ready.send(("error", str(e), EXIT_CONFIG))
        sys.exit(EXIT_CONFIG)
    ready.send(("ready", service.frontier.seen.bloom.name, None))
    code = EXIT_CRASH
    try:
        code = service.run()
    except DiskFull as e:
        print(f"frontier: {e}", file=sys.stderr, flush=True)
        code = EXIT_DISK_FULL
    except FrontierError as e:
        print(f"frontier: {e}", file=sys.stderr, flush=True)
        code = EXIT_CONFIG
    except BaseException:
        traceback.print_exc()
        code = EXIT_CRASH
    finally:
        try:
            service.close(code)
        except DiskFull as e:
            print(f"frontier: {e}", file=sys.stderr, flush=True)
            code = EXIT_DISK_FULL
    sys.exit(code)
