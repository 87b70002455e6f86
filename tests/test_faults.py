"""Fault injection: kill -9, dead and stuck workers, hostile servers, unsafe input, a full disk.

Every crawl here is `python run_frontier.py --config <yaml>` started in its own session (so it leads
its own process group) against a mock web served from a thread of this process, whose per-URL
request counts are the ground truth. Loopback only; every wait is bounded. Knobs (environment):
FAULT_SEED (4242), FAULT_KILLS (3 random kills, plus one at startup and one after the first page),
FAULT_PAGES (3000), FAULT_SMALL_PAGES (1500), FAULT_PROCESSES (2), FAULT_CONCURRENCY (16),
FAULT_LEASE_TIMEOUT (10), FAULT_TMPFS_SIZE (1M), FAULT_RUN_TIMEOUT (180 s per run).

What is guaranteed after a crash (kill -9 of any or every process, an OOM kill, a full disk)
------------------------------------------------------------------------------------------
* Nothing recorded as seen is lost, and nothing is seen without being queued or done. A batch of
  results is one LMDB transaction: the seen-test of its links, the queue entries of the new URLs,
  the acks (delete, or requeue with attempt + 1 and a backoff), robots.txt and the counters (pages
  fetched and attempts, for the crawl and per host) commit together or not at all.
* A rerun of the same command resumes from the last committed batch and fetches every reachable
  page. The only pages fetched twice are those in flight at the crash: leased to a worker, being
  fetched, or fetched with the result not yet committed. The frontier never has more than
  workers.processes x workers.concurrency leases out, so that is the bound per crash. Links found
  on those pages are found again when they are refetched.
* Retry counters survive: the attempt number is stored with the queue entry, so a URL gets
  1 + limits.max_retries attempts and is then given up. An attempt is a fetch, a lease that expired
  (reason lease_expired) or a lease still out when a dead worker made the supervisor restart the
  crawl (reason worker_died), each one crawl log line: a URL that hangs or kills its worker every
  time is given up too. Only a crash of the frontier process can cost a URL one uncounted attempt
  (counted in the bound above). robots.txt is cached in LMDB and only fetched again if it was in
  flight.
* Every limit holds across crashes and reruns (section 6). limits.max_pages and max_pages_per_host
  count pages fetched (an HTTP response, any status), committed with the results, with leases in
  flight counted toward them: a crawl never fetches more, however often it is killed (the fetches
  in flight at a kill are not counted: the bound above). A rerun with the same limits fetches
  nothing; a raised limit fetches exactly the additional pages. scope.max_depth: the URLs within
  it are fetched, whatever the kills.
* Unreachable hosts (section 7): when a host's robots.txt fails with a network error (connection
  refused, DNS failure, timeout, reset; not an HTTP 5xx) on every attempt, its URLs stay queued and
  it is not tried again in this run; a seed whose fetch does so stays queued too. A rerun tries
  them again. Unreachable seeds end the crawl with exit code 4; dead hosts met during the crawl
  do not keep it from exit 0.
* The Bloom filter's snapshot is valid only after a clean stop; after a crash the next run rebuilds
  the filter from the LMDB log (summary.json: seen.rebuilt_items). The shared-memory segment of a
  killed run (/dev/shm/frontier_<hash of the data dir>) is removed by the next run on that data
  dir; a clean stop leaves none.
* A worker that dies (SIGKILL, a crash) makes the supervisor restart the frontier and all workers
  on fresh queues (a process killed inside a multiprocessing.Queue operation can hold its lock
  for good). The dead worker's URLs are leasable again at once; results of the other workers that
  arrive within the frontier's stop grace (3 s) are kept; the rest counts in the bound above.
* A stuck worker (alive but not answering: stopped, swapped out, hung) keeps nothing and blocks no
  one (a worker holds the shared job queue's lock only while it reads a job, not while it waits for
  one): its leases expire after workers.lease_timeout (checked even when every slot is taken) and
  its URLs go back to their queues under new keys, for the other workers; its late results match
  no lease and are dropped (summary reason stale_result), so they can neither ack nor fail the URL.
  Each page fetched twice is one whose lease expired (same bound).
* A full disk stops the crawl with exit code 3 and one message naming the full path (in the data
  dir); the last committed batch stands; a rerun after space is freed resumes as after a kill.

What is not guaranteed
----------------------
* The crawl log (crawl.jsonl) is a trace, not the record: it is flushed after each batch, so a
  crash loses the lines of the batch under way, and may leave one torn line (the next run starts on
  a new line; readers skip lines that do not parse). Pages fetched twice appear twice.
* summary.json is written only by a run that ends cleanly (exit 0 or 130; exit 3 if it still fits);
  its `reasons` count the last frontier process only (they start again after a restart).
* WARC output: records are flushed per request/response pair; a page fetched twice is recorded
  twice, and the pair being written when a worker is killed may be truncated.
* Durability against power loss or an OS crash needs storage.fsync: true (LMDB without sync may lose
  the last transactions).
* When the whole process group is killed, Python's multiprocessing semaphores of that run
  (/dev/shm/sem.mp-*, a dozen small files per killed run) stay behind until the next crawl starts (the
  resource tracker that would remove them is killed too); the next start removes every one no live process
  maps.
* Lease clocks start when a job is queued for the workers, not when its fetch starts: a
  lease_timeout shorter than about twice workers.timeout (or than the workers' start-up on a busy
  machine) can expire a lease whose job is still waiting, and the page is fetched twice.
* scope.block_private judges the URL's text in the frontier (IP literals, "localhost") and, in the
  workers, the addresses a host name resolves to (skip reason private_address; with obey_robots such
  a host's robots.txt fails, so its pages end as robots_disallowed). Neither ever connects, but a
  redirect or link to such a host is only refused when a worker resolves it.
"""

from __future__ import annotations

import ipaddress
import os
import random
import re
import shutil
import signal
import socket
import stat
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from faultkit import (CrawlRun, assert_group_gone, busiest, env_float, env_int, excess_requests, expected_counts,
                      NO_TRAPS, merge, messages, mock_config, pending_responses, read_crawl_log, read_summary,
                      server_error_urls, shm_segments, wait_for, worker_processes, write_config)
from frontier.testing import HOSTILE_CANARIES, HOSTILE_FOUND, HOSTILE_ROUTES, MockWeb, SiteGraph, SiteSpec
from frontier.testing.hostile import CHAIN_HOPS
from frontier.url.scope import is_private_host

SEED = env_int("FAULT_SEED", 4242)
KILLS = env_int("FAULT_KILLS", 3)
PAGES = env_int("FAULT_PAGES", 3000)
SMALL_PAGES = env_int("FAULT_SMALL_PAGES", 1500)
HOSTS = 3
PROCESSES = env_int("FAULT_PROCESSES", 2)
CONCURRENCY = env_int("FAULT_CONCURRENCY", 16)
IN_FLIGHT = PROCESSES * CONCURRENCY  # the most leases the frontier has out at once
MAX_RETRIES = 2
ATTEMPTS = 1 + MAX_RETRIES
LEASE_TIMEOUT = env_float("FAULT_LEASE_TIMEOUT", 10.0)
TMPFS_SIZE = os.environ.get("FAULT_TMPFS_SIZE", "1M")
RUN_TIMEOUT = env_float("FAULT_RUN_TIMEOUT", 180.0)

# A crawl that should see no failure of its own: generous timeouts, so that only injected faults
# (not a loaded machine) cause repeated requests.
STEADY = {
    "limits": {"max_retries": MAX_RETRIES},
    "workers": {"processes": PROCESSES, "concurrency": CONCURRENCY, "timeout": 10.0, "connect_timeout": 5.0,
                "lease_timeout": 30.0},
    "politeness": {"delay": 0.0, "max_per_host": CONCURRENCY},
    "traps": NO_TRAPS,  # exact request counts (see faultkit.mock_config)
    "dedup": {"capacity": 200_000},
}


def requests_seen(web: MockWeb) -> int:
    return web.snapshot()["total"]


def page_requests(web: MockWeb) -> int:
    return sum(c for u, c in web.snapshot()["counts"].items() if not u.endswith("/robots.txt"))


def assert_complete(counts: dict[str, int], expected: Counter[str], web: MockWeb, context: str,
                    records: list[dict] = ()) -> None:
    """Every expected URL requested, 500 pages with every retry, nothing unexpected requested.

    A lease that ended without a result (crawl log reason lease_expired or worker_died) counts as an
    attempt whether or not its request reached the server: `records` lowers the 500 pages' due."""
    missing = [u for u in expected if counts.get(u, 0) < 1]
    assert not missing, f"{len(missing)} expected URLs never requested, e.g. {missing[:5]}; {context}"
    unanswered = Counter(r["url"] for r in records if r["reason"] in ("lease_expired", "worker_died"))
    short = {u: counts[u] for u in server_error_urls(web, expected) if counts[u] < ATTEMPTS - unanswered[u]}
    assert not short, f"500 pages requested fewer than 1 + max_retries times: {short}; {context}"
    unexpected = sorted(u for u in counts if u not in expected)
    assert not unexpected, f"URLs requested that a correct crawl never requests: {unexpected[:5]}; {context}"


def assert_excess_within(counts: dict[str, int], expected: Counter[str], bound: int, context: str) -> int:
    excess = excess_requests(counts, expected)
    total = sum(excess.values())
    worst = sorted(excess.items(), key=lambda kv: -kv[1])[:8]
    assert total <= bound, f"{total} duplicate requests > bound {bound}: {worst}; {context}"
    return total


# -- 1. kill -9 of the whole process group, anywhere -------------------------------------------------


@pytest.mark.timeout(600)
def test_kill9_anywhere_then_resume_loses_nothing(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    data_dir = tmp_path / "data"
    with MockWeb.serve_in_thread(SiteSpec(pages=PAGES, hosts=HOSTS, seed=SEED)) as web:
        config = write_config(tmp_path / "crawl.yaml", mock_config(web, data_dir, **STEADY))
        expected = expected_counts(web, MAX_RETRIES)
        total = sum(expected.values())
        kills: list[str] = []

        def kill(run: CrawlRun, label: str) -> None:
            assert run.running(), f"{run.name} exited ({run.proc.returncode}) before its kill\n{run.output()}"
            run.kill_group()  # asserts every process of the group is gone
            kills.append(f"{label}@{requests_seen(web)}")

        context = lambda: f"seed {SEED}, kills {kills}"  # noqa: E731

        # while idle at startup: the frontier may not even have opened the data dir yet
        run = CrawlRun(config, tmp_path, "kill-at-startup")
        time.sleep(rng.uniform(0.05, 1.5))
        kill(run, "startup")

        # right after the first page request of a run
        run = CrawlRun(config, tmp_path, "kill-after-first-page")
        before = page_requests(web)
        wait_for(lambda: page_requests(web) > before or not run.running(), RUN_TIMEOUT, "a first page request")
        kill(run, "first-page")

        # at seeded random points, spread over the crawl
        for i in range(KILLS):
            done = requests_seen(web)
            target = done + rng.uniform(0.3, 1.0) * (0.85 * total - done) / (KILLS - i)
            run = CrawlRun(config, tmp_path, f"kill-{i}")
            wait_for(lambda: requests_seen(web) >= target or not run.running(), RUN_TIMEOUT,
                     f"{target:.0f} requests ({context()})")
            kill(run, f"random-{i}")
            assert shm_segments(data_dir), "a killed run's Bloom filter segment should wait for the next run"

        run = CrawlRun(config, tmp_path, "final")
        code = run.wait(RUN_TIMEOUT)
        assert code == 0, f"{context()}\n{run.output()}"
        assert "crawl done" in run.stdout
        assert "Traceback" not in run.stderr, run.output()
        counts = web.snapshot()["counts"]
        assert_complete(counts, expected, web, context())
        excess = assert_excess_within(counts, expected, len(kills) * IN_FLIGHT, context())

        summary = read_summary(data_dir)
        assert summary["done"] and summary["queued"] == 0 and summary["in_flight"] == 0, summary
        # the snapshot was stale (the previous run was killed): the filter was rebuilt from the log
        assert 0 < summary["seen"].get("rebuilt_items", 0) <= summary["seen"]["urls"], summary["seen"]
        assert shm_segments(data_dir) == [], "the final run left its Bloom filter segment in /dev/shm"
        records, torn = read_crawl_log(data_dir / "crawl.jsonl")
        assert torn <= len(kills), f"{torn} unparseable crawl log lines after {len(kills)} kills"
        assert records, "empty crawl log"

        # a clean rerun: nothing to do, nothing requested, the Bloom snapshot is used as is
        requests_before = requests_seen(web)
        again = CrawlRun(config, tmp_path, "rerun")
        assert again.wait(RUN_TIMEOUT) == 0, again.output()
        assert requests_seen(web) == requests_before, "a rerun of a finished crawl requested pages"
        assert read_summary(data_dir)["fetched"] == summary["fetched"]
        summary = read_summary(data_dir)
        assert summary["done"]
        assert "rebuilt_items" not in summary["seen"], "a clean stop's snapshot was not used"
        assert shm_segments(data_dir) == []
        print(f"\nkill -9: {kills}; {excess} duplicate requests (bound {len(kills) * IN_FLIGHT})")


# -- 2. a dead worker, a stuck worker -------------------------------------------------------------------


@pytest.mark.timeout(300)
def test_killed_worker_is_replaced_and_nothing_is_lost(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with MockWeb.serve_in_thread(SiteSpec(pages=SMALL_PAGES, hosts=HOSTS, seed=SEED + 1)) as web:
        config = write_config(tmp_path / "crawl.yaml", mock_config(web, data_dir, **STEADY))
        expected = expected_counts(web, MAX_RETRIES)
        total = sum(expected.values())
        run = CrawlRun(config, tmp_path, "worker-kill")
        # every worker running (those past the first start once it has imported: run_frontier.eager_workers)
        wait_for(lambda: (requests_seen(web) >= 0.3 * total and len(worker_processes(run, data_dir)) == PROCESSES)
                 or not run.running(), RUN_TIMEOUT, "30% of the crawl, every worker started")
        assert run.running(), run.output()
        workers = worker_processes(run, data_dir)
        assert len(workers) == PROCESSES, f"expected {PROCESSES} workers, found {workers}"
        victim = busiest(workers, sample=0.2)
        at_kill = requests_seen(web)
        victim.kill()
        code = run.wait(RUN_TIMEOUT)
        assert code == 0, run.output()
        assert re.search(rf"worker \d+ exited with -{int(signal.SIGKILL)}", run.stderr), run.output()
        assert "Traceback" not in run.stderr, run.output()
        assert requests_seen(web) > at_kill, "nothing was fetched after the worker died"
        counts = web.snapshot()["counts"]
        context = f"seed {SEED + 1}, worker {victim.pid} killed at {at_kill} of {total} requests"
        records, _ = read_crawl_log(data_dir / "crawl.jsonl")
        assert_complete(counts, expected, web, context, records)
        excess = assert_excess_within(counts, expected, IN_FLIGHT, context)
        print(f"\nkilled worker: {excess} duplicate requests (bound {IN_FLIGHT})")
        summary = read_summary(data_dir)
        assert summary["done"]
        # the leases the restart abandoned are each an attempt, logged as the summary counts them
        died = sum(r["reason"] == "worker_died" for r in records)
        assert died == summary["reasons"].get("worker_died", 0), (died, summary["reasons"])
        assert_group_gone(run.pgid)
        assert shm_segments(data_dir) == []


@pytest.mark.timeout(300)
def test_stuck_worker_leases_expire_and_the_crawl_completes(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    timeout = min(5.0, LEASE_TIMEOUT / 2)
    workers_cfg = {"workers": {"timeout": timeout, "connect_timeout": timeout, "lease_timeout": LEASE_TIMEOUT}}
    # 4x the pages: batched queues crawl the standard site in about 4 s, too short to catch a worker mid-fetch
    with MockWeb.serve_in_thread(SiteSpec(pages=4 * PAGES, hosts=HOSTS, seed=SEED + 2)) as web:
        config = write_config(tmp_path / "crawl.yaml", mock_config(web, data_dir, **merge(STEADY, workers_cfg)))
        expected = expected_counts(web, MAX_RETRIES)
        total = sum(expected.values())
        run = CrawlRun(config, tmp_path, "worker-stop")
        wait_for(lambda: requests_seen(web) >= 0.15 * total or not run.running(), RUN_TIMEOUT, "15% of the crawl")
        assert run.running(), run.output()
        robots = {u: c for u, c in web.snapshot()["counts"].items() if u.endswith("/robots.txt")}
        assert all(c == 1 for c in robots.values()), (
            f"robots.txt requested twice before the fault ({robots}): a lease expired while the workers "
            f"started; raise FAULT_LEASE_TIMEOUT (now {LEASE_TIMEOUT:g} s) for this machine")
        # SIGSTOP a worker caught with fetches under way: alive, holding their leases, answering nothing
        for _ in range(20):
            assert run.running(), f"the crawl ended before a worker was caught fetching\n{run.output()}"
            victim = busiest(worker_processes(run, data_dir), sample=0.2)
            victim.suspend()
            time.sleep(0.2)
            held = pending_responses(victim)
            if held:
                break
            victim.resume()
        else:
            raise AssertionError("no worker was caught with a fetch under way in 20 tries")
        try:
            time.sleep(LEASE_TIMEOUT + 2.0)
        finally:
            victim.resume()
        code = run.wait(RUN_TIMEOUT)
        assert code == 0, run.output()
        assert "exited with" not in run.stderr, "a stuck worker is not dead: nothing should be restarted"
        summary = read_summary(data_dir)
        # every fetch the stopped worker had under way outlived its lease
        assert summary["reasons"].get("lease_expired", 0) >= held, (held, summary["reasons"])
        counts = web.snapshot()["counts"]
        context = f"seed {SEED + 2}, worker {victim.pid} stopped for {LEASE_TIMEOUT + 2:g} s"
        records, _ = read_crawl_log(data_dir / "crawl.jsonl")
        assert_complete(counts, expected, web, context, records)
        # each expired lease is one attempt in the crawl log, as its reason counts in summary.json
        assert sum(r["reason"] == "lease_expired" for r in records) == summary["reasons"]["lease_expired"]
        excess = assert_excess_within(counts, expected, IN_FLIGHT, context)
        reasons = summary["reasons"]
        # each page fetched twice is one whose lease expired (its late result was dropped as stale)
        assert excess <= reasons["lease_expired"], (excess, reasons)
        print(f"\nstuck worker: {held} fetches under way, {reasons['lease_expired']} leases expired, "
              f"{reasons.get('stale_result', 0)} stale results, {excess} duplicate requests (bound {IN_FLIGHT})")
        assert shm_segments(data_dir) == []


# -- 3. hostile servers -------------------------------------------------------------------------------

# What the crawl log records for each hostile route: one (status, reason) per request the frontier
# made (fetcher vocabulary, workers/fetcher.py), with limits.max_retries = MAX_RETRIES.
ROUTE_OUTCOMES: dict[str, list[tuple[str, str | None]]] = {
    **{r.path: [("fail", "http_503")] * 2 + [("ok", None)] for r in HOSTILE_ROUTES if "/flaky?" in r.path},
    "/hostile/always-500": [("fail", "http_500")] * ATTEMPTS,
    "/hostile/reset": [("fail", "connection_reset")] * ATTEMPTS,
    "/hostile/reset-early": [("fail", "connection_reset")] * ATTEMPTS,
    "/hostile/hang": [("fail", "timeout")] * ATTEMPTS,
    "/hostile/drip": [("fail", "timeout")] * ATTEMPTS,
    "/hostile/huge": [("skip", "too_large")],
    "/hostile/huge-chunked": [("skip", "too_large")],
    "/hostile/gzip-bomb": [("skip", "too_large")],
    "/hostile/loop-a": [("ok", "redirect")],
    "/hostile/chain/0": [("ok", "redirect")],
    "/hostile/redirect-invalid": [("ok", "redirect")],  # its target is refused: redirect_out_of_scope
    "/hostile/redirect-closed": [("ok", "redirect")],  # likewise
    "/hostile/redirect-scheme": [("skip", "bad_redirect")],
    "/hostile/redirect-nowhere": [("skip", "http_302")],
    "/hostile/as-png": [("ok", "not_html")],
    "/hostile/no-content-type": [("ok", None)],  # sniffed as HTML and parsed
    "/hostile/binary": [("skip", "binary_body")],
    **{path: [("ok", None)] for path in (
        "/hostile/bad-charset", "/hostile/invalid-utf8", "/hostile/malformed", "/hostile/calendar?month=0",
        "/hostile/grow?q=a", "/hostile/long-url", "/hostile/latin1-hrefs", "/hostile/schemes", "/hostile/bad-ports",
        "/hostile/idn")},
}
HOSTILE_MAX_REDIRECTS = 5
HOSTILE_MAX_URL_LENGTH = 256
SUMMARY_ONLY_REASONS = ("stale_result", "robots_fetched", "robots_unreachable", "robots_lease_expired",
                        "robots_worker_died", "host_unreachable", "redirect_", "link_", "seed_", "invalid_seed")


@pytest.fixture(scope="module")
def hostile_crawl(tmp_path_factory: pytest.TempPathFactory):
    """One crawl of a mock web with every hostile route; the tests below look at what it left."""
    tmp = tmp_path_factory.mktemp("hostile")
    data_dir = tmp / "data"
    spec = SiteSpec(pages=SMALL_PAGES, hosts=HOSTS, seed=SEED + 3, hostile=True)
    graph = SiteGraph(spec)
    depth = len(graph.layers) - 1  # every page of the graph, and a bound on the crawler traps
    override = merge(STEADY, {
        "scope": {"max_depth": depth},
        "limits": {"max_redirects": HOSTILE_MAX_REDIRECTS, "max_url_length": HOSTILE_MAX_URL_LENGTH,
                   "max_body_bytes": 2 * 2**20},
        "workers": {"timeout": 3.0, "connect_timeout": 2.0, "lease_timeout": LEASE_TIMEOUT},
    })
    with MockWeb.serve_in_thread(graph=graph) as web:
        config = write_config(tmp / "crawl.yaml", mock_config(web, data_dir, **override))
        run = CrawlRun(config, tmp, "hostile")
        code = run.wait(RUN_TIMEOUT)
        records, torn = read_crawl_log(data_dir / "crawl.jsonl")
        yield {
            "web": web, "run": run, "code": code, "data_dir": data_dir, "depth": depth,
            "counts": web.snapshot()["counts"], "base": web.base_urls[0], "records": records, "torn": torn,
            "summary": read_summary(data_dir) if (data_dir / "summary.json").exists() else {},
            "expected": expected_counts(web, MAX_RETRIES, max_depth=depth),
            "allowed": {f"127.0.0.1:{p}" for p in web.ports},
        }


def test_hostile_crawl_completes_and_no_worker_dies(hostile_crawl) -> None:
    run = hostile_crawl["run"]
    assert hostile_crawl["code"] == 0, run.output()
    assert "crawl done" in run.stdout
    assert "exited with" not in run.stderr, f"a worker died\n{run.output()}"
    assert "Traceback" not in run.stderr, run.output()
    assert hostile_crawl["torn"] == 0
    reasons = hostile_crawl["summary"]["reasons"]
    assert not [r for r in reasons if r.startswith("internal_error")], reasons
    print(f"\nhostile crawl: {run.elapsed():.1f} s, reasons {reasons}")


def test_hostile_routes_are_counted_under_named_reasons(hostile_crawl) -> None:
    assert set(ROUTE_OUTCOMES) == {r.path for r in HOSTILE_ROUTES}, "a hostile route without an expected outcome"
    base, counts, records = hostile_crawl["base"], hostile_crawl["counts"], hostile_crawl["records"]
    by_url: dict[str, list[tuple[str, str | None]]] = {}
    for rec in records:
        by_url.setdefault(rec["url"], []).append((rec["status"], rec["reason"]))
    wanted_reasons: Counter[str] = Counter()
    for path, outcomes in ROUTE_OUTCOMES.items():
        url = base + path
        got = sorted(by_url.get(url, []), key=repr)
        assert got == sorted(outcomes, key=repr), f"{path}: crawl log has {got}, expected {outcomes}"
        requested = counts.get(url, 0)
        if path == "/hostile/reset-early":  # aiohttp resends once on a reused keep-alive connection
            assert len(outcomes) <= requested <= 2 * len(outcomes), (path, requested)
        else:
            assert requested == len(outcomes), f"{path} requested {requested} times, expected {len(outcomes)}"
        wanted_reasons.update(reason for _, reason in outcomes if reason)
    # summary.json counts the same outcomes as the crawl log, under the same names
    summary = hostile_crawl["summary"]["reasons"]
    logged = Counter(r["reason"] or ("ok" if r["status"] == "ok" else r["status"]) for r in records)
    assert {k: summary.get(k) for k in logged} == dict(logged), (summary, logged)
    extra = [k for k in summary if k not in logged and not k.startswith(SUMMARY_ONLY_REASONS)]
    assert not extra, f"summary reasons that are neither logged nor known: {extra}"
    for reason, n in wanted_reasons.items():
        assert summary.get(reason, 0) >= n, f"summary.json counts {summary.get(reason)} x {reason}, expected >= {n}"
    assert summary.get("redirect_out_of_scope") == 2, summary  # redirect-invalid and redirect-closed
    assert summary.get("redirect_too_many_redirects") == 1, summary  # the chain


def test_hostile_links_found_canaries_and_traps_bounded(hostile_crawl) -> None:
    base, counts, depth = hostile_crawl["base"], hostile_crawl["counts"], hostile_crawl["depth"]
    not_found = [p for p in HOSTILE_FOUND if counts.get(base + p) != 1]
    assert not not_found, f"found pages not requested exactly once: {[(p, counts.get(base + p)) for p in not_found]}"
    assert all(counts.get(base + p, 0) == 0 for p in HOSTILE_CANARIES), "a canary page was requested"
    assert not [u for u in counts if "/hostile/long-target" in u], "the 100 KB URL was requested"
    assert counts.get(base + "/hostile/loop-b") == 1 and counts.get(base + "/hostile/loop-a") == 1
    # the redirect chain: hops up to limits.max_redirects, each once, none beyond
    for hop in range(CHAIN_HOPS + 1):
        want = 1 if hop <= HOSTILE_MAX_REDIRECTS else 0
        assert counts.get(f"{base}/hostile/chain/{hop}", 0) == want, (hop, counts.get(f"{base}/hostile/chain/{hop}"))
    # the calendar trap: month k sits at depth 2 + k (index -> hub -> calendar), so max_depth bounds it
    calendar = sorted(int(u.rsplit("=", 1)[1]) for u in counts if "/hostile/calendar?month=" in u)
    assert calendar == list(range(depth - 1)), f"calendar months requested {calendar}, max_depth {depth}"
    assert all(counts[f"{base}/hostile/calendar?month={m}"] == 1 for m in calendar)
    # the growing query: q doubles on every hop, stopped by max_url_length (or max_depth)
    grow = sorted(len(u.rsplit("=", 1)[1]) for u in counts if "/hostile/grow?q=" in u)
    prefix = len(f"{base}/hostile/grow?q=")
    bound = [2**k for k in range(depth - 1) if prefix + 2**k <= HOSTILE_MAX_URL_LENGTH]
    assert grow == bound, f"grow query lengths requested {grow}, expected {bound}"
    assert max(len(u) for u in counts) <= HOSTILE_MAX_URL_LENGTH


def test_never_fetches_out_of_scope_or_non_http(hostile_crawl) -> None:
    allowed, records = hostile_crawl["allowed"], hostile_crawl["records"]
    for rec in records:
        scheme, _, rest = rec["url"].partition("://")
        assert scheme in ("http", "https") and rest.split("/", 1)[0] in allowed, rec
    reasons = hostile_crawl["summary"]["reasons"]
    assert not {"dns_error", "connect_error"} & set(reasons), f"an out-of-scope host was contacted: {reasons}"
    # the mock web saw nothing a correct crawl does not request, apart from the hostile routes
    counts, expected = hostile_crawl["counts"], hostile_crawl["expected"]
    unexpected = [u for u in counts if u not in expected and "/hostile/" not in u]
    assert not unexpected, unexpected[:5]
    missing = [u for u in expected if counts.get(u, 0) < 1]
    assert not missing, missing[:5]
    # every request beyond the expected ones is explained by an expired lease
    excess = {u: n for u, n in excess_requests(counts, expected).items() if "/hostile/" not in u}
    assert sum(excess.values()) <= reasons.get("lease_expired", 0), (excess, reasons)


# -- 4. safety ---------------------------------------------------------------------------------------------


def run_cli(tmp_path: Path, cfg: dict | str, name: str, timeout: float = 60.0, **kwargs) -> CrawlRun:
    path = tmp_path / f"{name}.yaml"
    if isinstance(cfg, str):
        path.write_text(cfg)
    else:
        write_config(path, cfg)
    run = CrawlRun(path, tmp_path, name, **kwargs)
    run.wait(timeout)
    return run


def assert_clean_refusal(run: CrawlRun, *needles: str) -> str:
    """Exit 2, exactly one message on stderr, naming every needle; no traceback, no process left."""
    assert run.proc.returncode == 2, run.output()
    lines = messages(run.stderr)
    assert len(lines) == 1 and lines[0].startswith("frontier:"), f"expected one message, got {lines}"
    assert "Traceback" not in run.stderr
    for needle in needles:
        assert needle in lines[0], f"{needle!r} not in {lines[0]!r}"
    assert_group_gone(run.pgid)
    return lines[0]


@pytest.mark.parametrize("seed", ["http://127.0.0.1:{port}/index.html", "http://localhost:{port}/index.html",
                                  "http://[::1]:{port}/", "http://10.1.2.3/"])
def test_block_private_refuses_private_seeds(tmp_path: Path, seed: str) -> None:
    seed = seed.format(port=8081)
    cfg = {"seeds": [seed], "scope": {"allowed_domains": ["*"], "block_private": True},
           "storage": {"data_dir": str(tmp_path / "data")}}
    run = run_cli(tmp_path, cfg, "private")
    assert_clean_refusal(run, "seeds[0]", "private_address")
    assert not (tmp_path / "data").exists(), "nothing should be created for a refused config"


def loopback_name() -> str | None:
    """A host name that is not private by its text but resolves only to loopback addresses (/etc/hosts)."""
    for name in (socket.gethostname(), "localhost.localdomain", "ip6-localhost", "ip6-loopback"):
        if not name or is_private_host(name.lower()):
            continue
        try:
            infos = socket.getaddrinfo(name, 80, type=socket.SOCK_STREAM)
        except OSError:
            continue
        if infos and all(ipaddress.ip_address(info[4][0]).is_loopback for info in infos):
            return name.lower()
    return None


@pytest.mark.timeout(300)
def test_block_private_refuses_a_name_that_resolves_to_loopback(tmp_path: Path) -> None:
    """The scope judges a URL's text; a name resolving to a private address must be refused when the
    worker resolves it, before it connects."""
    name = loopback_name()
    if name is None:
        pytest.skip("no host name on this machine resolves only to loopback (see /etc/hosts)")
    with MockWeb.serve_in_thread(SiteSpec(pages=20, hosts=1, seed=SEED + 8)) as web:
        seed = web.seed.replace("127.0.0.1", name)
        cfg = merge(STEADY, {"seeds": [seed], "scope": {"allowed_hosts": [f"{name}:{web.ports[0]}"],
                                                        "block_private": True},
                             "politeness": {"obey_robots": False}, "storage": {"data_dir": str(tmp_path / "data")},
                             "output": {"progress": "off"}})
        run = run_cli(tmp_path, cfg, "private-name", timeout=RUN_TIMEOUT)
        assert run.proc.returncode == 0, run.output()
        assert requests_seen(web) == 0, f"{name} resolves to loopback, yet the mock web was contacted"
        records, _ = read_crawl_log(tmp_path / "data" / "crawl.jsonl")
        assert [(r["url"], r["status"], r["reason"]) for r in records] == [(seed, "skip", "private_address")]
        # without block_private the same crawl reaches the mock web: the refusal above is the guard's
        run = run_cli(tmp_path, merge(cfg, {"scope": {"block_private": False},
                                            "storage": {"data_dir": str(tmp_path / "open")}}), "open-name",
                      timeout=RUN_TIMEOUT)
        assert run.proc.returncode == 0, run.output()
        assert requests_seen(web) > 0


@pytest.mark.parametrize("text, needles", [
    ("seeds: [http://127.0.0.1:8081/]\npoliteness: {dealy: 1}\n", ["politeness.dealy", "unknown key"]),
    ("seeds: [http://127.0.0.1:8081/]\nworkers: {processes: 0}\n", ["workers.processes", ">= 1"]),
    ("seeds: [http://127.0.0.1:8081/]\nworkers: {timeout: 5, lease_timeout: 5}\n", ["workers.lease_timeout"]),
    ("seeds: [http://127.0.0.1:8081/]\ndedup: {capacity: 1e7}\n", ["dedup.capacity", "YAML 1.1"]),
    ("seeds: [ftp://127.0.0.1/]\n", ["seeds[0]"]),
    ("seeds: [http://127.0.0.1:8081/\n", ["not valid YAML"]),
    ("- just a list\n", ["mapping"]),
])
def test_bad_config_is_one_clear_message_and_exit_2(tmp_path: Path, text: str, needles: list[str]) -> None:
    run = run_cli(tmp_path, text, "bad")
    assert_clean_refusal(run, *needles)


def test_missing_config_file(tmp_path: Path) -> None:
    run = CrawlRun(tmp_path / "nope.yaml", tmp_path, "missing")
    run.wait(60)
    assert_clean_refusal(run, "nope.yaml")


@pytest.fixture(scope="module")
def small_data_dir(tmp_path_factory: pytest.TempPathFactory):
    """A finished crawl of a small mock web: (its data dir, a config dict to rerun it, the web)."""
    tmp = tmp_path_factory.mktemp("small")
    spec = SiteSpec(pages=40, hosts=1, seed=SEED + 4, redirects=False, errors=False)
    with MockWeb.serve_in_thread(spec) as web:
        cfg = mock_config(web, tmp / "data", **STEADY)
        run = run_cli(tmp, cfg, "small", timeout=RUN_TIMEOUT)
        assert run.proc.returncode == 0, run.output()
        yield tmp / "data", cfg, web


def copy_crawl(small_data_dir, tmp_path: Path) -> tuple[Path, dict]:
    data_dir, cfg, _ = small_data_dir
    copy = tmp_path / "data"
    shutil.copytree(data_dir, copy)
    return copy, merge(cfg, {"storage": {"data_dir": str(copy)}})


def test_data_dir_is_private(small_data_dir) -> None:
    data_dir = small_data_dir[0]
    for path in (data_dir, data_dir / "state"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700, (path, oct(path.stat().st_mode))
    for name in ("data.mdb", "lock.mdb"):
        mode = stat.S_IMODE((data_dir / "state" / name).stat().st_mode)
        assert not mode & 0o077, (name, oct(mode))


def test_world_writable_data_dir_is_refused(small_data_dir, tmp_path: Path) -> None:
    data_dir, cfg = copy_crawl(small_data_dir, tmp_path)
    data_dir.chmod(0o777)
    run = run_cli(tmp_path, cfg, "world-writable")
    assert_clean_refusal(run, str(data_dir), "world-writable")
    data_dir.chmod(0o700)
    run = run_cli(tmp_path, cfg, "private-again", timeout=RUN_TIMEOUT)
    assert run.proc.returncode == 0, run.output()


def test_corrupt_data_dir_is_refused(small_data_dir, tmp_path: Path) -> None:
    data_dir, cfg = copy_crawl(small_data_dir, tmp_path)
    mdb = data_dir / "state" / "data.mdb"
    mdb.write_bytes(random.Random(SEED).randbytes(mdb.stat().st_size))
    web = small_data_dir[2]
    before = requests_seen(web)
    run = run_cli(tmp_path, cfg, "corrupt", timeout=RUN_TIMEOUT)
    assert_clean_refusal(run, str(data_dir / "state"), "corrupt")
    assert requests_seen(web) == before, "a crawl on a corrupt data dir fetched pages"
    assert shm_segments(data_dir) == []


def test_other_canonical_rules_are_refused(small_data_dir, tmp_path: Path) -> None:
    data_dir, cfg = copy_crawl(small_data_dir, tmp_path)
    run = run_cli(tmp_path, merge(cfg, {"canonical": {"sort_query": False}}), "canonical", timeout=RUN_TIMEOUT)
    assert_clean_refusal(run, "canonical version", "sort_query")
    assert shm_segments(data_dir) == []


@pytest.mark.timeout(300)
def test_second_run_on_a_busy_data_dir_is_refused_and_sigterm_stops_cleanly(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    spec = SiteSpec(pages=60, hosts=1, seed=SEED + 5, redirects=False, errors=False)
    with MockWeb.serve_in_thread(spec) as web:
        # politeness.delay makes the first run slow enough to be caught running
        cfg = mock_config(web, data_dir, **merge(STEADY, {"politeness": {"delay": 0.5}}))
        config = write_config(tmp_path / "first.yaml", cfg)
        first = CrawlRun(config, tmp_path, "first")
        wait_for(lambda: page_requests(web) >= 2 or not first.running(), RUN_TIMEOUT, "the first run's pages")
        assert first.running(), first.output()
        second = run_cli(tmp_path, cfg, "second", timeout=RUN_TIMEOUT)
        assert_clean_refusal(second, "in use")
        assert first.running(), "the refused second run disturbed the first"
        assert shm_segments(data_dir), "the refused second run removed the first run's Bloom filter"
        first.proc.send_signal(signal.SIGTERM)  # a clean stop: exit 130, rerun resumes
        assert first.wait(60) == 130, first.output()
        assert "rerun the same command to resume" in first.stdout
        assert_group_gone(first.pgid)
        assert shm_segments(data_dir) == []
        assert not read_summary(data_dir)["done"]
        resumed = run_cli(tmp_path, merge(cfg, {"politeness": {"delay": 0.0}}), "resumed", timeout=RUN_TIMEOUT)
        assert resumed.proc.returncode == 0, resumed.output()
        expected = expected_counts(web, MAX_RETRIES)
        counts = web.snapshot()["counts"]
        assert_complete(counts, expected, web, "SIGTERM then resume")
        # a clean stop waits for the fetches under way, so nothing is fetched twice
        assert excess_requests(counts, expected) == {}
        assert "rebuilt_items" not in read_summary(data_dir)["seen"], "a clean stop's snapshot was not used"


# -- 5. disk -----------------------------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path):
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE},mode=0755", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (needs root and mount rights): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        if subprocess.run(["umount", str(mount)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mount)], capture_output=True)


@pytest.mark.timeout(400)
def test_full_disk_stops_cleanly_and_resumes(tmp_path: Path, small_disk: Path) -> None:
    data_dir = small_disk / "data"
    with MockWeb.serve_in_thread(SiteSpec(pages=PAGES, hosts=HOSTS, seed=SEED + 6)) as web:
        config = write_config(tmp_path / "crawl.yaml", mock_config(web, data_dir, **STEADY))
        expected = expected_counts(web, MAX_RETRIES)
        full = CrawlRun(config, tmp_path, "disk-full")
        assert full.wait(RUN_TIMEOUT) == 3, full.output()
        lines = messages(full.stderr)
        assert len(lines) == 1 and "disk is full" in lines[0] and str(data_dir) in lines[0], full.output()
        assert_group_gone(full.pgid)
        assert shm_segments(data_dir) == []
        assert any(c < 1 for c in (web.snapshot()["counts"].get(u, 0) for u in expected)), (
            f"the crawl finished before the {TMPFS_SIZE} disk filled: lower FAULT_TMPFS_SIZE")

        # still full: a rerun stops the same way
        again = CrawlRun(config, tmp_path, "still-full")
        assert again.wait(RUN_TIMEOUT) == 3, again.output()
        assert "Traceback" not in again.stderr and len(messages(again.stderr)) == 1, again.output()

        subprocess.run(["mount", "-o", "remount,size=200M", str(small_disk)], check=True)
        resumed = CrawlRun(config, tmp_path, "resumed")
        assert resumed.wait(RUN_TIMEOUT) == 0, resumed.output()
        counts = web.snapshot()["counts"]
        context = f"seed {SEED + 6}, disk {TMPFS_SIZE}"
        assert_complete(counts, expected, web, context)
        # each stop loses at most the batch under way: what was in flight
        assert_excess_within(counts, expected, 2 * IN_FLIGHT, context)
        assert read_summary(data_dir)["done"]
        assert shm_segments(data_dir) == []


@pytest.mark.timeout(300)
def test_lmdb_map_full_grows_the_map_during_a_crawl(tmp_path: Path) -> None:
    """The initial LMDB map (64 MiB) cannot be set from the config; a sitecustomize in every process of the
    crawl shrinks it to 128 KiB, so the map fills and grows many times while pages are committed."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        "import frontier.seen.fplog as fplog\n"
        "fplog.INITIAL_MAP_SIZE = 128 * 1024\n"
        "fplog.FingerprintLog.__init__.__kwdefaults__['map_size'] = fplog.INITIAL_MAP_SIZE\n"
        f"open({str(hook / 'applied')!r}, 'a').write('x')\n")
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(hook), os.environ.get("PYTHONPATH")]))}
    data_dir = tmp_path / "data"
    with MockWeb.serve_in_thread(SiteSpec(pages=SMALL_PAGES, hosts=HOSTS, seed=SEED + 7)) as web:
        config = write_config(tmp_path / "crawl.yaml", mock_config(web, data_dir, **STEADY))
        run = CrawlRun(config, tmp_path, "map-full", env=env)
        assert run.wait(RUN_TIMEOUT) == 0, run.output()
        assert "Traceback" not in run.stderr
        expected = expected_counts(web, MAX_RETRIES)
        counts = web.snapshot()["counts"]
        assert_complete(counts, expected, web, f"seed {SEED + 7}")
        assert excess_requests(counts, expected) == {}, "a clean crawl fetched something twice"
        assert (hook / "applied").exists(), "the sitecustomize hook did not run"
        size = (data_dir / "state" / "data.mdb").stat().st_size  # LMDB never writes past its map
        assert size > 128 * 1024, f"data.mdb is {size} bytes: the map never had to grow"


# -- 6. reruns with limits -------------------------------------------------------------------------------

# A site of about 1,100 page fetches; a politeness delay (one fetch per host at a time) paces the crawl at
# about 150 pages/s, so that each kill and Ctrl-C lands mid-run.
LIMITS_SPEC = SiteSpec(pages=900, hosts=HOSTS, seed=SEED + 9)
LIMITS_DELAY = 0.02


def page_counts(web: MockWeb) -> dict[str, int]:
    return {u: c for u, c in web.snapshot()["counts"].items() if not u.endswith("/robots.txt")}


def by_host(counts: dict[str, int]) -> Counter[str]:
    hosts: Counter[str] = Counter()
    for url, n in counts.items():
        hosts[url.split("/")[2]] += n
    return hosts


class LimitedCrawl:
    """Runs of run_frontier.py on one data dir against one mock web, with the limits changed between runs."""

    def __init__(self, web: MockWeb, tmp_path: Path, **override: object) -> None:
        self.web, self.tmp_path = web, tmp_path
        self.data_dir = tmp_path / "data"
        self.base = merge(STEADY, {"politeness": {"delay": LIMITS_DELAY}, **override})
        self.runs = 0
        self.lost = 0  # page requests of killed runs whose results were never committed (not in "fetched")

    def config(self, **override: object) -> Path:
        self.runs += 1
        cfg = mock_config(self.web, self.data_dir, **merge(self.base, override))
        return write_config(self.tmp_path / f"run-{self.runs}.yaml", cfg)

    def finish(self, name: str, **override: object) -> dict:
        """One run to its end: exit 0, nothing left behind; returns summary.json."""
        run = CrawlRun(self.config(**override), self.tmp_path, name)
        code = run.wait(RUN_TIMEOUT)
        assert code == 0, f"{name}: exit {code}\n{run.output()}"
        assert "crawl done" in run.stdout and "Traceback" not in run.stderr, run.output()
        assert_group_gone(run.pgid)
        assert shm_segments(self.data_dir) == []
        summary = read_summary(self.data_dir)
        assert summary["done"] and summary["in_flight"] == 0, summary
        return summary

    def interrupt(self, name: str, sig: int, reached: Callable[[], bool], **override: object) -> None:
        """A run stopped by `sig` to its whole process group (SIGINT: a Ctrl-C) once `reached()`."""
        run = CrawlRun(self.config(**override), self.tmp_path, name)
        wait_for(lambda: reached() or not run.running(), RUN_TIMEOUT, f"{name}: the point to stop at")
        assert run.running(), f"{name} ended before its {signal.Signals(sig).name}\n{run.output()}"
        run.kill_group(sig, gone_within=60.0)
        if sig == signal.SIGINT:
            assert run.proc.returncode == 130, run.output()
            assert "rerun the same command to resume" in run.stdout and "Traceback" not in run.stderr, run.output()
            assert shm_segments(self.data_dir) == []

    def assert_rerun_does_nothing(self, name: str, **override: object) -> None:
        before = requests_seen(self.web)
        summary = self.finish(name, **override)
        assert requests_seen(self.web) == before, f"{name}: a rerun of a finished crawl requested something"
        assert summary["fetched"] == sum(page_counts(self.web).values()) - self.lost, summary


@pytest.mark.timeout(600)
def test_max_pages_rerun_raise_kill_and_ctrl_c(tmp_path: Path) -> None:
    with MockWeb.serve_in_thread(LIMITS_SPEC) as web:
        expected = expected_counts(web, MAX_RETRIES)
        total = sum(n for u, n in expected.items() if not u.endswith("/robots.txt"))
        crawl = LimitedCrawl(web, tmp_path)
        pages = lambda: sum(page_counts(web).values())  # noqa: E731
        limits = [round(total * share) for share in (0.2, 0.4, 0.6, 0.8)]

        # a run with max_pages stops at exactly max_pages fetched; the same command again does nothing
        summary = crawl.finish("first", limits={"max_pages": limits[0]})
        assert pages() == summary["fetched"] == limits[0], summary
        crawl.assert_rerun_does_nothing("same-limit", limits={"max_pages": limits[0]})

        # raised: exactly the additional pages, none fetched twice
        summary = crawl.finish("raised", limits={"max_pages": limits[1]})
        assert pages() == summary["fetched"] == limits[1], summary
        assert excess_requests(page_counts(web), expected) == {}

        # kill -9 mid-run, rerun: max_pages fetched exactly; refetches bounded by what was in flight
        crawl.interrupt("killed", signal.SIGKILL, lambda: pages() >= (limits[1] + limits[2]) // 2,
                        limits={"max_pages": limits[2]})
        at_kill = pages()
        summary = crawl.finish("after-kill", limits={"max_pages": limits[2]})
        assert summary["fetched"] == limits[2], summary
        crawl.lost = pages() - limits[2]
        assert 0 <= crawl.lost <= IN_FLIGHT, (at_kill, pages(), limits[2])
        killed_excess = assert_excess_within(page_counts(web), expected, IN_FLIGHT, "kill -9 with max_pages")
        crawl.assert_rerun_does_nothing("after-kill-again", limits={"max_pages": limits[2]})

        # Ctrl-C mid-run (SIGINT to the whole group), rerun: a clean stop fetches nothing twice
        crawl.interrupt("ctrl-c", signal.SIGINT, lambda: pages() >= (limits[2] + limits[3]) // 2,
                        limits={"max_pages": limits[3]})
        summary = crawl.finish("after-ctrl-c", limits={"max_pages": limits[3]})
        assert summary["fetched"] == limits[3] == pages() - crawl.lost, summary
        assert sum(excess_requests(page_counts(web), expected).values()) == killed_excess
        crawl.assert_rerun_does_nothing("after-ctrl-c-again", limits={"max_pages": limits[3]})

        # no limit: the rest of the site, nothing missed
        crawl.finish("unlimited", limits={"max_pages": None})
        counts = web.snapshot()["counts"]
        assert_complete(counts, expected, web, "max_pages reruns")
        assert sum(excess_requests(counts, expected).values()) == killed_excess


@pytest.mark.timeout(600)
def test_max_pages_per_host_rerun_raise_kill_and_ctrl_c(tmp_path: Path) -> None:
    with MockWeb.serve_in_thread(LIMITS_SPEC) as web:
        expected = expected_counts(web, MAX_RETRIES)
        hosts = [f"127.0.0.1:{p}" for p in web.ports]
        smallest = min(by_host({u: n for u, n in expected.items() if not u.endswith("/robots.txt")}).values())
        crawl = LimitedCrawl(web, tmp_path)
        limits = [round(smallest * share) for share in (0.2, 0.4, 0.6, 0.8)]

        def per_host() -> list[int]:
            counts = by_host(page_counts(web))
            return [counts[h] for h in hosts]

        summary = crawl.finish("first", limits={"max_pages_per_host": limits[0]})
        assert per_host() == [limits[0]] * HOSTS and summary["fetched"] == HOSTS * limits[0], (per_host(), summary)
        crawl.assert_rerun_does_nothing("same-limit", limits={"max_pages_per_host": limits[0]})

        summary = crawl.finish("raised", limits={"max_pages_per_host": limits[1]})
        assert per_host() == [limits[1]] * HOSTS and summary["fetched"] == HOSTS * limits[1], (per_host(), summary)
        assert excess_requests(page_counts(web), expected) == {}

        crawl.interrupt("killed", signal.SIGKILL, lambda: sum(per_host()) >= HOSTS * (limits[1] + limits[2]) // 2,
                        limits={"max_pages_per_host": limits[2]})
        summary = crawl.finish("after-kill", limits={"max_pages_per_host": limits[2]})
        assert summary["fetched"] == HOSTS * limits[2], summary
        crawl.lost = sum(per_host()) - HOSTS * limits[2]
        assert 0 <= crawl.lost <= IN_FLIGHT and all(limits[2] <= n <= limits[2] + IN_FLIGHT for n in per_host())
        killed_excess = assert_excess_within(page_counts(web), expected, IN_FLIGHT, "kill -9 with max_pages_per_host")
        crawl.assert_rerun_does_nothing("after-kill-again", limits={"max_pages_per_host": limits[2]})

        crawl.interrupt("ctrl-c", signal.SIGINT, lambda: sum(per_host()) >= HOSTS * (limits[2] + limits[3]) // 2,
                        limits={"max_pages_per_host": limits[3]})
        summary = crawl.finish("after-ctrl-c", limits={"max_pages_per_host": limits[3]})
        assert summary["fetched"] == HOSTS * limits[3] == sum(per_host()) - crawl.lost, summary
        assert sum(excess_requests(page_counts(web), expected).values()) == killed_excess
        crawl.assert_rerun_does_nothing("after-ctrl-c-again", limits={"max_pages_per_host": limits[3]})

        crawl.finish("unlimited", limits={"max_pages_per_host": None})
        counts = web.snapshot()["counts"]
        assert_complete(counts, expected, web, "max_pages_per_host reruns")
        assert sum(excess_requests(counts, expected).values()) == killed_excess


@pytest.mark.timeout(600)
def test_max_depth_kill_ctrl_c_and_rerun(tmp_path: Path) -> None:
    """The site graph links layer d only to layer d + 1 and to layers <= 1, so the URLs within max_depth
    are the same whatever the fetch order (SiteGraph.expected_requests(max_depth=...)) and exact here."""
    with MockWeb.serve_in_thread(LIMITS_SPEC) as web:
        depth = len(web.graph.layers) - 2
        expected = expected_counts(web, MAX_RETRIES, max_depth=depth)
        total = sum(n for u, n in expected.items() if not u.endswith("/robots.txt"))
        crawl = LimitedCrawl(web, tmp_path, scope={"max_depth": depth})
        pages = lambda: sum(page_counts(web).values())  # noqa: E731

        crawl.interrupt("killed", signal.SIGKILL, lambda: pages() >= 0.3 * total)
        crawl.interrupt("ctrl-c", signal.SIGINT, lambda: pages() >= 0.6 * total)
        summary = crawl.finish("after-both")
        counts = web.snapshot()["counts"]
        assert_complete(counts, expected, web, f"max_depth {depth}")
        assert_excess_within(counts, expected, IN_FLIGHT, f"kill -9 and Ctrl-C with max_depth {depth}")
        crawl.lost = pages() - summary["fetched"]
        assert 0 <= crawl.lost <= IN_FLIGHT, summary
        crawl.assert_rerun_does_nothing("again")


# -- 7. unreachable hosts --------------------------------------------------------------------------------


def free_port() -> int:
    """A loopback port nobody listens on (connections to it are refused) until a server binds it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.timeout(300)
def test_unreachable_seed_exits_4_and_a_rerun_crawls_it_once_up(tmp_path: Path) -> None:
    spec = SiteSpec(pages=60, hosts=1, seed=SEED + 10, errors=False, redirects=False)
    port = free_port()
    seed = f"http://127.0.0.1:{port}{SiteGraph(spec).path(0)}"
    cfg = merge(STEADY, {"seeds": [seed], "scope": {"allowed_hosts": [f"127.0.0.1:{port}"]},
                         "storage": {"data_dir": str(tmp_path / "data")}, "output": {"progress": "off"}})
    down = run_cli(tmp_path, cfg, "down", timeout=RUN_TIMEOUT)
    assert down.proc.returncode == 4, down.output()
    assert seed in down.stderr and "connection refused" in down.stderr, down.output()
    assert "Traceback" not in down.stderr, down.output()
    assert_group_gone(down.pgid)
    records, _ = read_crawl_log(tmp_path / "data" / "crawl.jsonl")
    assert not [r for r in records if r["reason"] == "robots_disallowed"], "an unreachable seed was skipped for good"
    with MockWeb.serve_in_thread(spec, ports=[port]) as web:  # the host is up: the rerun crawls it normally
        up = run_cli(tmp_path, cfg, "up", timeout=RUN_TIMEOUT)
        assert up.proc.returncode == 0, up.output()
        assert web.snapshot()["counts"] == dict(web.graph.expected_requests(web.ports))


@pytest.mark.timeout(300)
def test_dead_hosts_met_during_a_crawl_do_not_block_exit_0(tmp_path: Path) -> None:
    """The mock web links to a closed port; in scope, that host is met during the crawl and never answers."""
    data_dir = tmp_path / "data"
    with MockWeb.serve_in_thread(SiteSpec(pages=300, hosts=HOSTS, seed=SEED + 11)) as web:
        dead = f"127.0.0.1:{web.closed_port}"
        cfg = mock_config(web, data_dir, **merge(STEADY, {"scope": {"allowed_hosts": [
            *(f"127.0.0.1:{p}" for p in web.ports), dead]}}))
        run = run_cli(tmp_path, cfg, "dead-host", timeout=RUN_TIMEOUT)
        assert run.proc.returncode == 0, run.output()
        assert "crawl done" in run.stdout and "Traceback" not in run.stderr, run.output()
        expected = expected_counts(web, MAX_RETRIES)
        counts = web.snapshot()["counts"]
        assert_complete(counts, expected, web, "a dead host in scope")
        assert excess_requests(counts, expected) == {}
        records, _ = read_crawl_log(data_dir / "crawl.jsonl")
        assert not [r for r in records if dead in r["url"]], "the dead host's URLs were skipped or given up"
        summary = read_summary(data_dir)
        assert summary["done"] and summary["queued"] > 0, summary  # kept for a rerun to try again
        # a rerun tries the dead host again (its robots.txt), fetches nothing else, and exits 0 again
        again = run_cli(tmp_path, cfg, "dead-host-again", timeout=RUN_TIMEOUT)
        assert again.proc.returncode == 0, again.output()
        assert web.snapshot()["counts"] == counts
