"""Which URL next, through the library: seed and outlink priorities, reprioritize, the scorers (frontier.crawl.ordering),
and a kill -9 in the middle of re-scores. The state's own rules (priority order, re-score moves, host turns) are in
tests/test_state_contract.py, on every backend."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from pathlib import Path
from typing import Any

import lmdb
import pytest

from frontier.config import DedupConfig, LimitsConfig, PolitenessConfig, load_config
from frontier.crawl.messages import FetchJob, FetchResult, Status
from frontier.crawl.ordering import InLinks, Opic, ScoredPage, load_scorer
from frontier.crawl.scheduler import Frontier
from frontier.errors import ConfigError
from frontier.seen.fingerprint import fingerprint
from frontier.state.base import Ack, Outcome, Rescore
from frontier.state.crawlstore import QINDEX_DB, QUEUE_DB, decode_entry
from frontier.testing.redis_servers import server_binaries
from frontier.url.scope import Scope

T0 = 1_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def make(tmp_path: Path, scorer: Any = None, **politeness: Any) -> Frontier:
    return Frontier.open(tmp_path / "data", scope=Scope(allowed_hosts=["a.test", "b.test"]), limits=LimitsConfig(),
                    politeness=PolitenessConfig(**{"delay": 0.0, "obey_robots": False, **politeness}),
                    dedup=DedupConfig(capacity=10_000), lease_timeout=10.0, clock=Clock(), scorer=scorer)


def ok(job: FetchJob, *outlinks: str, **fields: Any) -> FetchResult:
    return FetchResult(job=job, status=Status.OK, http_status=200, content_type="text/html", bytes=100,
                       fetched_at=T0, outlinks=outlinks, **fields)


def drain(frontier: Frontier) -> list[str]:
    """Lease one at a time and report each without links: the order the frontier hands URLs out."""
    out = []
    while jobs := frontier.lease(1):
        out.append(jobs[0].url)
        frontier.report([ok(jobs[0])])
    return out


def test_seed_and_outlink_priorities_decide_the_order(tmp_path: Path) -> None:
    with make(tmp_path, max_per_host=1) as frontier:
        frontier.add_seeds(["http://a.test/low"], priority=-1)
        frontier.add_seeds(["http://a.test/high"], priority=7.5)
        [job] = frontier.lease(1)
        assert job.url == "http://a.test/high"
        links = ("http://a.test/1", "http://a.test/2", "http://a.test/3")
        frontier.report([ok(job, *links, priorities=(0.0, 9.0, -5.0))])
        assert drain(frontier) == ["http://a.test/2", "http://a.test/1", "http://a.test/low", "http://a.test/3"]
        with pytest.raises(ValueError):
            frontier.add_seeds(["http://a.test/x"], priority=float("nan"))


def test_reprioritize_moves_a_queued_url_without_a_second_entry(tmp_path: Path) -> None:
    with make(tmp_path, max_per_host=1) as frontier:
        frontier.add_seeds([f"http://a.test/{i}" for i in range(5)])
        assert frontier.reprioritize(["http://a.test/4", "HTTP://A.test/3", "not a url", "http://b.test/none"], 3) == 2
        assert frontier.reasons["invalid_url"] == 1
        assert frontier.queued == 5
        assert drain(frontier) == ["http://a.test/4", "http://a.test/3", "http://a.test/0", "http://a.test/1",
                                   "http://a.test/2"]
        assert frontier.done and frontier.fetched == 5


def test_opic_cash_raises_a_url_queued_before(tmp_path: Path) -> None:
    """A page's cash is split among its links; a URL queued already gets the later page's share too and moves
    ahead of a URL queued before it."""
    with make(tmp_path, scorer=Opic(), max_per_host=1) as frontier:
        frontier.add_seeds(["http://a.test/rich"], priority=10.0)
        frontier.add_seeds(["http://a.test/poor"], priority=6.0)
        rich = frontier.lease(1)[0]
        frontier.report([ok(rich, "http://a.test/r1", "http://a.test/shared")])  # 5 each
        poor = frontier.lease(1)[0]
        assert poor.url == "http://a.test/poor"
        frontier.report([ok(poor, "http://a.test/p1", "http://a.test/shared")])  # 3 each: shared 8
        leases = []
        while jobs := frontier.lease(1):
            leases.append(frontier._state.leased([jobs[0].key])[0])
            frontier.report([ok(jobs[0])])
        assert [(lease.url, lease.priority) for lease in leases] == [
            ("http://a.test/shared", 8.0), ("http://a.test/r1", 5.0), ("http://a.test/p1", 3.0)]


def test_inlinks_orders_by_links_seen(tmp_path: Path) -> None:
    with make(tmp_path, scorer=InLinks(), max_per_host=1) as frontier:
        frontier.add_seeds(["http://a.test/", "http://b.test/"])
        first = frontier.lease(2)
        frontier.report([ok(job, "http://a.test/one", "http://a.test/two") for job in first])
        frontier.add_seeds(["http://a.test/zero"])
        assert drain(frontier)[:2] == ["http://a.test/one", "http://a.test/two"]  # 2 in-links each, then 0


def rank_by_length(page: ScoredPage) -> list[float]:
    return [float(len(url)) for url in page.outlinks]


def broken(page: ScoredPage) -> list[float]:
    raise RuntimeError("a bug in the user's scorer")


def test_a_user_scorer_by_name_and_a_broken_one_is_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    scorer = load_scorer("test_ordering:rank_by_length")
    assert scorer is not None and not scorer.additive
    with make(tmp_path, scorer=scorer, max_per_host=1) as frontier:
        frontier.add_seeds(["http://a.test/"])
        [job] = frontier.lease(1)
        frontier.report([ok(job, "http://a.test/s", "http://a.test/longer", "http://a.test/mid")])
        assert drain(frontier) == ["http://a.test/longer", "http://a.test/mid", "http://a.test/s"]
    with make(tmp_path / "2", scorer=load_scorer("test_ordering:broken")) as frontier:
        frontier.add_seeds(["http://a.test/"])
        [job] = frontier.lease(1)
        assert frontier.report([ok(job, "http://a.test/x")]) == 1  # queued at priority 0; the crawl goes on
        assert frontier.reasons["scorer_error"] == 1
    with pytest.raises(ConfigError, match="ordering.scorer"):
        load_scorer("no_such_module_anywhere:f")
    with pytest.raises(ConfigError, match="ordering.scorer"):
        load_config({"seeds": ["http://a.test/"], "ordering": {"scorer": "pagerank"}})


# -- kill -9 in the middle of re-scores ------------------------------------------------------------------

N_URLS = 3000


def make_on(data: str, redis_url: str | None, crawl: str) -> Frontier:
    """The Frontier of the kill tests: over the data dir, or over a crawl on a Redis server."""
    if redis_url is None:
        return make(Path(data), max_per_host=1)
    from frontier.crawl.scheduler import state_policy
    from frontier.state.redis_state import RedisCrawlState

    politeness = PolitenessConfig(delay=0.0, obey_robots=False, max_per_host=1)
    state = RedisCrawlState(redis_url, state_policy(LimitsConfig(), politeness, 10.0), crawl=crawl, groups=4)
    return Frontier(state, scope=Scope(allowed_hosts=["a.test"]), politeness=politeness, clock=Clock())


def _rescore_forever(data: str, redis_url: str | None, crawl: str, n: int, ready: Any) -> None:
    frontier = make_on(data, redis_url, crawl)
    frontier.add_seeds([f"http://a.test/{i}" for i in range(n)])
    ready.set()
    for round_ in range(10**6):  # killed long before the end
        frontier.reprioritize([f"http://a.test/{i}" for i in range(round_ % 7, n, 7)], float(round_ % 11))


@pytest.mark.parametrize("backend", ["lmdb", "redis"])
def test_kill_9_during_rescores_loses_nothing_and_duplicates_nothing(tmp_path: Path, backend: str,
                                                                      request: pytest.FixtureRequest) -> None:
    redis_url, n = None, N_URLS
    if backend == "redis":
        binaries = server_binaries()
        if not binaries:
            pytest.skip("no Redis or Valkey server installed")
        redis_url, n = request.getfixturevalue("redis_servers").node(binaries[0]).url, 600
    crawl = f"kill-{tmp_path.name}"
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    child = ctx.Process(target=_rescore_forever, args=(str(tmp_path), redis_url, crawl, n, ready))
    child.start()
    try:
        assert ready.wait(120), "the child did not queue its seeds"
        time.sleep(1.5)  # re-scores under way
        os.kill(child.pid, signal.SIGKILL)  # type: ignore[arg-type]
    finally:
        child.join(30)
    assert child.exitcode == -signal.SIGKILL
    if backend == "lmdb":
        env = lmdb.open(str(tmp_path / "data" / "state"), max_dbs=32, readonly=True, lock=False, subdir=True)
        try:
            with env.begin() as txn:
                entries = [decode_entry(k, v) for k, v in txn.cursor(db=env.open_db(QUEUE_DB, txn=txn, create=False))]
                index = dict(txn.cursor(db=env.open_db(QINDEX_DB, txn=txn, create=False)))
        finally:
            env.close()
        urls = [e.url for e in entries]
        assert len(urls) == len(set(urls)) == n  # one entry per URL: none lost, none doubled
        assert {fingerprint(e.url): e.key for e in entries} == {bytes(k): bytes(v) for k, v in index.items()}
    with make_on(str(tmp_path), redis_url, crawl) as frontier:  # reopened: every URL leased exactly once
        assert frontier.queued == n
        got = drain(frontier)
        assert sorted(got) == sorted(f"http://a.test/{i}" for i in range(n)) and frontier.done


# -- a real crawl (run_frontier.py, worker processes, the mock web over HTTP) with each scorer --------------

from test_crawl import assert_done, count_diff, expected_counts, run_crawl, serve, write_config  # noqa: E402,F401

from frontier.testing import MockWeb, SiteSpec  # noqa: E402


@pytest.mark.parametrize("scorer", ["opic", "inlinks"])
def test_a_real_crawl_with_a_scorer_fetches_every_reachable_url_exactly_once(
        tmp_path: Path, serve: Any, scorer: str) -> None:
    web: MockWeb = serve(SiteSpec(pages=1500, hosts=3, links_per_page=20, seed=23))
    config = write_config(tmp_path, web, ordering={"scorer": scorer})
    assert_done(run_crawl(config))
    assert count_diff(web.snapshot()["counts"], expected_counts(web.graph, web.ports)) == {}


def test_a_data_dir_queued_before_priorities_is_migrated_at_open(tmp_path: Path) -> None:
    """Queue keys of the layout before priorities (host id + sequence, the top bit marking a low entry) are
    rewritten at open: the order (normal FIFO, then low) and the payloads are kept, and re-scores find them."""
    from frontier.state.base import Commit, Link, StatePolicy
    from frontier.state.crawlstore import LEGACY_KEY_SIZE, LOW_BIT, PAYLOADS_DB
    from frontier.state.lmdb import LmdbCrawlState

    policy = StatePolicy(obey_robots=False, max_per_host=1)
    with LmdbCrawlState(tmp_path, policy, dedup=DedupConfig(capacity=10_000), now=T0) as state:
        state.commit(Commit(links=[Link("http://a.test/low", 1, low=True), Link("http://a.test/1", 1, payload=b"p1"),
                                   Link("http://a.test/2", 1), Link("http://a.test/3", 1)]), T0)
    env = lmdb.open(str(tmp_path / "state"), max_dbs=32, subdir=True)
    with env.begin(write=True) as txn:  # back to the old layout, as an older version wrote it
        queue, payloads = env.open_db(QUEUE_DB, txn=txn), env.open_db(PAYLOADS_DB, txn=txn)
        for seq, (key, value) in enumerate(list(txn.cursor(db=queue)), 1):
            old = key[:4] + (seq | (LOW_BIT if key[4] else 0)).to_bytes(8, "big")
            assert len(old) == LEGACY_KEY_SIZE
            txn.delete(key, db=queue)
            txn.put(old, value, db=queue)
            if (payload := txn.pop(key, db=payloads)) is not None:
                txn.put(old, payload, db=payloads)
        txn.drop(env.open_db(QINDEX_DB, txn=txn), delete=False)
    env.close()
    with LmdbCrawlState(tmp_path, policy, dedup=DedupConfig(capacity=10_000), now=T0) as state:
        assert state.commit(Commit(rescore=[Rescore("http://a.test/3", 1.0)]), T0).moved == 1
        got = []
        for i in range(6):
            for lease in state.lease(1, T0 + i, lambda host, url: True).leases:
                got.append((lease.url, lease.payload, lease.low))
                state.commit(Commit(acks=[Ack(key=lease.key, outcome=Outcome.DONE, fetched=True)]), T0 + i)
        assert got == [("http://a.test/3", None, False), ("http://a.test/1", b"p1", False),
                       ("http://a.test/2", None, False), ("http://a.test/low", None, True)]
