"""The supervisor (run_frontier.py) and its children, as real processes with real signals against a loopback
mock web: children die with a supervisor killed by SIGKILL, carry names, exit codes are the documented
ones, a stop during start-up spawns nothing more, a clean stop gets the time its Bloom snapshot needs, and a URL
that kills its worker every time is given up instead of restarting the crawl forever."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from aiohttp import web as aioweb

from faultkit import (SHM, CrawlRun, assert_group_gone, expected_counts, live_group_members, mapped_shm_inodes,
                      mock_config, read_crawl_log, read_summary, semaphores, shm_segments, spawned_children, wait_for,
                      write_config)
from frontier.config import load_config
from frontier.crawl.messages import FetchJob
from frontier.crawl.process import (CLOSE_TIMEOUT, SNAPSHOT_WRITE_RATE, STOP_GRACE, Channels, FrontierService, RunInfo,
                                    exit_code_of, job_batches, stop_timeout)
from frontier.seen.shm import SEGMENT_GRACE
from frontier.testing import MockWeb, SiteSpec
from test_crawl import oracle_crawl

RUN_TIMEOUT = 90.0
# A crawl that runs for a few seconds: one fetch per host every 30 ms, so a test can act in the middle of it.
SLOW = {"limits": {"max_retries": 1},
        "workers": {"processes": 2, "concurrency": 8, "timeout": 5.0, "lease_timeout": 20.0},
        "politeness": {"delay": 0.03}, "dedup": {"capacity": 100_000}}
SLOW_SPEC = SiteSpec(pages=120, hosts=2, seed=7, errors=False)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def slow_web() -> Iterator[MockWeb]:
    with MockWeb.serve_in_thread(SLOW_SPEC) as web:
        yield web


def start(tmp_path: Path, web: MockWeb, name: str, **override: Any) -> CrawlRun:
    config = write_config(tmp_path / "crawl.yaml", mock_config(web, tmp_path / "data", **{**SLOW, **override}))
    return CrawlRun(config, tmp_path, name)


def under_way(run: CrawlRun, web: MockWeb, requests: int = 20, processes: int = 2) -> None:
    """The crawl has made `requests` requests and every worker has started (those past the first start once
    it has imported: run_frontier.eager_workers) and named itself."""
    every = {"frontier", *(f"worker-{i}" for i in range(processes))}
    wait_for(lambda: (web.snapshot()["total"] >= requests and {p.name() for p in spawned_children(run)} == every)
             or not run.running(), 60, "the crawl to get going")
    assert run.running(), run.output()


def named(run: CrawlRun, name: str) -> psutil.Process:
    (proc,) = [p for p in spawned_children(run) if p.name() == name]
    return proc


def assert_complete(web: MockWeb) -> None:
    counts = web.snapshot()["counts"]
    missing = [u for u in expected_counts(web, max_retries=1) if counts.get(u, 0) < 1]
    assert not missing, missing[:5]


# -- item 3: kill -9 of the supervisor alone ----------------------------------------------------------------


def test_kill_9_of_the_supervisor_alone_takes_its_children_and_a_rerun_resumes(
        tmp_path: Path, slow_web: MockWeb) -> None:
    run = start(tmp_path, slow_web, "killed")
    try:
        under_way(run, slow_web)
        # the children carry names in ps: the kernel's process name and the command line
        children = spawned_children(run)
        assert sorted(p.name() for p in children) == ["frontier", "worker-0", "worker-1"]
        for proc in children:
            assert " ".join(proc.cmdline()).rstrip() == f"frontier: {proc.name()} {tmp_path / 'data'}"
        os.kill(run.proc.pid, signal.SIGKILL)  # the supervisor only, as an OOM kill or `kill -9 PID` does
        run.proc.wait(5)
        killed = time.monotonic()
        assert_group_gone(run.pgid, within=5.0)
        gone_after = time.monotonic() - killed
    finally:
        run.kill_group()
    assert gone_after < 5.0
    # the orphaned frontier process stopped cleanly: it committed, snapshotted and recorded the run
    summary = read_summary(tmp_path / "data")
    assert summary["exit_code"] == 130 and summary["queued"] > 0
    (line,) = (tmp_path / "data" / "runs.jsonl").read_text().splitlines()
    assert json.loads(line)["exit_code"] == 130

    rerun = CrawlRun(tmp_path / "crawl.yaml", tmp_path, "rerun")  # no "in use": the data dir is free
    assert rerun.wait(RUN_TIMEOUT) == 0, rerun.output()
    assert_complete(slow_web)
    summary = read_summary(tmp_path / "data")
    assert summary["done"] and "rebuilt_items" not in summary["seen"], "the orphan's snapshot was not used"


# -- item 13: the frontier's raw exit status is mapped to the documented codes ------------------------------


def test_exit_codes_of_the_frontier_process_are_mapped() -> None:
    assert [exit_code_of(c) for c in (0, 1, 2, 3, 4, 130)] == [0, 1, 2, 3, 4, 130]
    assert [exit_code_of(c) for c in (-9, -15, 247, 5, None)] == [1, 1, 1, 1, 1]


def test_a_frontier_process_killed_by_a_signal_ends_the_run_with_exit_1(tmp_path: Path, slow_web: MockWeb) -> None:
    run = start(tmp_path, slow_web, "frontier-killed")
    try:
        under_way(run, slow_web)
        named(run, "frontier").kill()  # what the kernel's out-of-memory killer does
        code = run.wait(30)
        assert_group_gone(run.pgid)
    finally:
        run.kill_group()
    assert code == 1, run.output()  # not 247 (-9 as an exit status)
    assert "frontier: the frontier process was killed by SIGKILL" in run.stderr and "Traceback" not in run.stderr
    (line,) = (tmp_path / "data" / "runs.jsonl").read_text().splitlines()
    record = json.loads(line)
    assert record["exit_code"] == 1 and "killed by SIGKILL" in record["note"]


# -- item 6: a stop request interrupts the spawning ---------------------------------------------------------


def test_sigterm_while_starting_fetches_nothing_and_starts_nothing_more(tmp_path: Path, slow_web: MockWeb) -> None:
    """The frontier process and the first workers are spawned together (start-up), so a SIGTERM while
    the frontier process is still opening its data dir finds them all started (a spawn under way when it
    arrives completes): it fetches nothing, starts no further process (no second frontier or worker)
    and ends with 130, every child gone."""
    processes = 4
    run = start(tmp_path, slow_web, "stopped-early", workers={"processes": processes})
    seen: set[int] = set()
    try:
        wait_for(lambda: spawned_children(run) or not run.running(), 30, "the frontier process to start")
        run.proc.send_signal(signal.SIGTERM)  # the frontier process is still opening its data dir
        deadline = time.monotonic() + 30
        while run.running() and time.monotonic() < deadline:
            seen.update(p.pid for p in spawned_children(run))
            time.sleep(0.01)
        code = run.wait(5)
        assert_group_gone(run.pgid)
    finally:
        run.kill_group()
    assert code == 130, run.output()
    assert len(seen) <= 1 + processes, f"{len(seen)} processes spawned: more than one frontier and {processes} workers"
    assert slow_web.snapshot()["total"] == 0


# -- jobs cross the queue in batches ---------------------------------------------------------------


def test_job_batches_give_each_worker_one_capped_batch_in_order() -> None:
    jobs = [FetchJob(f"http://a.test/{i}", 1, b"k%d" % i) for i in range(20)]
    assert job_batches([], 2, 8) == []
    assert [len(b) for b in job_batches(jobs, 2, 16)] == [10, 10]
    assert [len(b) for b in job_batches(jobs, 2, 8)] == [8, 8, 4]  # capped: a busy worker holds no more
    assert [len(b) for b in job_batches(jobs[:3], 4, 8)] == [1, 1, 1]
    assert [j for b in job_batches(jobs, 3, 5) for j in b] == jobs


# -- item 14: a clean stop gets the time its Bloom snapshot needs -------------------------------------------


def test_stop_timeout_scales_with_the_snapshot() -> None:
    assert stop_timeout(0) == STOP_GRACE + CLOSE_TIMEOUT
    assert stop_timeout(int(SNAPSHOT_WRITE_RATE) * 100) == STOP_GRACE + CLOSE_TIMEOUT + 100
    assert stop_timeout(24_000_000_000) > 480  # the 10-billion-URL blacklist filter: 8 minutes, not 10 s


def test_the_frontier_publishes_its_snapshot_size(tmp_path: Path) -> None:
    cfg = load_config({"seeds": ["http://127.0.0.1:9/"], "dedup": {"capacity": 5_000_000},
                       "storage": {"data_dir": str(tmp_path / "data")}, "output": {"progress": "off"}})
    channels = Channels.create(mp.get_context("spawn"), cfg)
    service = FrontierService(cfg, channels, RunInfo(run_id="t", started_at=time.time(), supervisor_pid=os.getpid()))
    try:
        nbytes = service.frontier.seen.bloom.nbytes
        assert channels.snapshot_bytes.value == nbytes > 10_000_000
        assert stop_timeout(channels.snapshot_bytes.value) > STOP_GRACE + CLOSE_TIMEOUT
    finally:
        service.close(0)
        channels.close()


def test_sigint_is_a_clean_stop(tmp_path: Path, slow_web: MockWeb) -> None:
    run = start(tmp_path, slow_web, "sigint", dedup={"capacity": 5_000_000})  # a 12 MB snapshot
    try:
        under_way(run, slow_web)
        run.proc.send_signal(signal.SIGINT)
        code = run.wait(60)
        assert_group_gone(run.pgid)
    finally:
        run.kill_group()
    assert code == 130, run.output()
    assert "killed" not in run.stderr
    rerun = CrawlRun(tmp_path / "crawl.yaml", tmp_path, "rerun")
    assert rerun.wait(RUN_TIMEOUT) == 0, rerun.output()
    assert "rebuilt_items" not in read_summary(tmp_path / "data")["seen"], "the snapshot of the stop was not used"
    assert_complete(slow_web)


# -- item 12: a URL that kills its worker every time is given up --------------------------------------------

POISON = "/poison.html"


class PoisonWeb(MockWeb):
    """MockWeb where a request for POISON SIGKILLs the worker process that sent it: found by the client port
    of the request among the crawl's processes (`self.crawl_pid`: the supervisor)."""

    crawl_pid = 0
    poison_requests = 0

    def _make_handler(self, host: int, *args: Any) -> Any:
        inner = super()._make_handler(host, *args)

        async def handle(request: Any) -> Any:
            if request.path != POISON:
                return await inner(request)
            self.poison_requests += 1  # on the server's loop thread only
            client_port = request.transport.get_extra_info("peername")[1]
            for proc in psutil.Process(self.crawl_pid).children(recursive=True):
                try:
                    if any(c.laddr and c.laddr.port == client_port for c in proc.net_connections(kind="tcp")):
                        proc.kill()
                except psutil.Error:
                    continue
            return aioweb.Response(text="")

        return handle


def test_a_url_that_kills_its_worker_every_time_is_given_up(tmp_path: Path) -> None:
    with PoisonWeb.serve_in_thread(SiteSpec(pages=40, hosts=1, seed=3, errors=False)) as web:
        poison = web.base_urls[0] + POISON
        cfg = mock_config(web, tmp_path / "data", **{**SLOW, "seeds": [web.seed, poison],
                                                     "workers": {**SLOW["workers"], "concurrency": 2},
                                                     "politeness": {"delay": 0.0}})
        run = CrawlRun(write_config(tmp_path / "crawl.yaml", cfg), tmp_path, "poison")
        web.crawl_pid = run.proc.pid
        try:
            code = run.wait(RUN_TIMEOUT)
            assert_group_gone(run.pgid)
        finally:
            run.kill_group()
        assert code == 0, run.output()
        assert web.poison_requests == 2  # 1 + limits.max_retries, then given up
        assert run.stderr.count("restarting the frontier and workers") == 2
        records, _ = read_crawl_log(tmp_path / "data" / "crawl.jsonl")
        poisoned = [r for r in records if r["url"] == poison]
        assert [(r["reason"], r["retry"]) for r in poisoned] == [("worker_died", True), ("worker_died", False)]
        summary = read_summary(tmp_path / "data")
        assert summary["reasons"]["worker_died"] >= 2 and summary["last_run"]["restarts"] == 2
        # Nothing else is lost without a word. A page in flight at each death (the frontier cannot tell
        # which worker held which lease) may be given up too, logged; the crawl is then complete without
        # it and what only it links to.
        # (Any page given up is logged: a loaded machine can time a fetch out twice as well.)
        given_up = {r["url"] for r in records if r["reason"] == "worker_died" and not r["retry"]}
        ended = {r["url"]: r["reason"] for r in records if r["status"] == "fail" and not r["retry"]}
        reachable, _, _ = oracle_crawl(web.graph, web.ports, allow=lambda url: url not in ended)
        counts = web.snapshot()["counts"]
        missing = [u for u in reachable - ended.keys() if counts.get(u, 0) < 1]
        if missing:  # pytest.fail prints it whole (an assertion's message is cut short)
            pytest.fail(f"never requested: {missing}\ngiven up: {ended}\n{run.output()}")
        assert len(given_up - {poison}) <= 2 * 2 - 1  # a worker holds up to 2 x workers.concurrency jobs
    assert not live_group_members(run.pgid)


def _orphan_semaphores(before: set[str]) -> set[str]:
    """Named semaphores made since `before` that no live process maps: what killed runs left."""
    mapped = mapped_shm_inodes()
    out = set()
    for name in semaphores() - before:
        try:
            if (SHM / name).stat().st_ino not in mapped:
                out.add(name)
        except FileNotFoundError:
            pass
    return out


def test_a_crawl_killed_20_times_leaves_no_semaphores(tmp_path: Path) -> None:
    """kill -9 of the whole group kills multiprocessing's resource tracker with the crawl, so the run's named
    semaphores (/dev/shm/sem.mp-*) stay behind; the next start removes them. Killed 20 times, then stopped
    cleanly: /dev/shm holds none of them."""
    before = semaphores()
    with MockWeb.serve_in_thread(SiteSpec(pages=3000, hosts=2, seed=36)) as web:
        config = write_config(tmp_path / "crawl.yaml", mock_config(web, tmp_path / "data", workers={"processes": 1}))
        left: set[str] = set()
        kills_that_left_some = 0
        for i in range(21):
            total = web.snapshot()["total"]
            run = CrawlRun(config, tmp_path, f"run{i}")
            wait_for(lambda: web.snapshot()["total"] > total, 60, f"run {i} crawling")  # past its start
            assert not left & semaphores(), f"run {i} started and a killed run's semaphores are still there"
            if i == 20:
                run.proc.send_signal(signal.SIGINT)  # a clean stop: the run removes its own
                assert run.wait(60) in (0, 130), run.output()
                break
            os.killpg(run.pgid, signal.SIGKILL)  # not run.kill_group(): it cleans up after the run itself
            run.proc.wait(15)
            assert_group_gone(run.pgid, 15)
            left = _orphan_semaphores(before)
            kills_that_left_some += bool(left)  # (another crawl of this user starting meanwhile removes them too)
    assert kills_that_left_some >= 10, "kill -9 of the group left no semaphores: this test no longer tests anything"
    assert not _orphan_semaphores(before)


DROPPED_FILTER = """
import os, signal, sys
from frontier.scrapy.dupefilter import DupeFilter
from frontier.seen.urlseen import URLSeen
seen_filter = DupeFilter(URLSeen(sys.argv[1], capacity=10_000))  # dropped below without close()
print(seen_filter.seen.bloom.name, flush=True)
os.killpg(0, signal.SIGKILL)  # with its resource tracker, which would unlink the segment at exit
"""


def _killed_crawl(web: MockWeb, tmp_path: Path, name: str) -> tuple[Path, list[str]]:
    """A crawl of its own data dir, kill -9'd (the whole group) once it fetches: (its config, its segments)."""
    config = write_config(tmp_path / f"{name}.yaml", mock_config(web, tmp_path / name, workers={"processes": 1}))
    total = web.snapshot()["total"]
    run = CrawlRun(config, tmp_path, name)
    wait_for(lambda: web.snapshot()["total"] > total, 60, f"{name} crawling")
    run.kill_group()
    segments = shm_segments(tmp_path / name)
    assert segments, f"{name}: a kill -9 left no segment: this test no longer tests anything"
    return config, segments


def test_shared_memory_of_dead_owners_is_reclaimed_at_any_crawls_start_and_by_fresh(tmp_path: Path) -> None:
    """A crawl killed and never resumed, and a Scrapy DupeFilter dropped without close() in a process killed with
    its resource tracker, leave segments in /dev/shm that no live process maps: the start of another crawl (of
    another data dir) removes them, and `frontier fresh` does; a running crawl's segment stays."""
    with MockWeb.serve_in_thread(SiteSpec(pages=3000, hosts=2, seed=37)) as web:
        _, killed = _killed_crawl(web, tmp_path, "killed")
        dropped = subprocess.run([sys.executable, "-c", DROPPED_FILTER, str(tmp_path / "scrapy")], cwd=ROOT,
                                 capture_output=True, text=True, timeout=60, start_new_session=True)
        scrapy_segment = dropped.stdout.strip()
        assert scrapy_segment and os.path.exists(f"/dev/shm/{scrapy_segment}"), dropped.stderr
        live_config = write_config(tmp_path / "live.yaml", mock_config(web, tmp_path / "live", workers={"processes": 1}))
        total = web.snapshot()["total"]
        live = CrawlRun(live_config, tmp_path, "live")
        wait_for(lambda: web.snapshot()["total"] > total, 60, "the live crawl crawling")
        time.sleep(SEGMENT_GRACE)  # the live crawl's segments are old enough to be judged
        other = CrawlRun(write_config(tmp_path / "other.yaml", mock_config(web, tmp_path / "other")), tmp_path, "other")
        try:
            wait_for(lambda: not any(os.path.exists(f"/dev/shm/{n}") for n in [*killed, scrapy_segment]), 60,
                     "the dead owners' segments reclaimed by another crawl's start")
            assert shm_segments(tmp_path / "live"), "a live crawl's segment was unlinked"
        finally:
            for run in (other, live):
                run.proc.send_signal(signal.SIGINT)
                assert run.wait(60) in (0, 130), run.output()
        config, killed = _killed_crawl(web, tmp_path, "refreshed")
        done = subprocess.run([sys.executable, "-m", "frontier", "fresh", "--config", str(config), "--yes"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert not any(os.path.exists(f"/dev/shm/{n}") for n in killed)
