"""The Redis crawl state under faults, each against real servers (one per test where the test
kills or restarts it): a rollback to an older RDB, a reply lost on the wire (a loopback proxy that cuts the
connection before the reply), an instance whose clock is off, a server restarted empty, an evicting server,
instances with different policies."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from faultkit import CrawlRun, messages, mock_config, write_config
from frontier.errors import StorageError
from frontier.state.base import Ack, Commit, Link, Outcome, StatePolicy
from frontier.state.redis_conn import load_library, plaintext_warning
from frontier.state.redis_keys import KeySpace
from frontier.state.redis_lua import (FUNCTION_SEEN_ADD, FUNCTION_SEEN_HAS, FUNCTION_VERSION, LIBRARY,
                                      LIBRARY_VERSION, MAX_CHUNK_ENTRIES)
from frontier.state.redis_state import WAIT_TIMEOUT_MS, RedisCrawlState
from frontier.testing import MockWeb, SiteSpec
from frontier.testing.redis_servers import LOOPBACK, LocalCluster, RedisServer, ServerBinary

POLICY = StatePolicy(lease_timeout=100.0, max_retries=2, max_per_host=8, obey_robots=False)


def allow_all(host: str, url: str) -> bool:
    return True


@pytest.fixture
def server(redis_binary: ServerBinary, tmp_path: Path) -> Iterator[RedisServer]:
    """A server of this test's own: the test kills or restarts it."""
    with RedisServer(redis_binary, tmp_path / "server") as node:
        yield node


def open_state(url: str | list[str], crawl: str, policy: StatePolicy = POLICY, **kwargs: object) -> RedisCrawlState:
    return RedisCrawlState(url, policy, crawl=crawl, groups=1, give_up_after=10.0, **kwargs)  # type: ignore[arg-type]


def test_an_ack_after_a_rollback_never_ends_another_urls_lease(server: RedisServer, crawl_name: str) -> None:
    """Finding 1: a server restarted from an older RDB forgets a lease; the next lease must not reuse its key."""
    a = open_state(server.url, crawl_name)
    a.commit(Commit(links=[Link("http://b.test/1", 0)]), time.time())
    server.client().save()  # the RDB the server comes back from
    [la] = a.lease(1, time.time(), allow_all).leases
    assert la.url == "http://b.test/1"
    server.kill()
    server.restart()  # rolled back: b.test/1 queued and not leased
    with open_state(server.url, crawl_name) as b:
        b.commit(Commit(links=[Link("http://a.test/1", 0)]), time.time())
        leases = b.lease(2, time.time(), allow_all).leases
        assert sorted(lease.url for lease in leases) == ["http://a.test/1", "http://b.test/1"]
        # a's result for b.test/1 arrives: it must not end b's lease of a.test/1 (or of anything else)
        committed = a.commit(Commit(acks=[Ack(key=la.key, outcome=Outcome.DONE, fetched=True)]), time.time())
        assert committed.stale == [la.key]
        assert all(lease is not None for lease in b.leased([lease.key for lease in leases]))
        assert b.stats().queued == 2 and b.stats().fetched == 0
    a.close()


class CuttingProxy:
    """A TCP proxy on loopback to `port` that, once armed with a word, closes the client's connection instead of
    passing on the reply to the first request containing it: the server ran the command, the client never
    hears so and sends it again."""

    def __init__(self, port: int) -> None:
        self._upstream = port
        self._listener = socket.create_server((LOOPBACK, 0))
        self.port = self._listener.getsockname()[1]
        self.armed: bytes | None = None
        self.cut = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection((LOOPBACK, self._upstream))
            pending = threading.Event()
            threading.Thread(target=self._pump, args=(client, server, pending, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, pending, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, pending: threading.Event, requests: bool) -> None:
        try:
            while data := src.recv(65536):
                if requests and self.armed is not None and self.armed in data:
                    self.armed = None
                    pending.set()
                elif not requests and pending.is_set():
                    pending.clear()
                    self.cut += 1
                    raise OSError("cut")
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self) -> None:
        self._listener.close()


@pytest.fixture
def proxy(redis_node: RedisServer) -> Iterator[CuttingProxy]:
    p = CuttingProxy(redis_node.port)
    yield p
    p.close()


def test_a_lease_whose_reply_is_lost_is_answered_again_not_orphaned(proxy: CuttingProxy, crawl_name: str) -> None:
    """Finding 6: the repeated lease call gets the first call's leases (before: none, and the URL leased to
    nobody until it expires, an attempt counted)."""
    with open_state(f"redis://{LOOPBACK}:{proxy.port}/0", crawl_name) as state:
        state.commit(Commit(links=[Link("http://a.test/1", 0)]), time.time())
        proxy.armed = b"frontier_lease"
        leases = state.lease(1, time.time(), allow_all).leases
        assert proxy.cut == 1
        assert [lease.url for lease in leases] == ["http://a.test/1"]
        state.commit(Commit(acks=[Ack(key=leases[0].key, outcome=Outcome.DONE, fetched=True)]), time.time())
        assert state.done(time.time()) and state.stats().fetched == 1


def test_a_commit_whose_reply_is_lost_queues_a_forced_link_once(proxy: CuttingProxy, crawl_name: str) -> None:
    """Finding 6: a forced link (queued without the seen-test) is queued once when its commit is sent again."""
    with open_state(f"redis://{LOOPBACK}:{proxy.port}/0", crawl_name) as state:
        proxy.armed = b"frontier_commit"
        state.commit(Commit(links=[Link("http://a.test/1", 0, force=True)]), time.time())
        assert proxy.cut == 1
        assert state.stats().queued == 1


def test_an_instance_whose_clock_is_ahead_keeps_the_others_politeness(redis_node: RedisServer,
                                                                     crawl_name: str) -> None:
    """Finding 4: times are the server's. An instance 20 s ahead (within lease_timeout / 4) sees a host's
    delay as the others do (before: it leased the host's next page at once)."""
    policy = StatePolicy(lease_timeout=100.0, delay=10.0, obey_robots=False)
    with open_state(redis_node.url, crawl_name, policy) as a, \
            open_state(redis_node.url, crawl_name, policy, clock=lambda: time.time() + 20) as ahead:
        a.commit(Commit(links=[Link("http://a.test/1", 0), Link("http://a.test/2", 0)]), time.time())
        [first] = a.lease(5, time.time(), allow_all).leases
        a.commit(Commit(acks=[Ack(key=first.key, outcome=Outcome.DONE, fetched=True)]), time.time())
        assert ahead.lease(5, time.time() + 20, allow_all).leases == []
        assert ahead.expire(time.time() + 20) == [] and a.next_ready_in(time.time()) == pytest.approx(10, abs=1)
        assert ahead.next_ready_in(time.time() + 20) == pytest.approx(10, abs=1)


def test_an_instance_whose_clock_jumps_90s_ahead_steals_no_lease_and_keeps_politeness(
        redis_node: RedisServer, crawl_name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Finding 4: every Function reads the server's TIME. An instance whose clock jumps 90 s ahead mid-crawl
    (a VM resumed, an NTP step; at start it was in sync) acks at the server's time, ends none of another
    instance's leases and keeps a host's delay (before: the offset measured at start still held, so its ack
    set the host's next fetch 100 s away instead of 10, and it expired the other's leases, 60 s long, and
    leased their URLs again at once)."""
    policy = StatePolicy(lease_timeout=60.0, delay=10.0, obey_robots=False)
    jump = [0.0]

    def clock() -> float:
        return time.time() + jump[0]

    with open_state(redis_node.url, crawl_name, policy) as a, \
            open_state(redis_node.url, crawl_name, policy, clock=clock) as ahead:
        urls = ("http://a.test/1", "http://a.test/2", "http://b.test/1", "http://b.test/2")
        a.commit(Commit(links=[Link(url, 0) for url in urls]), time.time())
        [mine] = ahead.lease(1, clock(), allow_all).leases
        [theirs] = a.lease(5, time.time(), allow_all).leases  # the other host: one in flight per host (delay)
        assert theirs.host != mine.host
        jump[0] = 90.0
        # its first call after the jump is an ack: the Function finds its time 90 s off TIME and uses TIME
        assert ahead.commit(Commit(acks=[Ack(key=mine.key, outcome=Outcome.DONE, fetched=True)]), clock()).stale == []
        assert a.next_ready_in(time.time()) == pytest.approx(10, abs=2)  # the host's delay from the result
        assert ahead.expire(clock()) == []
        assert ahead.lease(5, clock(), allow_all).leases == []
        assert ahead.next_ready_in(clock()) == pytest.approx(10, abs=2)
        assert a.commit(Commit(acks=[Ack(key=theirs.key, outcome=Outcome.DONE, fetched=True)]), time.time()).stale == []
        assert a.stats().fetched == 2
        assert "this machine's clock moved +90.0s against the server's" in capsys.readouterr().err


def test_a_clock_far_off_the_servers_is_refused_and_a_small_skew_warned(redis_node: RedisServer, crawl_name: str,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(StorageError, match=r"clock is \+60\.\ds off the server's, more than lease_timeout / 4"):
        open_state(redis_node.url, crawl_name, clock=lambda: time.time() - 60)
    with open_state(redis_node.url, crawl_name, clock=lambda: time.time() + 3):
        assert "clock is -3.0s off the server's" in capsys.readouterr().err


def test_a_server_restarted_empty_stops_the_crawl_with_one_line(server: RedisServer, crawl_name: str) -> None:
    """Finding 5: before, the instance reloaded the library and carried on against an empty keyspace: done."""
    with open_state(server.url, crawl_name) as state:
        state.commit(Commit(links=[Link("http://a.test/1", 0)]), time.time())
        server.kill()
        server.restart()  # no persistence: empty
        assert state.lease(5, time.time(), allow_all).leases == []  # nothing ready: no call made
        for ask in (state.done, state.next_ready_in):  # what a crawl asks when it finds nothing to lease
            with pytest.raises(StorageError, match=f"the state of crawl '{crawl_name}' is gone from the server"):
                ask(time.time())
        with pytest.raises(StorageError, match="the crawl state is gone from the server"):
            state.commit(Commit(links=[Link("http://a.test/2", 0)]), time.time())  # any call refuses


def test_an_evicting_server_is_refused_with_one_line_naming_maxmemory_policy(redis_binary: ServerBinary,
                                                                            tmp_path: Path, crawl_name: str) -> None:
    """Finding 5: allkeys-* may evict seen chunks, queues, counters: the crawl refuses to start (exit 2)."""
    with RedisServer(redis_binary, tmp_path / "lru", config=["maxmemory-policy allkeys-lru"]) as node:
        with pytest.raises(StorageError, match="has maxmemory-policy allkeys-lru, which may evict"):
            open_state(node.url, crawl_name)
        with MockWeb.serve_in_thread(SiteSpec(pages=5, hosts=1, seed=24)) as web:
            redis = {"backend": "redis", "redis": {"url": node.url, "crawl": crawl_name}}
            cfg = mock_config(web, tmp_path / "data", storage={"data_dir": str(tmp_path / "data"), **redis})
            run = CrawlRun(write_config(tmp_path / "a.yaml", cfg), tmp_path, "a")
            assert run.wait(60) == 2, run.output()
            [message] = messages(run.stderr)
            assert "maxmemory-policy allkeys-lru" in message and "\n" not in message, message
            assert web.snapshot()["total"] == 0


def test_a_server_without_persistence_is_warned_about(redis_node: RedisServer, crawl_name: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    with open_state(redis_node.url, crawl_name):
        assert "has persistence off (no RDB save, no AOF)" in capsys.readouterr().err


def test_an_instance_with_another_policy_warns_and_pins_its_own(redis_node: RedisServer, crawl_name: str,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Finding 7: the policy is pinned when the crawl is created (before: each instance applied its own silently).
    Another policy (max_pages raised for a rerun) is not refused: one warning line naming the differing fields,
    and the crawl's pinned policy becomes the new one."""
    meta = KeySpace(crawl=crawl_name, groups=1).meta_key
    first = StatePolicy(lease_timeout=100.0, max_retries=2, max_per_host=8, obey_robots=False, max_pages=1)
    with open_state(redis_node.url, crawl_name, first) as state:
        state.commit(Commit(links=[Link("http://a.test/1", 0), Link("http://a.test/2", 0)]), time.time())
        [lease] = state.lease(5, time.time(), allow_all).leases
        state.commit(Commit(acks=[Ack(key=lease.key, outcome=Outcome.DONE, fetched=True)]), time.time())
        assert state.lease(5, time.time(), allow_all).leases == []  # max_pages=1 reached
    assert capsys.readouterr().err.count("policy changed") == 0
    raised = StatePolicy(lease_timeout=100.0, max_retries=2, max_per_host=2, delay=5.0, obey_robots=False,
                         max_pages=3)
    with open_state(redis_node.url, crawl_name, raised) as state:
        [line] = [x for x in capsys.readouterr().err.splitlines() if "policy changed" in x]
        assert f"crawl '{crawl_name}'" in line, line
        assert "delay=0.0 -> 5.0, max_pages=1 -> 3, max_per_host=8 -> 2;" in line, line
        assert "max_retries" not in line and "lease_timeout" not in line, line
        pinned = redis_node.client().hget(meta, "policy").decode()
        assert "max_pages=3" in pinned and "max_per_host=2" in pinned and "delay=5.0" in pinned, pinned
        # the raised limit applies: the second page is leased
        assert [x.url for x in state.lease(5, time.time(), allow_all).leases] == ["http://a.test/2"]
    with open_state(redis_node.url, crawl_name, raised):  # the same policy as the pinned one: no warning
        assert "policy changed" not in capsys.readouterr().err


def test_an_instance_of_another_library_version_refuses_and_leaves_the_library(redis_node: RedisServer,
                                                                              crawl_name: str) -> None:
    """Finding 7: a crawl created by another version (its meta says library 6) is refused before this
    instance replaces the server's library (before: FUNCTION LOAD REPLACE swapped it back and forth)."""
    client = redis_node.client()
    client.function_load(LIBRARY.replace(f"local VERSION = '{LIBRARY_VERSION}'", "local VERSION = 'old'"),
                         replace=True)
    client.hset(KeySpace(crawl=crawl_name, groups=1).meta_key, "library", "6")
    with pytest.raises(StorageError, match=f"library=6 \\(asked: {LIBRARY_VERSION}\\)"):
        open_state(redis_node.url, crawl_name)
    assert client.fcall_ro(FUNCTION_VERSION, 0) == b"old"
    client.function_load(LIBRARY, replace=True)


def test_a_busy_server_is_waited_for(redis_binary: ServerBinary, tmp_path: Path, crawl_name: str) -> None:
    """Finding 7: a long script on the server makes it reply BUSY; the call is retried, not fatal."""
    with RedisServer(redis_binary, tmp_path / "busy", config=["busy-reply-threshold 100"]) as node, \
            open_state(node.url, crawl_name) as state:
        spin = "local s = tonumber(redis.call('TIME')[1]) while tonumber(redis.call('TIME')[1]) < s + 2 do end"
        busy = threading.Thread(target=lambda: node.client().eval(spin, 0))
        busy.start()
        time.sleep(0.5)
        try:
            state.commit(Commit(links=[Link("http://a.test/1", 0)]), time.time())
        finally:
            busy.join()
        assert state.stats().queued == 1


def test_a_seen_add_that_fails_has_written_nothing(redis_node: RedisServer, crawl_name: str) -> None:
    """Finding 3: crafted fingerprints that would overflow one chunk fail the call before its first write
    (before: the chunks routed earlier in the call kept their new entries: URLs seen but never queued)."""
    client = redis_node.client()
    load_library(client, redis_node.url)
    key = KeySpace(crawl=crawl_name, groups=1).seen_key(0)
    # load 1: two fingerprints split the set into chunks 0 and 1 (picked by the top bit of byte 0)
    assert client.fcall(FUNCTION_SEEN_ADD, 1, key, bytes(8) + b"\x80" + bytes(7), 1, "other") == b"11"
    early = [bytes([0, 0, 0, 0, 0, 0, 0, i]) for i in range(1, 6)]  # chunk 0, written first
    crafted = [b"\x80\x00" + n.to_bytes(6, "big") for n in range(1, MAX_CHUNK_ENTRIES + 2)]  # all in chunk 1
    with pytest.raises(redis.ResponseError, match="a chunk would pass"):
        client.fcall(FUNCTION_SEEN_ADD, 1, key, b"".join(early + crafted), 16384, "other")
    assert client.fcall(FUNCTION_SEEN_HAS, 1, key, b"".join(early)) == b"00000"
    assert int(client.hget(key, "n")) == 2


def test_a_dead_startup_node_does_not_stop_a_cluster_crawl_from_starting(redis_binary: ServerBinary, tmp_path: Path,
                                                                       crawl_name: str) -> None:
    """Finding 10: storage.redis.url may list startup nodes; the first that answers is used (before: only
    one URL, and a dead one stopped every instance at start though the Cluster had failed over)."""
    with LocalCluster(redis_binary, tmp_path / "cluster", masters=3, replicas=1) as cluster:
        with open_state(cluster.url, crawl_name) as state:
            state.commit(Commit(links=[Link(f"http://h{i}.test/", 0) for i in range(20)]), time.time())
        dead, alive, its_replica = cluster.nodes[0], cluster.nodes[1], cluster.nodes[cluster.masters]
        dead.kill()
        probe, deadline = its_replica.client(), time.monotonic() + 30
        while probe.info("replication")["role"] != "master" or probe.cluster("info")["cluster_state"] != "ok":
            assert time.monotonic() < deadline, "no failover"
            time.sleep(0.2)
        with pytest.raises(StorageError, match="cannot reach"):
            open_state(dead.url, crawl_name)
        with open_state([dead.url, alive.url], crawl_name) as state:  # type: ignore[arg-type]
            assert state.stats().queued == 20
        with pytest.raises(StorageError, match=f"cannot reach any of the servers tried: {dead.url} .*; "):
            open_state([dead.url, dead.url], crawl_name)  # type: ignore[arg-type]


def test_a_cluster_lease_or_ack_no_replica_confirms_is_not_used(redis_binary: ServerBinary, tmp_path: Path,
                                                               crawl_name: str) -> None:
    """A master cut off from its replicas takes writes until the Cluster fails it over; a lease or an ack no
    replica holds is lost then, and its page fetched twice. So on a Cluster with replicas a lease is handed
    out, and an ack counts, only once a replica confirms it (before: the state found no replica in redis-py's
    node table, which lists none unless it reads from them, and waited for none)."""
    with LocalCluster(redis_binary, tmp_path / "cluster", masters=3, replicas=1) as cluster:
        state = RedisCrawlState(cluster.url, POLICY, crawl=crawl_name, groups=1, give_up_after=3.0)
        try:
            state.commit(Commit(links=[Link(f"http://a.test/{i}", 0) for i in range(2)]), time.time())
            [lease] = state.lease(1, time.time(), allow_all).leases
            for replica in cluster.nodes[cluster.masters:]:
                replica.kill()
            with pytest.raises(StorageError, match="no replica of the master .* confirmed new leases for 3s"):
                state.lease(1, time.time(), allow_all)
            with pytest.raises(StorageError, match="no replica of the master .* confirmed a commit's acks for 3s"):
                state.commit(Commit(acks=[Ack(key=lease.key, outcome=Outcome.DONE, fetched=True)]), time.time())
        finally:
            state.client.close()


def test_the_config_takes_a_list_of_startup_nodes(tmp_path: Path) -> None:
    from frontier.config import load_config
    from frontier.errors import ConfigError

    nodes = ["redis://127.0.0.1:7000/0", "redis://127.0.0.1:7001/0"]
    cfg = load_config({"seeds": ["http://a.test/"], "storage": {"backend": "redis", "redis": {"url": nodes}}},
                      base_dir=tmp_path)
    assert cfg.storage.redis.url == tuple(nodes)
    with pytest.raises(ConfigError, match="storage.redis.url: expected a redis://, rediss:// or unix:// URL or a list"):
        bad = {"backend": "redis", "redis": {"url": [nodes[0], "http://x"]}}
        load_config({"seeds": ["http://a.test/"], "storage": bad}, base_dir=tmp_path)


@pytest.mark.parametrize(("url", "refused"), [
    ("redis://crawler:s3cret@10.0.0.5:6379/0", True),
    ("redis://10.0.0.5:6379/0?password=s3cret", True),
    ("rediss://crawler:s3cret@10.0.0.5:6379/0", False),  # TLS
    ("redis://crawler:s3cret@127.0.0.1:6379/0", False),  # this machine
    ("redis://10.0.0.5:6379/0", False),  # no password to leak (refused elsewhere unless allow_unauthenticated)
])
def test_a_password_over_plain_redis_to_a_remote_server_is_refused(url: str, refused: bool) -> None:
    """Finding 8: a password sent unencrypted to a remote server is refused before any connection, one line
    naming storage.redis.allow_plaintext, unless that is set (before: accepted silently, then warned)."""
    from frontier.errors import ConfigError
    from frontier.state.redis_conn import check_url, connect

    warning = plaintext_warning(url)
    assert (warning is not None) == refused
    if not refused:
        check_url(url, allow_unauthenticated=True)
        return
    assert "unencrypted" in warning and "rediss://" in warning and "s3cret" not in warning
    with pytest.raises(ConfigError, match="storage.redis.allow_plaintext") as refusal:
        connect(url)  # refused before it connects: no packet leaves this machine
    assert "s3cret" not in str(refusal.value) and "\n" not in str(refusal.value)
    assert check_url(url, allow_plaintext=True) == url


def test_cluster_nodes_discovered_remote_through_a_local_seed_are_checked() -> None:
    """Finding 8: a loopback seed whose Cluster announces nodes elsewhere would send them the password in plain."""
    from frontier.errors import ConfigError
    from frontier.state.redis_conn import check_nodes

    seed = "redis://:s3cret@127.0.0.1:7000/0"
    check_nodes(seed, ["127.0.0.1", "localhost", "::1"])
    with pytest.raises(ConfigError, match=r"nodes 10\.0\.0\.7 are not on this machine.*allow_plaintext"):
        check_nodes(seed, ["127.0.0.1", "10.0.0.7"])
    check_nodes(seed, ["10.0.0.7"], allow_plaintext=True)
    check_nodes("rediss://:s3cret@127.0.0.1:7000/0", ["10.0.0.7"])
    check_nodes("redis://127.0.0.1:7000/0", ["10.0.0.7"])  # no password to leak


def test_a_commit_no_replica_confirms_is_not_acked(replicated: tuple[RedisServer, RedisServer], crawl_name: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Finding 2: WAIT returning 0 (the replica is gone) keeps the ack back: asked again for give_up_after, then
    one line and a StorageError, the page still leased (before: acked anyway, its links on the master only).
    A replica back within give_up_after lets the ack through."""
    master, replica = replicated
    state = RedisCrawlState(master.url, POLICY, crawl=crawl_name, groups=1, give_up_after=3.0)
    with state:
        state.commit(Commit(links=[Link("http://a.test/1", 0), Link("http://a.test/2", 0)]), time.time())
        first, second = state.lease(2, time.time(), allow_all).leases
        replica.kill()
        done = Commit(links=[Link("http://a.test/3", 1)], acks=[Ack(key=first.key, outcome=Outcome.DONE, fetched=True)])
        with pytest.raises(StorageError, match="no replica of the server confirmed a commit's links for 3s"):
            state.commit(done, time.time())
        assert state.leased([first.key]) != [None] and state.stats().fetched == 0
        assert "its pages are not acked" in capsys.readouterr().err
        back = threading.Timer(WAIT_TIMEOUT_MS / 1000 + 0.5, replica.restart)  # after the first WAIT ends
        back.start()
        try:
            state.give_up_after = 60.0
            state.commit(Commit(acks=[Ack(key=second.key, outcome=Outcome.DONE, fetched=True)],
                                links=[Link("http://a.test/4", 1)]), time.time())
        finally:
            back.join()
        assert state.leased([second.key]) == [None] and state.stats().fetched == 1
        assert "a replica of the server confirmed after" in capsys.readouterr().err


def test_a_master_with_replicas_and_no_min_replicas_to_write_is_warned_about(
        replicated: tuple[RedisServer, RedisServer], crawl_name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Finding 2: partitioned from its replicas, such a master takes writes a failover loses."""
    master, _ = replicated
    with open_state(master.url, crawl_name):
        pass
    assert "min-replicas-to-write 0" in capsys.readouterr().err
    client = master.client()
    client.config_set("min-replicas-to-write", 1)
    deadline = time.monotonic() + 30  # the master counts its replica good once an ACK came within the max lag
    while True:
        try:
            client.set(f"{crawl_name}-probe", 1)
            break
        except redis.exceptions.ResponseError as e:
            assert "NOREPLICAS" in str(e) and time.monotonic() < deadline, e
            time.sleep(0.1)
    with open_state(master.url, crawl_name):
        pass
    assert "min-replicas-to-write" not in capsys.readouterr().err


def crafted_urls(count: int, bits: int) -> list[str]:
    """URLs of one host whose unseeded fingerprints share their top `bits` bits (all 0): one chunk of an
    unseeded seen-set down to depth `bits`, as a hostile site could write them."""
    from frontier.seen.fingerprint import fingerprints

    out: list[str] = []
    start = 0
    while len(out) < count:
        batch = [f"http://a.test/{n}" for n in range(start, start + 100_000)]
        out += [url for url, fp in zip(batch, fingerprints(batch)) if int.from_bytes(fp[:2], "big") >> (16 - bits) == 0]
        start += 100_000
    return out[:count]


def test_crafted_urls_do_not_pile_into_one_chunk(redis_node: RedisServer, crawl_name: str) -> None:
    """Finding 3b: the chunk of a URL is chosen by its fingerprint keyed with the crawl's secret seed (drawn at
    creation, kept in the meta), so URLs crafted against the unseeded hash spread like any others (before:
    all in one chunk, which at 65,535 entries fails every later call touching it). A crawl created before
    seeds keeps seed 0 (its fingerprints stay where they are)."""
    from frontier.state.redis_seen import RedisSeen

    crafted = crafted_urls(600, 12)
    others = [f"http://a.test/other/{n}" for n in range(400)]
    client = redis_node.client()
    with RedisSeen(redis_node.url, crawl=crawl_name, groups=1, load=64, lru_size=0) as seen:
        assert sum(seen.add_many(crafted + others)) == 1000
        chunks = client.keys(f"{seen.keys.seen_key(0)}:*")
        biggest = max(client.strlen(key) for key in chunks)
        assert len(chunks) >= 8 and biggest < 250 * 7, f"{biggest} bytes in one of {len(chunks)} chunks"
        assert seen.seed != 0 and int(client.hget(seen.keys.meta_key, "seed")) == seen.seed
    with RedisSeen(redis_node.url, crawl=crawl_name, groups=1, load=64, lru_size=0) as again:
        assert again.seed == seen.seed and not any(again.add_many(crafted[:50]))
    old = f"{crawl_name}-old"
    client.hset(KeySpace(crawl=old, groups=1).meta_key, "created", "before seeds")
    with RedisSeen(redis_node.url, crawl=old, groups=1, load=64, lru_size=0) as unseeded:
        assert unseeded.seed == 0


def test_an_instance_opening_a_crawl_with_an_emptied_group_stops(redis_node: RedisServer, crawl_name: str) -> None:
    """Finding 5, found by `python -m frontier.bench faults`: a Cluster master restarted empty before its
    replica took over lost its groups; an instance started (or restarted by its supervisor) then wrote the
    epoch into those empty groups again and crawled on, "done" without their URLs. It must stop instead."""
    keys = KeySpace(crawl=crawl_name, groups=2)
    host = next(f"h{i}.test" for i in range(100) if keys.group_of(f"h{i}.test") == 1)
    with RedisCrawlState(redis_node.url, POLICY, crawl=crawl_name, groups=2) as first:
        first.commit(Commit(links=[Link(f"http://{host}/{n}", 0) for n in range(5)]), time.time())
    client = redis_node.client()
    client.delete(*client.keys(f"{keys.group_key(1)}*"))  # the group's master came back empty
    with pytest.raises(StorageError, match="is gone from the server"):
        RedisCrawlState(redis_node.url, POLICY, crawl=crawl_name, groups=2)


def keyspace(client: redis.Redis, crawl: str) -> dict[bytes, bytes | None]:
    """Every key of the crawl, DUMPed: equal snapshots mean nothing was written."""
    return {key: client.dump(key) for key in client.keys(f"frontier:{crawl}:*")}


def _broken_records(parts: dict[str, list[Any]]) -> None:
    parts["records"][-1] = parts["records"][-1].split(b"\0", 1)[0]


def _broken_order(parts: dict[str, list[Any]]) -> None:
    parts["fps"] = [parts["fps"][1], parts["fps"][0]]


def _broken_ack(parts: dict[str, list[Any]]) -> None:
    parts["acks"][0] = parts["acks"][0].rsplit(b"\0", 1)[0]


def _broken_ack_time(parts: dict[str, list[Any]]) -> None:
    head = parts["acks"][0].split(b"\0")
    head[5] = b"soon"  # pause_until
    parts["acks"][0] = b"\0".join(head)


def _broken_rescore(parts: dict[str, list[Any]]) -> None:
    parts["rescores"][0] = parts["rescores"][0].replace(b"\x003.0\0", b"\0high\0")


def _broken_url(parts: dict[str, list[Any]]) -> None:
    parts["records"][0] = b"\0".join([b"0", b"a.test", b"1", b"0", b"0", b"0.0", b"", b"", b"no-scheme"])


def _broken_revisit(parts: dict[str, list[Any]]) -> None:
    """A DONE ack whose revisit schedule is cut short (the ack's text on a page)."""
    parts["acks"][1] = b"123.0\0" + b"\x01" * 8 + b"short"


def _full_chunk(parts: dict[str, list[Any]]) -> None:
    """More new fingerprints than one chunk holds (the set has one chunk): valid records, crafted fingerprints."""
    from frontier.state.redis_state import _record

    n = MAX_CHUNK_ENTRIES + 1
    parts["fps"] = [b"\x80\x00" + i.to_bytes(6, "big") for i in range(1, n + 1)]
    parts["records"] = [_record(i, "a.test", Link(f"http://a.test/c{i}", 1), "") for i in range(n)]


@pytest.mark.parametrize(("broken", "error"), [
    (_broken_records, "malformed record"), (_broken_order, "fingerprints must be sorted and unique"),
    (_broken_ack, "malformed record"), (_broken_ack_time, "malformed ack time"),
    (_broken_rescore, "malformed rescore priority"), (_broken_url, "malformed link URL"),
    (_full_chunk, "a chunk would pass"), (_broken_revisit, "malformed revisit schedule"),
], ids=["link-record", "fingerprint-order", "ack-header", "ack-time", "rescore", "link-url", "full-chunk", "revisit"])
def test_a_commit_that_fails_has_written_nothing(redis_node: RedisServer, crawl_name: str,
                                                 broken: Callable[[dict[str, list[Any]]], None], error: str) -> None:
    """Finding 3: a commit (host states, a rescore, links, a forced link, an ack) whose one part is bad fails with
    one error and leaves the crawl's keys as they were (before: the host states, the rescore, the seen-set or
    the links written before the bad part stayed); the same commit unbroken then goes through."""
    from frontier.state.redis_lua import FUNCTION_COMMIT
    from frontier.state.redis_state import _record

    client = redis_node.client()
    with open_state(redis_node.url, crawl_name) as state:
        state.commit(Commit(links=[Link(f"http://a.test/{i}", 0) for i in range(3)]), time.time())
        [lease] = state.lease(1, time.time(), allow_all).leases
        new = [Link("http://a.test/new1", 1), Link("http://a.test/new2", 1)]
        fps = [fp[:8] for fp in state._seen.fingerprints([link.url for link in new])]  # type: ignore[union-attr]
        order = sorted(range(2), key=fps.__getitem__)
        forced = Link("http://a.test/forced", 1, force=True)

        def parts() -> dict[str, list[Any]]:
            return {"fps": [fps[i] for i in order], "records": [_record(i, "a.test", new[i], "") for i in order],
                    "forced": [_record(2, "a.test", forced, "")],
                    "forced_fps": [state._seen.fingerprints([forced.url])[0][:8]],  # type: ignore[union-attr]
                    "acks": [b"\0".join([b"p", lease.key, b"done", b"1", b"0", b"0", b"", b"0", b"0", b"0", b""]), b""],
                    "states": [b"a.test", b"host-state"],
                    "rescores": [b"\0".join([b"a.test", b"0", b"3.0", b"http://a.test/2"])]}

        def call(p: dict[str, list[Any]]) -> Any:
            args = [b"".join(p["fps"]), len(p["records"]), *p["records"], len(p["forced"]), b"".join(p["forced_fps"]),
                    *p["forced"], len(p["acks"]) // 2, *p["acks"], len(p["states"]) // 2, *p["states"], 0,
                    len(p["rescores"]), *p["rescores"]]
            _, fcall = state._fcall(FUNCTION_COMMIT, 0, state._seen.load,  # type: ignore[union-attr]
                                    state._seen.allocator, *args, now=time.time())  # type: ignore[union-attr]
            return client.fcall(*fcall)

        before = keyspace(client, crawl_name)
        bad = parts()
        broken(bad)
        with pytest.raises(redis.ResponseError) as refused:
            call(bad)
        assert keyspace(client, crawl_name) == before
        assert error in str(refused.value)
        call(parts())
        assert keyspace(client, crawl_name) != before
        assert state.stats().fetched == 1 and state.stats().queued == 5  # 3 - 1 done + 2 new + 1 forced


def test_a_lost_page_budget_stops_the_crawl(redis_node: RedisServer, crawl_name: str) -> None:
    """Finding 5: the crawl-wide page budget (limits.max_pages) carries the crawl's epoch like the groups. A
    budget key lost (evicted, its Cluster master restarted empty) or of an older incarnation stops the crawl
    (before: the count started from 0 again and the crawl fetched max_pages more). A crawl whose budget was a
    plain counter (before the epoch) keeps its count."""
    client = redis_node.client()
    budget = KeySpace(crawl=crawl_name, groups=1).budget_key
    policy = StatePolicy(lease_timeout=100.0, obey_robots=False, max_pages=1)
    with open_state(redis_node.url, crawl_name, policy) as state:
        state.commit(Commit(links=[Link("http://a.test/1", 0), Link("http://b.test/1", 0)]), time.time())
        [lease] = state.lease(5, time.time(), allow_all).leases
        state.commit(Commit(acks=[Ack(key=lease.key, outcome=Outcome.DONE, fetched=True)]), time.time())
        assert state.lease(5, time.time(), allow_all).leases == [] and state.done(time.time())
        client.delete(budget)
        with pytest.raises(StorageError, match="is gone from the server"):
            state.lease(5, time.time(), allow_all)
        with pytest.raises(StorageError, match="is gone from the server"):
            state.done(time.time())
        client.hset(budget, mapping={"epoch": "an-older-incarnation", "used": 0})
        with pytest.raises(StorageError, match="is gone from the server"):
            state.lease(5, time.time(), allow_all)
    with pytest.raises(StorageError, match="is gone from the server"):
        open_state(redis_node.url, crawl_name, policy)
    old = f"{crawl_name}-old"
    with open_state(redis_node.url, old, policy):
        pass
    keys = KeySpace(crawl=old, groups=1)
    client.delete(keys.budget_key)
    client.set(keys.budget_key, 1)  # the counter of a crawl created before the budget had an epoch
    client.hdel(keys.meta_key, "budget_epoch")
    with open_state(redis_node.url, old, policy) as state:
        state.commit(Commit(links=[Link("http://a.test/1", 0)]), time.time())
        assert state.lease(5, time.time(), allow_all).leases == []  # max_pages=1 already used
        assert client.hget(keys.budget_key, "used") == b"1"


def test_the_scrapy_plugin_takes_frontier_redis_allow_plaintext(redis_auth: RedisServer, crawl_name: str) -> None:
    """Finding 8: FRONTIER_REDIS_ALLOW_PLAINTEXT is the plugin's storage.redis.allow_plaintext (before: the plugin
    had no such setting and refused a password over redis:// to another machine, whatever the network). The
    server is reached as 0.0.0.0, an address frontier takes for another machine's (not a loopback address)
    that Linux connects to this machine: no packet leaves it."""
    pytest.importorskip("scrapy")
    from scrapy.settings import Settings

    from conftest import AUTH_PASSWORD
    from frontier.errors import ConfigError
    from frontier.scrapy.settings import FrontierSettings

    url = f"redis://:{AUTH_PASSWORD}@0.0.0.0:{redis_auth.port}/0"
    policy = StatePolicy(lease_timeout=100.0, obey_robots=False)
    refused = FrontierSettings.from_settings(Settings({"FRONTIER_REDIS_URL": url}))
    for open_it in (lambda: refused.open_seen("books"), lambda: refused.open_state("books", policy)):
        with pytest.raises(ConfigError) as caught:
            open_it()
        assert caught.value.key == "FRONTIER_REDIS_ALLOW_PLAINTEXT", caught.value
        assert "FRONTIER_REDIS_ALLOW_PLAINTEXT = True" in str(caught.value) and AUTH_PASSWORD not in str(caught.value)
    allowed = FrontierSettings.from_settings(Settings({"FRONTIER_REDIS_URL": url, "FRONTIER_REDIS_CRAWL": crawl_name,
                                                       "FRONTIER_REDIS_ALLOW_PLAINTEXT": "true"}))
    assert allowed.redis_allow_plaintext is True
    with allowed.open_seen("books") as seen:
        assert seen.add_many(["http://a.test/1"]) == [True]
    with allowed.open_state("books", policy) as state:
        assert state.commit(Commit(links=[Link("http://a.test/1", 0)]), time.time()).new == [False]
    with pytest.raises(ConfigError) as caught:
        FrontierSettings.from_settings(Settings({"FRONTIER_REDIS_ALLOW_PLAINTEXT": "sometimes"}))
    assert caught.value.key == "FRONTIER_REDIS_ALLOW_PLAINTEXT"


# The ACL user of one tenant's crawl (docs/guide/redis.md): its keys only, the library's functions, no FUNCTION.
TENANT_ACL = ("on >{password} resetkeys ~frontier:{crawl}:* resetchannels -@all +@read +@write -@dangerous "
              "+@connection +fcall +fcall_ro +info +time +wait +config|get +cluster|slots +cluster|shards "
              "+cluster|nodes +cluster|info -function")


def test_a_tenant_with_the_documented_acl_crawls_its_crawl_and_nothing_else(redis_auth: RedisServer,
                                                                            crawl_name: str) -> None:
    """Finding 8: every crawl on a server shares the library `frontier` (Redis's function names are global), so
    tenants are kept apart by ACL users: the documented one crawls its own crawl (the library loaded by an admin)
    and can neither read nor call on another crawl's keys, nor load, replace or delete the library."""
    from conftest import AUTH_PASSWORD

    admin = redis_auth.client()  # the default user, with requirepass
    load_library(admin, redis_auth.url)
    other = f"{crawl_name}-other"
    with open_state(f"redis://:{AUTH_PASSWORD}@{LOOPBACK}:{redis_auth.port}/0", other) as theirs:
        theirs.commit(Commit(links=[Link("http://b.test/1", 0)]), time.time())
    admin.execute_command("ACL", "SETUSER", "tenant", *TENANT_ACL.format(password="t-pw", crawl=crawl_name).split())
    url = f"redis://tenant:t-pw@{LOOPBACK}:{redis_auth.port}/0"
    with open_state(url, crawl_name) as state:
        state.commit(Commit(links=[Link("http://a.test/1", 0)]), time.time())
        [lease] = state.lease(5, time.time(), allow_all).leases
        state.commit(Commit(acks=[Ack(key=lease.key, outcome=Outcome.DONE, fetched=True)]), time.time())
        assert state.done(time.time()) and state.stats().fetched == 1
    with pytest.raises(StorageError, match="lacks a permission"):
        open_state(url, other)
    tenant = redis.Redis(host=LOOPBACK, port=redis_auth.port, username="tenant", password="t-pw")
    meta = KeySpace(crawl=other, groups=1).meta_key
    for refused in (lambda: tenant.hgetall(meta), lambda: tenant.fcall(FUNCTION_SEEN_HAS, 1, f"{meta}:x", bytes(8)),
                    lambda: tenant.function_load(LIBRARY, replace=True), lambda: tenant.function_delete("frontier"),
                    lambda: tenant.function_flush(), lambda: tenant.flushall()):
        with pytest.raises(redis.exceptions.NoPermissionError):
            refused()
    tenant.close()
    assert admin.fcall_ro(FUNCTION_VERSION, 0) == LIBRARY_VERSION.encode()
