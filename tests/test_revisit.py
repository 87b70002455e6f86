"""Revisits (frontier.crawl.revisit) on LMDB: a schedule per fetched URL, conditional GET against aiohttp's static
file handler (which sends ETag / Last-Modified and answers 304), unchanged bodies by digest, adaptive intervals,
WARC revisit records read back by warcio, and kill -9 while a revisit pass queues what is due."""

from __future__ import annotations

import json
import math
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from aiohttp import web
from warcio.archiveiterator import ArchiveIterator

from crawlcmd import crawl_argv, crawl_env
from frontier.cli.crawlinfo import read_status, revisit_counts
from frontier.config import PolitenessConfig, RevisitConfig, load_config
from frontier.bench.revisit import poisson
from frontier.crawl.revisit import WINDOW, RevisitSchedule, change_rate, freshness_interval
from frontier.crawl.scheduler import Frontier
from frontier.errors import ConfigError
from frontier.seen.fingerprint import fingerprint
from frontier.state.base import Ack, Commit, Link, Outcome, Revisit, StatePolicy
from frontier.state.lmdb import LmdbCrawlState
from frontier.url.scope import Scope
from workers.fetcher import Fetcher
from workers.warc import IDENTICAL_PAYLOAD_PROFILE, NOT_MODIFIED_PROFILE, worker_warc_path

PAGES = 20
T0 = 1_800_000_000.0


def write_site(root: Path, pages: int) -> None:
    root.mkdir()
    links = "".join(f'<a href="/p{i}.html">p{i}</a>' for i in range(pages))
    (root / "index.html").write_text(f"<html><body>{links}</body></html>")
    for i in range(pages):
        (root / f"p{i}.html").write_text(f"<html><body>page {i} <a href='/index.html'>home</a></body></html>")


@pytest.fixture
async def site(aiohttp_server, tmp_path):
    root = tmp_path / "site"
    write_site(root, PAGES)
    requests: Counter[str] = Counter()

    @web.middleware
    async def count(request: web.Request, handler):
        requests[request.path] += 1
        return await handler(request)

    app = web.Application(middlewares=[count])
    app.router.add_static("/", root)
    server = await aiohttp_server(app, host="127.0.0.1")
    return server, root, requests


async def crawl_pass(frontier: Frontier, fetcher: Fetcher) -> list:
    results = []
    while not frontier.done:
        jobs = frontier.lease(16)
        if not jobs:
            continue
        batch = [await fetcher.fetch(job) for job in jobs]
        frontier.report(batch)
        results.extend(batch)
    return results


def bump(path: Path, text: str | None = None) -> None:
    """Rewrite (or only touch) a file with a later mtime: the static handler's ETag and Last-Modified change."""
    if text is not None:
        path.write_text(text)
    later = path.stat().st_mtime + 100
    os.utime(path, (later, later))


async def test_a_second_pass_sends_validators_gets_304s_and_tells_unchanged_bodies(site, tmp_path: Path) -> None:
    server, root, requests = site
    base = f"http://127.0.0.1:{server.port}"
    cfg = load_config({"seeds": [f"{base}/index.html"], "output": {"warc": str(tmp_path / "crawl.warc.gz")},
                       "workers": {"timeout": 5.0, "connect_timeout": 5.0}})
    clock = [T0]
    schedule = RevisitSchedule(after=1000.0, adaptive="nutch", min_after=100.0, max_after=5000.0)
    frontier = Frontier.open(tmp_path / "data", scope=Scope.from_config(cfg), clock=lambda: clock[0],
                        politeness=PolitenessConfig(delay=0, adaptive=False, obey_robots=False), revisit=schedule)
    async with Fetcher(cfg, Scope.from_config(cfg)) as fetcher:
        frontier.add_seeds([f"{base}/index.html"])
        first = await crawl_pass(frontier, fetcher)
        assert len(first) == PAGES + 1 and {r.http_status for r in first} == {200}
        assert all(r.etag and r.last_modified and r.digest for r in first)
        assert frontier.done and frontier.stats()["next_due"] == pytest.approx(T0 + 1000.0, abs=1)
        clock[0] = T0 + 999.0
        assert frontier.done  # nothing due yet: the run would end here

        changed = [root / f"p{i}.html" for i in range(0, PAGES, 3)]  # 7 of 20 rewritten
        for path in changed:
            bump(path, path.read_text() + "<p>new</p>")
        touched = root / "p1.html"  # new mtime, so a 200, but the same body
        bump(touched)
        requests.clear()
        clock[0] = T0 + 1000.0
        assert not frontier.done  # every page is due: the schedule queues them, no link needed
        second = await crawl_pass(frontier, fetcher)
        frontier.close()

    assert sorted(requests.values()) == [1] * (PAGES + 1)  # each page requested once in the second pass
    status = {r.job.url.rsplit("/", 1)[1]: r.http_status for r in second}
    assert {name for name, code in status.items() if code == 200} == {p.name for p in changed} | {touched.name}
    assert Counter(r.reason for r in second if r.http_status == 304) == {"not_modified": PAGES + 1 - len(changed) - 1}
    assert all(not r.outlinks for r in second if r.http_status == 304)
    assert frontier.revisits == {"not_modified": PAGES - len(changed), "unchanged": 1, "changed": len(changed)}

    state = LmdbCrawlState(tmp_path / "data", StatePolicy(revisit=True))
    try:
        stored = dict(zip(status, state._store.revisits([fingerprint(r.job.url) for r in second])))
    finally:
        state.close()
    for name, revisit in stored.items():
        unchanged = name not in {p.name for p in changed}
        assert revisit.interval == pytest.approx(1400.0 if unchanged else 800.0)  # x1.4 / x0.8 (Nutch)
        # the change-rate estimate's counts, stored with the record (encoding version 2)
        assert (revisit.visits, revisit.changes, revisit.seconds) == (1.0, float(not unchanged), pytest.approx(1000.0))
        assert revisit.due == pytest.approx(T0 + 1000.0 + revisit.interval)
        assert revisit.changed_at == (T0 if unchanged else T0 + 1000.0)

    records = []
    with open(worker_warc_path(tmp_path / "crawl.warc.gz", 0), "rb") as f:
        for record in ArchiveIterator(f):
            if record.rec_type in ("response", "revisit"):
                records.append(record)
    revisits = [r for r in records if r.rec_type == "revisit"]
    profiles = Counter(r.rec_headers.get_header("WARC-Profile") for r in revisits)
    assert profiles == {NOT_MODIFIED_PROFILE: PAGES - len(changed), IDENTICAL_PAYLOAD_PROFILE: 1}
    for record in revisits:
        uri = record.rec_headers.get_header("WARC-Target-URI")
        assert record.rec_headers.get_header("WARC-Refers-To-Target-URI") == uri
        assert record.rec_headers.get_header("WARC-Refers-To-Date").startswith("2027-01-15T")  # T0: the capture
    digest = [r for r in revisits if r.rec_headers.get_header("WARC-Profile") == IDENTICAL_PAYLOAD_PROFILE][0]
    original = [r for r in records if r.rec_type == "response"
                and r.rec_headers.get_header("WARC-Target-URI") == digest.rec_headers.get_header("WARC-Target-URI")]
    assert digest.rec_headers.get_header("WARC-Payload-Digest") == original[0].rec_headers.get_header(
        "WARC-Payload-Digest")
    assert len([r for r in records if r.rec_type == "response"]) == PAGES + 1 + len(changed)

    # status and export --what due read the schedule from the stopped data dir
    status_out = subprocess.run([sys.executable, "-m", "frontier", "status", str(tmp_path / "data")],
                                capture_output=True, text=True, check=True).stdout
    assert f"revisits   {PAGES + 1} URLs scheduled, 0 due now" in status_out  # T0 is ahead of the wall clock
    assert read_status(tmp_path / "data")["revisits"]["scheduled"] == PAGES + 1
    assert revisit_counts(tmp_path / "data", T0 + 1799.0) == {"scheduled": PAGES + 1, "due_now": 0,
                                                              "next_due": pytest.approx(T0 + 1800.0)}
    assert revisit_counts(tmp_path / "data", T0 + 1800.0)["due_now"] == len(changed)
    exported = subprocess.run([sys.executable, "-m", "frontier", "export", str(tmp_path / "data"), "--what", "due"],
                              capture_output=True, text=True, check=True).stdout.splitlines()
    rows = [line.split("\t") for line in exported]
    assert len(rows) == PAGES + 1 and [r[2] for r in rows] == ["800"] * len(changed) + ["1400"] * (PAGES + 1 - len(changed))
    assert rows[0][1] == "2027-01-15T08:30:00Z"  # T0 + 1000 + 800


def test_fixed_intervals_without_adaptive() -> None:
    schedule = RevisitSchedule(after=600.0, adaptive="off")
    from frontier.crawl.messages import FetchJob, FetchResult, Status

    job = FetchJob("http://a.example/", 1, b"k")
    first, unchanged = schedule.next(None, FetchResult(job, Status.OK, http_status=200, digest=b"d" * 8), T0)
    assert (first.interval, first.due, unchanged) == (600.0, T0 + 600.0, False)
    again, unchanged = schedule.next(first, FetchResult(job, Status.OK, http_status=200, digest=b"d" * 8), T0 + 600)
    assert (again.interval, unchanged, again.changed_at) == (600.0, True, T0)


def test_the_config_checks_revisit_keys() -> None:
    seed = {"seeds": ["http://a.example/"]}
    assert load_config({**seed, "revisit": {"after": 3600}}).revisit == RevisitConfig(after=3600.0)
    with pytest.raises(ConfigError, match="revisit.continuous"):
        load_config({**seed, "revisit": {"continuous": True}})
    with pytest.raises(ConfigError, match="dedup.recrawl_after.*revisit.after replaces it"):
        load_config({**seed, "revisit": {"after": 60}, "dedup": {"recrawl_after": 60}})
    with pytest.raises(ConfigError, match="revisit.dec_rate"):
        load_config({**seed, "revisit": {"dec_rate": 1.5}})
    assert load_config(seed).revisit.adaptive == "poisson"
    assert [load_config({**seed, "revisit": {"adaptive": v}}).revisit.adaptive for v in (True, False, "nutch")] == [
        "poisson", "off", "nutch"]
    for bad in ("Nutch", 1, [True]):
        with pytest.raises(ConfigError, match="revisit.adaptive: expected one of poisson, nutch, off"):
            load_config({**seed, "revisit": {"adaptive": bad}})
    with pytest.raises(ConfigError, match="revisit.adaptive"):  # the library's schedule takes the names only
        RevisitSchedule(after=60.0, adaptive=False)  # type: ignore[arg-type]
    on_redis = load_config({**seed, "revisit": {"after": 60}, "storage": {"backend": "redis"}})  # both backends
    assert on_redis.revisit.after == 60.0 and on_redis.storage.backend == "redis"


KILL_URLS = 30_000

CHILD = """
import sys, time
from frontier.state.base import Ack, Commit, Outcome, Revisit, StatePolicy
from frontier.state.lmdb import LmdbCrawlState
state = LmdbCrawlState(sys.argv[1], StatePolicy(revisit=True, obey_robots=False, max_per_host=10**6))
now = float(sys.argv[2])
while True:
    leases = state.lease(512, now, lambda host, url: True).leases
    acks = [Ack(key=l.key, outcome=Outcome.DONE, fetched=True,
                revisit=Revisit(l.url, l.depth, now + 10**6, 10**6, now, now)) for l in leases]
    state.commit(Commit(acks=acks), now)
    print(len(leases), flush=True)
"""


def test_kill_9_during_a_revisit_pass_loses_nothing(tmp_path: Path) -> None:
    """A child queues what is due (DUE_BATCH a transaction) and fetches it; kill -9 mid-pass. Reopened, every URL
    is queued once, or still due, or done with its next schedule: none lost, none queued twice."""
    data = tmp_path / "data"
    policy = StatePolicy(revisit=True, obey_robots=False, max_per_host=10**6)
    urls = [f"http://h{i % 7}.example/p{i}" for i in range(KILL_URLS)]
    state = LmdbCrawlState(data, policy, now=T0)
    state.commit(Commit(links=[Link(url, 1) for url in urls]), T0)
    while leases := state.lease(4096, T0, lambda host, url: True).leases:
        state.commit(Commit(acks=[Ack(key=l.key, outcome=Outcome.DONE, fetched=True,
                                      revisit=Revisit(l.url, l.depth, T0 + 100, 100.0, T0, T0)) for l in leases]), T0)
    assert state.done(T0) and not state.done(T0 + 100)
    state.close()

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(data), str(T0 + 200)], stdout=subprocess.PIPE,
                             text=True, env=env)
    try:
        fetched = 0
        deadline = time.monotonic() + 120
        while fetched < KILL_URLS // 3 and time.monotonic() < deadline:
            line = child.stdout.readline()  # type: ignore[union-attr]
            assert line, "the child died"
            fetched += int(line)
        assert fetched < KILL_URLS, "the pass ended before the kill"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait()

    state = LmdbCrawlState(data, policy, now=T0 + 200)
    try:
        fps = [fingerprint(url) for url in urls]
        revisits = state._store.revisits(fps)

        def where(txn):
            queued = [state._store.queued_key(txn, fp) is not None for fp in fps]
            done = [state._store.done_at(txn, fp) is not None for fp in fps]
            return queued, done

        queued, done = state.seen.log.read(where)
        assert not any(q and d for q, d in zip(queued, done))  # seen iff queued or done, never both
        assert all(q or d for q, d in zip(queued, done))  # none lost
        refetched = sum(r.due == T0 + 200 + 10**6 for r in revisits)  # type: ignore[union-attr]
        still_due = sum(d and r.due == T0 + 100 for d, r in zip(done, revisits))  # type: ignore[union-attr]
        assert refetched + still_due + sum(queued) == KILL_URLS
        assert refetched >= KILL_URLS // 3 - 512  # acks before the kill stand (at most one commit in flight)
        # the rest comes back: the reopened state queues what is still due and finishes the pass
        while leases := state.lease(4096, T0 + 200, lambda host, url: True).leases:
            state.commit(Commit(acks=[Ack(key=l.key, outcome=Outcome.DONE, fetched=True,
                                          revisit=Revisit(l.url, l.depth, T0 + 10**7, 1.0, T0, T0))
                                      for l in leases]), T0 + 200)
        assert state.done(T0 + 200) and state.stats().queued == 0
        assert all(r.due in (T0 + 200 + 10**6, T0 + 10**7) for r in state._store.revisits(fps))  # type: ignore
    finally:
        state.close()


def test_a_continuous_state_waits_for_the_next_due_page_and_a_plain_one_ends(tmp_path: Path) -> None:
    for continuous in (False, True):
        policy = StatePolicy(revisit=True, revisit_continuous=continuous, obey_robots=False)
        state = LmdbCrawlState(tmp_path / f"data{continuous}", policy, now=T0)
        try:
            state.commit(Commit(links=[Link("http://a.example/", 0)]), T0)
            lease = state.lease(1, T0, lambda host, url: True).leases[0]
            state.commit(Commit(acks=[Ack(key=lease.key, outcome=Outcome.DONE, fetched=True,
                                          revisit=Revisit(lease.url, 0, T0 + 50, 50.0, T0, T0))]), T0)
            assert state.done(T0 + 10) is not continuous
            assert state.next_ready_in(T0 + 10) == (pytest.approx(40.0) if continuous else None)
            assert state.next_ready_in(T0 + 50) == 0.0 and not state.done(T0 + 50)
            again = state.lease(1, T0 + 50, lambda host, url: True).leases
            assert [(l.url, l.revisit.due) for l in again] == [("http://a.example/", T0 + 50)]  # type: ignore
        finally:
            state.close()


REDIS_KILL_URLS = 3000
REDIS_LEASE_TIMEOUT = 3.0

REDIS_CHILD = """
import json, sys, time
from frontier.state.base import Ack, Commit, Outcome, Revisit, StatePolicy
from frontier.state.redis_state import RedisCrawlState
url, crawl, pause = sys.argv[1], sys.argv[2], float(sys.argv[3])
policy = StatePolicy(revisit=True, obey_robots=False, max_per_host=10**6, lease_timeout=%r)
state = RedisCrawlState(url, policy, crawl=crawl, groups=8)
while not state.done(time.time()):
    state.expire(time.time())
    leases = state.lease(100, time.time(), lambda host, url: True).leases
    print(json.dumps([l.url for l in leases]), flush=True)
    time.sleep(pause)  # the fetches
    now = time.time()
    state.commit(Commit(acks=[Ack(key=l.key, outcome=Outcome.DONE, fetched=True,
                                  revisit=Revisit(l.url, l.depth, now + 10**6, 10**6, now, now)) for l in leases]), now)
state.close()
print("done", flush=True)
""" % REDIS_LEASE_TIMEOUT


def test_kill_9_of_one_of_two_redis_instances_during_a_revisit_pass_misses_nothing(redis_servers, tmp_path: Path,
                                                                                   crawl_name: str) -> None:
    """Two instances (processes) share a Redis crawl whose 3,000 URLs all came due; both queue what is due (each
    lease) and fetch it; one is killed with leases out. The survivor takes them over after lease_timeout and ends
    the pass: every URL fetched again (its next schedule stored), none leased twice but the victim's in flight."""
    import redis as redis_py

    from frontier.state.crawlstore import decode_revisit
    from frontier.state.redis_keys import KeySpace
    from frontier.state.redis_state import RedisCrawlState
    from frontier.testing.redis_servers import server_binaries

    binaries = server_binaries()
    if not binaries:
        pytest.skip("no Redis or Valkey server installed")
    server = redis_servers.node(binaries[0])
    policy = StatePolicy(revisit=True, obey_robots=False, max_per_host=10**6, lease_timeout=REDIS_LEASE_TIMEOUT)
    urls = [f"http://h{i % 7}.example/p{i}" for i in range(REDIS_KILL_URLS)]
    past = time.time() - 3600  # the first pass, an hour ago: every URL is due again by now
    with RedisCrawlState(server.url, policy, crawl=crawl_name, groups=8, now=past) as state:
        state.commit(Commit(links=[Link(url, 1) for url in urls]), past)
        while leases := state.lease(1000, past, lambda host, url: True).leases:
            state.commit(Commit(acks=[Ack(key=l.key, outcome=Outcome.DONE, fetched=True,
                                          revisit=Revisit(l.url, l.depth, past + 100, 100.0, past, past))
                                      for l in leases]), past)
        assert state.stats().fetched == REDIS_KILL_URLS and not state.done(time.time())

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    started = time.time()

    def child(pause: float) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", REDIS_CHILD, server.url, crawl_name, str(pause)],
                                stdout=subprocess.PIPE, text=True, env=env)

    victim, survivor = child(0.3), child(0.02)
    leased: Counter[str] = Counter()
    try:
        held: list[str] = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = victim.stdout.readline()  # type: ignore[union-attr]
            assert line, "the victim died"
            batch = json.loads(line)
            leased.update(batch)
            if batch and sum(leased.values()) >= 300:
                held = batch
                break
        os.kill(victim.pid, signal.SIGKILL)  # while it "fetches" its last batch
        assert held, "the victim leased nothing"
        lines = survivor.communicate(timeout=120)[0].splitlines()
    finally:
        for proc in (victim, survivor):
            proc.kill()
            proc.wait()
    assert survivor.returncode == 0 and lines[-1] == "done", lines[-3:]
    for line in lines[:-1]:
        leased.update(json.loads(line))

    assert set(leased) == set(urls)  # none missed
    twice = {url for url, n in leased.items() if n > 1}
    assert twice <= set(held) and max(leased.values()) <= 2  # refetched: only what the victim had in flight
    client = redis_py.Redis.from_url(server.url)
    try:
        keys = KeySpace(crawl=crawl_name, groups=8)
        records = [decode_revisit(v) for g in range(8) for v in client.hvals(f"{keys.group_key(g)}:rv")]
        due = sum(client.zcard(f"{keys.group_key(g)}:due") for g in range(8))
    finally:
        client.close()
    assert len(records) == due == REDIS_KILL_URLS and {r.url for r in records} == set(urls)
    assert all(r.due >= started + 10**6 for r in records)  # each fetched in this pass, its next schedule stored
    with RedisCrawlState(server.url, policy, crawl=crawl_name, groups=8) as state:
        assert state.stats().queued == 0 and state.stats().in_flight == 0 and state.done(time.time())
    print(f"\nkill -9 of one of two Redis instances during a revisit pass: {len(held)} leases in flight, "
          f"{len(twice)} refetched")
def test_a_bad_revisit_adaptive_exits_2_with_one_line(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(f"seeds: ['http://127.0.0.1:9/']\nstorage: {{data_dir: '{tmp_path / 'd'}'}}\n"
                      "revisit: {after: 60, adaptive: sometimes}\n")
    proc = subprocess.run(crawl_argv(config), env=crawl_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert [line for line in proc.stderr.splitlines() if line.strip()] == [
        "frontier: revisit.adaptive: expected one of poisson, nutch, off, true or false, got 'sometimes' (str)"]


def test_the_change_rate_estimator_is_cho_and_garcia_molinas() -> None:
    """-log((n - X + 0.5) / (n + 0.5)) / interval, and finite when every visit found a change."""
    assert change_rate(10, 3, 10 * 3600.0) == pytest.approx(-math.log(7.5 / 10.5) / 3600.0)
    assert change_rate(10, 10, 36_000.0) == pytest.approx(math.log(21) / 3600.0)
    assert change_rate(4, 0, 4000.0) == 0.0


def test_the_freshness_interval_meets_the_lagrange_condition() -> None:
    """The marginal freshness of a visit, 1 - (1 + x) e^-x with x = rate x interval, is the same for every page:
    a page changing once per `after` gets `after`, slower ones less than proportionally more, much faster ones
    none (inf)."""
    after = 86_400.0
    assert freshness_interval(1 / after, after) == pytest.approx(after, rel=1e-6)
    for change_interval in (3 * after, 30 * after):
        interval = freshness_interval(1 / change_interval, after)
        x = interval / change_interval
        assert 1 - (1 + x) * math.exp(-x) == pytest.approx((1 - 2 / math.e) * after / change_interval, rel=1e-6)
        assert after < interval < change_interval
    assert freshness_interval(4 / after, after) == math.inf  # rate x 0.264 x after >= 1
    assert freshness_interval(0.0, after) == math.inf


def simulate(schedule: RevisitSchedule, change_interval: float, visits: int, seed: int) -> list[Revisit]:
    """The records of a page changing at Poisson rate 1 / change_interval, visited on its schedule."""
    from frontier.crawl.messages import FetchJob, FetchResult, Status

    rng = random.Random(seed)
    job = FetchJob("http://a.example/", 1, b"k")
    t, next_change, version, previous, records = T0, T0, 0, None, []
    for _ in range(visits):
        while next_change <= t:
            version += 1
            next_change += rng.expovariate(1 / change_interval)
        previous, _ = schedule.next(previous, FetchResult(job, Status.OK, http_status=200,
                                                          digest=b"%08d" % version), t)
        records.append(previous)
        t = previous.due
    return records


def test_the_poisson_schedule_follows_each_pages_change_rate() -> None:
    """After 30 visits each page's interval is near the freshness-optimal one for its true rate (within 2x), an
    unchanging page's keeps growing, a page changing every few minutes is not fetched more often than one changing
    once per `after`, and the counts stay within the window."""
    after, max_after = 86_400.0, 90 * 86_400.0
    schedule = RevisitSchedule(after=after, min_after=60.0, max_after=max_after)
    for change_interval in (after / 2, after, 4 * after, 20 * after):
        best = freshness_interval(1 / change_interval, after)
        finals = sorted(simulate(schedule, change_interval, 30, seed)[-1].interval for seed in range(9))
        assert best / 2 <= finals[4] <= 2 * best, (change_interval, best, finals)
    still = simulate(schedule, 10**12, 30, 1)  # never changes: the interval keeps growing
    assert still[9].interval < still[-1].interval and still[-1].interval > 10 * after
    # every visit finds a change: the estimate is a lower bound, the page no more often than one changing per after
    assert simulate(schedule, 300.0, 40, 1)[-1].interval >= after
    records = simulate(schedule, after, 100, 2)
    assert max(r.visits for r in records) <= WINDOW and records[-1].visits == pytest.approx(WINDOW)


def test_adaptive_beats_a_fixed_interval_at_the_same_budget() -> None:
    """The benchmark's simulation, smaller: pages changing hourly to monthly. The default schedule's mean
    freshness is at least a fixed interval's at the same number of fetches, and after 10 visits the median
    interval is within 2x of the true change interval. (Nutch's rule loses here: proportional revisiting.)"""
    out = poisson(300, 60.0, 1, modes=("poisson",))["poisson"]
    assert out["adaptive"]["freshness"] >= out["fixed"]["freshness"], out
    assert 0.5 <= out["median_interval_after_10_visits_x_true"] <= 2, out


def test_a_version_1_revisit_record_is_read_and_upgraded(tmp_path: Path) -> None:
    """A data dir written before the counts (revisit encoding 1) opens: its records read (counts 0), its
    recorded version becomes 2 (older code then refuses it rather than misread), and the next fetch's record
    replaces the old one and its due entry."""
    from frontier.seen.fplog import ENCODING_KEY
    from frontier.state.crawlstore import _REVISIT_V1, DUE_DB, REVISIT_DB, decode_revisit, due_key

    url, depth = "http://a.example/x", 2
    fp = fingerprint(url)
    state = LmdbCrawlState(tmp_path / "data", StatePolicy(revisit=True))
    log = state._store._log
    v1 = _REVISIT_V1.pack(T0 + 50, 50.0, T0 - 10, T0 - 10, depth, b"d" * 8, 2, 0) + b"e1" + url.encode()
    assert decode_revisit(v1) == Revisit(url, depth, T0 + 50, 50.0, T0 - 10, T0 - 10, b"d" * 8, "e1", "")

    revisit_db, due_db = log.open_db(REVISIT_DB), log.open_db(DUE_DB)

    def write_v1(txn) -> None:  # type: ignore[no-untyped-def]
        txn.put(fp, v1, db=revisit_db)
        txn.put(due_key(T0 + 50, fp), b"", db=due_db)
        log.put_meta(txn, ENCODING_KEY + b"revisit", b"1")

    log.write(write_v1)
    state.close()
    assert revisit_counts(tmp_path / "data", T0 + 50)["due_now"] == 1  # the read-only reader takes version 1
    state = LmdbCrawlState(tmp_path / "data", StatePolicy(revisit=True))
    try:
        assert state._store._log.get_meta(ENCODING_KEY + b"revisit") == b"2"
        assert state._store.revisits([fp]) == [decode_revisit(v1)]
        new = Revisit(url, depth, T0 + 500, 450.0, T0 + 50, T0 + 50, b"f" * 8, "e2", "", 1.0, 1.0, 60.0)
        state._store._log.write(lambda txn: state._store.put_revisit(txn, fp, new))
        assert state._store.revisits([fp]) == [new]
        assert state._store._log.read(state._store.next_due) == pytest.approx(T0 + 500)  # the old entry is gone
    finally:
        state.close()


def test_the_redis_functions_read_the_revisit_record_layout_python_writes() -> None:
    """The Lua reads depth and lengths at fixed offsets of crawlstore's record: a new record version moves them."""
    import re
    import struct

    from frontier.state import crawlstore, redis_lua

    text = redis_lua.LIBRARY  # the joined .lua files
    assert int(re.search(r"local REVISIT_HEAD = (\d+)", text).group(1)) == crawlstore._REVISIT.size
    record = crawlstore.encode_revisit(Revisit("http://a.example/x", 7, 1.0, 2.0, 3.0, 4.0, b"d" * 8, "e1", "m22"))
    depth_at = re.search(r"local d1, d2, d3, d4 = byte\(record, (\d+), (\d+)\)", text)
    sizes_at = re.search(r"local e1, e2, m1, m2 = byte\(record, (\d+), (\d+)\)", text)
    assert struct.unpack("<I", record[int(depth_at[1]) - 1:int(depth_at[2])]) == (7,)
    assert struct.unpack("<HH", record[int(sizes_at[1]) - 1:int(sizes_at[2])]) == (2, 3)
