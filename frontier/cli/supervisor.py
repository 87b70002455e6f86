"""`frontier crawl --config crawl.yaml [--log-level debug|info|warning] [--fresh [--yes]]`: run (or resume) a
crawl; also `python -m frontier crawl` and `python run_frontier.py --config ...`, the same code. `frontier fresh
--config crawl.yaml [--yes]` only deletes.

The supervisor: reads the config and checks what can be checked before anything starts (frontier.cli.prestart:
the YAML, memory for the Bloom filter and the workers; the output paths), starts the mock web for a demo config,
spawns the frontier process and N fetcher workers, restarts them all on fresh queues when a worker dies (see
Supervisor.supervise), forwards SIGINT/SIGTERM as a clean stop, and cleans up shared memory whatever happens. Its
children die with it, also when it is killed with SIGKILL (frontier.crawl.child).
Exit codes: 0 crawl done, 2 bad config or unusable data dir, 3 disk full, 4 seeds unreachable (a
rerun tries them again), 130 stopped (rerun to resume), 1 anything else. Every error that stops it
before the crawl starts is one line on stderr.

--log-level: stdlib logging of every process (this one, the frontier process, the workers), one format
on stderr (frontier.crawl.child.configure_logging); "warning" by default. --fresh: start over, deleting what the
crawl created (frontier.cli.fresh) after a confirmation on the terminal, or --yes, and then crawl; without a
terminal and without --yes it is refused (exit 2).

Start-up is on the clock of a small crawl (the first request within 0.3 s is the goal). The supervisor
imports no numpy, LMDB or aiohttp before it spawns (its checks, frontier.seen.sizing and frontier.seen.datadir, are
plain Python). The frontier process and the workers are spawned together, not the workers after the
frontier's "ready": each spends most of its start-up importing (numpy and LMDB; aiohttp), so the two
overlap; but no more processes start at once than there are cores (`eager_workers`), the others once
the first worker has imported. A worker's target is `workers.worker_target`, so a spawned worker imports
none of this module; the spawn start method re-runs the main script in every child (as __mp_main__), so
run_frontier.py and the `frontier` script (frontier.cli.commands) import this module only when run as the main.
This module sits above `frontier` and `workers` (it starts both), so it may import workers.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import multiprocessing as mp
import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from frontier.cli.prestart import check_memory, check_output_path, read_config
from frontier.config import CrawlConfig
from frontier.crawl.child import LOG_LEVELS, configure_logging
from frontier.crawl.log import RunHistory, other_reasons
from frontier.crawl.process import (EXIT_CONFIG, EXIT_CRASH, EXIT_DISK_FULL, EXIT_STOPPED, EXIT_UNREACHABLE, Channels,
                                    RunInfo, exit_code_of, run_frontier_process, stop_timeout)
from frontier.crawl.progress import banner
from frontier.errors import ConfigError, DiskFull, StorageError
from frontier.seen.datadir import prepare_data_dir
from frontier.seen.shm import reclaim_orphans, unlink_all
from workers import worker_target

if TYPE_CHECKING:
    from multiprocessing.synchronize import Event as EventType

STARTUP_TIMEOUT = 120.0
DEFERRED_WORKERS_AFTER = 2.0  # seconds: the other workers start then even if the first has not imported yet
WORKER_EXIT_GRACE = 10.0
RESTART_GRACE = 1.0  # seconds the other workers get to stop when a dead worker restarts the crawl processes
MAX_RESTARTS_PER_WORKER = 100
log = logging.getLogger("frontier.cli.supervisor")


def eager_workers(processes: int) -> int:
    """How many workers start beside the frontier process; the others once the first has imported aiohttp.

    Start-up is CPU-bound (imports: numpy and LMDB in the frontier process, aiohttp in each worker): on 2
    cores, 1 frontier + 2 workers importing at once finish together, later than 1 + 1 would, and the first
    request waits for the frontier and one worker only. So as many processes start at once as there are
    cores; the crawl's total start-up CPU is the same either way."""
    return max(1, min(processes, (os.cpu_count() or 1) - 1))


def check_outputs(cfg: CrawlConfig) -> None:
    """ConfigError when the crawl log or a WARC file could not be written."""
    if cfg.output.log is not None:  # the default lies in the data dir, checked by prepare_data_dir
        check_output_path(cfg.output.log, "output.log")
    if cfg.output.warc is not None:
        from workers.warc import worker_warc_path

        for worker_id in range(cfg.workers.processes):
            check_output_path(worker_warc_path(cfg.output.warc, worker_id), "output.warc")


def start_demo_web(cfg: CrawlConfig):
    """Serve the built-in mock web on free loopback ports; point seeds and scope at it."""
    from frontier.testing import SiteSpec
    from frontier.testing.mockweb import MockWebProcess

    demo = cfg.demo
    spec = SiteSpec(pages=demo.pages, hosts=demo.hosts, links_per_page=demo.links_per_page, seed=demo.seed,
                    hostile=demo.hostile)
    ports_file = Path(cfg.storage.data_dir) / "demo_ports.json"
    try:  # a rerun serves the same web on the same ports, so the crawl resumes instead of starting anew
        web = MockWebProcess(spec, ports=json.loads(ports_file.read_text()) if ports_file.exists() else None)
    except Exception:
        web = MockWebProcess(spec)
    ports_file.write_text(json.dumps(web.ports))
    hosts = tuple(url.split("://", 1)[1] for url in web.base_urls)
    scope = dataclasses.replace(cfg.scope, allowed_hosts=hosts)
    print(f"demo: mock web of {demo.pages} pages on {', '.join(hosts)}", flush=True)
    return web, dataclasses.replace(cfg, seeds=(web.seed,), scope=scope)


def describe_exit(raw: int | None) -> str:
    """How a frontier process ended, in words, for a raw status that is not a documented exit code."""
    if raw is None:
        return "the frontier process did not exit"
    if raw < 0:
        try:
            name = signal.Signals(-raw).name
        except ValueError:
            name = f"signal {-raw}"
        why = " (kill -9, or the kernel's out-of-memory killer)" if -raw == signal.SIGKILL else ""
        return f"the frontier process was killed by {name}{why}"
    return f"the frontier process exited with status {raw}"


class Supervisor:
    """Owns the child processes and the channels between them."""

    def __init__(self, cfg: CrawlConfig, run: RunInfo) -> None:
        self.cfg = cfg
        self.run = run
        self.ctx = mp.get_context("spawn")
        self.frontier: mp.Process | None = None
        self.workers: list[mp.Process] = []
        self.imported: EventType | None = None  # set by the first worker of a start once it has imported
        self.restarts = 0
        self.bloom_name: str | None = None
        self.started = False  # a frontier process of this run got ready: the run has a record
        self.ready = False  # the current frontier process got ready (it will send the workers their sentinels)
        self.failure: str | None = None  # how the frontier process ended when it was not its own choice
        self.stopping = False  # SIGINT/SIGTERM: stop and do not restart
        self.channels = Channels.create(self.ctx, cfg)

    def request_stop(self) -> None:
        self.stopping = True
        self.channels.stop.set()

    def start(self) -> bool:
        """Start a frontier process and the workers together, then wait for the frontier's "ready"; False
        (said on stderr) if it died or hung first. A startup error it reports (data dir, disk full) is
        raised as StorageError. Either way, `shutdown` then ends the workers at once."""
        self.ready = False
        receive, send = self.ctx.Pipe(duplex=False)
        run = dataclasses.replace(self.run, restarts=self.restarts)
        # kept while the workers run: a spawned child opens the named semaphore when it unpickles its args,
        # and the parent's Event unlinks the name when it is garbage-collected
        self.imported = imported = self.ctx.Event()
        self.workers = []
        # the first workers before the frontier process: their start-up (aiohttp) is the longer one
        self.spawn_workers(eager_workers(self.cfg.workers.processes), imported)
        self.frontier = self.ctx.Process(target=run_frontier_process, name="frontier",
                                         args=(self.cfg, self.channels, send, run))
        self.frontier.start()
        send.close()
        log.info("started the frontier process (pid %d) and %d of %d workers", self.frontier.pid,
                 len(self.workers), self.cfg.workers.processes)
        began = time.monotonic()
        deadline = began + STARTUP_TIMEOUT
        while time.monotonic() < deadline:
            deferred = not self.stopping and len(self.workers) < self.cfg.workers.processes
            if deferred and (imported.is_set() or time.monotonic() - began > DEFERRED_WORKERS_AFTER):
                self.spawn_workers(self.cfg.workers.processes, imported)
                log.debug("started the other workers after %.3f s", time.monotonic() - began)
                continue
            if receive.poll(0.01 if deferred else 0.2):
                try:
                    kind, value, code = receive.recv()
                except EOFError:
                    break
                if kind == "error":
                    self.frontier.join()
                    raise (DiskFull if code == EXIT_DISK_FULL else StorageError)(value)
                self.bloom_name = value
                self.started = self.ready = True
                log.debug("the frontier process is ready after %.3f s", time.monotonic() - began)
                if deferred:
                    imported.wait(max(0.0, DEFERRED_WORKERS_AFTER - (time.monotonic() - began)))
                    self.spawn_workers(self.cfg.workers.processes, imported)
                return True
            if not self.frontier.is_alive():
                break
        self.frontier.join(0.5)
        self.failure = f"{describe_exit(self.frontier.exitcode)} before it was ready" + (
            "" if self.frontier.exitcode is not None else f" within {STARTUP_TIMEOUT:g} s")
        print(f"frontier: {self.failure}", file=sys.stderr, flush=True)
        return False

    def spawn_workers(self, up_to: int, imported: EventType) -> None:
        """Start workers one by one until `up_to` run; a stop request (SIGINT/SIGTERM) ends the spawning at
        once. They read the Bloom filter's name from the channels when they need it (it is not known yet)."""
        for worker_id in range(len(self.workers), up_to):
            if self.stopping:
                return
            proc = self.ctx.Process(target=worker_target, name=f"worker-{worker_id}",
                                    args=(imported, worker_id, self.cfg, self.channels.jobs, self.channels.results,
                                          self.channels.bloom_name, self.run.supervisor_pid, self.run.log_level,
                                          self.channels.in_flight))
            proc.start()
            self.workers.append(proc)

    def supervise(self) -> int:
        """Run the workers until the frontier process exits; return the run's exit code (EXIT_*).

        A dead worker is not replaced alone: killed inside a queue operation, it can hold a lock of
        the shared queues for good (multiprocessing.Queue holds its read lock while a reader waits
        for a job, its write lock while a result is written) and so stall every other process. The
        frontier stops instead (it takes the results that arrive within its grace, then counts an
        attempt for each lease still out: Channels.worker_died; every leased URL stays queued in
        LMDB), the other workers stop, and a new frontier and new workers resume the crawl on fresh
        channels.
        """
        while True:
            dead = self._wait()
            assert self.frontier is not None
            if dead is None:
                return self._frontier_exit()
            self.channels.worker_died.set()
            if self.restarts >= MAX_RESTARTS_PER_WORKER * len(self.workers):
                print("frontier: workers keep dying; stopping", file=sys.stderr, flush=True)
                self.channels.stop.set()
                self.frontier.join(stop_timeout(self.channels.snapshot_bytes.value))
                return self._frontier_exit()
            self.restarts += 1
            print(f"frontier: worker {dead[0]} exited with {dead[1]}; restarting the frontier and workers",
                  file=sys.stderr, flush=True)
            self.shutdown(worker_grace=RESTART_GRACE)
            code = self.frontier.exitcode
            if self.stopping or code is None or (code >= 0 and code != EXIT_STOPPED):
                return self._frontier_exit()  # done meanwhile, a user stop, or an error
            self.channels = Channels.create(self.ctx, self.cfg)
            if not self.start():
                return EXIT_CRASH

    def _frontier_exit(self) -> int:
        assert self.frontier is not None
        raw = self.frontier.exitcode
        code = exit_code_of(raw)
        if raw != code:
            self.failure = describe_exit(raw)
            print(f"frontier: {self.failure}; rerun the same command to resume", file=sys.stderr, flush=True)
        return code

    def _wait(self) -> tuple[int, int] | None:
        """Until the frontier process exits (None) or a worker dies while it runs: (index, exit code)."""
        assert self.frontier is not None
        stop = self.channels.stop
        while self.frontier.is_alive():
            self.frontier.join(0.25)
            for i, proc in enumerate(self.workers):
                # exit code 0 is a worker that got its end-of-crawl sentinel; anything else died
                if not proc.is_alive() and proc.exitcode != 0 and self.frontier.is_alive() and not stop.is_set():
                    return i, proc.exitcode
        return None

    def shutdown(self, worker_grace: float = WORKER_EXIT_GRACE) -> None:
        """Stop the frontier (cut short only after stop_timeout: it scales with the Bloom snapshot),
        let workers finish on their sentinel, terminate stragglers; unlink shared memory."""
        self.channels.stop.set()
        if self.frontier is not None and self.frontier.is_alive():
            self.frontier.join(stop_timeout(self.channels.snapshot_bytes.value))
            if self.frontier.is_alive():
                self.frontier.kill()
                self.frontier.join()
        if not self.ready or (self.frontier is not None and (self.frontier.exitcode or 0) < 0):
            worker_grace = 0.0  # failed to start, or killed by a signal: it sent the workers no sentinel to wait for
        deadline = time.monotonic() + worker_grace
        for proc in self.workers:
            proc.join(max(0.0, deadline - time.monotonic()))
        for proc in self.workers:
            if proc.is_alive():
                proc.terminate()
                proc.join(2.0)
            if proc.is_alive():
                proc.kill()
                proc.join()
        self.channels.close()
        if self.bloom_name:
            unlink_all(self.bloom_name)  # what a frontier process that died without cleanup left


def print_counts(label: str, counts: dict[str, int]) -> None:
    if counts:
        print(f"{label}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])))


def print_summary(cfg: CrawlConfig, run: RunInfo, code: int) -> None:
    """What this run did, from summary.json (written by the frontier process when it stopped)."""
    history = RunHistory(cfg.storage.data_dir)
    summary = history.summary()
    last = summary.get("last_run") or {}
    if code not in (0, EXIT_UNREACHABLE, EXIT_STOPPED) or last.get("run_id") != run.run_id:
        return
    headline = "crawl done" if summary["done"] else "crawl stopped; rerun the same command to resume"
    runs = summary["runs"]
    print(f"\n{headline}: {last['fetched']} pages fetched ({last['attempts']} attempts) in {last['elapsed_seconds']} s "
          f"({last['pages_per_second']} pages/s) by this instance; crawl-wide: {summary['fetched']} pages fetched "
          f"({summary['attempts']} attempts) over {runs} run{'s' if runs != 1 else ''}, "
          f"{summary['queued']} still queued")
    print_counts("outcomes (this instance's pages)", last.get("outcomes", {}))
    print_counts("the crawler's own requests (this instance)", last.get("own_requests", {}))
    print_counts("links refused and other events (this instance)", other_reasons(last))
    from frontier.cli.ops import format_suspected

    for line in format_suspected(summary.get("suspected") or [], "summary"):
        print(line.replace("DATA_DIR", str(cfg.storage.data_dir)))
    print(f"crawl log: {summary['crawl_log']}\nsummary:   {history.summary_path}\nruns:      {history.runs_path}")
    if cfg.output.warc is not None:
        from workers.warc import worker_warc_path

        n = cfg.workers.processes
        more = f" ... {worker_warc_path(cfg.output.warc, n - 1).name}" if n > 1 else ""
        print(f"warc:      {worker_warc_path(cfg.output.warc, 0)}{more} (one file per worker process)")
    sys.stdout.flush()
    unreachable = summary.get("unreachable_seeds") or []
    if code == EXIT_UNREACHABLE and unreachable:
        for url, why in unreachable:
            print(f"frontier: seed {url} unreachable: {why}", file=sys.stderr)
        them = "it" if len(unreachable) == 1 else "them"
        print(f"frontier: {len(unreachable)} seed{'s' if len(unreachable) != 1 else ''} could not be reached; "
              f"rerun the same command to try {them} again", file=sys.stderr, flush=True)


def start_fresh(cfg: CrawlConfig, *, confirmed: bool) -> None:
    """--fresh: delete what the crawl created (frontier.cli.fresh) once confirmed: `confirmed` (--yes), else a "y"
    typed on the terminal; first, shared memory that dead crawls left (frontier.seen.shm.reclaim_orphans).
    ConfigError without a terminal to ask on; StorageError when refused or declined."""
    from frontier.cli.fresh import FreshStart

    reclaim_orphans()  # shared memory whose owner died: this crawl's if it was killed, or any other's
    plan = FreshStart.of(cfg)
    if plan.empty:
        log.info("--fresh: %s", plan.describe())
        return
    if not confirmed:
        if not sys.stdin.isatty():
            raise ConfigError(f"--fresh would delete {plan.describe()}; stdin is not a terminal to confirm it on: "
                              "add --yes")
        try:
            answer = input(f"--fresh deletes {plan.describe()}. Delete? [y/N] ")
        except EOFError:
            answer = ""
        if answer.strip().lower() not in ("y", "yes"):
            raise StorageError("--fresh: not confirmed; nothing deleted")
    plan.run()
    print(f"fresh start: deleted {plan.describe()}", flush=True)


def crawl_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, type=Path, help="crawl YAML (see configs/crawl.yaml)")
    parser.add_argument("--log-level", choices=LOG_LEVELS, default="warning",
                        help="logging of every crawl process, on stderr (default warning)")
    parser.add_argument("--fresh", action="store_true",
                        help="start over: delete what the crawl created in storage.data_dir (and a Redis crawl's "
                             "keys) after a confirmation, and then crawl; to delete only: `frontier fresh`")
    parser.add_argument("--yes", action="store_true", help="with --fresh: delete without asking")


def fresh_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, type=Path, help="the crawl's YAML")
    parser.add_argument("--yes", action="store_true", help="delete without asking")


def fresh(args: argparse.Namespace) -> int:
    """`frontier fresh`: the deletion of `crawl --fresh`, without the crawl."""
    try:
        start_fresh(read_config(args.config), confirmed=args.yes)
    except (ConfigError, StorageError) as e:
        print(f"frontier: {e}", file=sys.stderr)
        return EXIT_CONFIG
    return 0


def main(argv: list[str] | None = None) -> int:
    """run_frontier.py's entry: `crawl` without the subcommand's name."""
    parser = argparse.ArgumentParser(description="run or resume a crawl (the `frontier crawl` command)")
    crawl_arguments(parser)
    args = parser.parse_args(argv)
    args.parser = parser
    return crawl(args)


def crawl(args: argparse.Namespace) -> int:
    if args.yes and not args.fresh:
        args.parser.error("--yes confirms --fresh; give both")
    configure_logging(args.log_level, "supervisor")
    started = time.time()
    run = RunInfo(run_id=f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(started))}-{os.getpid()}",
                  started_at=started, supervisor_pid=os.getpid(), log_level=args.log_level)
    web = None
    try:
        cfg = read_config(args.config)
        cfg.require_seeds()
        reclaim_orphans()  # before this run makes its own: what dead crawls (kill -9) left in /dev/shm
        check_memory(cfg)
        if args.fresh:
            start_fresh(cfg, confirmed=args.yes)
        prepare_data_dir(Path(cfg.storage.data_dir))
        check_outputs(cfg)
        if cfg.demo is not None:
            web, cfg = start_demo_web(cfg)
        if cfg.output.progress != "off":
            print(banner(cfg), flush=True)
        supervisor = Supervisor(cfg, run)
    except (ConfigError, StorageError) as e:
        print(f"frontier: {e}", file=sys.stderr)
        return EXIT_CONFIG
    except KeyboardInterrupt:  # Ctrl-C before the crawl started (its handler is set below): nothing recorded yet
        print("frontier: stopped before the crawl started", file=sys.stderr)
        return EXIT_STOPPED

    def request_stop(signum: int, frame: object) -> None:
        supervisor.request_stop()

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    code = EXIT_CRASH
    try:
        code = supervisor.supervise() if supervisor.start() else EXIT_CRASH
    except StorageError as e:
        print(f"frontier: {e}", file=sys.stderr)
        code = EXIT_DISK_FULL if isinstance(e, DiskFull) else EXIT_CONFIG
    finally:
        supervisor.shutdown()
        if web is not None:
            web.close()
    if supervisor.started:  # a no-op when the last frontier process recorded the run itself
        try:
            RunHistory(cfg.storage.data_dir).close_run(
                run.run_id, run.started_at, code, supervisor.failure or "the frontier process did not record the run")
        except OSError as e:
            if code != EXIT_DISK_FULL:  # a full disk has been reported already
                print(f"frontier: cannot record the run in {e.filename}: {e.strerror}", file=sys.stderr)
    print_summary(cfg, run, code)
    return code
