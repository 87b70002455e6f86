"""The Redis crawl's host queues (frontier.state.redis_lua: segments of at most SEG entries and their index): the
order a host's URLs leave in, against a reference model, across segment boundaries, with retries, re-scores and
expiries in between; every queue key stays a listpack; entries keep every URL form and payload; a crawl of the
layout before segments is refused. The rules themselves are in tests/test_state_contract.py, on every backend."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from frontier.errors import VersionMismatch
from frontier.state.base import Ack, Commit, Lease, Link, Outcome, Rescore, StatePolicy
from frontier.state.redis_keys import PREFIX
from frontier.state.redis_state import RedisCrawlState
from frontier.testing.redis_servers import RedisServer

T0 = 1_000_000.0
SEG = 128  # frontier.state.redis_lua: SEG
POLICY = StatePolicy(lease_timeout=10.0, max_retries=1000, max_per_host=8, obey_robots=False, max_suspect_pages=None,
                     host_turn=None)


def allow_all(host: str, url: str) -> bool:
    return True


@dataclass
class Queued:
    priority: float
    seq: int
    low: bool


class Model:
    """A host's queue as the contract states it: normal entries before low ones, higher priority first, then
    FIFO (a requeue or a re-score that moves an entry puts it behind its equals)."""

    def __init__(self) -> None:
        self.queued: dict[str, Queued] = {}
        self.leased: set[str] = set()
        self._seq = 0

    def push(self, url: str, priority: float, low: bool) -> None:
        self._seq += 1
        self.queued[url] = Queued(priority, self._seq, low)

    def order(self) -> list[str]:
        return sorted(self.queued, key=lambda u: (self.queued[u].low, -self.queued[u].priority, self.queued[u].seq))

    def next(self, n: int) -> list[str]:
        return [u for u in self.order() if u not in self.leased][:n]


def queue_keys(node: RedisServer, crawl: str) -> dict[bytes, bytes]:
    """Every segment and index key of the crawl's host queues -> its OBJECT ENCODING."""
    client = node.client()
    keys = [k for pattern in (f"{PREFIX}:{crawl}:*:q:*", f"{PREFIX}:{crawl}:*:qi:*")
            for k in client.scan_iter(pattern, count=1000) if not k.endswith(b":lq")]
    return {k: client.object("encoding", k) for k in keys}


def check_listpacks(node: RedisServer, crawl: str) -> None:
    encodings = queue_keys(node, crawl)
    assert encodings and set(encodings.values()) == {b"listpack"}, encodings
    client = node.client()
    assert max(client.zcard(k) for k in encodings) <= SEG


def test_a_host_of_1000_urls_leaves_in_exact_order_across_segments(redis_node: RedisServer, crawl_name: str) -> None:
    rng = random.Random(24)
    model = Model()
    now = T0
    with RedisCrawlState(redis_node.url, POLICY, crawl=crawl_name, groups=4, now=now) as state:
        for start in range(0, 1000, 125):
            batch = [Link(f"http://a.test/p{n}", 1, priority=rng.choice([-2.0, 0.0, 0.0, 1.0, 3.5]),
                          low=rng.random() < 0.15) for n in range(start, start + 125)]
            assert all(state.commit(Commit(links=batch), now).new)
            for link in batch:
                model.push(link.url, link.priority, link.low)
        check_listpacks(redis_node, crawl_name)
        assert len(queue_keys(redis_node, crawl_name)) == 1000 // SEG + 2  # segments, the index
        assert [url for _, url in state.suspected()] == [u for u in model.order() if model.queued[u].low]

        out: dict[str, Lease] = {}
        steps = 0
        while model.queued:
            steps += 1
            assert steps < 2000
            now += 1.0
            slots = POLICY.max_per_host - len(model.leased)
            leases = state.lease(8, now, allow_all).leases
            assert [lease.url for lease in leases] == model.next(slots)
            for lease in leases:
                out[lease.url] = lease
                model.leased.add(lease.url)
            acks = []
            for lease in leases:
                roll = rng.random()
                if roll < 0.6:
                    acks.append(Ack(key=lease.key, outcome=Outcome.DONE, fetched=True))
                elif roll < 0.8:
                    acks.append(Ack(key=lease.key, outcome=Outcome.RETRY, fetched=True))
            state.commit(Commit(acks=acks), now)
            for ack in acks:
                url = next(u for u, lease in out.items() if lease.key == ack.key)
                model.leased.discard(url)
                queued = model.queued.pop(url)
                if ack.outcome is Outcome.RETRY:
                    model.push(url, queued.priority, queued.low)
            if steps % 7 == 0:  # the leases left out expire, in the order the step ends them
                now += POLICY.lease_timeout + 1
                for ended in state.expire(now):
                    assert ended.requeued
                    model.leased.discard(ended.lease.url)
                    queued = model.queued.pop(ended.lease.url)
                    model.push(ended.lease.url, queued.priority, queued.low)
            if steps % 3 == 0:  # re-scores: only queued entries neither leased nor held move
                picks = rng.sample(sorted(model.queued), min(6, len(model.queued)))
                rescores = [Rescore(url, rng.choice([-2.0, 0.0, 1.0, 3.5, 9.0]), add=rng.random() < 0.3)
                            for url in picks]
                moved = state.commit(Commit(rescore=rescores), now).moved
                expect = 0
                for r in rescores:
                    queued = model.queued[r.url]
                    new = queued.priority + r.priority if r.add else r.priority
                    if r.url not in model.leased and new != queued.priority:
                        del model.queued[r.url]
                        model.push(r.url, new, queued.low)
                        expect += 1
                assert moved == expect
            if steps % 25 == 0:
                check_listpacks(redis_node, crawl_name)
        assert state.stats().queued == 0
        assert queue_keys(redis_node, crawl_name) == {}  # empty segments and index are gone


def test_entries_keep_every_url_form_and_payload(redis_node: RedisServer, crawl_name: str) -> None:
    links = [Link("http://a.test/x?q=1", 2, 1), Link("https://a.test/x?q=1", 3, payload=b"\0p\0ay\xff"),
             Link("http://a.test", 1), Link("http://a.test:8080/p", 1, payload=b""),
             Link("https://b.test/" + "long/" * 40, 4, low=True)]
    with RedisCrawlState(redis_node.url, POLICY, crawl=crawl_name, groups=4, now=T0) as state:
        assert all(state.commit(Commit(links=links), T0).new)
        leases = {lease.url: lease for lease in state.lease(20, T0, allow_all).leases}
        assert {url: (lease.depth, lease.redirects, lease.payload, lease.low) for url, lease in leases.items()} == {
            link.url: (link.depth, link.redirects, link.payload, link.low) for link in links}


def test_a_crawl_of_the_unsegmented_layout_is_refused(redis_node: RedisServer, crawl_name: str) -> None:
    with RedisCrawlState(redis_node.url, POLICY, crawl=crawl_name, groups=4, now=T0) as state:
        state.commit(Commit(links=[Link("http://a.test/", 0)]), T0)
    redis_node.client().hset(f"{PREFIX}:{crawl_name}:meta", "library", "11")  # as library 11 created it
    with pytest.raises(VersionMismatch, match="library=11") as refused:
        RedisCrawlState(redis_node.url, POLICY, crawl=crawl_name, groups=4, now=T0)
    assert "\n" not in str(refused.value)


def test_equals_leave_fifo_when_a_newer_segment_holds_a_better_url(redis_node: RedisServer,
                                                                   crawl_name: str) -> None:
    """The newer segment comes first in the index (its best URL), and holds more equals than a lease reads: the
    older segment's equals still leave before them."""
    links = [Link(f"http://a.test/p{n}", 1, priority=5.0 if n == 200 else 0.0) for n in range(3 * SEG)]
    with RedisCrawlState(redis_node.url, POLICY, crawl=crawl_name, groups=4, now=T0) as state:
        state.commit(Commit(links=links), T0)
        got = [lease.url for lease in state.lease(8, T0, allow_all).leases]
        assert got == ["http://a.test/p200"] + [f"http://a.test/p{n}" for n in range(7)]
