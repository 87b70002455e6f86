"""Helpers of the fault-injection suite (tests/test_faults.py).

A crawl runs as `frontier crawl --config <yaml>` (tests/crawlcmd.py) in its own session, so it leads its own
process group and `kill_group()` can SIGKILL the supervisor, the frontier process, the workers and
multiprocessing's resource tracker at once. The mock web is served from a thread of the test
process, so its per-URL request counts survive every kill.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

import psutil
import pytest
import yaml

from crawlcmd import crawl_argv, crawl_env
from frontier.seen.shm import SHM_DIR
from frontier.seen.urlseen import default_bloom_name
from frontier.testing import PageKind

LOOPBACK = "127.0.0.1"


def env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def env_float(name: str, default: float) -> float:
    return float(os.environ.get(name, default))


# -- configs -------------------------------------------------------------------------------------------


def merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """`base` with `override` merged in, section by section (a None value deletes the key)."""
    out = copy.deepcopy(dict(base))
    for key, value in override.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


NO_TRAPS = {"patterns": False, "soft_404": False}


def mock_config(web: Any, data_dir: Path, **override: Any) -> dict[str, Any]:
    """A crawl of a running MockWeb (its ports are the scope), with `override` merged in."""
    base = {
        "seeds": [web.seed],
        "scope": {"allowed_hosts": [f"{LOOPBACK}:{p}" for p in web.ports]},
        "storage": {"data_dir": str(data_dir)},
        "output": {"progress": "off"},
        # the mock web at full speed, its requests counted exactly: no politeness delay, and no trap detection
        # (its soft-404 probe is one request per host the site does not expect); tests/test_traps_crawl.py
        # crawls with the defences, and the demo keeps them on
        "politeness": {"delay": 0.0},
        "traps": NO_TRAPS,
    }
    return merge(base, override)


def write_config(path: Path, cfg: Mapping[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(dict(cfg), sort_keys=False))
    return path


# -- running and killing a crawl ------------------------------------------------------------------------


SHM = Path("/dev/shm")


def semaphores() -> set[str]:
    """multiprocessing's named semaphores now in /dev/shm."""
    return {p.name for p in SHM.glob("sem.mp-*")} if SHM.is_dir() else set()


def mapped_shm_inodes() -> set[int]:
    """Inodes of the /dev/shm files some live process has mapped. By inode, not name: glibc's sem_open
    creates a semaphore under a temporary name, maps it and then links it to its final name, so its
    creator's mapping names a deleted file; only the inode is the semaphore's."""
    inodes: set[int] = set()
    for maps in Path("/proc").glob("[0-9]*/maps"):
        try:
            text = maps.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            if " /dev/shm/" in line:
                inodes.add(int(line.split()[4]))
    return inodes


def tool_missing(reason: str) -> NoReturn:
    """Skip a fault test whose tool (iproute2, nftables, faketime) is not installed; fail it in a root run, which
    could have installed it (.ci/run does): there a skip would leave the fault untested while CI stays green."""
    if os.geteuid() == 0:
        pytest.fail(f"{reason}: install it (apt-get install iproute2 nftables faketime, as .ci/run does)")
    pytest.skip(reason)


class CrawlRun:
    """One run of `frontier crawl` (or `command`, the argv before `--config`), leading its own process group;
    stdout/stderr go to files."""

    def __init__(self, config: Path, out_dir: Path, name: str, *, env: Mapping[str, str] | None = None,
                 command: Sequence[str] | None = None) -> None:
        self.name = name
        self.stdout_path = out_dir / f"{name}.stdout"
        self.stderr_path = out_dir / f"{name}.stderr"
        self.started = time.monotonic()
        self._semaphores_before = semaphores()
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            argv = [*command, "--config", str(config)] if command else crawl_argv(config)
            self.proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=out_dir,
                                         start_new_session=True, env=crawl_env(env))
        self.pgid = self.proc.pid  # start_new_session: the child leads a new session and process group

    @property
    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def output(self, limit: int = 4000) -> str:
        return f"--- {self.name} stdout ---\n{self.stdout[-limit:]}\n--- {self.name} stderr ---\n{self.stderr[-limit:]}"

    def running(self) -> bool:
        return self.proc.poll() is None

    def wait(self, timeout: float) -> int:
        """The exit code; on timeout the whole group is killed and the test fails with the output."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill_group()
            raise AssertionError(f"{self.name} did not finish within {timeout:g} s\n{self.output()}") from None

    def kill_group(self, sig: int = signal.SIGKILL, gone_within: float = 15.0) -> None:
        """Signal every process of the group, reap the leader, wait until no member is left alive."""
        try:
            os.killpg(self.pgid, sig)
        except ProcessLookupError:
            pass
        self.proc.wait(gone_within)
        assert_group_gone(self.pgid, gone_within)
        if sig == signal.SIGKILL:
            self._unlink_orphan_semaphores()

    def _unlink_orphan_semaphores(self) -> None:
        """A kill -9 of the group kills multiprocessing's resource tracker with it, so the named semaphores
        of the run's queues stay in /dev/shm: unlink those made since the run started that no live process
        still maps (a crawl's own cleanup cannot run after SIGKILL; this is the test's)."""
        mapped = mapped_shm_inodes()
        for name in semaphores() - self._semaphores_before:
            try:
                if (SHM / name).stat().st_ino not in mapped:
                    (SHM / name).unlink()
            except FileNotFoundError:
                pass

    def elapsed(self) -> float:
        return time.monotonic() - self.started


def spawned_children(run: CrawlRun) -> list[psutil.Process]:
    """The supervisor's children that multiprocessing spawned (not its resource tracker)."""
    out = []
    for child in psutil.Process(run.proc.pid).children():
        try:
            cmdline = " ".join(child.cmdline())
        except psutil.Error:
            continue
        if "spawn_main" in cmdline or cmdline.startswith("frontier: "):
            out.append(child)
    return out


def live_group_members(pgid: int) -> list[psutil.Process]:
    """Processes of a process group that are not zombies (a killed orphan is reaped by init later)."""
    members = []
    for proc in psutil.process_iter(["status"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                members.append(proc)
        except (ProcessLookupError, psutil.Error):
            continue
    return members


def assert_group_gone(pgid: int, within: float = 10.0) -> None:
    """No process of the group is left alive (multiprocessing's resource tracker exits shortly after the
    supervisor: it sees end-of-file on its pipe, removes what was registered with it, and exits)."""

    def gone() -> bool:
        return not live_group_members(pgid)

    try:
        wait_for(gone, within, f"processes of group {pgid} alive")
    except AssertionError:
        left = []
        for proc in live_group_members(pgid):
            try:
                left.append((proc.pid, " ".join(proc.cmdline())[:120]))
            except psutil.Error:
                pass
        raise AssertionError(f"processes of group {pgid} still alive after {within:g} s: {left}") from None


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
    """Poll until `predicate()` is truthy (returned) or fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s: {what}")
        time.sleep(interval)


def worker_processes(run: CrawlRun, data_dir: Path) -> list[psutil.Process]:
    """The fetcher workers among the supervisor's children: the processes named "worker-N"
    (frontier.crawl.child) that do not hold the data dir open (the frontier process does)."""
    workers = []
    try:
        children = psutil.Process(run.proc.pid).children()
    except psutil.NoSuchProcess:
        return []
    for child in children:
        try:
            if not child.name().startswith("worker-"):
                continue
            if any(f.path.startswith(str(data_dir)) for f in child.open_files()):
                continue
            workers.append(child)
        except psutil.Error:
            continue
    return workers


def busiest(workers: list[psutil.Process], sample: float = 0.5) -> psutil.Process:
    """The worker that used the most CPU over `sample` seconds: the one with fetches under way (one
    worker may hold every job while the other idles, so having connections open says little)."""

    def cpu(proc: psutil.Process) -> float:
        try:
            t = proc.cpu_times()
            return t.user + t.system
        except psutil.Error:
            return float("-inf")

    before = {p.pid: cpu(p) for p in workers}
    time.sleep(sample)
    return max(workers, key=lambda p: cpu(p) - before[p.pid])


def pending_responses(proc: psutil.Process) -> int:
    """TCP sockets of a process with received bytes it has not read (Linux /proc): fetches under way
    whose response is waiting. A stopped worker with one holds that URL's lease."""
    inodes = set()
    fd_dir = f"/proc/{proc.pid}/fd"
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(f"{fd_dir}/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    pending = 0
    with open(f"/proc/{proc.pid}/net/tcp") as table:
        next(table)
        for line in table:
            fields = line.split()
            if fields[9] in inodes and int(fields[4].split(":")[1], 16) > 0:
                pending += 1
    return pending


# -- what a crawl left behind ----------------------------------------------------------------------------


def expected_counts(web: Any, max_retries: int, *, max_depth: int | None = None) -> Counter[str]:
    """`graph.expected_requests`, with each URL of a permanent-500 page requested 1 + max_retries times."""
    expected = web.graph.expected_requests(web.ports, max_depth=max_depth)
    errors = web.graph.page_urls(web.ports, kinds=[PageKind.SERVER_ERROR])
    for url in expected:
        if url.split("?", 1)[0] in errors:
            expected[url] = 1 + max_retries
    return expected


def server_error_urls(web: Any, expected: Mapping[str, int]) -> list[str]:
    errors = web.graph.page_urls(web.ports, kinds=[PageKind.SERVER_ERROR])
    return [u for u in expected if u.split("?", 1)[0] in errors]


def excess_requests(counts: Mapping[str, int], expected: Mapping[str, int]) -> dict[str, int]:
    """URL -> requests beyond the expected number (only URLs requested more often than expected)."""
    return {u: c - expected.get(u, 0) for u, c in counts.items() if c > expected.get(u, 0)}


def read_crawl_log(path: Path) -> tuple[list[dict[str, Any]], int]:
    """(records, torn): the JSON lines of a crawl log, and how many lines did not parse."""
    records, torn = [], 0
    if not path.exists():
        return records, torn
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            torn += 1
    return records, torn


def read_summary(data_dir: Path) -> dict[str, Any]:
    return json.loads((data_dir / "summary.json").read_text())


def shm_segments(data_dir: Path) -> list[str]:
    """The crawl's shared-memory segments in /dev/shm (its Bloom filter: frontier_<hash of the state dir>)."""
    prefix = default_bloom_name(data_dir / "state")
    return sorted(n for n in os.listdir(SHM_DIR) if n.startswith(prefix))


def messages(stderr: str) -> list[str]:
    """The messages run_frontier printed on stderr: each starts with "frontier:" at the start of a line and
    runs to the next one (a YAML error quotes the offending line under its message). Anything printed
    before the first message is a message of its own (a traceback, a warning)."""
    out: list[str] = []
    for line in stderr.splitlines():
        if not line.strip():
            continue
        if line.startswith("frontier:") or not out:
            out.append(line)
        else:
            out[-1] += "\n" + line
    return out
