"""`frontier crawl` with its supervisor, frontier process and workers each under cProfile (one .prof file each in a
directory): `python -m frontier.bench crawl` runs frontier this way (`command`) when FRONTIER_BENCH_PROFILE names a
directory. The command imports this module by its name, so the spawned children find the wrappers by it."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

PROFILE_ENV = "FRONTIER_BENCH_PROFILE"
# the folder the packages frontier and workers are in (a checkout, or site-packages): a crawl the benchmarks start
# there (frontier.cli.commands.crawl_command) imports this same frontier
PACKAGES = Path(__file__).resolve().parents[2]


def _profiled(target: Callable[..., Any], out: Path) -> Callable[..., Any]:
    import cProfile

    def wrapper(*a: Any, **kw: Any) -> Any:
        profile = cProfile.Profile()
        try:
            return profile.runcall(target, *a, **kw)
        finally:
            profile.dump_stats(str(out))

    return wrapper


def profiled_frontier_process(*args: Any) -> None:
    """Spawn target replacing frontier.crawl.process.run_frontier_process: the same, under cProfile."""
    from frontier.crawl.process import run_frontier_process

    _profiled(run_frontier_process, Path(os.environ[PROFILE_ENV]) / "frontier.prof")(*args)


def profiled_worker(imported: Any, worker_id: int, *args: Any) -> None:
    """Spawn target replacing workers.worker_target: the same, under cProfile."""
    from workers.fetcher import run_worker

    imported.set()
    _profiled(run_worker, Path(os.environ[PROFILE_ENV]) / f"worker-{worker_id}.prof")(worker_id, *args)


def run_profiled(profile_dir: str, config: str) -> int:
    """`frontier crawl --config config` with its frontier process and workers under cProfile."""
    os.environ[PROFILE_ENV] = profile_dir
    Path(profile_dir).mkdir(parents=True, exist_ok=True)
    from frontier.cli import supervisor as module

    # the spawned children pickle their target by name: point the supervisor at this module's wrappers
    module.run_frontier_process = profiled_frontier_process
    module.worker_target = profiled_worker
    return _profiled(module.main, Path(profile_dir) / "supervisor.prof")(["--config", config])


def command(profile_dir: Path, config: Path) -> list[str]:
    """The command that runs `frontier crawl --config config` profiled into `profile_dir`."""
    code = "import sys; from frontier.bench.profiling import run_profiled; sys.exit(run_profiled(*sys.argv[1:]))"
    return [sys.executable, "-c", code, str(profile_dir.resolve()), str(config)]
