"""Start-up: what each process of a crawl loads, and that the workers start together with the
frontier process (as many at once as there are cores), not after its "ready". The time to the first request is a benchmark, not a timed test:
`python -m frontier.bench crawl --small` prints it ("first request s")."""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from crawlcmd import RUN_FRONTIER, checkout_only
from faultkit import CrawlRun, assert_group_gone, mock_config, spawned_children, wait_for, write_config
from frontier.seen.urlseen import URLSeen
from frontier.testing import MockWeb, SiteSpec

pytestmark = pytest.mark.timeout(120)

PROCESSES = 2
# A crawl that keeps going for a few seconds (one fetch per host every 50 ms), so its processes can be looked at.
SLOW = {"workers": {"processes": PROCESSES, "concurrency": 4}, "politeness": {"delay": 0.05},
        "dedup": {"capacity": 100_000}}
SITE_PACKAGES = "site-packages/"


@pytest.fixture
def web() -> Iterator[MockWeb]:
    with MockWeb.serve_in_thread(SiteSpec(pages=200, hosts=1, seed=3, errors=False)) as w:
        yield w


def start(tmp_path: Path, web: MockWeb, command: list[str] | None = None, **override: object) -> CrawlRun:
    config = write_config(tmp_path / "crawl.yaml", mock_config(web, tmp_path / "data", **{**SLOW, **override}))
    return CrawlRun(config, tmp_path, "startup", command=command)


def native_packages(proc: psutil.Process) -> set[str]:
    """The installed packages whose compiled extensions a process has mapped: what it imported, as far as
    C extensions tell (aiohttp, selectolax, yaml, numpy and lmdb all have one)."""
    packages = set()
    for mapping in proc.memory_maps(grouped=True):
        path = mapping.path
        if path.endswith(".so") and SITE_PACKAGES in path:
            packages.add(path.split(SITE_PACKAGES, 1)[1].split("/", 1)[0])
    return packages


def loaded_by_role(tmp_path: Path, web: MockWeb, command: list[str] | None = None) -> dict[str, set[str]]:
    """{"supervisor" | "frontier" | "worker-N": native packages} of a crawl under way (`frontier crawl`, or
    `command`), which is then stopped."""
    run = start(tmp_path, web, command)
    try:
        every = {"frontier", *(f"worker-{i}" for i in range(PROCESSES))}  # the workers past the first start
        # once it has imported (run_frontier.eager_workers), and name themselves after their imports
        wait_for(lambda: (web.snapshot()["total"] >= 5 and {p.name() for p in spawned_children(run)} == every)
                 or not run.running(), 60, "the crawl to get going")
        assert run.running(), run.output()
        roles = {"supervisor": native_packages(psutil.Process(run.proc.pid))}
        for proc in spawned_children(run):
            roles[proc.name()] = native_packages(proc)
        run.proc.send_signal(signal.SIGTERM)
        assert run.wait(30) == 130, run.output()
        assert_group_gone(run.pgid)
    finally:
        run.kill_group()
    assert set(roles) == {"supervisor", "frontier", *(f"worker-{i}" for i in range(PROCESSES))}, roles
    return roles


@pytest.mark.parametrize("command", [pytest.param(None, id="frontier-crawl"),
                                     pytest.param([sys.executable, str(RUN_FRONTIER)], id="run_frontier.py",
                                                  marks=checkout_only)])
def test_each_process_loads_what_it_needs_and_not_the_others_libraries(tmp_path: Path, web: MockWeb,
                                                                       command: list[str] | None) -> None:
    """The spawn start method re-runs the crawl's main module (run_frontier.py, or the `frontier` script's) in every
    child: it used to import the workers' HTTP and HTML stack into the frontier process and the supervisor, and YAML
    into every worker."""
    roles = loaded_by_role(tmp_path, web, command)
    for role, packages in roles.items():
        if role.startswith("worker-"):
            assert {"aiohttp", "selectolax"} <= packages, (role, packages)
            assert "yaml" not in packages, (role, packages)
        elif role == "frontier":  # its console's server (frontier.console, on by default) is aiohttp; no HTML stack
            assert "aiohttp" in packages and "selectolax" not in packages, (role, packages)
        else:
            assert not {"aiohttp", "selectolax"} & packages, (role, packages)
    assert "lmdb" in roles["frontier"]


def test_workers_load_no_numpy_or_lmdb(tmp_path: Path, web: MockWeb) -> None:
    roles = loaded_by_role(tmp_path, web)
    for role in (r for r in roles if r.startswith("worker-")):
        assert not {"numpy", "lmdb"} & roles[role], (role, roles[role])


def test_workers_start_with_the_frontier_process_not_after_its_ready(tmp_path: Path, web: MockWeb) -> None:
    """Seen with a frontier process that never gets ready (its data dir is held by this test): a worker
    is spawned anyway, and the refusal still ends the run at once (exit 2, one line) instead of
    waiting for end-of-crawl sentinels that never come."""
    with URLSeen(tmp_path / "data" / "state", capacity=100_000):  # holds the data dir, as a running crawl would
        run = start(tmp_path, web)
        seen: set[int] = set()
        try:
            while run.running() and run.elapsed() < 60:
                seen.update(p.pid for p in spawned_children(run))
                time.sleep(0.005)
            code = run.wait(5)
            took = run.elapsed()
            assert_group_gone(run.pgid)
        finally:
            run.kill_group()
    assert code == 2, run.output()
    errors = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and "in use" in errors[0], run.output()
    # a worker at least (as many as there are cores beside the frontier: run_frontier.eager_workers) starts
    # beside it; the others would start once that one has imported
    assert 2 <= len(seen) <= 1 + PROCESSES, f"{len(seen)} processes spawned: the workers waited for the frontier's ready"
    # at once: seconds (8.6 once, on a 2-core machine at load 15), where waiting for sentinels runs into the
    # loop's 60 s bound
    assert took < 30.0, f"the refusal took {took:.1f} s"
    assert web.snapshot()["total"] == 0


def test_supervisor_loads_no_numpy_or_lmdb(tmp_path: Path, web: MockWeb) -> None:
    """Its checks before the spawn (memory for the Bloom filter, the data dir) are plain Python
    (frontier.seen.sizing, frontier.seen.datadir): importing numpy and LMDB for them held back every crawl's start."""
    roles = loaded_by_role(tmp_path, web)
    assert not {"numpy", "lmdb", "bitarray"} & roles["supervisor"], roles["supervisor"]


def _report_gc(out: object) -> None:
    """A spawned child's target: set up as a crawl process is, then report its collector's settings."""
    import gc
    import os

    from frontier.crawl.child import supervised

    supervised("gc-probe", os.getppid(), on_orphaned=lambda: None, exit_after=lambda: 0.0, exit_code=1)
    out.put((gc.get_threshold(), gc.get_freeze_count()))  # type: ignore[attr-defined]


def test_crawl_processes_freeze_their_imports_and_collect_less_often() -> None:
    """frontier.crawl.child.supervised tunes the cyclic GC of every crawl process (2-3% of a crawl's CPU
    went to collections at CPython's defaults)."""
    import multiprocessing

    from frontier.crawl.child import GC_THRESHOLD

    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_report_gc, args=(out,))
    proc.start()
    try:
        threshold, frozen = out.get(timeout=60)
    finally:
        proc.join(30)
    assert threshold == GC_THRESHOLD and threshold[0] > 700
    assert frozen > 1000  # the imports' objects (frontier, logging, multiprocessing) are out of the collector's walks
