"""The crawl's process supervision: the frontier process and N fetcher workers spawned, watched and restarted.

`Supervisor.start` spawns the frontier process and the first workers together (no more processes start at once
than there are cores: `eager_workers`; the others once the first worker has imported) and waits for the
frontier's "ready"; `supervise` runs them until the frontier process exits, restarting them all on fresh queues
when a worker dies; `shutdown` stops them and unlinks the shared memory whatever happened. A worker's target is
`workers.worker_target`, so a spawned worker imports none of this module. The crawl command
(frontier.cli.supervisor) drives it.
"""

from __future__ import annotations

import dataclasses
import logging
import multiprocessing as mp
import os
import signal
import sys
import time
from typing import TYPE_CHECKING

from frontier.config import CrawlConfig
from frontier.crawl.process import (EXIT_CRASH, EXIT_DISK_FULL, EXIT_STOPPED, Channels, RunInfo, exit_code_of,
                                    run_frontier_process, stop_timeout)
from frontier.errors import DiskFull, StorageError
from frontier.seen.shm import unlink_all
from workers import worker_target

if TYPE_CHECKING:
    from multiprocessing.synchronize import Event as EventType

STARTUP_TIMEOUT = 120.0
DEFERRED_WORKERS_AFTER = 2.0  # seconds: the other workers start then even if the first has not imported yet
WORKER_EXIT_GRACE = 10.0
RESTART_GRACE = 1.0  # seconds the other workers get to stop when a dead worker restarts the crawl processes
MAX_RESTARTS_PER_WORKER = 100
log = logging.getLogger(__name__)


def eager_workers(processes: int) -> int:
    """How many workers start beside the frontier process; the others once the first has imported aiohttp.

    Start-up is CPU-bound (imports: numpy and LMDB in the frontier process, aiohttp in each worker): on 2
    cores, 1 frontier + 2 workers importing at once finish together, later than 1 + 1 would, and the first
    request waits for the frontier and one worker only. So as many processes start at once as there are
    cores; the crawl's total start-up CPU is the same either way."""
    return max(1, min(processes, (os.cpu_count() or 1) - 1))


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
