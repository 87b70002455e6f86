"""Politeness groups (politeness.queue_by) and group backoff, end to end: `run_frontier.py` crawls many names that
network.resolve maps onto a few loopback addresses (frontier.testing.AddressWeb: one server per address, each
logging every request's arrival time and the requests of its kind it was serving then). What is asserted comes
from the servers' own logs. robots.txt requests are left out of the per-address checks: a name's robots.txt is
what tells the crawler its address (until then the name is its own group, as in Heritrix).
"""

from __future__ import annotations

import os
import signal
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from frontier.config import DedupConfig, load_config
from frontier.errors import ConfigError
from frontier.state.base import Ack, Commit, Link, Outcome, StatePolicy
from frontier.state.lmdb import LmdbCrawlState
from frontier.testing.addressweb import AddressWeb, Arrival
from frontier.testing.redis_servers import server_binaries
from frontier.url.groups import group_key, registered_domain
from test_crawl import assert_done, finish_crawl, merge, run_crawl, start_crawl

pytestmark = pytest.mark.timeout(120)

ADDRESSES = ("127.0.0.2", "127.0.0.3", "127.0.0.4")
SIXTY = {f"n{i:02d}.site{i}.test": ADDRESSES[i % 3] for i in range(60)}
DELAY = 0.1
T0 = 1_000_000.0
SERVER_BINARIES = server_binaries()


def write_config(tmp_path: Path, web: AddressWeb, queue_by: str, name: str = "crawl", **sections: Any) -> Path:
    data = {
        "seeds": web.seeds,
        "network": {"resolve": web.resolve},
        "limits": {"max_retries": 2},
        "workers": {"processes": 2, "concurrency": 32, "timeout": 5, "lease_timeout": 10},
        "politeness": {"delay": DELAY, "adaptive": False, "queue_by": queue_by},
        "traps": {"patterns": False, "soft_404": False},
        "dedup": {"capacity": 100_000},
        "storage": {"data_dir": str(tmp_path / f"{name}-data")},
        "output": {"progress": "plain", "progress_interval": 1.0},
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(merge(data, sections)))
    return path


def pages(log: list[Arrival]) -> list[Arrival]:
    return [a for a in log if a.path != "/robots.txt"]


def by_address(log: list[Arrival]) -> dict[str, list[Arrival]]:
    out: dict[str, list[Arrival]] = defaultdict(list)
    for arrival in pages(log):
        out[arrival.address].append(arrival)
    return out


def min_gap(arrivals: list[Arrival]) -> float:
    times = sorted(a.at for a in arrivals)
    return min((b - a for a, b in zip(times, times[1:])), default=float("inf"))


def assert_every_page_fetched(web: AddressWeb, log: list[Arrival]) -> None:
    ok = {(a.host, a.path) for a in pages(log) if a.status == 200}
    want = {(name, path) for name in web.names for path in ["/", *(f"/p/{i}" for i in range(1, web.pages + 1))]}
    assert want <= ok, sorted(want - ok)[:10]


# -- the key function ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("host", "queue_by", "address", "key"), [
    ("a.example.org:8080", "host", "", "a.example.org:8080"),
    ("a.example.org", "domain", "", "example.org"),
    ("b.example.org:81", "domain", "", "example.org"),
    ("example.co.uk", "domain", "", "example.co.uk"),
    ("www.other.co.uk", "domain", "", "other.co.uk"),
    ("x.blogspot.com", "domain", "", "blogspot.com"),  # the PSL's ICANN section: one server's names share
    ("localhost:8080", "domain", "", "localhost"),
    ("127.0.0.9:8080", "domain", "", "127.0.0.9"),
    ("a.example.org", "ip", "", "a.example.org"),  # not resolved yet: its own group
    ("a.example.org", "ip", "10.0.0.7", "10.0.0.7"),
    ("127.0.0.9:8080", "ip", "", "127.0.0.9"),  # an IP literal is its own address
    ("[::1]:8080", "ip", "", "::1"),
])
def test_group_key(host: str, queue_by: str, address: str, key: str) -> None:
    assert group_key(host, queue_by, address) == key


def test_registered_domain_never_fetches_the_list(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    def no_network(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the Public Suffix List was fetched")

    monkeypatch.setattr(socket, "create_connection", no_network)
    registered_domain.cache_clear()
    assert registered_domain("deep.name.example.com.au") == "example.com.au"


def test_redis_storage_takes_domain_groups() -> None:
    cfg = load_config({"seeds": ["http://a.test/"], "storage": {"backend": "redis"},
                       "politeness": {"queue_by": "domain"}})
    assert cfg.politeness.queue_by == "domain"


def test_queue_by_takes_host_domain_or_ip_only() -> None:
    with pytest.raises(ConfigError) as info:
        load_config({"seeds": ["http://a.test/"], "politeness": {"queue_by": "surt"}})
    assert info.value.key == "politeness.queue_by"


# -- the LMDB state's groups -----------------------------------------------------------------------------------


def test_a_busy_group_keeps_its_waiting_hosts_off_the_schedule_and_wakes_the_best_one(tmp_path: Path) -> None:
    """5,000 names of one registered domain, a delay: one fetch in flight for the whole group; the other hosts
    wait in the group's own heap (not on the time heaps, so a lease never scans them), and each result lets
    exactly one go: the one whose best URL ranks highest."""
    policy = StatePolicy(lease_timeout=10.0, obey_robots=False, delay=1.0, queue_by="domain")
    state = LmdbCrawlState(tmp_path / "crawl", policy, dedup=DedupConfig(capacity=20_000), now=T0)
    try:
        names = [f"h{i}.example.org" for i in range(5000)]
        state.commit(Commit(links=[Link(f"http://{name}/", 1, priority=1.0 if name == "h4321.example.org" else 0.0)
                                   for name in names]), T0)
        [first] = state.lease(100, T0, lambda host, url: True).leases
        assert state.lease(100, T0 + 5, lambda host, url: True).leases == []
        sched = state._sched
        group = sched.groups["example.org"]
        assert (group.in_flight, len(group.waiting), len(sched._heap) + len(sched._ready)) == (1, 4999, 0)
        report = {row["host"]: row for row in state.host_report(T0 + 5)}
        assert report[first.host]["group"] == "example.org" and report["h1.example.org"]["state"] == "waiting"
        state.commit(Commit(acks=[Ack(key=first.key, outcome=Outcome.DONE, fetched=True)]), T0 + 5)
        assert len(sched._heap) + len(sched._ready) == 1  # the woken one
        assert state.lease(100, T0 + 5.5, lambda host, url: True).leases == []  # the group's delay
        [second] = state.lease(100, T0 + 6, lambda host, url: True).leases
        assert second.host == "h4321.example.org" or first.host == "h4321.example.org"
    finally:
        state.close()


def test_an_overloaded_group_reports_its_hosts_backing_off(tmp_path: Path) -> None:
    policy = StatePolicy(lease_timeout=10.0, obey_robots=False, delay=0.5, queue_by="ip")
    state = LmdbCrawlState(tmp_path / "crawl", policy, dedup=DedupConfig(capacity=1000), now=T0)
    try:
        state.commit(Commit(links=[Link(f"http://{n}.test/{i}", 1) for n in ("a", "b") for i in range(2)]), T0)
        leases = state.lease(10, T0, lambda host, url: True).leases
        assert len(leases) == 2  # two names, no address learnt yet: two groups
        state.commit(Commit(acks=[Ack(key=lease.key, outcome=Outcome.DONE, fetched=True, address="10.0.0.1",
                                      overload=lease.host == "a.test")
                                  for lease in sorted(leases, key=lambda lease: lease.host, reverse=True)]), T0)
        rows = {row["host"]: row for row in state.host_report(T0 + 0.1)}
        assert {row["group"] for row in rows.values()} == {"10.0.0.1"}
        assert rows["a.test"]["state"] == rows["b.test"]["state"] == "backing off"
        assert rows["a.test"]["backoff"] == 1  # b's result came first: a's overload is the last word
        assert len(state.lease(10, T0 + 1.01, lambda host, url: True).leases) == 1  # one group now: one at a time
    finally:
        state.close()


def test_learnt_addresses_and_queue_by_are_kept_and_another_queue_by_regroups_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = StatePolicy(lease_timeout=10.0, obey_robots=False, delay=0.5, queue_by="ip")
    state = LmdbCrawlState(tmp_path / "crawl", policy, dedup=DedupConfig(capacity=1000), now=T0)
    try:
        state.commit(Commit(links=[Link(f"http://{n}.test/{i}", 1) for n in ("a", "b") for i in range(2)]), T0)
        leases = state.lease(10, T0, lambda host, url: True).leases
        state.commit(Commit(acks=[Ack(key=lease.key, outcome=Outcome.DONE, fetched=True, address="10.0.0.1")
                                  for lease in leases]), T0)
    finally:
        state.close()
    state = LmdbCrawlState(tmp_path / "crawl", policy, dedup=DedupConfig(capacity=1000), now=T0 + 10)
    try:
        assert {row["host"]: row["group"] for row in state.host_report(T0 + 10)} == {"a.test": "10.0.0.1",
                                                                                    "b.test": "10.0.0.1"}
        assert len(state.lease(10, T0 + 10, lambda host, url: True).leases) == 1  # one address: one at a time
    finally:
        state.close()
    assert capsys.readouterr().out == ""
    state = LmdbCrawlState(tmp_path / "crawl", replace(policy, queue_by="host"), dedup=DedupConfig(capacity=1000),
                           now=T0 + 20)
    try:
        assert {row["group"] for row in state.host_report(T0 + 20)} == {"a.test", "b.test"}
    finally:
        state.close()
    assert capsys.readouterr().out.splitlines() == [
        "frontier: politeness.queue_by is host, was ip: the hosts are regrouped by host (groups derive from host "
        "names and learnt addresses)"]


# -- Redis: one group's cap across instances ----------------------------------------------------------------


@pytest.mark.skipif(not SERVER_BINARIES, reason="no Redis / Valkey server installed")
def test_two_redis_instances_keep_an_address_groups_cap_together(request: pytest.FixtureRequest,
                                                                  tmp_path: Path) -> None:
    """Hosts in several slot groups on one address (queue_by ip): the group's one fetch at a time (a delay) and
    its delay hold for two instances together, decided inside the server functions."""
    from frontier.state.redis_state import RedisCrawlState

    server = request.getfixturevalue("redis_servers").node(SERVER_BINARIES[0])
    policy = StatePolicy(lease_timeout=10.0, obey_robots=False, delay=1.0, queue_by="ip")
    one = RedisCrawlState(server.url, policy, crawl="groups-ip", groups=8, now=T0)
    two = RedisCrawlState(server.url, policy, crawl="groups-ip", groups=8, now=T0)
    try:
        names = [f"h{i}.test" for i in range(12)]
        one.commit(Commit(links=[Link(f"http://{name}/{i}", 1) for name in names for i in range(3)]), T0)
        first = one.lease(100, T0, lambda host, url: True).leases + two.lease(100, T0, lambda host, url: True).leases
        assert sorted(lease.host for lease in first) == sorted(names)  # no address known yet: a group each
        for state in (one, two):
            mine = [lease for lease in first if state.leased([lease.key])[0] is not None]
            state.commit(Commit(acks=[Ack(key=lease.key, outcome=Outcome.DONE, fetched=True, address="10.9.9.9")
                                      for lease in mine]), T0)
        now, fetched = T0 + 1.0, 0
        while fetched < 24:
            got = one.lease(100, now, lambda host, url: True).leases + two.lease(100, now, lambda host, url: True).leases
            assert len(got) <= 1, (now, got)  # one address: one fetch in flight, whichever instance asks
            assert two.lease(100, now + 0.5, lambda host, url: True).leases == []
            for state in (one, two):
                mine = [lease for lease in got if state.leased([lease.key])[0] is not None]
                state.commit(Commit(acks=[done_with(lease, "10.9.9.9") for lease in mine]), now + 0.1)
            fetched += len(got)
            now += 1.2
            assert now < T0 + 60, fetched
        assert one.done(now) and two.done(now)
    finally:
        one.close()
        two.close()


@pytest.mark.skipif(not SERVER_BINARIES, reason="no Redis / Valkey server installed")
def test_two_redis_instances_keep_a_registered_domains_cap_together(request: pytest.FixtureRequest) -> None:
    """queue_by domain: the names of example.org (in several slot groups) share one fetch at a time and one clock
    across two instances, from their first lease on (the domain is stored with the host, not learnt from a fetch);
    example.co.uk and other.co.uk are two groups."""
    from frontier.state.redis_state import RedisCrawlState

    server = request.getfixturevalue("redis_servers").node(SERVER_BINARIES[0])
    policy = StatePolicy(lease_timeout=10.0, obey_robots=False, delay=1.0, queue_by="domain")
    one = RedisCrawlState(server.url, policy, crawl="groups-domain", groups=8, now=T0)
    two = RedisCrawlState(server.url, policy, crawl="groups-domain", groups=8, now=T0)
    try:
        org = [f"{name}.example.org" for name in ("a", "b", "c", "d", "e", "f")]
        assert len({one.keys.group_of(name) for name in org}) > 1  # the group spans slot groups
        names = [*org, "example.co.uk", "other.co.uk"]
        one.commit(Commit(links=[Link(f"http://{name}/{i}", 1) for name in names for i in range(2)]), T0)
        now, fetched, last = T0, 0, {}
        while fetched < 2 * len(names):
            got = one.lease(100, now, lambda host, url: True).leases + two.lease(100, now, lambda host, url: True).leases
            groups = [registered_domain(lease.host) for lease in got]
            assert len(groups) == len(set(groups)), (now, got)  # one fetch in flight per registered domain
            for group in groups:
                assert now - last.get(group, -1e9) >= 1.0, (now, group)  # the group's delay, whichever instance
                last[group] = now
            if now == T0:
                assert sorted(groups) == ["example.co.uk", "example.org", "other.co.uk"]
            for state in (one, two):
                mine = [lease for lease in got if state.leased([lease.key])[0] is not None]
                state.commit(Commit(acks=[Ack(key=lease.key, outcome=Outcome.DONE, fetched=True) for lease in mine]),
                             now)
            fetched += len(got)
            now += 0.5
            assert now < T0 + 60, fetched
        assert one.done(now) and two.done(now)
        assert now > T0 + 11 * 1.0  # example.org's 12 pages, one a second
    finally:
        one.close()
        two.close()


@pytest.mark.skipif(not SERVER_BINARIES, reason="no Redis / Valkey server installed")
def test_a_redis_crawl_rerun_with_another_queue_by_lets_the_waiting_hosts_go_in_one_line(
        request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]) -> None:
    from frontier.state.redis_state import RedisCrawlState

    server = request.getfixturevalue("redis_servers").node(SERVER_BINARIES[0])
    policy = StatePolicy(lease_timeout=10.0, obey_robots=False, delay=1.0, queue_by="ip")
    names = [f"h{i}.test" for i in range(6)]
    state = RedisCrawlState(server.url, policy, crawl="groups-rerun", groups=4, now=T0)
    try:
        state.commit(Commit(links=[Link(f"http://{name}/{i}", 1) for name in names for i in range(2)]), T0)
        first = state.lease(100, T0, lambda host, url: True).leases
        state.commit(Commit(acks=[done_with(lease, "10.9.9.9") for lease in first]), T0)
        assert len(state.lease(100, T0 + 1, lambda host, url: True).leases) == 1  # one address: the rest wait
    finally:
        state.close()
    capsys.readouterr()
    state = RedisCrawlState(server.url, replace(policy, queue_by="host"), crawl="groups-rerun", groups=4,
                            now=T0 + 20)
    try:
        # every host its own group again: the five that waited, and the one whose lease close() released
        assert len(state.lease(100, T0 + 20, lambda host, url: True).leases) == 6
    finally:
        state.close()
    [line] = [line for line in capsys.readouterr().err.splitlines() if "queue_by" in line]
    assert "queue_by=ip -> host" in line


@pytest.mark.skipif(not SERVER_BINARIES, reason="no Redis / Valkey server installed")
def test_a_redis_crawl_rerun_with_queue_by_domain_groups_the_hosts_it_created_before(
        request: pytest.FixtureRequest) -> None:
    """Hosts created under queue_by host have no stored domain: a rerun with domain stores one for each (the
    Public Suffix List is Python's), so they share their domain's group from its first lease on."""
    from frontier.state.redis_state import RedisCrawlState

    server = request.getfixturevalue("redis_servers").node(SERVER_BINARIES[0])
    policy = StatePolicy(lease_timeout=10.0, obey_robots=False, delay=1.0, queue_by="host")
    names = ["a.example.org", "b.example.org", "c.example.org", "other.co.uk"]
    state = RedisCrawlState(server.url, policy, crawl="groups-to-domain", groups=4, now=T0)
    try:
        state.commit(Commit(links=[Link(f"http://{name}/{i}", 1) for name in names for i in range(2)]), T0)
    finally:
        state.close()
    state = RedisCrawlState(server.url, replace(policy, queue_by="domain"), crawl="groups-to-domain", groups=4,
                            now=T0)
    try:
        assert {row["host"]: row["group"] for row in state.host_report(T0)} == {
            "a.example.org": "example.org", "b.example.org": "example.org", "c.example.org": "example.org",
            "other.co.uk": "other.co.uk"}
        got = state.lease(100, T0, lambda host, url: True).leases
        assert sorted(registered_domain(lease.host) for lease in got) == ["example.org", "other.co.uk"]
    finally:
        state.close()


@pytest.mark.skipif(not SERVER_BINARIES, reason="no Redis / Valkey server installed")
@pytest.mark.parametrize("queue_by", ["domain", "ip"])
def test_a_redis_cluster_refuses_shared_groups_in_one_line_naming_the_key(request: pytest.FixtureRequest,
                                                                          queue_by: str) -> None:
    from frontier.state.redis_state import RedisCrawlState

    cluster = request.getfixturevalue("redis_servers").cluster(SERVER_BINARIES[0])
    policy = StatePolicy(lease_timeout=10.0, obey_robots=False, delay=1.0, queue_by=queue_by)
    with pytest.raises(ConfigError) as info:
        RedisCrawlState(cluster.url, policy, crawl=f"groups-cluster-{queue_by}", groups=4, now=T0)
    assert info.value.key == "politeness.queue_by" and "single node" in str(info.value)


@pytest.mark.skipif(not SERVER_BINARIES, reason="no Redis / Valkey server installed")
def test_an_overload_on_redis_backs_off_the_whole_address(request: pytest.FixtureRequest) -> None:
    from frontier.state.redis_state import RedisCrawlState

    server = request.getfixturevalue("redis_servers").node(SERVER_BINARIES[0])
    policy = StatePolicy(lease_timeout=10.0, obey_robots=False, delay=0.1, queue_by="ip")
    state = RedisCrawlState(server.url, policy, crawl="groups-backoff", groups=4, now=T0)
    try:
        state.commit(Commit(links=[Link(f"http://h{i}.test/{j}", 1) for i in range(4) for j in range(3)]), T0)
        first = state.lease(100, T0, lambda host, url: True).leases
        state.commit(Commit(acks=[done_with(lease, "10.9.9.9") for lease in first]), T0)
        [one] = state.lease(100, T0 + 0.2, lambda host, url: True).leases
        state.commit(Commit(acks=[Ack(key=one.key, outcome=Outcome.DONE, fetched=True, address="10.9.9.9",
                                      overload=True)]), T0 + 0.2)
        assert state.lease(100, T0 + 0.68, lambda host, url: True).leases == []  # every host of the address
        assert len(state.lease(100, T0 + 1.22, lambda host, url: True).leases) == 1
    finally:
        state.close()


def done_with(lease: Any, address: str) -> Ack:
    return Ack(key=lease.key, outcome=Outcome.DONE, fetched=True, address=address)


# -- crawls ----------------------------------------------------------------------------------------------------


def test_queue_by_ip_one_request_at_a_time_per_address_spaced_by_the_delay(tmp_path: Path) -> None:
    with AddressWeb.serve_in_thread(SIXTY, pages=2) as web:
        assert_done(run_crawl(write_config(tmp_path, web, "ip")))
        log = list(web.log)
    assert_every_page_fetched(web, log)
    groups = by_address(log)
    assert sorted(groups) == list(ADDRESSES)
    for address, arrivals in groups.items():
        assert len(arrivals) == 20 * 3
        assert max(a.in_flight for a in arrivals) == 1, address
        assert min_gap(arrivals) >= DELAY, (address, min_gap(arrivals))


def test_queue_by_host_overlaps_the_names_of_one_address(tmp_path: Path) -> None:
    with AddressWeb.serve_in_thread(SIXTY, pages=2) as web:
        assert_done(run_crawl(write_config(tmp_path, web, "host")))
        log = list(web.log)
    assert_every_page_fetched(web, log)
    per_name: dict[str, list[Arrival]] = defaultdict(list)
    for arrival in pages(log):
        per_name[arrival.host].append(arrival)
    assert all(min_gap(arrivals) >= DELAY for arrivals in per_name.values())  # each name still waits its delay
    for address, arrivals in by_address(log).items():
        assert max(a.in_flight for a in arrivals) > 1, address  # per name: the names of one address overlap


def test_queue_by_domain_shares_a_registered_domain_only(tmp_path: Path) -> None:
    names = {"a.example.org": "127.0.0.2", "b.example.org": "127.0.0.2",
             "example.co.uk": "127.0.0.3", "other.co.uk": "127.0.0.3"}
    delay = 0.3
    with AddressWeb.serve_in_thread(names, pages=4) as web:
        config = write_config(tmp_path, web, "domain", politeness={"delay": delay})
        assert_done(run_crawl(config))
        log = list(web.log)
    assert_every_page_fetched(web, log)
    org = by_address(log)["127.0.0.2"]
    assert {a.host for a in org} == {"a.example.org", "b.example.org"}
    assert max(a.in_flight for a in org) == 1
    assert min_gap(org) >= delay
    uk = by_address(log)["127.0.0.3"]
    cross = [abs(x.at - y.at) for x in uk if x.host == "example.co.uk" for y in uk if y.host == "other.co.uk"]
    assert min(cross) < delay  # two registered domains: two groups, each on its own clock


def test_429_without_retry_after_backs_the_group_off_and_it_recovers(tmp_path: Path) -> None:
    names = {f"n{i}.slow.test": "127.0.0.2" for i in range(8)}
    overload = 30.0
    with AddressWeb.serve_in_thread(names, pages=14) as web:
        config = write_config(tmp_path, web, "ip", politeness={"delay": 0.05, "max_delay": 4.0},
                              limits={"max_retries": 8})
        proc = start_crawl(config)
        deadline = time.time() + 30
        while sum(a.status == 200 for a in pages(web.log)) < 20 and time.time() < deadline:
            time.sleep(0.05)
        start = time.time()
        web.overload("127.0.0.2", overload)
        assert_done(finish_crawl(proc))
        log = list(web.log)
    assert_every_page_fetched(web, log)
    before = [a for a in pages(log) if a.at < start]
    during = [a for a in pages(log) if start <= a.at < start + overload]
    after = [a for a in pages(log) if a.at >= start + overload]
    first = min(a.at for a in pages(log))
    rate_before = len(before) / (start - first)
    late = [a for a in during if a.at >= start + overload / 2]  # once backed off: the second half of the window
    rate_late = len(late) / (overload / 2)
    assert rate_late * 4 <= rate_before, (rate_before, rate_late)
    assert all(a.status == 429 for a in during)
    assert after, "nothing was left to fetch after the overload"
    span = max(a.at for a in after) - (start + overload)
    assert len(after) >= 40 and len(after) / max(span, 1e-3) >= rate_before / 2, (len(after), span, rate_before)


def test_kill_9_keeps_the_learnt_addresses_and_a_rerun_with_another_queue_by_says_so(tmp_path: Path) -> None:
    with AddressWeb.serve_in_thread(SIXTY, pages=4) as web:
        config = write_config(tmp_path, web, "ip")
        proc = start_crawl(config)
        deadline = time.time() + 30
        while len(pages(web.log)) < 40 and time.time() < deadline:  # every robots.txt in: every address learnt
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        killed_at = time.time()
        assert len(pages(web.log)) < 60 * 5, "the crawl ended before the kill"
        assert_done(run_crawl(config))
        rerun = [a for a in web.log if a.at > killed_at]
        assert not [a for a in rerun if a.path == "/robots.txt"]  # stored: the addresses come from the hosts' records
        for address, arrivals in by_address(rerun).items():
            assert max(a.in_flight for a in arrivals) == 1, address
            assert min_gap(arrivals) >= DELAY, address
        assert_every_page_fetched(web, list(web.log))
        other = config.with_name("host.yaml")
        other.write_text(yaml.safe_dump(merge(yaml.safe_load(config.read_text()), {"politeness": {"queue_by": "host"}})))
        proc = run_crawl(other)
    assert_done(proc)
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if "queue_by" in line]
    assert lines == ["frontier: politeness.queue_by is host, was ip: the hosts are regrouped by host (groups derive "
                     "from host names and learnt addresses)"]


@pytest.mark.skipif(not SERVER_BINARIES, reason="no Redis / Valkey server installed")
def test_two_instances_on_redis_with_queue_by_ip_keep_one_request_per_address(
        request: pytest.FixtureRequest, tmp_path: Path) -> None:
    server = request.getfixturevalue("redis_servers").node(SERVER_BINARIES[0])
    names = dict(list(SIXTY.items())[:30])
    with AddressWeb.serve_in_thread(names, pages=3) as web:
        runs = []
        for name in ("a", "b"):
            storage = {"backend": "redis", "data_dir": str(tmp_path / f"{name}-data"),
                       "redis": {"url": server.url, "crawl": "groups-two"}}
            runs.append(start_crawl(write_config(tmp_path, web, "ip", name=name, storage=storage,
                                                 workers={"processes": 1, "concurrency": 16})))
        for proc in runs:
            assert_done(finish_crawl(proc))
        log = list(web.log)
    assert_every_page_fetched(web, log)
    for name in ("a", "b"):  # both instances fetched pages
        assert (tmp_path / f"{name}-data" / "crawl.jsonl").read_text().count('"http_status":200') > 0, name
    for address, arrivals in by_address(log).items():
        assert len(arrivals) == 10 * 4
        assert max(a.in_flight for a in arrivals) == 1, address
        assert min_gap(arrivals) >= DELAY, (address, min_gap(arrivals))


@pytest.mark.skipif(not SERVER_BINARIES, reason="no Redis / Valkey server installed")
def test_two_instances_on_redis_with_queue_by_domain_share_a_registered_domain_only(
        request: pytest.FixtureRequest, tmp_path: Path) -> None:
    server = request.getfixturevalue("redis_servers").node(SERVER_BINARIES[0])
    names = {"a.example.org": "127.0.0.2", "b.example.org": "127.0.0.2",
             "example.co.uk": "127.0.0.3", "other.co.uk": "127.0.0.3"}
    delay = 0.3
    with AddressWeb.serve_in_thread(names, pages=4) as web:
        runs = []
        for name in ("a", "b"):
            storage = {"backend": "redis", "data_dir": str(tmp_path / f"{name}-data"),
                       "redis": {"url": server.url, "crawl": "groups-two-domain"}}
            runs.append(start_crawl(write_config(tmp_path, web, "domain", name=name, storage=storage,
                                                 politeness={"delay": delay},
                                                 workers={"processes": 1, "concurrency": 16})))
        for proc in runs:
            assert_done(finish_crawl(proc))
        log = list(web.log)
    assert_every_page_fetched(web, log)
    for name in ("a", "b"):  # both instances fetched pages
        assert (tmp_path / f"{name}-data" / "crawl.jsonl").read_text().count('"http_status":200') > 0, name
    org = by_address(log)["127.0.0.2"]
    assert {a.host for a in org} == {"a.example.org", "b.example.org"}
    assert max(a.in_flight for a in org) == 1
    assert min_gap(org) >= delay, min_gap(org)
    uk = by_address(log)["127.0.0.3"]
    cross = [abs(x.at - y.at) for x in uk if x.host == "example.co.uk" for y in uk if y.host == "other.co.uk"]
    assert min(cross) < delay  # two registered domains: two groups, each on its own clock
