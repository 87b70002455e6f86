"""`python -m frontier.bench faults`: random fault schedules against a distributed crawl, and a checker.

    python -m frontier.bench faults [--schedules 10] [--seed 1] [--faults 2] [--pages 200] [--hosts 3]

Per schedule (its seed is `--seed` + its index, so any one is rerun alone with `--schedules 1 --seed S`): a
3-master + 3-replica Cluster (real servers, cluster-node-timeout 2 s, each node in its own network namespace
behind a bridge: frontier.testing.netns), the mock web (its own process on 127.0.0.1; its per-URL request
counts are the oracle), two `python run_frontier.py` instances on one crawl (root namespace, each with its
own group id, which the cuts match), and `--faults` faults drawn at random (weights in FAULTS), each fired
once the mock web has served a random share of the site's pages:
  kill-instance   SIGKILL of an instance's process group; a new instance is started 0-2 s later
  kill-master     SIGKILL of a master; once its replica is promoted, the node is restarted (it rejoins as
                  the new master's replica, as an operator would bring it back)
  stop-master     SIGSTOP of a master for 0.5-4 s (past 2 s its replica takes over), then SIGCONT
  restart-empty   a master killed and restarted at once without persistence: the crawl's state is gone
                  (always the last fault of a schedule: the crawl cannot go on)
  cut-master      a master cut from every other node (its replica and the other masters) for 3-8 s, then
                  healed: past 2 s the majority fails its replica over while the instances still reach the
                  old master (its WAITs get no replica: nothing is leased or acked there); healed, it rejoins as a replica
  cut-instance    an instance cut from every server for 12-20 s (> lease_timeout: the others take its pages
                  over), then healed: its late results commit their outlinks
  cut-web         an instance cut from the mock web only for 2-6 s (its fetches time out and are retried)
  skew            an instance SIGKILLed and started again with its clock off by +90, -90, +5 or +2 s
                  (libfaketime; past lease_timeout / 4 = 2.5 s it refuses to start, with one line)
Without `ip netns` (not root) the cluster runs on loopback and the cut-* faults are left out of the draw.
libfaketime runs with the monotonic clock faked too: with FAKETIME_DONT_FAKE_MONOTONIC=1, Debian's 0.9.10
makes every time.sleep fail with EINVAL (Python sleeps with clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)).

The checker, per schedule: every instance ends with exit 0, or non-zero with a `frontier:` line and no
traceback (a worker's traceback that its supervisor recovered from is not a failure); a crawl whose state was
not destroyed is resumed by a clean instance if none ended it, and then every page the site links to must have
been requested (`lost`: those never requested); `duplicates`: requests beyond the expected ones, bounded by
(faults + 1) x instances x concurrency (each fault may refetch at most the pages in flight; for cut-master
that holds because a lease or an ack is used only once a replica holds it: what the cut master takes meanwhile
is dropped at its demotion, and without that wait the refetches grow with the crawl rate times the time it
takes the Cluster to notice the cut, 158-548 measured). A schedule that
fails prints its seed. Exit 0 when none failed.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from frontier.bench.profiling import PACKAGES
from frontier.bench.redis_crawl import _config, _expected
from frontier.cli.commands import crawl_command
from frontier.testing import MockWebProcess, SiteSpec, netns
from frontier.testing.redis_servers import LOOPBACK, LocalCluster, RedisServer, ServerBinary, server_binaries

FAULTS = {"kill-instance": 3, "kill-master": 3, "stop-master": 2, "restart-empty": 1,  # fault -> weight
          "cut-master": 3, "cut-instance": 3, "cut-web": 2, "skew": 3}
NET_FAULTS = {"cut-master", "cut-instance", "cut-web"}  # need network namespaces
SKEWS = (90, -90, 5, 2)  # seconds an instance's clock is off in a skew fault
LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")  # Debian's faketime package
INSTANCES = 2
CONCURRENCY = 8
LEASE_TIMEOUT = 10.0  # a killed instance's pages are leased again after this
RUN_TIMEOUT = 240.0  # seconds a schedule's crawl may take before the checker calls it stuck


@dataclass
class Outcome:
    seed: int
    faults: list[str]
    fired: int = 0  # faults injected before the crawl ended (a fault drawn late may find it over)
    codes: list[int] = field(default_factory=list)
    lost: int = 0
    duplicates: int = 0
    bound: int = 0
    stopped: int = 0  # instances that stopped non-zero with a `frontier:` line (no traceback)
    state_gone: bool = False
    resumed: bool = False
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and self.lost == 0 and self.duplicates <= self.bound


def draw(rng: random.Random, count: int, kinds: dict[str, int]) -> list[str]:
    """A schedule's faults, in order (restart-empty last if drawn)."""
    faults = rng.choices(list(kinds), weights=list(kinds.values()), k=count)
    if "restart-empty" in faults:
        faults = [f for f in faults if f != "restart-empty"] + ["restart-empty"]
    return faults


def kinds(*, network: bool, skew: bool) -> dict[str, int]:
    """The faults that can be injected here (network: `ip netns` works; skew: libfaketime is installed)."""
    return {f: w for f, w in FAULTS.items() if (network or f not in NET_FAULTS) and (skew or f != "skew")}


class Schedule:
    """One schedule's servers, mock web and instances (see the module doc). `faults`: how many to draw from
    `kinds`, or the list to inject; `network`: run the nodes in namespaces (the cut-* faults need it)."""

    def __init__(self, binary: ServerBinary, seed: int, faults: int | list[str], spec: SiteSpec, workdir: Path,
                 *, network: bool = True, kinds: dict[str, int] = FAULTS) -> None:
        self.rng = random.Random(seed)
        chosen = draw(self.rng, faults, kinds) if isinstance(faults, int) else list(faults)
        if not network and NET_FAULTS & set(chosen):
            raise ValueError(f"{sorted(NET_FAULTS & set(chosen))} need network=True")
        self.outcome = Outcome(seed, chosen)
        self.spec = spec
        self.workdir = workdir
        self.network = network
        self.net = netns.Net() if network else None
        self.cluster: LocalCluster | None = None
        self.binary = binary
        self.web: MockWebProcess | None = None
        self.runs: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.groups: dict[str, int] = {}  # instance -> its group id (what a cut matches)
        self.ended: list[tuple[str, int]] = []
        self.started = 0

    # -- instances ----------------------------------------------------------------------------------

    def start_instance(self, skew: int = 0) -> None:
        """A new instance (its own group id; `skew`: its clock that many seconds off, through libfaketime)."""
        name = f"i{self.started}"
        group = netns.GROUP_BASE + self.started
        self.started += 1
        args = argparse.Namespace(processes=1, concurrency=CONCURRENCY)
        data = self.workdir / f"{name}-data"
        assert self.web is not None and self.cluster is not None, "the schedule is not running"
        cfg = _config(self.web, self.cluster.url, "faults", data, args)
        cfg["workers"].update(lease_timeout=LEASE_TIMEOUT, timeout=3.0, connect_timeout=2.0)
        if self.net is not None:  # the nodes' addresses are behind this machine's own bridge, not remote
            cfg["storage"]["redis"]["allow_unauthenticated"] = True
        config = self.workdir / f"{name}.yaml"
        config.write_text(yaml.safe_dump(cfg))
        env = dict(os.environ)
        if skew:
            env.update(LD_PRELOAD=str(LIBFAKETIME), FAKETIME=f"{skew:+d}s", FAKETIME_NO_CACHE="1")
        if self.net is not None:
            self.net.track(group)
        with open(self.workdir / f"{name}.log", "wb") as log:
            log.write(f"(clock {skew:+d} s)\n".encode() if skew else b"")
            log.flush()
            proc = subprocess.Popen([*crawl_command(), "--config", str(config)], stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=PACKAGES,
                                    start_new_session=True, env=env, group=group)
        self.runs.append((name, proc))
        self.groups[name] = group

    def _live(self) -> list[tuple[str, subprocess.Popen[bytes]]]:
        return [(n, p) for n, p in self.runs if p.poll() is None]

    def kill_instance(self, skew: int = 0) -> None:
        live = self._live()
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
        self.start_instance(skew)

    def skew(self) -> None:
        self.kill_instance(self.rng.choice(SKEWS))

    def _cut_instance(self, targets: list[str], ports: list[int], seconds: tuple[float, float]) -> None:
        live = self._live()
        if not live:
            return
        name, _ = self.rng.choice(live)
        assert self.net is not None
        self.net.cut_group(self.groups[name], targets, ports)
        try:
            time.sleep(self.rng.uniform(*seconds))
        finally:
            self.net.heal()

    def cut_instance(self) -> None:
        assert self.net is not None
        self._cut_instance([self.net.network], [], (LEASE_TIMEOUT + 2, LEASE_TIMEOUT + 10))

    def cut_web(self) -> None:
        self._cut_instance([LOOPBACK], self.web.ports, (2.0, 6.0))  # type: ignore[union-attr]

    # -- servers ------------------------------------------------------------------------------------

    @property
    def nodes(self) -> list[RedisServer]:
        assert self.cluster is not None, "the schedule is not running"
        return self.cluster.nodes

    def _masters(self) -> list[RedisServer]:
        out = []
        for node in self.nodes:
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
                       for n in self.nodes if n.pid is not None):
                    return
            except Exception:  # a node restarting
                pass
            time.sleep(0.2)
        self.outcome.problems.append("the Cluster did not recover within 60 s")

    def _replica_of(self, master: RedisServer) -> RedisServer | None:
        for node in self.nodes:
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

    def cut_master(self) -> None:
        node = self.rng.choice(self._masters())
        assert self.net is not None and node.netns is not None
        self.net.isolate(node.netns, [n.host for n in self.nodes if n is not node])
        try:
            time.sleep(self.rng.uniform(3.0, 8.0))
        finally:
            self.net.heal()
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
        try:
            hosts = None
            if self.net is not None:
                self.net.start()
                hosts = [self.net.add_host() for _ in range(6)]
            self.cluster = LocalCluster(self.binary, self.workdir / "cluster", netns=hosts).start()
            self.web = MockWebProcess(self.spec)
            expected = _expected(self.web, self.spec)
            total = sum(expected.values())
            for _ in range(INSTANCES):
                self.start_instance()
            marks = sorted(self.rng.uniform(0.1, 0.8) * total for _ in out.faults)
            actions = {"kill-instance": self.kill_instance, "kill-master": self.kill_master,
                       "stop-master": self.stop_master, "restart-empty": self.restart_empty,
                       "cut-master": self.cut_master, "cut-instance": self.cut_instance, "cut-web": self.cut_web,
                       "skew": self.skew}
            for mark, fault in zip(marks, out.faults):
                while self._served() < mark and any(p.poll() is None for _, p in self.runs):
                    time.sleep(0.05)
                if not any(p.poll() is None for _, p in self.runs):
                    break
                actions[fault]()
                out.fired += 1
            self._finish(expected, total)
        finally:
            for _, proc in self.runs:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
            if self.web is not None:
                self.web.close()
            if self.cluster is not None:
                self.cluster.stop()
            if self.net is not None:
                self.net.close()
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
            elif code != 0:
                out.stopped += 1
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
        "| faults per schedule | schedules | state destroyed | instances stopped non-zero with a line | resumed "
        "| lost | duplicates max | bound | failed seeds |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| {faults} | {len(outcomes)} | {sum(o.state_gone for o in outcomes)} | {sum(o.stopped for o in outcomes)} "
        f"| {sum(o.resumed for o in outcomes)} "
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
    why_not = netns.available()
    if why_not is None:
        gone = netns.cleanup_leftovers()
        if gone:
            print(f"removed leftovers of an earlier run: {', '.join(gone)}")
    else:
        print(f"no network faults: {why_not}")
    if not LIBFAKETIME.exists():
        print(f"no clock skew: {LIBFAKETIME} not installed (Debian package libfaketime)")
    pool = kinds(network=why_not is None, skew=LIBFAKETIME.exists())
    outcomes = []
    for i in range(args.schedules):
        seed = args.seed + i
        workdir = Path(tempfile.mkdtemp(prefix=f"frontier-faults-{seed}-"))
        spec = SiteSpec(pages=args.pages, hosts=args.hosts, seed=seed)
        outcome = Schedule(binaries[0], seed, args.faults, spec, workdir, network=why_not is None,
                           kinds=pool).run()
        outcomes.append(outcome)
        print(f"seed {seed}: {' + '.join(outcome.faults)} ({outcome.fired} fired): exit codes {outcome.codes}, lost {outcome.lost}, "
              f"duplicates {outcome.duplicates}/{outcome.bound}{', state destroyed' if outcome.state_gone else ''}"
              f"{', resumed' if outcome.resumed else ''}"
              f"{'' if outcome.ok else ' FAILED: ' + '; '.join(outcome.problems)}"
              f"{' (logs: ' + str(workdir) + ')' if args.keep or not outcome.ok else ''}", flush=True)
        if outcome.ok and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"\n{binaries[0].name}, 3+3 Cluster, {INSTANCES} instances x {CONCURRENCY} fetches, "
          f"mock web {args.hosts} hosts x {args.pages} pages\n")
    print(table(outcomes, args.faults))
    drawn = Counter(f for o in outcomes for f in o.faults)
    fired = Counter(f for o in outcomes for f in o.faults[:o.fired])
    print("\nfaults drawn (fired before the crawl ended): "
          + ", ".join(f"{f} {drawn[f]} ({fired[f]})" for f in FAULTS if drawn[f]))
    return 0 if all(o.ok for o in outcomes) else 1
