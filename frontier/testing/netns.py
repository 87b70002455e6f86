"""Network partitions on one machine for the fault suite: `ip netns` + veth + a bridge, cuts made with nftables.

    with Net() as net:                       # bridge <prefix>br, 10.88.S.1/24, in the root namespace
        node = net.add_host()                # namespace <prefix>n1, address 10.88.S.2 on a veth to the bridge
        node.argv(["valkey-server", conf])   # the command run inside the namespace
        net.isolate(node, [other.address])   # inside the namespace: drop every packet to or from those
        net.track(61001)                     # before the instance of group 61001 starts
        net.cut_group(61001, ["10.88.S.0/24"])   # root namespace: sockets of group 61001 reach none of those
        net.heal()                           # every cut undone

Servers go in namespaces, each on its own address (so a cut can single out a node); frontier instances stay
in the root namespace (the mock web binds 127.0.0.1) and each runs with its own group id, which nftables
matches (`meta skgid`): a cut drops the group's packets out, and the packets in on connections it opened
(conntrack marks them). All addresses are private and behind a bridge with no uplink: nothing leaves the
machine. Names carry the creating process's pid (`<prefix>` = "ffp<pid><a letter per Net>"): `cleanup_leftovers()` removes
what a dead process left behind (namespaces, links, nftables tables) and never touches a live run's.
Needs root (CAP_NET_ADMIN), iproute2 and nft; `available()` says whether they work here.
"""

from __future__ import annotations

import ipaddress
import itertools
import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

PREFIX = "ffp"  # every namespace, link and nftables table made here starts with this and a pid
SUBNETS = range(20, 250)  # 10.88.S.0/24: the first S no interface on this machine uses
GROUP_BASE = 61000  # instance i runs with group id GROUP_BASE + i
_NAME = re.compile(rf"^{PREFIX}(\d+)")
_SERIAL = itertools.count()  # a letter per Net of this process: the kernel removes a deleted namespace's
# veth ends lazily, so a Net started right after another must not reuse its link names


def _run(argv: Sequence[str], *, check: bool = True, stdin: str | None = None) -> str:
    done = subprocess.run(list(argv), input=stdin, capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()}")
    return done.stdout


MISSING = "iproute2 (ip) or nftables (nft) not installed"


def available() -> str | None:
    """None when namespaces, veth pairs and nftables work here; else why not (a skip reason; MISSING when a
    tool is not installed, which a root run can cure with apt-get, unlike a sandbox that forbids namespaces)."""
    if shutil.which("ip") is None or shutil.which("nft") is None:
        return MISSING
    probe = f"{PREFIX}{os.getpid()}probe"
    try:
        _run(["ip", "netns", "add", probe])
        _run(["ip", "netns", "exec", probe, "nft", "add", "table", "inet", "probe"])
        return None
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        return f"`ip netns` or nftables not permitted here ({exc})"
    finally:
        _run(["ip", "netns", "delete", probe], check=False)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def cleanup_leftovers() -> list[str]:
    """Remove the namespaces, links and root nftables tables of runs whose process is gone; returns their names."""
    gone: list[str] = []

    def dead(name: str) -> bool:
        m = _NAME.match(name)
        return m is not None and int(m[1]) != os.getpid() and not _alive(int(m[1]))

    for line in _run(["ip", "netns", "list"], check=False).splitlines():
        name = line.split()[0] if line.split() else ""
        if dead(name):
            _run(["ip", "netns", "delete", name], check=False)
            gone.append(name)
    for line in _run(["ip", "-o", "link", "show"], check=False).splitlines():
        name = line.split(":")[1].strip().split("@")[0] if line.count(":") >= 2 else ""
        if dead(name):
            _run(["ip", "link", "delete", name], check=False)
            gone.append(name)
    for line in _run(["nft", "list", "tables"], check=False).splitlines():
        parts = line.split()
        if len(parts) == 3 and dead(parts[2]):
            _run(["nft", "delete", "table", parts[1], parts[2]], check=False)
            gone.append(parts[2])
    return gone


def _free_subnet() -> int:
    used = _run(["ip", "-o", "-4", "addr", "show"])
    for s in SUBNETS:
        if f" 10.88.{s}." not in used:
            return s
    raise RuntimeError("no free 10.88.S.0/24 subnet for the fault suite's bridge")


@dataclass(frozen=True, kw_only=True)
class Host:
    """A namespace with one address on the bridge."""

    namespace: str
    address: str

    def argv(self, command: Sequence[str]) -> list[str]:
        """`command` run inside this namespace."""
        return ["ip", "netns", "exec", self.namespace, *command]


class Net:
    """A bridge and the namespaces behind it (see the module doc); `close()` removes all of it, idempotent."""

    def __init__(self) -> None:
        self.prefix = f"{PREFIX}{os.getpid()}{chr(ord('a') + next(_SERIAL) % 26)}"
        self.bridge = f"{self.prefix}br"
        self.hosts: list[Host] = []
        self._isolated: set[str] = set()
        self._cut_tables: set[str] = set()
        self._up = False
        self._subnet = 0

    @property
    def gateway(self) -> str:
        """The bridge's address: where the root namespace's traffic to the hosts comes from."""
        return f"10.88.{self._subnet}.1"

    @property
    def network(self) -> str:
        return f"10.88.{self._subnet}.0/24"

    def start(self) -> "Net":
        cleanup_leftovers()
        self.close()
        self._subnet = _free_subnet()
        self._up = True
        try:
            _run(["ip", "link", "add", self.bridge, "type", "bridge"])
            _run(["ip", "addr", "add", f"{self.gateway}/24", "dev", self.bridge])
            _run(["ip", "link", "set", self.bridge, "up"])
            # root namespace: connections opened by a tracked group carry its id as their conntrack mark
            _run(["nft", "-f", "-"], stdin=f"""table inet {self.prefix} {{
                chain output {{ type filter hook output priority -10; policy accept; }}
            }}""")
        except BaseException:
            self.close()
            raise
        return self

    def add_host(self) -> Host:
        """A new namespace with the next address, linked to the bridge by a veth pair."""
        n = len(self.hosts) + 1
        host = Host(namespace=f"{self.prefix}n{n}", address=f"10.88.{self._subnet}.{n + 1}")
        outer, inner = f"{self.prefix}v{n}", f"{self.prefix}p{n}"
        _run(["ip", "netns", "add", host.namespace])
        self.hosts.append(host)
        _run(["ip", "link", "add", outer, "type", "veth", "peer", "name", inner])
        _run(["ip", "link", "set", inner, "netns", host.namespace])
        _run(["ip", "link", "set", outer, "master", self.bridge])
        _run(["ip", "link", "set", outer, "up"])
        for argv in (["ip", "addr", "add", f"{host.address}/24", "dev", inner], ["ip", "link", "set", inner, "up"],
                     ["ip", "link", "set", "lo", "up"], ["ip", "route", "add", "default", "via", self.gateway]):
            _run(host.argv(argv))
        return host

    def track(self, gid: int) -> None:
        """Mark the connections that sockets of group `gid` open from now on: `cut_group` can then also drop
        the packets they receive. Call it before the group's process starts."""
        if not GROUP_BASE <= gid < GROUP_BASE + 1000:
            raise ValueError(f"group {gid} outside {GROUP_BASE}-{GROUP_BASE + 999}")
        _run(["nft", "add", "rule", "inet", self.prefix, "output", "meta", "skgid", str(gid),
              "ct", "mark", "set", str(gid)])

    def isolate(self, host: Host, peers: Iterable[str]) -> None:
        """Inside `host`'s namespace, drop every packet to or from `peers` (addresses); others still pass."""
        addrs = ", ".join(peers)
        _run(host.argv(["nft", "-f", "-"]), stdin=f"""table inet cut {{
            chain input {{ type filter hook input priority 0; policy accept; ip saddr {{ {addrs} }} drop; }}
            chain output {{ type filter hook output priority 0; policy accept; ip daddr {{ {addrs} }} drop; }}
        }}""")
        self._isolated.add(host.namespace)

    def cut_group(self, gid: int, targets: Iterable[str], ports: Iterable[int] = ()) -> None:
        """Root namespace: sockets of group `gid` neither send to nor receive from `targets` (addresses or
        networks; with `ports`, only those TCP ports of them). Received packets are dropped on connections
        opened since `track(gid)`."""
        dests = ", ".join(str(ipaddress.ip_network(t)) for t in targets)
        port_list = ", ".join(map(str, ports))
        out_port = f"tcp dport {{ {port_list} }} " if port_list else ""
        in_port = f"tcp sport {{ {port_list} }} " if port_list else ""
        table = f"{self.prefix}c{gid}"
        _run(["nft", "-f", "-"], stdin=f"""table inet {table} {{
            chain output {{ type filter hook output priority 0; policy accept;
                meta skgid {gid} ip daddr {{ {dests} }} {out_port}drop; }}
            chain input {{ type filter hook input priority 0; policy accept;
                ct mark {gid} ip saddr {{ {dests} }} {in_port}drop; }}
        }}""")
        self._cut_tables.add(table)

    def heal(self) -> None:
        """Undo every cut."""
        for namespace in list(self._isolated):
            _run(["ip", "netns", "exec", namespace, "nft", "delete", "table", "inet", "cut"], check=False)
            self._isolated.discard(namespace)
        for table in list(self._cut_tables):
            _run(["nft", "delete", "table", "inet", table], check=False)
            self._cut_tables.discard(table)

    def close(self) -> None:
        """Cuts, namespaces (their veth ends go with them), the bridge and the root table; idempotent."""
        if not self._up:
            return
        self.heal()
        for n, host in enumerate(self.hosts, 1):
            _run(["ip", "link", "delete", f"{self.prefix}v{n}"], check=False)  # both ends, now
            _run(["ip", "netns", "delete", host.namespace], check=False)
        self.hosts.clear()
        _run(["ip", "link", "delete", self.bridge], check=False)
        _run(["nft", "delete", "table", "inet", self.prefix], check=False)
        self._up = False

    def __enter__(self) -> "Net":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
