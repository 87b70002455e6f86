"""python run_frontier.py --config crawl.yaml: run (or resume) a crawl.

The supervisor: reads the YAML (the only place it is parsed), builds the frozen config, starts the
mock web for a demo config, spawns the frontier process and N fetcher workers, restarts them all
on fresh queues when a worker dies (see Supervisor.supervise), forwards SIGINT/SIGTERM as a clean
stop, and cleans up shared memory whatever happens.
Exit codes: 0 crawl done, 2 bad config or unusable data dir, 3 disk full, 130 stopped (rerun to
resume), 1 anything else.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing as mp
import signal
import sys
import time
from pathlib import Path

import yaml

from frontier.bloom import unlink_all
from frontier.config import CrawlConfig, load_config
from frontier.errors import ConfigError, DiskFull, StorageError
from frontier.fplog import prepare_data_dir
from frontier.service import (EXIT_CONFIG, EXIT_CRASH, EXIT_DISK_FULL, EXIT_STOPPED, run_frontier_process,
                              summary_path)
from workers.fetcher import run_worker

STARTUP_TIMEOUT = 120.0
WORKER_EXIT_GRACE = 10.0
RESTART_GRACE = 1.0  # seconds the other workers get to stop when a dead worker restarts the crawl processes
MAX_RESTARTS_PER_WORKER = 100


def read_config(path: Path) -> CrawlConfig:
    """Parse and validate; ConfigError names the file and the key."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"{path} is not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a mapping of sections, got {type(data).__name__}")
    return load_config(data, base_dir=Path.cwd())


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


class Supervisor:
    """Owns the child processes and the queues between them."""

    def __init__(self, cfg: CrawlConfig) -> None:
        self.cfg = cfg
        self.ctx = mp.get_context("spawn")
        self.frontier: mp.Process | None = None
        self.workers: list[mp.Process] = []
        self.restarts = 0
        self.bloom_name: str | None = None
        self.stopping = False  # SIGINT/SIGTERM: stop and do not restart
        self._new_queues()

    def _new_queues(self) -> None:
        """Fresh queues and stop event, for a first start or a restart of the frontier and workers."""
        n = self.cfg.workers.processes
        self.jobs = self.ctx.Queue()
        self.results = self.ctx.Queue(maxsize=max(1024, 4 * n * self.cfg.workers.concurrency))
        self.stop = self.ctx.Event()

    def request_stop(self) -> None:
        self.stopping = True
        self.stop.set()

    def start_frontier(self) -> None:
        receive, send = self.ctx.Pipe(duplex=False)
        self.frontier = self.ctx.Process(target=run_frontier_process, name="frontier",
                                         args=(self.cfg, self.jobs, self.results, send, self.stop))
        self.frontier.start()
        send.close()
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while time.monotonic() < deadline:
            if receive.poll(0.2):
                try:
                    kind, value, code = receive.recv()
                except EOFError:
                    break
                if kind == "error":
                    self.frontier.join()
                    raise (DiskFull if code == EXIT_DISK_FULL else StorageError)(value)
                self.bloom_name = value
                return
            if not self.frontier.is_alive():
                break
        raise RuntimeError(f"the frontier process did not start (exit code {self.frontier.exitcode})")

    def spawn_worker(self, worker_id: int) -> mp.Process:
        proc = self.ctx.Process(target=run_worker, name=f"worker-{worker_id}",
                                args=(worker_id, self.cfg, self.jobs, self.results, self.bloom_name))
        proc.start()
        return proc

    def supervise(self) -> int:
        """Run the workers until the frontier process exits; return its exit code.

        A dead worker is not replaced alone: killed inside a queue operation, it can hold a lock of
        the shared queues for good (multiprocessing.Queue holds its read lock while a reader waits
        for a job, its write lock while a result is written) and so stall every other process. The
        frontier stops instead (it takes the results that arrive within its grace; every other
        leased URL stays queued in LMDB), the other workers stop, and a new frontier and new
        workers resume the crawl on fresh queues.
        """
        while True:
            self.workers = [self.spawn_worker(i) for i in range(self.cfg.workers.processes)]
            dead = self._wait()
            assert self.frontier is not None
            if dead is None:
                return self.frontier.exitcode if self.frontier.exitcode is not None else EXIT_CRASH
            if self.restarts >= MAX_RESTARTS_PER_WORKER * len(self.workers):
                print("frontier: workers keep dying; stopping", file=sys.stderr, flush=True)
                self.stop.set()
                self.frontier.join(WORKER_EXIT_GRACE)
                return self.frontier.exitcode if self.frontier.exitcode is not None else EXIT_CRASH
            self.restarts += 1
            print(f"frontier: worker {dead[0]} exited with {dead[1]}; restarting the frontier and workers",
                  file=sys.stderr, flush=True)
            self.shutdown(worker_grace=RESTART_GRACE)
            code = self.frontier.exitcode
            if self.stopping or code is None or (code >= 0 and code != EXIT_STOPPED):
                return code if code is not None else EXIT_CRASH  # done meanwhile, a user stop, or an error
            self._new_queues()
            self.start_frontier()

    def _wait(self) -> tuple[int, int] | None:
        """Until the frontier process exits (None) or a worker dies while it runs: (index, exit code)."""
        assert self.frontier is not None
        while self.frontier.is_alive():
            self.frontier.join(0.25)
            for i, proc in enumerate(self.workers):
                # exit code 0 is a worker that got its end-of-crawl sentinel; anything else died
                if not proc.is_alive() and proc.exitcode != 0 and self.frontier.is_alive() and not self.stop.is_set():
                    return i, proc.exitcode
        return None

    def shutdown(self, worker_grace: float = WORKER_EXIT_GRACE) -> None:
        """Let workers finish on their sentinel, then terminate stragglers; unlink shared memory."""
        self.stop.set()
        if self.frontier is not None and self.frontier.is_alive():
            self.frontier.join(WORKER_EXIT_GRACE)
            if self.frontier.is_alive():
                self.frontier.kill()
                self.frontier.join()
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
        for q in (self.jobs, self.results):
            q.cancel_join_thread()
            q.close()
        if self.bloom_name:
            unlink_all(self.bloom_name)  # only does anything if the frontier process died without cleanup


def print_summary(cfg: CrawlConfig, code: int) -> None:
    path = summary_path(cfg)
    if code in (0, EXIT_STOPPED) and path.exists():
        summary = json.loads(path.read_text())
        reasons = summary.get("reasons", {})
        print(f"\n{'crawl done' if summary['done'] else 'crawl stopped; rerun the same command to resume'}: "
              f"{summary['pages_this_run']} pages in {summary['elapsed_seconds']} s "
              f"({summary['pages_per_second']} pages/s), {summary['pages']} in all, {summary['queued']} still queued")
        if reasons:
            print("outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(reasons.items(), key=lambda kv: -kv[1])))
        print(f"crawl log: {summary['crawl_log']}\nsummary:   {path}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run or resume a crawl.")
    parser.add_argument("--config", required=True, type=Path, help="crawl YAML (see configs/crawl.yaml)")
    args = parser.parse_args(argv)
    web = None
    try:
        cfg = read_config(args.config)
        prepare_data_dir(Path(cfg.storage.data_dir))
        if cfg.demo is not None:
            web, cfg = start_demo_web(cfg)
    except (ConfigError, StorageError) as e:
        print(f"frontier: {e}", file=sys.stderr)
        return EXIT_CONFIG

    supervisor = Supervisor(cfg)

    def request_stop(signum: int, frame: object) -> None:
        supervisor.request_stop()

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    code = EXIT_CRASH
    try:
        supervisor.start_frontier()
        code = supervisor.supervise()
    except StorageError as e:
        print(f"frontier: {e}", file=sys.stderr)
        code = EXIT_DISK_FULL if isinstance(e, DiskFull) else EXIT_CONFIG
    finally:
        supervisor.shutdown()
        if web is not None:
            web.close()
    print_summary(cfg, code)
    return code


if __name__ == "__main__":
    sys.exit(main())
