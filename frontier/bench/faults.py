"""`python -m frontier.bench faults`: random fault schedules against a distributed crawl, and a checker.

    python -m frontier.bench faults [--schedules 10] [--seed 1] [--faults 2] [--pages 200] [--hosts 3]

Per schedule (its seed is `--seed` + its index, so any one is rerun alone with `--schedules 1 --seed S`): a
3-master + 3-replica Cluster (real servers on loopback, cluster-node-timeout 2 s), the mock web (its own
process; its per-URL request counts are the oracle), two `python run_frontier.py` instances on one crawl, and
`--faults` faults drawn at random (weights 3:3:3:1 in the order below), each fired once the mock web has
served a random share of the site's pages:
  kill-instance   SIGKILL of an instance's process group; a new instance is started 0-2 s later
  kill-master     SIGKILL of a master; once its replica is promoted, the node is restarted (it rejoins as
                  the new master's replica, as an operator would bring it back)
  stop-master     SIGSTOP of a master for 0.5-4 s (past 2 s its replica takes over), then SIGCONT
  restart-empty   a master killed and restarted at once without persistence: the crawl's state is gone
                  (always the last fault of a schedule: the crawl cannot go on)
Not injected: a network partition (`ip netns` + veth: not built) and clock skew (libfaketime, Debian's
0.9.10, makes Python's time.sleep fail with EINVAL now and then, in threads and spawned children: the
instances would die of the tool, not of the skew; tests/test_redis_faults.py injects a clock instead).

The checker, per schedule: every instance ends with exit 0, or non-zero with a `frontier:` line and no
traceback (a worker's traceback that its supervisor recovered from is not a failure); a crawl whose state was
not destroyed is resumed by a clean instance if none ended it, and then every page the site links to must have
been requested (`lost`: those never requested); `duplicates`: requests beyond the expected ones, bounded by
(faults + 1) x instances x concurrency (each fault may refetch at most the pages in flight). A schedule that
fails prints its seed. Exit 0 when none failed.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from frontier.bench.redis_crawl import RUN_FRONTIER, _config, _expected
from frontier.testing import MockWebProcess, SiteSpec
from frontier.testing.redis_servers import LocalCluster, RedisServer, ServerBinary, server_binaries

FAULTS = {"kill-instance": 3, "kill-master": 3, "stop-master": 3, "restart-empty": 1}  # fault -> weight
INSTANCES = 2
CONCURRENCY = 8
LEASE_TIMEOUT = 10.0  # a killed instance's pages are leased again after this
RUN_TIMEOUT = 240.0  # seconds a schedule's crawl may take before the checker calls it stuck


@dataclass
class Outcome:
    seed: int
    faults: list[str]
    codes: list[int] = field(default_factory=list)
    lost: int = 0
    duplicates: int = 0
    bound: int = 0
    state_gone: bool = False
    resumed: bool = False
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and self.lost == 0 and self.duplicates <= self.bound


def draw(rng: random.Random, count: int) -> list[str]:
    """A schedule's faults, in order (restart-empty last if drawn)."""
    faults = rng.choices(list(FAULTS), weights=list(FAULTS.values()), k=count)
    if "restart-empty" in faults:
        faults = [f for f in faults if f != "restart-empty"] + ["restart-empty"]
    return faults


class Schedule:
    """One schedule's servers, mock web and instances (see the module doc)."""

    def __init__(self, binary: ServerBinary, seed: int, faults: int, spec: SiteSpec, workdir: Path) -> None:
        self.rng = random.Random(seed)
        self.outcome = Outcome(seed, draw(self.rng, faults))
        self.spec = spec
        self.workdir = workdir
        self.cluster = LocalCluster(binary, workdir / "cluster")
        self.web: MockWebProcess | None = None
        self.runs: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.ended: list[tuple[str, int]] = []
        self.started = 0

    # -- instances ----------------------------------------------------------------------------------

    def start_instance(self) -> None:
        name = f"i{self.started}"
        self.started += 1
        args = argparse.Namespace(processes=1, concurrency=CONCURRENCY)
        data = self.workdir / f"{name}-data"
        cfg = _config(self.web, self.cluster.url, "faults", data, args)  # type: ignore[arg-type]
        cfg["workers"].update(lease_timeout=LEASE_TIMEOUT, timeout=3.0, connect_timeout=2.0)
        config = self.workdir / f"{name}.yaml"
        config.write_text(yaml.safe_dump(cfg))
        with open(self.workdir / f"{name}.log", "wb") as log:
            proc = subprocess.Popen([sys.executable, str(RUN_FRONTIER), "--config", str(config)], stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.workdir,
                                    start_new_session=True)
        self.runs.append((name, proc))

    def kill_instance(self) -> None:
        live = [(n, p) for n, p in self.runs if p.poll() is None]
        if not live:
            return
        name, proc = self.rng.choice(live)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        self.runs.remove((name, proc))
        time.sleep(self.rng.uniform(0, 2))
        self.start_instance()

    # -- servers ------------------------------------------------------------------------------------

    def _masters(self) -> list[RedisServer]:
        out = []
        for node in self.cluster.nodes:
            if node.pid is None:
                continue
            try:
                if node.client(socket_timeout=2).execute_command("ROLE")[0] == b"master":
                    out.append(node)
            except Exception:  # a stopped or dying node: not a master to pick
                continue
        return out

    def _wait_ok(self, timeout: float = 60.0) -> None:
        """Until every live node says cluster_state:ok (the failover is over)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if all(n.client(socket_timeout=2).cluster("info").get("cluster_state") == "ok"
                       for n in self.cluster.nodes if n.pid is not None):
                    return
            except Exception:  # a node restarting
                pass
            time.sleep(0.2)
        self.outcome.problems.append("the Cluster did not recover within 60 s")

    def _replica_of(self, master: RedisServer) -> RedisServer | None:
        for node in self.cluster.nodes:
            if node.pid is not None and node is not master and \
                    int(node.client(socket_timeout=2).info("replication").get("master_port", 0)) == master.port:
                return node
        return None

    def kill_master(self) -> None:
        node = self.rng.choice(self._masters())
        replica = self._replica_of(node)
        node.kill()
        deadline = time.monotonic() + 60
        while replica is not None and time.monotonic() < deadline:  # until the replica is promoted
            try:
                if replica.client(socket_timeout=2).execute_command("ROLE")[0] == b"master":
                    break
            except Exception:  # busy or restarting: ask again
                pass
            time.sleep(0.1)
        else:
            self.outcome.problems.append(f"the replica of the master on port {node.port} was not promoted in 60 s")
        self._wait_ok()
        node.restart()

    def stop_master(self) -> None:
        node = self.rng.choice(self._masters())
        os.kill(node.pid, signal.SIGSTOP)  # type: ignore[arg-type]
        time.sleep(self.rng.uniform(0.5, 4.0))
        os.kill(node.pid, signal.SIGCONT)  # type: ignore[arg-type]
        self._wait_ok()

    def restart_empty(self) -> None:
        node = self.rng.choice(self._masters())
        node.kill()
        node.restart()
        self.outcome.state_gone = True

    # -- the run ------------------------------------------------------------------------------------

    def _served(self) -> int:
        counts = self.web.stats()["counts"]  # type: ignore[union-attr]
        return sum(c for u, c in counts.items() if not u.endswith("/robots.txt"))

    def run(self) -> Outcome:
        out = self.outcome
        self.cluster.start()
        self.web = MockWebProcess(self.spec)
        try:
            expected = _expected(self.web, self.spec)
            total = sum(expected.values())
            for _ in range(INSTANCES):
                self.start_instance()
            marks = sorted(self.rng.uniform(0.1, 0.8) * total for _ in out.faults)
            actions = {"kill-instance": self.kill_instance, "kill-master": self.kill_master,
                       "stop-master": self.stop_master, "restart-empty": self.restart_empty}
            for mark, fault in zip(marks, out.faults):
                while self._served() < mark and any(p.poll() is None for _, p in self.runs):
                    time.sleep(0.05)
                if not any(p.poll() is None for _, p in self.runs):
                    break
                actions[fault]()
            self._finish(expected, total)
        finally:
            for _, proc in self.runs:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
            self.web.close()
            self.cluster.stop()
        return out

    def _finish(self, expected: dict[str, int], total: int) -> None:
        out = self.outcome
        deadline = time.monotonic() + RUN_TIMEOUT
        for name, proc in list(self.runs):
            try:
                code = proc.wait(max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                out.problems.append(f"{name} still running after {RUN_TIMEOUT:g} s")
                continue
            self.ended.append((name, code))
            self.runs.remove((name, proc))
            text = (self.workdir / f"{name}.log").read_text(errors="replace")
            if code != 0 and ("Traceback" in text or "frontier:" not in text):
                out.problems.append(f"{name}: exit {code} without a clear line (a traceback, or no message)")
        out.codes = [code for _, code in self.ended]
        if out.state_gone:
            return  # the state was destroyed: no page count to check (each instance stopped with its line)
        if 0 not in out.codes and not out.problems:
            out.resumed = True
            self.start_instance()
            name, proc = self.runs[-1]
            code = proc.wait(RUN_TIMEOUT)
            self.runs.pop()
            out.codes.append(code)
            if code != 0:
                out.problems.append(f"the resumed instance {name} exited {code}")
        counts = self.web.stats()["counts"]  # type: ignore[union-attr]
        out.lost = sum(1 for u in expected if counts.get(u, 0) < 1)
        out.duplicates = sum(max(0, c - expected.get(u, 0)) for u, c in counts.items())
        out.bound = (len(out.faults) + 1) * INSTANCES * CONCURRENCY


def table(outcomes: list[Outcome], faults: int) -> str:
    checked = [o for o in outcomes if not o.state_gone]
    failed = [o.seed for o in outcomes if not o.ok]
    return "\n".join([
        "| faults per schedule | schedules | state destroyed (stopped non-zero) | resumed | lost | "
        "duplicates max | bound | failed seeds |",
        "|---|---|---|---|---|---|---|---|",
        f"| {faults} | {len(outcomes)} | {sum(o.state_gone for o in outcomes)} | {sum(o.resumed for o in outcomes)} "
        f"| {sum(o.lost for o in checked)} | {max((o.duplicates for o in checked), default=0)} "
        f"| {(faults + 1) * INSTANCES * CONCURRENCY} | {', '.join(map(str, failed)) or 'none'} |"])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m frontier.bench faults", description=__doc__.split("\n")[0])
    parser.add_argument("--schedules", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--faults", type=int, default=2, help="faults per schedule")
    parser.add_argument("--pages", type=int, default=200, help="pages per host of the mock web")
    parser.add_argument("--hosts", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep each schedule's logs (printed path)")
    args = parser.parse_args(argv)
    binaries = server_binaries()
    if not binaries:
        parser.error("no Redis or Valkey server installed")
    outcomes = []
    for i in range(args.schedules):
        seed = args.seed + i
        workdir = Path(tempfile.mkdtemp(prefix=f"frontier-faults-{seed}-"))
        spec = SiteSpec(pages=args.pages, hosts=args.hosts, seed=seed)
        outcome = Schedule(binaries[0], seed, args.faults, spec, workdir).run()
        outcomes.append(outcome)
        print(f"seed {seed}: {' + '.join(outcome.faults)}: exit codes {outcome.codes}, lost {outcome.lost}, "
              f"duplicates {outcome.duplicates}/{outcome.bound}{', state destroyed' if outcome.state_gone else ''}"
              f"{', resumed' if outcome.resumed else ''}"
              f"{'' if outcome.ok else ' FAILED: ' + '; '.join(outcome.problems)}"
              f"{' (logs: ' + str(workdir) + ')' if args.keep or not outcome.ok else ''}", flush=True)
        if outcome.ok and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"\n{binaries[0].name}, 3+3 Cluster, {INSTANCES} instances x {CONCURRENCY} fetches, "
          f"mock web {args.hosts} hosts x {args.pages} pages\n")
    print(table(outcomes, args.faults))
    return 0 if all(o.ok for o in outcomes) else 1
