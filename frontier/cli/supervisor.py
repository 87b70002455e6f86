"""`frontier crawl --config crawl.yaml [--log-level debug|info|warning] [--fresh [--yes]]`: run (or resume) a
crawl; also `python -m frontier crawl` and `python run_frontier.py --config ...`, the same code. `frontier fresh
--config crawl.yaml [--yes]` only deletes.

The supervisor: reads the config and checks what can be checked before anything starts (frontier.cli.prestart:
the YAML, memory for the Bloom filter and the workers; the output paths), starts the mock web for a demo config
(frontier.cli.demo_web), runs the frontier process and N fetcher workers under a `Supervisor`
(frontier.cli.supervision: it restarts them all on fresh queues when a worker dies and cleans up shared memory
whatever happens), forwards SIGINT/SIGTERM as a clean stop, records the run and prints its summary
(frontier.cli.crawl_summary). Its children die with it, also when it is killed with SIGKILL (frontier.crawl.child).
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
overlap; but no more processes start at once than there are cores (supervision.eager_workers), the others once
the first worker has imported. A worker's target is `workers.worker_target`, so a spawned worker imports
none of them; the spawn start method re-runs the main script in every child (as __mp_main__), so
run_frontier.py and the `frontier` script (frontier.cli.commands) import this module only when run as the main.
This module and its parts (supervision, demo_web, crawl_summary) sit above `frontier` and `workers` (they start
both), so they may import workers, and frontier.testing for the demo's mock web.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

from frontier.cli.crawl_summary import print_summary
from frontier.cli.demo_web import start_demo_web
from frontier.cli.prestart import check_memory, check_output_path, read_config
from frontier.cli.supervision import Supervisor
from frontier.config import CrawlConfig
from frontier.crawl.child import LOG_LEVELS, configure_logging
from frontier.crawl.log import RunHistory
from frontier.crawl.process import EXIT_CONFIG, EXIT_CRASH, EXIT_DISK_FULL, EXIT_STOPPED, RunInfo
from frontier.crawl.progress import banner
from frontier.errors import ConfigError, DiskFull, StorageError
from frontier.seen.datadir import prepare_data_dir
from frontier.seen.shm import reclaim_orphans


def check_outputs(cfg: CrawlConfig) -> None:
    """ConfigError when the crawl log or a WARC file could not be written."""
    if cfg.output.log is not None:  # the default lies in the data dir, checked by prepare_data_dir
        check_output_path(cfg.output.log, "output.log")
    if cfg.output.warc is not None:
        from workers.warc import worker_warc_path

        for worker_id in range(cfg.workers.processes):
            check_output_path(worker_warc_path(cfg.output.warc, worker_id), "output.warc")


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
    from frontier.cli.fresh import start_fresh  # LMDB's names: only when asked for

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
            from frontier.cli.fresh import start_fresh  # LMDB's names: only when asked for (start-up is on the clock)

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
