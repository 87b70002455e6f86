"""The frontier process: owns the de-dup state and the fetch queue, feeds workers, takes their results.

    results queue --(ResultBatch messages)--> Frontier.report   (one LMDB transaction per loop turn)
    Frontier.lease --(JobBatch messages)--> jobs queue  (at most processes x concurrency in flight)

Jobs and results cross the queues in batches (frontier.crawl.messages): a turn's leases are cut into one
batch per worker, and each worker batches its results (workers.fetcher). It publishes the Bloom
filter's name in `Channels.bloom_name` (workers start with it, before it is ready) and tells the
supervisor "ready" (with the same name) or a startup error over a pipe, then loops until the crawl
is done or a stop is requested; then it stops leasing,
takes the results of fetches already under way for a short grace period, sends each worker a
`None`, snapshots the Bloom filter and writes summary.json (cumulative) and, at the end of a run,
its line in runs.jsonl (frontier.crawl.log). Exit codes: see EXIT_*.

It dies with its supervisor (frontier.crawl.child): a kill -9 of run_frontier.py makes it stop as on
SIGTERM, without the grace (the workers die too), so the data dir is free again within seconds.
"""

from __future__ import annotations

import errno
import logging
import queue
import signal
import sys
import time
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event as EventType
from typing import TYPE_CHECKING, Any

from frontier.config import CrawlConfig
from frontier.crawl.child import orphaned, supervised
from frontier.crawl.log import CrawlLog, RunHistory
from frontier.crawl.messages import FetchJob, FetchResult, JobBatch
from frontier.crawl.progress import Progress
from frontier.errors import DiskFull, FrontierError

if TYPE_CHECKING:
    from frontier.console.server import ConsoleServer
    from frontier.crawl.metrics import MetricsServer

log = logging.getLogger(__name__)

EXIT_DONE = 0
EXIT_CRASH = 1
EXIT_CONFIG = 2
EXIT_DISK_FULL = 3
EXIT_UNREACHABLE = 4
EXIT_STOPPED = 130
EXIT_CODES = (EXIT_DONE, EXIT_CRASH, EXIT_CONFIG, EXIT_DISK_FULL, EXIT_UNREACHABLE, EXIT_STOPPED)

MAX_RESULTS_PER_BATCH = 2048
JOB_BATCH_SHARE = 4  # a job batch holds at most workers.concurrency / JOB_BATCH_SHARE jobs (see job_batches)
BLOOM_NAME_BYTES = 255  # NAME_MAX: room for any shared-memory name in Channels.bloom_name
RICH_REFRESH = 0.25  # seconds between stats for a rich progress line (it redraws 4 times a second)
STOP_GRACE = 3.0  # seconds to wait for in-flight results after a stop request
CLOSE_TIMEOUT = 10.0  # seconds for a clean stop's work besides the grace and the Bloom snapshot
# Bytes per second a clean stop is assumed to write the Bloom snapshot at (tmp file, fsync, rename).
# Measured 135-338 MB/s on the development machine's virtual disk; a quarter of the slower figure
# leaves room for a loaded machine or a slow disk, so a clean stop is not cut short into a kill
# (and a full rebuild of the filter from the log on the next run).
SNAPSHOT_WRITE_RATE = 50e6


def stop_timeout(snapshot_bytes: int) -> float:
    """Seconds a clean stop may take before it is cut short with SIGKILL: the grace for results in
    flight, the close, and the Bloom snapshot at SNAPSHOT_WRITE_RATE (a 24 GB filter: 8 minutes)."""
    return STOP_GRACE + CLOSE_TIMEOUT + max(0, snapshot_bytes) / SNAPSHOT_WRITE_RATE


def job_batches(jobs: list[FetchJob], workers: int, largest: int) -> list[JobBatch]:
    """`jobs` cut into about one batch per worker, each of at most `largest` jobs. A worker reads a whole
    batch at once (workers.channel.read_jobs), so a cap keeps one busy worker from holding jobs an idle
    one could start."""
    if not jobs:
        return []
    size = max(1, min(largest, -(-len(jobs) // workers)))
    return [jobs[i:i + size] for i in range(0, len(jobs), size)]


def exit_code_of(raw: int | None) -> int:
    """A documented exit code (EXIT_*) for a frontier process's raw exit status: one it chose
    stands; killed by a signal (negative), an odd status (an OOM kill's 247) or unknown: EXIT_CRASH."""
    return raw if raw in EXIT_CODES else EXIT_CRASH


@dataclass(frozen=True, kw_only=True, slots=True)
class RunInfo:
    """Who runs the frontier process and as part of which run (one run_frontier.py invocation)."""

    run_id: str
    started_at: float  # time.time() when run_frontier.py started
    supervisor_pid: int
    restarts: int = 0  # times the supervisor restarted the crawl processes in this run before this one
    log_level: str = "warning"  # run_frontier.py --log-level (frontier.crawl.child.configure_logging)


@dataclass(frozen=True, kw_only=True, slots=True)
class Channels:
    """What the supervisor shares with one frontier process and its workers; fresh on each restart.

    `jobs` carries JobBatch messages and one None per worker at the end, `results` ResultBatch
    messages. `stop`: stop leasing and finish (a user's SIGINT/SIGTERM, a restart). `worker_died`: set
    by the supervisor before it stops the frontier for a restart: the leases still out belong to a dead
    worker, so each counts an attempt (Frontier.abandon_leases). `snapshot_bytes`: the Bloom filter's
    size, kept current by the frontier process, so the supervisor's stop timeout fits the snapshot.
    `bloom_name`: the shared Bloom filter's name, set by the frontier process once it exists (empty
    until then, and for a Redis crawl, which has none): workers start with the frontier process, not
    after its "ready", and read it when they first need it. `in_flight`: each worker's fetches in flight,
    written by that worker alone (index: its worker id), read by the console.
    """

    jobs: Any  # multiprocessing.Queue[JobBatch | None]
    results: Any  # multiprocessing.Queue[ResultBatch]
    stop: EventType
    worker_died: EventType
    snapshot_bytes: Any  # a shared ctypes c_longlong (RawValue "q"): one writer, no lock needed
    bloom_name: Any  # a shared ctypes char array (RawArray "c"): written once, before any job is sent
    in_flight: Any  # a shared ctypes int array (RawArray "i"), one per worker: no lock, one writer each

    @classmethod
    def create(cls, ctx: Any, cfg: CrawlConfig) -> "Channels":
        n = cfg.workers.processes
        return cls(jobs=ctx.Queue(), results=ctx.Queue(maxsize=max(1024, 4 * n * cfg.workers.concurrency)),
                   stop=ctx.Event(), worker_died=ctx.Event(), snapshot_bytes=ctx.RawValue("q", 0),
                   bloom_name=ctx.RawArray("c", BLOOM_NAME_BYTES + 1), in_flight=ctx.RawArray("i", n))

    def close(self) -> None:
        """Close this process's ends of the queues without waiting to flush them (a reader may be gone)."""
        for q in (self.jobs, self.results):
            q.cancel_join_thread()
            q.close()


def disk_full_message(cfg: CrawlConfig, e: BaseException) -> str | None:
    """The message for an out-of-space error (DiskFull, or an OSError from the crawl log or a snapshot), else None."""
    if isinstance(e, DiskFull):
        return str(e)
    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"{e.filename or cfg.storage.data_dir}: the disk is full ({e.strerror}); free space and rerun to resume"
    return None


class FrontierService:
    """The frontier process's loop around a `Frontier`, its queues, crawl log and progress line."""

    def __init__(self, cfg: CrawlConfig, channels: Channels, run: RunInfo,
                 metrics: MetricsServer | None = None, console: ConsoleServer | None = None) -> None:
        self.cfg = cfg
        self.metrics = metrics  # output.metrics: answered once a turn (frontier.crawl.metrics)
        self.console = console  # the operator's console: answered once a turn (frontier.console)
        self.channels = channels
        self.jobs = channels.jobs
        self.results = channels.results
        self.stop = channels.stop
        self.run_info = run
        # imported here, not at the top: the supervisor imports this module for Channels and must not wait
        # for LMDB and numpy before it spawns anything
        from frontier.crawl.scheduler import Frontier

        from frontier.console.control import Controls  # the operator's actions, applied on this loop
        from frontier.console.inbox import ACTIONS_DIR, ActionInbox

        self.log = CrawlLog(cfg.log_path)
        try:
            self.frontier: Frontier = Frontier.from_config(
                cfg, on_event=self.log.write if console is None else self._record)
        except BaseException:
            self.log.close()
            raise
        self.controls = Controls.from_config(self.frontier, cfg, on_stop=channels.stop.set)
        try:
            self.inbox = ActionInbox(cfg.storage.data_dir / ACTIONS_DIR)
        except BaseException:
            self.frontier.close()
            self.log.close()
            raise
        self.target_in_flight = cfg.workers.processes * cfg.workers.concurrency
        self.per_host = 1 if cfg.politeness.delay > 0 else cfg.politeness.max_per_host
        self.started = time.monotonic()
        self.progress = Progress(cfg.output.progress, cfg.output.progress_interval)
        self._next_progress = time.monotonic() + self._progress_interval()
        self.messages = {"jobs": 0, "results": 0}  # queue messages this process sent and received
        self.links_received = 0  # page outlinks the workers found (per page distinct, in scope), known ones included
        self.known_links = 0  # of them, left out as held by the Bloom filter (FetchResult.known_links)
        self.publish_snapshot_size()
        self.live = None
        if console is not None:
            from frontier.console.live import LiveView

            self.live = LiveView(self.frontier, stats=self.stats, started_at=run.started_at,
                                 supervisor_pid=run.supervisor_pid, controls=self.controls,
                                 worker_in_flight=channels.in_flight)

    def _record(self, record: dict[str, Any]) -> None:
        """A crawl log record: written, and counted by the console."""
        self.log.write(record)
        if self.live is not None:
            self.live.observe(record)

    def publish_snapshot_size(self) -> None:
        """Tell the supervisor how much a clean stop has to write (the filter grows during a crawl)."""
        if self.cfg.storage.backend == "lmdb":  # a Redis crawl has no Bloom filter here
            self.channels.snapshot_bytes.value = self.frontier.seen.bloom.nbytes

    def run(self) -> int:
        """Crawl until done (EXIT_DONE, or EXIT_UNREACHABLE if seeds could not be reached) or stopped
        (EXIT_STOPPED)."""
        self.frontier.add_seeds(self.cfg.seeds)
        while not self.stop.is_set():
            self._take_results(self._wait_time())
            self._hand_out_jobs()
            self.log.flush()  # one write a turn: the results' records, expired leases and robots skips
            self.publish_snapshot_size()
            self._update_progress()
            self._answer_metrics()
            self.inbox.poll(self.controls.apply)
            if self.frontier.done:
                return EXIT_UNREACHABLE if self.frontier.unreachable_seeds() else EXIT_DONE
        # an orphan's workers died with the supervisor: no result is coming
        grace = 0.0 if orphaned(self.run_info.supervisor_pid) else STOP_GRACE
        deadline = time.monotonic() + grace
        while self.frontier.in_flight and time.monotonic() < deadline:
            self._take_results(0.1)
            self.log.flush()
            self._answer_metrics()
        return EXIT_STOPPED

    def _answer_metrics(self) -> None:
        if self.metrics is not None:
            self.metrics.answer(self.stats)
        if self.console is not None and self.live is not None:
            self.live.state = "stopping" if self.stop.is_set() else "running"
            self.live.tick()
            self.console.answer(self.live.handle)

    def stats(self) -> dict[str, Any]:
        """Frontier.stats() plus the worker slots, and what caps in flight below them when politeness does:
        every known host has its most fetches out while more URLs wait (a crawl of few hosts).

        The seen-test's counts include the workers' share: links a worker left out because the shared
        filter holds them were checked, found in the filter, and trusted (probabilistic mode), as the
        frontier's own seen-test would have; `worker_known` says how many."""
        stats = self.frontier.stats()
        if self.known_links:
            seen = stats["seen"] = dict(stats["seen"])
            seen["worker_known"] = self.known_links
            for key in ("checked", "bloom_maybe", "trusted_maybe"):
                seen[key] = seen.get(key, 0) + self.known_links
        stats["slots"] = self.target_in_flight
        hosts = int(stats["hosts"])
        cap = hosts * self.per_host
        # a delay caps the rate between fetches too (in flight 0 while each host waits), so it is named
        # whenever more URLs wait than are in flight
        delayed = self.cfg.politeness.delay > 0
        if cap < self.target_in_flight and (delayed or stats["in_flight"] >= cap) and \
                stats["queued"] > stats["in_flight"]:
            stats["in_flight_cap"] = f"{self.cfg.politeness.host_cap} x {hosts} host{'s' if hosts != 1 else ''}"
        return stats

    def _update_progress(self) -> None:
        # Not on every loop turn: stats() counts the Bloom filter's set bits, tens of ms at the
        # default capacity, which once cut the crawl rate about fivefold. Nor at once: the first one
        # comes after an interval, so a crawl's first jobs go out first.
        now = time.monotonic()
        if self.progress.mode == "off" or now < self._next_progress:
            return
        self._next_progress = now + self._progress_interval()
        self.progress.update(self.stats(), force=True)  # the throttle is here

    def _progress_interval(self) -> float:
        return RICH_REFRESH if self.progress.mode == "rich" else self.cfg.output.progress_interval

    def _wait_time(self) -> float:
        if self.frontier.in_flight:
            return 0.05
        ready_in = self.frontier.next_ready_in()
        return 0.2 if ready_in is None else min(max(ready_in, 0.0), 0.2)

    def _take_results(self, timeout: float) -> None:
        batch: list[FetchResult] = []
        try:
            batch.extend(self.results.get(timeout=timeout) if timeout > 0 else self.results.get_nowait())
            self.messages["results"] += 1
            while len(batch) < MAX_RESULTS_PER_BATCH:
                batch.extend(self.results.get_nowait())
                self.messages["results"] += 1
        except queue.Empty:
            pass
        if batch:
            self.frontier.report(batch)
            known = sum(r.known_links for r in batch)
            self.known_links += known
            self.links_received += known + sum(len(r.outlinks) for r in batch)

    def _hand_out_jobs(self) -> None:
        self.frontier.expire()  # even with every slot taken: a stuck worker may hold them all
        free = self.target_in_flight - self.frontier.in_flight
        if free <= 0:
            return
        workers = self.cfg.workers
        largest = max(1, workers.concurrency // JOB_BATCH_SHARE)
        for batch in job_batches(self.frontier.lease(free), workers.processes, largest):
            self.jobs.put(batch)
            self.messages["jobs"] += 1

    def _segment(self, exit_code: int) -> dict[str, Any]:
        """What this frontier process did, for the run's record; and the crawl's state now."""
        stats = self.stats()
        return {
            "exit_code": exit_code,
            "done": exit_code in (EXIT_DONE, EXIT_UNREACHABLE),
            "elapsed_seconds": round(time.monotonic() - self.started, 3),
            # this process's own counts, not a difference of the crawl-wide ones (other instances add to those)
            "fetched": stats["instance"]["fetched"],
            "attempts": stats["instance"]["attempts"],
            "outcomes": stats["instance"]["outcomes"],
            "own_requests": stats["instance"]["own"],
            "reasons": stats["reasons"],
            "state": {
                "fetched": stats["fetched"], "attempts": stats["attempts"], "queued": stats["queued"],
                "in_flight": stats["in_flight"], "hosts": stats["hosts"], "seen": stats["seen"],
                "unreachable_seeds": [list(s) for s in self.frontier.unreachable_seeds()],
                # the low queues' URLs per host and pattern: once done, those skipped as suspected traps
                "suspected": self.frontier.suspected(),
                "crawl_log": str(self.cfg.log_path),
                # of this frontier process: queue messages (job batches sent, result batches received), and the
                # outlinks it received (before the seen-test's per-batch de-duplication, unlike seen.checked)
                "queue_messages": dict(self.messages),
                "links_received": self.links_received,
            },
        }

    def close(self, exit_code: int) -> None:
        """Tell workers to finish, count a dead worker's leases, snapshot the frontier, write the records."""
        restart = self.channels.worker_died.is_set()
        if orphaned(self.run_info.supervisor_pid):
            self.jobs.cancel_join_thread()  # nobody reads the jobs any more: do not wait on the pipe at exit
        for _ in range(self.cfg.workers.processes):
            self.jobs.put(None)
        if restart:  # after the grace: the results that came are in, the rest were the dead worker's
            self.frontier.abandon_leases("worker_died")
            self.log.flush()
        self.progress.update(self.stats(), force=True)
        self.progress.close()
        segment = self._segment(exit_code)
        try:
            self.frontier.close()
        finally:
            self.log.close()
        history = RunHistory(self.cfg.storage.data_dir)
        history.record(self.run_info.run_id, self.run_info.started_at, segment, final=not restart)


def run_frontier_process(cfg: CrawlConfig, channels: Channels, ready: Connection, run: RunInfo) -> None:
    """Target of the spawned frontier process."""

    def request_stop(signum: int, frame: object) -> None:
        channels.stop.set()

    signal.signal(signal.SIGTERM, request_stop)  # also the death signal: the supervisor died
    signal.signal(signal.SIGINT, request_stop)
    supervised("frontier", run.supervisor_pid, on_orphaned=channels.stop.set, exit_code=EXIT_STOPPED,
               exit_after=lambda: stop_timeout(channels.snapshot_bytes.value), detail=str(cfg.storage.data_dir),
               log_level=run.log_level)
    metrics = console = None
    try:
        if cfg.output.metrics is not None:  # first: a port in use is refused before the data dir is opened
            from frontier.crawl.metrics import MetricsServer

            metrics = MetricsServer.start(cfg.output.metrics, restarts=run.restarts)
            log.info("serving metrics on http://%s:%d/metrics", *metrics.address)
        if cfg.console.enabled:
            from frontier.console.server import ConsoleServer

            console = ConsoleServer.start(cfg.console, cfg.storage.data_dir)
            if cfg.output.progress != "off":
                print(f"console: {console.url}", flush=True)
        service = FrontierService(cfg, channels, run, metrics, console)
        if console is not None:
            console.publish()
    except (FrontierError, OSError) as e:
        if metrics is not None:
            metrics.close()
        if console is not None:
            console.close()
        full = disk_full_message(cfg, e)
        code = EXIT_CONFIG if full is None else EXIT_DISK_FULL
        if full is None and not isinstance(e, FrontierError):  # a file of the data dir or the crawl log
            full = f"{e.filename}: {e.strerror}" if e.filename else str(e)
        ready.send(("error", full or str(e), code))
        sys.exit(code)
    # the workers' shared Bloom filter; a Redis crawl has none (None)
    bloom_name = service.frontier.seen.bloom.name if cfg.storage.backend == "lmdb" else None
    if bloom_name is not None:
        channels.bloom_name.value = bloom_name.encode()
    ready.send(("ready", bloom_name, None))
    # not stats(): it counts the Bloom filter's bits, which reads every page of it (120 ms and 24 MB of
    # shared memory made resident at the default capacity, measured)
    log.info("crawl state open: %d pages fetched, %d attempts so far (crawl-wide)", service.frontier.fetched,
             service.frontier.attempts)
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
        finally:
            if metrics is not None:
                metrics.close()
            if console is not None:
                console.close()
    log.info("exiting with code %d", code)
    sys.exit(code)
