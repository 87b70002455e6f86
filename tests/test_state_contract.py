"""The crawl-state contract (frontier/state/base.py), one set of tests run against every backend.

A backend is added by one entry in BACKENDS: a function (pytest request, a fresh directory, the policy, now)
-> an open CrawlState; called again with the same directory it must reopen the same crawl.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from frontier.config import DedupConfig
from frontier.state.base import (Ack, Commit, CrawlState, Lease, Link, Outcome, Rescore, Revisit, RobotsAck,
                                 RobotsOutcome, StatePolicy)
from frontier.state.lmdb import LmdbCrawlState
from frontier.testing.redis_servers import ServerBinary, server_binaries

T0 = 1_000_000.0
SERVER_BINARIES = server_binaries()
NO_ROBOTS = StatePolicy(lease_timeout=10.0, max_retries=2, max_per_host=8, obey_robots=False)


def open_lmdb(request: pytest.FixtureRequest, where: Path, policy: StatePolicy, now: float) -> CrawlState:
    return LmdbCrawlState(where, policy, dedup=DedupConfig(capacity=10_000), now=now)


def open_redis(binary: ServerBinary, cluster: bool) -> Callable[..., CrawlState]:
    """The crawl on a real server (tests/conftest.py's pool), named after the test's directory."""

    def open_(request: pytest.FixtureRequest, where: Path, policy: StatePolicy, now: float) -> CrawlState:
        from frontier.state.redis_state import RedisCrawlState

        pool = request.getfixturevalue("redis_servers")
        server = pool.cluster(binary) if cluster else pool.node(binary)
        crawl = "c-" + hashlib.sha1(str(where).encode()).hexdigest()[:16]
        return RedisCrawlState(server.url, policy, crawl=crawl, groups=8, now=now)

    return open_


# Redis: a single node of every server installed (Valkey, Redis 7.0), and a Cluster of the first
BACKENDS = {
    "lmdb": open_lmdb,
    **{f"redis-{b.name}": open_redis(b, cluster=False) for b in SERVER_BINARIES},
    **{f"redis-cluster-{b.name}": open_redis(b, cluster=True) for b in SERVER_BINARIES[:1]},
}

Open = Callable[..., CrawlState]


@pytest.fixture(params=list(BACKENDS))
def open_state(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Open]:
    """open_state(policy=NO_ROBOTS, now=T0): the backend's state on this test's crawl, closed at the end."""
    opened: list[CrawlState] = []

    def open_(policy: StatePolicy = NO_ROBOTS, now: float = T0) -> CrawlState:
        state = BACKENDS[request.param](request, tmp_path / "crawl", policy, now)
        opened.append(state)
        return state

    yield open_
    for state in opened:
        state.close()


def allow_all(host: str, url: str) -> bool:
    return True


def links(*urls: str, depth: int = 1) -> list[Link]:
    return [Link(url, depth) for url in urls]


def lease_all(state: CrawlState, now: float, n: int = 100) -> list[Lease]:
    return state.lease(n, now, allow_all).leases


def done(lease: Lease, fetched: bool = True) -> Ack:
    return Ack(key=lease.key, outcome=Outcome.DONE, fetched=fetched)


# -- commit --------------------------------------------------------------------------------------------


def test_commit_tells_new_links_from_known_ones_and_queues_the_new(open_state: Open) -> None:
    state = open_state()
    urls = ["http://a.test/1", "http://a.test/2", "http://b.test/1"]
    assert state.commit(Commit(links=links(*urls)), T0).new == [True, True, True]
    again = state.commit(Commit(links=links("http://a.test/2", "http://a.test/3", "http://a.test/3")), T0)
    assert again.new == [False, True, False]  # known; new; a repeat within the commit is new once
    assert again.stale == []
    stats = state.stats()
    assert (stats.queued, stats.hosts, stats.in_flight, stats.fetched, stats.attempts) == (4, 2, 0, 0, 0)
    assert sorted(lease.url for lease in lease_all(state, T0)) == sorted(urls + ["http://a.test/3"])


def test_a_link_keeps_its_depth_and_redirects(open_state: Open) -> None:
    state = open_state()
    state.commit(Commit(links=[Link("http://a.test/r", 3, 2)]), T0)
    [lease] = lease_all(state, T0)
    assert (lease.url, lease.host, lease.depth, lease.redirects, lease.attempt, lease.robots) == (
        "http://a.test/r", "a.test", 3, 2, 0, False)


# -- leases --------------------------------------------------------------------------------------------


def test_a_hosts_queue_is_leased_in_fifo_order(open_state: Open) -> None:
    state = open_state()
    state.commit(Commit(links=links(*(f"http://a.test/{i}" for i in range(5)))), T0)
    state.commit(Commit(links=links(*(f"http://a.test/{i}" for i in range(5, 12)))), T0)
    got = [lease.url for lease in lease_all(state, T0, 100)]
    assert got == [f"http://a.test/{i}" for i in range(8)]  # max_per_host = 8 in flight
    assert state.lease(10, T0, allow_all).leases == []
    assert state.stats().in_flight == 8


def test_a_hosts_queue_is_leased_by_priority_fifo_among_equals_and_a_requeue_keeps_it(open_state: Open) -> None:
    state = open_state()
    order = [(0, 1.0), (1, 5.0), (2, 1.0), (3, -2.0), (4, 5.0), (5, 0.0), (6, 2.5)]
    state.commit(Commit(links=[Link(f"http://a.test/{i}", 1, priority=p) for i, p in order]), T0)
    got = lease_all(state, T0)
    assert [(lease.url, lease.priority) for lease in got] == [
        (f"http://a.test/{i}", p) for i, p in [(1, 5.0), (4, 5.0), (6, 2.5), (0, 1.0), (2, 1.0), (5, 0.0), (3, -2.0)]]
    # a retry keeps its priority and goes behind its equals (a commit queues its links before its acks)
    state.commit(Commit(acks=[Ack(key=got[0].key, outcome=Outcome.RETRY, not_before=T0), done(got[1])],
                        links=[Link("http://a.test/7", 1, priority=5.0)]), T0)
    [seven, again] = lease_all(state, T0 + 1)
    assert [seven.url, (again.url, again.priority, again.attempt)] == ["http://a.test/7", ("http://a.test/1", 5.0, 1)]


def test_a_rescore_moves_a_queued_url_once_and_leaves_leased_and_unknown_ones(open_state: Open) -> None:
    policy = StatePolicy(lease_timeout=10.0, max_per_host=1, obey_robots=False)
    state = open_state(policy)
    state.commit(Commit(links=links(*(f"http://a.test/{i}" for i in range(4)))), T0)
    [first] = lease_all(state, T0)
    assert first.url == "http://a.test/0"
    moved = state.commit(Commit(rescore=[Rescore("http://a.test/3", 10.0), Rescore("http://a.test/2", 4.0),
                                         Rescore("http://a.test/2", 2.0, add=True), Rescore("http://a.test/0", 99.0),
                                         Rescore("http://a.test/none", 50.0), Rescore("http://a.test/1", 0.0)]), T0)
    assert moved.moved == 3  # 3, 2 (twice: 4, then 6); not 0 (leased), none (not queued) nor 1 (no change)
    assert state.stats().queued == 4
    state.close()
    state = open_state(policy, T0 + 1)  # the moves are durable; 0's lease ended with the process (LMDB)
    got = []
    for i in range(8):
        leases = lease_all(state, T0 + 1 + i)
        got += [(lease.url, lease.priority) for lease in leases]
        state.commit(Commit(acks=[done(lease) for lease in leases]), T0 + 1 + i)
    assert [url for url, _ in got if url != "http://a.test/0"] == ["http://a.test/3", "http://a.test/2", "http://a.test/1"]
    assert ("http://a.test/3", 10.0) in got and ("http://a.test/2", 6.0) in got
    assert state.stats().queued == 0 or state.stats().queued == 1  # 0 still leased by the first instance (Redis)


def test_a_rescore_committed_with_the_urls_own_ack_does_not_queue_it_again(open_state: Open) -> None:
    state = open_state()
    state.commit(Commit(links=links("http://a.test/", "http://a.test/1")), T0)
    leases = lease_all(state, T0)
    home = next(lease for lease in leases if lease.url == "http://a.test/")
    state.commit(Commit(acks=[done(lease) for lease in leases],
                        rescore=[Rescore("http://a.test/", 5.0, add=True), Rescore("http://a.test/1", 1.0)]), T0)
    assert state.stats().queued == 0 and lease_all(state, T0 + 1) == [] and state.done(T0 + 1)
    assert home.url == "http://a.test/"
    state.close()
    again = open_state(now=T0 + 2)  # what is stored, not only what the process counts
    assert again.stats().queued == 0 and lease_all(again, T0 + 2) == [] and again.done(T0 + 2)


def test_among_ready_hosts_the_one_with_the_best_entry_is_leased_first(open_state: Open) -> None:
    policy = StatePolicy(lease_timeout=10.0, max_per_host=1, obey_robots=False)
    state = open_state(policy)
    hosts = [f"h{i}.test" for i in range(6)]
    state.commit(Commit(links=[Link(f"http://{h}/", 1, priority=float(i % 3)) for i, h in enumerate(hosts)]
                        + [Link("http://h0.test/low", 1, low=True)]), T0)
    got = [state.lease(1, T0, allow_all).leases[0].host for _ in range(6)]
    assert got[:2] in (["h2.test", "h5.test"], ["h5.test", "h2.test"])
    assert sorted(got[2:4]) == ["h1.test", "h4.test"] and sorted(got[4:]) == ["h0.test", "h3.test"]


def test_a_host_that_used_its_turn_goes_behind_the_other_ready_hosts(open_state: Open) -> None:
    policy = StatePolicy(lease_timeout=10.0, max_per_host=8, obey_robots=False, host_turn=2)
    state = open_state(policy)
    state.commit(Commit(links=[Link(f"http://a.test/{i}", 1, priority=5.0) for i in range(5)]
                        + [Link(f"http://b.test/{i}", 1) for i in range(5)]), T0)
    got = []
    for _ in range(8):
        [lease] = state.lease(1, T0, allow_all).leases
        got.append(lease.host[0])
        state.commit(Commit(acks=[done(lease)]), T0)
    assert "".join(got) == "aabbaabb"


def test_politeness_delay_means_one_in_flight_and_a_pause_after_each_result(open_state: Open) -> None:
    state = open_state(StatePolicy(lease_timeout=10.0, delay=2.0, obey_robots=False))
    state.commit(Commit(links=links("http://a.test/1", "http://a.test/2", "http://b.test/1")), T0)
    first = lease_all(state, T0)
    assert sorted(lease.url for lease in first) == ["http://a.test/1", "http://b.test/1"]
    a1 = next(lease for lease in first if lease.host == "a.test")
    state.commit(Commit(acks=[done(a1)]), T0 + 1)
    assert lease_all(state, T0 + 2.9) == []  # the delay runs from the result
    assert state.next_ready_in(T0 + 2.9) == pytest.approx(0.1)
    assert [lease.url for lease in lease_all(state, T0 + 3)] == ["http://a.test/2"]


def test_an_expired_lease_returns_the_url_with_one_more_attempt_under_a_new_key(open_state: Open) -> None:
    state = open_state()
    state.commit(Commit(links=links("http://a.test/1")), T0)
    [lease] = lease_all(state, T0)
    assert state.expire(T0 + 9.9) == [] and state.leased([lease.key]) == [lease]
    [ended] = state.expire(T0 + 10)
    assert ended.lease == lease and ended.requeued
    assert state.leased([lease.key]) == [None]
    assert state.stats().attempts == 1 and state.stats().queued == 1
    [again] = lease_all(state, T0 + 10)
    assert (again.url, again.attempt) == (lease.url, 1) and again.key != lease.key
    # the late result of the expired lease matches nothing; the new lease is still live
    assert state.commit(Commit(acks=[done(lease)]), T0 + 11).stale == [lease.key]
    assert state.leased([again.key]) == [again] and state.stats().fetched == 0


def test_a_renewed_lease_outlives_its_first_deadline_and_an_ended_one_stays_ended(open_state: Open) -> None:
    state = open_state()
    state.commit(Commit(links=links("http://a.test/1", "http://b.test/1")), T0)
    kept, left = sorted(lease_all(state, T0), key=lambda lease: lease.url)
    assert state.renew([kept.key], T0 + 8) == [True]  # now due at T0 + 18
    [ended] = state.expire(T0 + 10)
    assert ended.lease == left and state.leased([kept.key]) == [kept]
    assert state.renew([left.key, kept.key], T0 + 12) == [False, True]  # an ended lease is not brought back
    assert state.leased([left.key]) == [None] and state.expire(T0 + 21.9) == []
    [late] = state.expire(T0 + 22)
    assert late.lease == kept
    assert state.renew([kept.key], T0 + 23) == [False] and state.leased([kept.key]) == [None]


def test_an_expired_lease_is_given_up_after_max_retries(open_state: Open) -> None:
    state = open_state(StatePolicy(lease_timeout=10.0, max_retries=1, obey_robots=False))
    state.commit(Commit(links=links("http://a.test/1")), T0)
    now = T0
    requeued = []
    for _ in range(2):
        lease_all(state, now)
        now += 10
        requeued += [e.requeued for e in state.expire(now)]
    assert requeued == [True, False]
    assert state.stats().queued == 0 and state.stats().attempts == 2 and state.done(now)


def test_abandon_ends_every_lease(open_state: Open) -> None:
    state = open_state()
    state.commit(Commit(links=links("http://a.test/1", "http://b.test/1")), T0)
    leases = lease_all(state, T0)
    ended = state.abandon(T0 + 1)
    assert sorted(e.lease.url for e in ended) == sorted(lease.url for lease in leases)
    assert all(e.requeued for e in ended) and state.stats().in_flight == 0
    assert sorted(lease.attempt for lease in lease_all(state, T0 + 1)) == [1, 1]


# -- acks ----------------------------------------------------------------------------------------------


def test_acks_dequeue_requeue_or_hold(open_state: Open) -> None:
    state = open_state()
    state.commit(Commit(links=[Link("http://a.test/done", 1), Link("http://a.test/retry", 1),
                               Link("http://a.test/seed", 0)]), T0)
    by_url = {lease.url: lease for lease in lease_all(state, T0)}
    acks = [done(by_url["http://a.test/done"]),
            Ack(key=by_url["http://a.test/retry"].key, outcome=Outcome.RETRY, fetched=True, not_before=T0 + 5),
            Ack(key=by_url["http://a.test/seed"].key, outcome=Outcome.HOLD, reason="connect_error")]
    assert state.commit(Commit(acks=acks), T0).stale == []
    stats = state.stats()
    assert (stats.fetched, stats.attempts, stats.queued, stats.in_flight) == (2, 3, 2, 0)
    assert state.unreachable_seeds() == [("http://a.test/seed", "connect_error")]
    assert lease_all(state, T0 + 4.9) == []  # the retry backs off; the held seed waits for a rerun
    [retry] = lease_all(state, T0 + 5)
    assert (retry.url, retry.attempt) == ("http://a.test/retry", 1)
    state.commit(Commit(acks=[done(retry)]), T0 + 5)
    assert state.done(T0 + 5) and state.stats().queued == 1  # the held seed stays queued


def test_retry_after_pauses_the_host(open_state: Open) -> None:
    state = open_state()
    state.commit(Commit(links=links("http://a.test/1", "http://a.test/2")), T0)
    [first, _] = lease_all(state, T0, 100)
    state.commit(Commit(acks=[Ack(key=first.key, outcome=Outcome.DONE, fetched=True, pause_until=T0 + 30)]), T0)
    state.abandon(T0)
    assert lease_all(state, T0 + 29) == []
    assert [lease.url for lease in lease_all(state, T0 + 30)] == ["http://a.test/2"]


def test_page_limits_count_fetched_pages_and_leases_in_flight(open_state: Open) -> None:
    state = open_state(StatePolicy(lease_timeout=10.0, obey_robots=False, max_pages=3, max_pages_per_host=2))
    urls = [f"http://{host}/{i}" for host in ("a.test", "b.test") for i in range(4)]
    state.commit(Commit(links=links(*urls)), T0)
    leases = lease_all(state, T0)
    assert len(leases) == 3 and max(sum(lease.host == h for lease in leases) for h in ("a.test", "b.test")) == 2
    state.commit(Commit(acks=[done(lease, fetched=False) for lease in leases]), T0)  # no response: not fetched
    assert len(lease_all(state, T0)) == 3
    state.abandon(T0)
    assert state.stats().fetched == 0 and state.stats().attempts == 6


# -- robots.txt ----------------------------------------------------------------------------------------


def test_robots_txt_is_leased_first_and_gates_the_hosts_pages(open_state: Open) -> None:
    state = open_state(StatePolicy(lease_timeout=10.0))
    state.commit(Commit(links=links("https://a.test/ok", "https://a.test/private")), T0)
    [robots] = lease_all(state, T0)
    assert (robots.robots, robots.url, robots.host, robots.attempt) == (True, "https://a.test/robots.txt", "a.test", 0)
    assert lease_all(state, T0) == []  # the pages wait for the robots result
    state.commit(Commit(acks=[RobotsAck(key=robots.key, outcome=RobotsOutcome.RETRY, delay=0.0, not_before=T0 + 1)]),
                 T0)
    [robots] = lease_all(state, T0 + 1)
    assert robots.attempt == 1  # one earlier failure
    text = "User-agent: *\nDisallow: /private\n"
    state.commit(Commit(acks=[RobotsAck(key=robots.key, outcome=RobotsOutcome.OK, delay=0.0, text=text,
                                        fetched_at=T0 + 1)]), T0 + 1)
    assert state.robots_text("a.test") == text and state.robots_text("b.test") is None
    batch = state.lease(10, T0 + 1, lambda host, url: not url.endswith("/private"))
    assert [lease.url for lease in batch.leases] == ["https://a.test/ok"]
    assert [lease.url for lease in batch.disallowed] == ["https://a.test/private"]
    drop = Ack(key=batch.disallowed[0].key, outcome=Outcome.DROP)
    assert state.commit(Commit(acks=[drop]), T0 + 1).stale == []
    assert state.commit(Commit(acks=[drop]), T0 + 1).stale == [drop.key]  # dropped once
    state.commit(Commit(acks=[done(batch.leases[0])]), T0 + 1)
    stats = state.stats()
    assert (stats.queued, stats.fetched, stats.attempts) == (0, 1, 1)  # a dropped URL is no attempt
    assert state.done(T0 + 1)


def test_an_unreachable_robots_txt_holds_the_host_back_with_its_urls(open_state: Open) -> None:
    state = open_state(StatePolicy(lease_timeout=10.0))
    state.commit(Commit(links=[Link("http://a.test/", 0), Link("http://a.test/x", 1)]), T0)
    [robots] = lease_all(state, T0)
    state.commit(Commit(acks=[RobotsAck(key=robots.key, outcome=RobotsOutcome.UNREACHABLE, delay=0.0,
                                        reason="dns_error")]), T0)
    assert state.done(T0) and state.stats().queued == 2 and state.stats().unreachable_hosts == 1
    assert state.unreachable_seeds() == [("http://a.test/", "dns_error")]


# -- payloads and forced links (frontier.scrapy's Scheduler) ------------------------------------------


def test_a_payload_stays_with_its_entry_through_requeues_and_reopening(open_state: Open) -> None:
    state = open_state()
    blob = bytes(range(256)) * 4  # any bytes, NULs included
    state.commit(Commit(links=[Link("http://a.test/p", 2, payload=blob), Link("http://a.test/plain", 1)]), T0)
    leases = {lease.url: lease for lease in lease_all(state, T0)}
    assert (leases["http://a.test/p"].payload, leases["http://a.test/plain"].payload) == (blob, None)
    [ended] = [e for e in state.expire(T0 + 10) if e.lease.url == "http://a.test/p"]  # expired: a new key
    assert ended.requeued and ended.lease.payload == blob
    state.commit(Commit(acks=[done(leases["http://a.test/plain"])]), T0 + 10)  # stale: expired too
    retried = {lease.url: lease for lease in lease_all(state, T0 + 10)}
    assert retried["http://a.test/p"].payload == blob and retried["http://a.test/p"].attempt == 1
    state.commit(Commit(acks=[Ack(key=retried["http://a.test/p"].key, outcome=Outcome.RETRY, not_before=T0 + 11),
                              done(retried["http://a.test/plain"])]), T0 + 10)  # a retry: a new key again
    state.close()

    state = open_state(NO_ROBOTS, T0 + 20)
    [again] = lease_all(state, T0 + 20)
    assert (again.url, again.attempt, again.depth, again.payload) == ("http://a.test/p", 2, 2, blob)
    state.commit(Commit(acks=[done(again)]), T0 + 20)
    assert state.stats().queued == 0 and state.done(T0 + 20)
    state.commit(Commit(links=[Link("http://a.test/q", 1, payload=b"")]), T0 + 20)  # empty, not None
    assert [lease.payload for lease in lease_all(state, T0 + 20)] == [b""]


def test_a_forced_link_is_queued_every_time_and_not_recorded_as_seen(open_state: Open) -> None:
    state = open_state()
    assert state.commit(Commit(links=links("http://a.test/1")), T0).new == [True]
    forced = [Link("http://a.test/1", 1, payload=b"again", force=True), Link("http://a.test/1", 1, force=True),
              Link("http://a.test/2", 1, force=True), Link("http://a.test/1", 1)]
    assert state.commit(Commit(links=forced), T0).new == [True, True, True, False]  # queued or not, seen or not
    assert state.stats().queued == 4
    got = lease_all(state, T0)
    assert [(lease.url, lease.payload) for lease in got] == [
        ("http://a.test/1", None), ("http://a.test/1", b"again"), ("http://a.test/1", None), ("http://a.test/2", None)]
    state.commit(Commit(acks=[done(lease) for lease in got]), T0)
    assert state.done(T0) and state.stats().fetched == 4
    # a forced link is not recorded: the URL is still new to an ordinary link
    assert state.commit(Commit(links=links("http://a.test/2", "http://a.test/1")), T0).new == [True, False]


# -- durability ----------------------------------------------------------------------------------------


def test_reopening_keeps_queues_counters_seen_robots_and_host_state(open_state: Open) -> None:
    policy = StatePolicy(lease_timeout=10.0)
    state = open_state(policy)
    state.commit(Commit(links=links("http://a.test/1", "http://a.test/2", "http://a.test/3")), T0)
    [robots] = lease_all(state, T0)
    state.commit(Commit(acks=[RobotsAck(key=robots.key, outcome=RobotsOutcome.OK, delay=0.0, text="# none",
                                        fetched_at=T0)], host_state={"a.test": b"\x01state"}), T0)
    leases = lease_all(state, T0)
    state.commit(Commit(acks=[done(leases[0])], host_state={"b.test": b"x"}), T0)
    state.commit(Commit(host_state={"b.test": b""}), T0)  # b"" deletes
    state.close()

    state = open_state(policy, T0 + 100)
    stats = state.stats()
    assert (stats.fetched, stats.attempts, stats.queued, stats.in_flight, stats.hosts) == (1, 1, 2, 0, 1)
    assert state.commit(Commit(links=links("http://a.test/1", "http://a.test/4")), T0 + 100).new == [False, True]
    assert state.robots_text("a.test") == "# none"
    assert state.host_states() == {"a.test": b"\x01state"}
    # robots.txt is still fresh: no robots lease; the leased-but-unacked URL is leasable again, in order
    assert [lease.url for lease in lease_all(state, T0 + 100)] == [
        "http://a.test/2", "http://a.test/3", "http://a.test/4"]


def test_a_low_queue_waits_for_the_normal_one_and_its_budget_ends_the_crawl(open_state: Open) -> None:
    """Low entries (suspected traps) are leased after every normal entry of their host, FIFO among their own,
    at most max_suspect_pages of them per host (requeues stay low; an expired low lease counts); what the
    budget leaves stays queued, `done` holds, and `suspected` lists it, also after reopening."""
    policy = StatePolicy(lease_timeout=10.0, max_retries=2, max_per_host=8, obey_robots=False, max_suspect_pages=3)
    state = open_state(policy)
    low = [Link(f"http://a.test/cal/{i}", 2, low=True) for i in range(5)]
    committed = state.commit(Commit(links=[low[0], low[1], *links("http://a.test/1", "http://a.test/2"), *low[2:],
                                           Link("http://b.test/cal/1", 2, low=True)]), T0)
    assert committed.new == [True] * 8
    first = lease_all(state, T0)
    assert sorted(lease.url for lease in first if lease.host == "a.test")[:2] == ["http://a.test/1", "http://a.test/2"]
    assert [lease.url for lease in first if lease.host == "a.test"] == \
        ["http://a.test/1", "http://a.test/2", "http://a.test/cal/0", "http://a.test/cal/1", "http://a.test/cal/2"]
    by_url = {lease.url: lease for lease in first}
    state.commit(Commit(acks=[done(by_url["http://a.test/1"]), done(by_url["http://a.test/2"]),
                              Ack(key=by_url["http://a.test/cal/0"].key, outcome=Outcome.RETRY, fetched=True),
                              done(by_url["http://a.test/cal/1"]), done(by_url["http://b.test/cal/1"])]), T0 + 1)
    # cal/0 was retried: an attempt of the budget; cal/2 is in flight: the budget of 3 is spent
    assert lease_all(state, T0 + 2) == []
    state.commit(Commit(acks=[done(by_url["http://a.test/cal/2"])]), T0 + 2)
    assert lease_all(state, T0 + 3) == []
    assert state.done(T0 + 3)
    assert state.stats().queued == 3
    expected = [("a.test", "http://a.test/cal/3"), ("a.test", "http://a.test/cal/4"), ("a.test", "http://a.test/cal/0")]
    assert sorted(state.suspected()) == sorted(expected)
    state.close()
    again = open_state(policy, now=T0 + 4)
    assert sorted(again.suspected()) == sorted(expected)
    assert lease_all(again, T0 + 4) == [] and again.done(T0 + 4)
    # a new normal link of the host is leased at once; a new low one waits for nothing but the budget
    again.commit(Commit(links=[Link("http://a.test/3", 1), Link("http://a.test/cal/9", 2, low=True)]), T0 + 4)
    assert [lease.url for lease in lease_all(again, T0 + 4)] == ["http://a.test/3"]


def test_a_low_ack_moves_a_normal_entry_to_the_low_queue_without_an_attempt(open_state: Open) -> None:
    policy = StatePolicy(lease_timeout=10.0, max_retries=2, max_per_host=1, obey_robots=False, max_suspect_pages=1)
    state = open_state(policy)
    state.commit(Commit(links=links("http://a.test/fan/1", "http://a.test/fan/2", "http://a.test/1")), T0)
    (first,) = lease_all(state, T0)
    assert not first.low
    state.commit(Commit(acks=[Ack(key=first.key, outcome=Outcome.LOW)]), T0)
    assert state.stats().attempts == 0 and state.stats().queued == 3
    (second,) = lease_all(state, T0)  # not delayed: nothing was fetched
    assert second.url == "http://a.test/fan/2"
    assert state.suspected() == [("a.test", "http://a.test/fan/1")]
    state.commit(Commit(acks=[done(second)]), T0)
    (third,) = lease_all(state, T0 + 1)
    assert third.url == "http://a.test/1"
    state.commit(Commit(acks=[done(third)]), T0 + 1)
    (last,) = lease_all(state, T0 + 2)
    assert (last.url, last.low, last.attempt) == ("http://a.test/fan/1", True, 0)
    state.commit(Commit(acks=[done(last)]), T0 + 2)
    assert state.done(T0 + 3) and state.suspected() == [] and state.stats().attempts == 3


def test_a_park_ack_holds_an_entry_for_the_run_lists_it_suspected_and_a_rerun_leases_it(open_state: Open) -> None:
    policy = StatePolicy(lease_timeout=10.0, max_retries=2, max_per_host=4, obey_robots=False, max_suspect_pages=None)
    state = open_state(policy)
    state.commit(Commit(links=[Link("http://a.test/cal/1", 2, low=True), Link("http://a.test/cal/2", 2, low=True),
                               *links("http://a.test/1")]), T0)
    leases = lease_all(state, T0)
    assert [(lease.url, lease.low) for lease in leases] == [
        ("http://a.test/1", False), ("http://a.test/cal/1", True), ("http://a.test/cal/2", True)]
    state.commit(Commit(acks=[done(leases[0]), *(Ack(key=lease.key, outcome=Outcome.PARK) for lease in leases[1:])]),
                 T0)
    assert lease_all(state, T0 + 1) == []  # parked: not leased again by this run, and the crawl is done
    assert state.done(T0 + 1) and state.stats().attempts == 1 and state.stats().queued == 2
    assert sorted(state.suspected()) == [("a.test", "http://a.test/cal/1"), ("a.test", "http://a.test/cal/2")]
    assert state.unreachable_seeds() == []  # not a network error
    state.close()
    again = open_state(policy, T0 + 2)
    assert sorted((lease.url, lease.attempt) for lease in lease_all(again, T0 + 2)) == [
        ("http://a.test/cal/1", 0), ("http://a.test/cal/2", 0)]


def test_a_wait_ack_puts_an_entry_back_without_an_attempt_and_pauses_its_host(open_state: Open) -> None:
    state = open_state()
    state.commit(Commit(links=[Link("http://a.test/1", 1, priority=5.0), *links("http://a.test/2", "http://b.test/1")]),
                 T0)
    leases = {lease.url: lease for lease in lease_all(state, T0)}
    state.commit(Commit(acks=[Ack(key=leases["http://a.test/1"].key, outcome=Outcome.WAIT, pause_until=T0 + 30),
                              Ack(key=leases["http://a.test/2"].key, outcome=Outcome.WAIT, pause_until=T0 + 30)]), T0)
    assert state.stats().attempts == 0 and state.stats().queued == 3 and state.stats().in_flight == 1
    assert lease_all(state, T0 + 29) == [] and not state.done(T0 + 29)  # the host waits; the crawl with it
    again = lease_all(state, T0 + 30)
    assert [(lease.url, lease.attempt, lease.priority) for lease in again] == [
        ("http://a.test/1", 0, 5.0), ("http://a.test/2", 0, 0.0)]  # its band and priority kept


def test_queued_urls_and_known_hosts(open_state: Open) -> None:
    state = open_state()
    assert state.queued_urls() == [] and not state.knows_host("a.test")
    state.commit(Commit(links=links("http://a.test/1", "http://a.test/2", "http://b.test:8080/1")), T0)
    [leased, *_] = lease_all(state, T0, 1)
    assert sorted(state.queued_urls()) == [("a.test", "http://a.test/1"), ("a.test", "http://a.test/2"),
                                           ("b.test:8080", "http://b.test:8080/1")]  # the leased one included
    state.commit(Commit(acks=[done(leased)]), T0)
    assert len(state.queued_urls()) == 2
    assert state.knows_host("a.test") and state.knows_host("b.test:8080")
    assert not state.knows_host("b.test") and not state.knows_host("c.test")


def test_a_host_with_only_low_entries_waits_for_the_normal_entries_of_every_ready_host(open_state: Open) -> None:
    state = open_state(StatePolicy(lease_timeout=10.0, max_per_host=8, obey_robots=False, max_suspect_pages=None))
    state.commit(Commit(links=[Link("http://a.test/cal/1", 2, low=True), Link("http://a.test/cal/2", 2, low=True)]), T0)
    state.commit(Commit(links=links("http://b.test/1", "http://c.test/1")), T0)
    first = state.lease(1, T0, allow_all).leases + state.lease(1, T0, allow_all).leases
    assert sorted(lease.url for lease in first) == ["http://b.test/1", "http://c.test/1"]
    assert [lease.url for lease in lease_all(state, T0)] == ["http://a.test/cal/1", "http://a.test/cal/2"]


def test_close_is_idempotent(open_state: Open) -> None:
    state = open_state()
    state.close()
    state.close()


def test_low_entries_of_any_priority_are_suspected_and_ordered_among_their_own(open_state: Open) -> None:
    state = open_state(StatePolicy(lease_timeout=10.0, max_per_host=8, obey_robots=False, max_suspect_pages=None))
    state.commit(Commit(links=[Link("http://a.test/cal/1", 2, low=True, priority=-3.0),
                               Link("http://a.test/cal/2", 2, low=True, priority=5.0),
                               Link("http://a.test/1", 1, priority=-100.0)]), T0)
    assert sorted(state.suspected()) == [("a.test", "http://a.test/cal/1"), ("a.test", "http://a.test/cal/2")]
    assert [lease.url for lease in lease_all(state, T0)] == [
        "http://a.test/1", "http://a.test/cal/2", "http://a.test/cal/1"]  # every normal entry before the low band


# -- revisits (StatePolicy.revisit) --------------------------------------------------------------------

REVISITS = StatePolicy(lease_timeout=10.0, obey_robots=False, revisit=True)


def schedule(lease: Lease, due: float, tag: str = "") -> Revisit:
    """A fetched page's next schedule, with validators and a digest of its own (`tag`)."""
    return Revisit(lease.url, lease.depth, due, due - T0, T0 - 1, T0 - 2, f"d{tag:>7}".encode(), f'W/"{tag}é"',
                   f"Sat, 01 Jan 2000 00:00:0{len(tag) % 10} GMT")


def fetched(lease: Lease, revisit: Revisit) -> Ack:
    return Ack(key=lease.key, outcome=Outcome.DONE, fetched=True, revisit=revisit)


def test_a_due_url_is_queued_again_by_its_schedule_and_its_lease_carries_the_stored_record(open_state: Open) -> None:
    state = open_state(REVISITS)
    state.commit(Commit(links=[Link("http://a.test/1", 2), Link("http://a.test/2", 1)]), T0)
    first = sorted(lease_all(state, T0), key=lambda lease: lease.url)
    assert [lease.revisit for lease in first] == [None, None]  # never fetched
    records = {lease.url: schedule(lease, T0 + 50 + 10 * i, f"r{i}") for i, lease in enumerate(first)}
    state.commit(Commit(acks=[fetched(lease, records[lease.url]) for lease in first]), T0)
    assert state.done(T0 + 10) and state.next_ready_in(T0 + 10) is None and lease_all(state, T0 + 10) == []
    assert state.next_due() == pytest.approx(T0 + 50)  # type: ignore[attr-defined]
    state.close()

    # the schedule is durable (a moment after T0 + 50: another instance's clock offset to the server's may differ
    # by a few milliseconds)
    state = open_state(REVISITS, T0 + 50.1)
    assert not state.done(T0 + 50.1) and state.next_ready_in(T0 + 50.1) == 0.0
    [one] = lease_all(state, T0 + 50.1)  # due: queued by the schedule, no link needed; /2 is not due yet
    assert (one.url, one.depth, one.attempt, one.revisit) == ("http://a.test/1", 2, 0, records["http://a.test/1"])
    assert state.leased([one.key]) == [one]  # the record the result is judged against: validators, digest
    later = schedule(one, T0 + 500, "later")
    state.commit(Commit(acks=[fetched(one, later)]), T0 + 51)
    assert lease_all(state, T0 + 59.9) == []
    [two] = lease_all(state, T0 + 60.1)
    assert (two.url, two.revisit) == ("http://a.test/2", records["http://a.test/2"])
    state.commit(Commit(acks=[fetched(two, schedule(two, T0 + 600, "x"))]), T0 + 61)
    assert state.done(T0 + 61) and state.stats().queued == 0 and state.stats().fetched == 4
    assert state.next_due() == pytest.approx(T0 + 500)  # type: ignore[attr-defined]
    [again] = lease_all(state, T0 + 500)
    assert (again.url, again.revisit) == ("http://a.test/1", later)  # the latest record replaced the first


@pytest.mark.parametrize("continuous", [False, True])
def test_a_continuous_state_waits_for_the_next_due_page_and_a_plain_one_ends(open_state: Open,
                                                                              continuous: bool) -> None:
    state = open_state(StatePolicy(lease_timeout=10.0, obey_robots=False, revisit=True, revisit_continuous=continuous))
    state.commit(Commit(links=[Link("http://a.test/", 0)]), T0)
    [lease] = lease_all(state, T0)
    state.commit(Commit(acks=[fetched(lease, schedule(lease, T0 + 50))]), T0)
    assert state.done(T0 + 10) is not continuous
    assert state.next_ready_in(T0 + 10) == (pytest.approx(40.0, abs=0.01) if continuous else None)
    assert state.next_ready_in(T0 + 50) == 0.0 and not state.done(T0 + 50)
    assert [(again.url, again.revisit.due) for again in lease_all(state, T0 + 50)] == [  # type: ignore[union-attr]
        ("http://a.test/", T0 + 50)]


def test_a_due_url_already_queued_or_leased_is_queued_once(open_state: Open) -> None:
    """/1 is queued again by a recrawl before it is due (then leased when it is due); /2 is due while lease after
    lease asks: each is queued and leased once. After their next fetch, the same again."""
    state = open_state(REVISITS)
    state.commit(Commit(links=links("http://a.test/1", "http://a.test/2")), T0)
    state.commit(Commit(acks=[fetched(lease, schedule(lease, T0 + 50)) for lease in lease_all(state, T0)]), T0)
    assert state.commit(Commit(links=[Link("http://a.test/1", 1, recrawl=True)]), T0 + 10).new == [True]
    for now in (T0 + 50, T0 + 100):
        got = [lease for t in range(4) for lease in lease_all(state, now + t)]
        assert sorted(lease.url for lease in got) == ["http://a.test/1", "http://a.test/2"]
        assert state.stats().queued == 2 and not state.done(now + 4)
        state.commit(Commit(acks=[fetched(lease, schedule(lease, now + 50)) for lease in got]), now + 4)
        assert state.stats().queued == 0 and state.done(now + 5)
