"""The crawl-trap defences wired into the real crawl: run_frontier.py with the DEFAULT config
against the trap site (frontier.testing.traps) on loopback. The only keys set are the seeds, the data dir,
`politeness.delay: 0` (the default adaptive delay would space one host's fetches a second apart: minutes
for this site) and `output.progress: "off"`; scope, limits, canonical rules and trap detection are the
defaults of configs/crawl.yaml.

What is checked: the crawl ends by itself (exit 0), every normal page and every page of the
legitimate large site (/item/N, distinct pages under one pattern) is fetched, the traps together cost at most
TRAP_REQUESTS requests, in both variants of the site (plain, and templated: short articles in one template,
unknown paths answering 200); the URLs left as suspects are named by the summary, `status` and `export
--what suspected`; the detector's state and the low queues survive kill -9, on LMDB and on Redis."""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from faultkit import CrawlRun, assert_group_gone, merge, read_crawl_log, read_summary, wait_for, write_config
from frontier.config import load_config
from frontier.crawl.scheduler import Frontier
from frontier.crawl.traps import WINDOW, url_pattern
from frontier.errors import StorageError
from frontier.testing.redis_servers import RedisServer, server_binaries
from frontier.testing.traps import TRAPS, TrapSpec, TrapWeb

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[1]

RUN_TIMEOUT = 60.0
ITEMS = 600
TRAP_REQUESTS = 5_000  # every trap together: about traps.max_suspect_pages (1,000) plus what comes before suspicion
TRAP_KINDS = ("calendar", "session", "search", "other", "relative", "mirror", "fanout")


@pytest.fixture(scope="module", params=[False, True], ids=["plain", "templated"])
def web(request: pytest.FixtureRequest) -> Iterator[TrapWeb]:
    with TrapWeb.serve_in_thread(TrapSpec(items=ITEMS, templated=request.param)) as w:
        yield w


@pytest.fixture(scope="module")
def pattern_web() -> Iterator[TrapWeb]:
    """The trap site without its soft-404 trap, for the kill tests, which run with soft-404 detection off:
    with it on, a run may end every trap as soft 404s before any pattern is marked (the two defences race
    on the full site), and those tests are about the pattern state surviving a kill -9."""
    with TrapWeb.serve_in_thread(TrapSpec(items=ITEMS, traps=tuple(t for t in TRAPS if t != "soft404"))) as w:
        yield w


def default_config(web: TrapWeb, data_dir: Path, **override: Any) -> dict[str, Any]:
    return merge({"seeds": [web.seed, web.items_seed], "politeness": {"delay": 0}, "storage": {"data_dir": str(data_dir)},
                  "output": {"progress": "off"}}, override)


def run(tmp: Path, name: str, cfg: dict[str, Any]) -> CrawlRun:
    return CrawlRun(write_config(tmp / f"{name}.yaml", cfg), tmp, name)


def finish(crawl: CrawlRun) -> None:
    try:
        code = crawl.wait(RUN_TIMEOUT)
    finally:
        crawl.kill_group()
    assert code == 0, crawl.output()
    assert_group_gone(crawl.pgid)


def marked(cfg: dict[str, Any]) -> set[tuple[str, str]]:
    """(host, pattern) of the traps in the crawl state, as a new run would load them. Right after a kill -9
    the data dir's lock may take a moment to be released (seen once in CI, 2,800 tests in): a few tries."""
    deadline = time.monotonic() + 5.0
    while True:
        try:
            with Frontier.from_config(load_config(cfg)) as frontier:
                return {(host, pattern) for host, pattern, _pages in frontier.traps()}
        except StorageError as e:
            if "in use" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def requests_of(counts: dict[str, int], patterns: set[tuple[str, str]]) -> int:
    wanted = {pattern for _host, pattern in patterns}
    return sum(n for url, n in counts.items() if url_pattern(url) in wanted)


def check_complete(web: TrapWeb, counts: dict[str, int], slack: int = 0) -> Counter[str]:
    """Every page fetched, the traps within TRAP_REQUESTS (+ `slack`: refetches of what was in flight at a kill)."""
    missing = [u for u in web.normal_urls() + web.item_urls() if not counts.get(u)]
    assert missing == [], f"{len(missing)} pages never fetched, e.g. {missing[:5]}"
    kinds = web.requests_by_kind(counts)
    assert sum(kinds[k] for k in TRAP_KINDS) <= TRAP_REQUESTS + slack, dict(kinds)
    return kinds


def test_the_default_config_ends_by_itself_fetches_every_page_and_bounds_each_trap(tmp_path: Path,
                                                                                  web: TrapWeb) -> None:
    web.snapshot(reset=True)
    data = tmp_path / "data"
    cfg = default_config(web, data)
    crawl = run(tmp_path, "default", cfg)
    finish(crawl)
    counts = web.snapshot()["counts"]
    kinds = check_complete(web, counts)
    print(f"trap site, default config: {sum(counts.values())} requests, by kind {dict(kinds)}")
    patterns = {pattern for _host, pattern in marked(cfg)}
    assert not [p for p in patterns if p.startswith(("/item", "/page"))]  # the large site is not suspected
    records = read_crawl_log(data / "crawl.jsonl")[0]
    reasons = Counter(r.get("reason") for r in records)
    assert reasons["soft_404"] >= 1 and reasons["soft_404_probe"] == 2  # one probe per host
    # what is left is named: the summary lines, status and export
    assert "suspected traps: " in crawl.stdout and "--what suspected" in crawl.stdout, crawl.output()
    status = subprocess.run([sys.executable, "-m", "frontier", "status", str(data)], capture_output=True, text=True,
                            check=True, cwd=ROOT).stdout
    assert "suspected  " in status and "still queued as suspected traps" in status, status
    assert "new per page" in status and "(soft 404)" in status, status  # growth figures; soft 404s as one
    assert "new per page" in crawl.stdout and "traps.release" in crawl.stdout, crawl.output()
    listed = subprocess.run([sys.executable, "-m", "frontier", "export", str(data), "--what", "suspected"],
                            capture_output=True, text=True, check=True, cwd=ROOT).stdout.split()
    assert listed and not set(listed) & set(web.normal_urls() + web.item_urls())
    assert not [u for u in listed if counts.get(u)]  # skipped: never fetched
    assert len(listed) == sum(row["urls"] for row in read_summary(data)["suspected"])


def test_trap_patterns_alone_suspect_each_trap(tmp_path: Path, pattern_web: TrapWeb) -> None:
    """Soft-404 detection off (and the site without its soft-404 trap): the calendar, search and fan-out
    traps are each suspected by their URL pattern; the 6,000 /fan/N links of one page go to the low band at
    once (a huge fan-out), and most of them are parked past the pattern's budget."""
    pattern_web.snapshot(reset=True)
    cfg = default_config(pattern_web, tmp_path / "data", traps={"soft_404": False})
    finish(run(tmp_path, "patterns", cfg))
    check_complete(pattern_web, pattern_web.snapshot()["counts"])
    patterns = {pattern for _host, pattern in marked(cfg)}
    assert {"/cal/N/N", "/search?page&q", "/fan/N"} <= patterns, patterns
    assert not [p for p in patterns if p.startswith(("/item", "/page"))]
    summary = read_summary(tmp_path / "data")
    assert summary["reasons"]["link_fan_out"] >= 5000 and summary["reasons"]["trap_budget"] > 1000
    assert {row["pattern"] for row in summary["suspected"]} >= {"/fan/N"}


def test_a_released_pattern_is_fetched_by_the_next_run(tmp_path: Path, pattern_web: TrapWeb) -> None:
    """A pattern parked past its budget stays queued (exit 0, named); traps.release in the config and a rerun
    fetch it, and only it: the calendar, still growing, stays parked."""
    pattern_web.snapshot(reset=True)
    cfg = default_config(pattern_web, tmp_path / "data", traps={"soft_404": False, "max_suspect_pages": 100})
    finish(run(tmp_path, "first", cfg))
    left = {row["pattern"]: row["urls"] for row in read_summary(tmp_path / "data")["suspected"]}
    assert left.get("/fan/N", 0) > 1000 and left.get("/cal/N/N", 0) > 0, left
    pattern_web.snapshot(reset=True)
    finish(run(tmp_path, "released", merge(cfg, {"traps": {"release": ["/fan/N"]}})))
    kinds = pattern_web.requests_by_kind(pattern_web.snapshot()["counts"])
    assert kinds["fanout"] == left["/fan/N"], dict(kinds)
    after = {row["pattern"]: row["urls"] for row in read_summary(tmp_path / "data")["suspected"]}
    assert "/fan/N" not in after and after.get("/cal/N/N", 0) > 0, after
    assert kinds["calendar"] == 0, dict(kinds)


def test_without_the_defences_the_traps_run_on(tmp_path: Path, web: TrapWeb) -> None:
    """The control: the traps are real for this crawler. With detection off and Heritrix's rules only, the
    calendar and search traps run until the page budget."""
    web.snapshot(reset=True)
    cfg = default_config(web, tmp_path / "data", traps={"patterns": False, "soft_404": False},
                         limits={"max_pages": 1500})
    finish(run(tmp_path, "control", cfg))
    kinds = web.requests_by_kind(web.snapshot()["counts"])
    assert kinds["calendar"] + kinds["search"] + kinds["other"] + kinds["fanout"] > 300, dict(kinds)


def calendar_stopped(log: Path) -> bool:
    """At least 10 calendar pages in the crawl log, and 300 records of other pages after the last of them."""
    records = read_crawl_log(log)[0]
    calendar = [i for i, r in enumerate(records) if "/cal/" in r.get("url", "")]
    return len(calendar) >= 10 and len(records) - calendar[-1] > 300


def kill_after_a_trap_and_resume(tmp_path: Path, web: TrapWeb, cfg: dict[str, Any]) -> None:
    web.snapshot(reset=True)
    log = Path(cfg["storage"]["data_dir"]) / "crawl.jsonl"
    first = run(tmp_path, "first", cfg)
    try:
        # the calendar (an endless trap) stopped growing while the crawl goes on: it is suspected, and its state
        # committed (a page's record is logged after the commit of what it taught the detector). How many of
        # its pages that takes depends on what was in flight when the verdict came (13 to 23 seen here).
        wait_for(lambda: calendar_stopped(log) or not first.running(), 120, "a trap to be suspected")
        assert first.running(), first.output()
    finally:
        first.kill_group()
    assert_group_gone(first.pgid)
    before = marked(cfg)
    assert before, "no suspected pattern in the crawl state after the kill"
    with Frontier.from_config(load_config(cfg)) as frontier:  # the growth figures came through the kill too
        calendar = [row for row in frontier.suspected() if row["pattern"] == "/cal/N/N"]
    assert calendar and calendar[0]["fetched"] >= WINDOW and calendar[0]["growing"], calendar
    counts_first = web.snapshot(reset=True)["counts"]
    finish(run(tmp_path, "resumed", cfg))
    counts_second = web.snapshot()["counts"]
    # not learnt again: the suspicion and the low queues' budget carry over the kill, so the two runs together
    # stay within the bound (a kill refetches what was in flight: politeness.max_per_host, 8)
    assert before <= marked(cfg), (sorted(before), sorted(marked(cfg)))
    check_complete(web, Counter(counts_first) + Counter(counts_second), slack=8)


def test_kill_9_keeps_the_pattern_state(tmp_path: Path, pattern_web: TrapWeb) -> None:
    cfg = default_config(pattern_web, tmp_path / "data", traps={"soft_404": False})
    kill_after_a_trap_and_resume(tmp_path, pattern_web, cfg)


SERVER_BINARIES = server_binaries()


@pytest.mark.skipif(not SERVER_BINARIES, reason="no Redis or Valkey server installed")
def test_kill_9_keeps_the_pattern_state_on_redis(tmp_path: Path, pattern_web: TrapWeb, redis_servers: Any,
                                                 crawl_name: str) -> None:
    """The same on Redis, where the killed instance's leases are taken over once they expire: the lease
    timeout is cut to 6 s (default 120) so the resumed run does not wait two minutes for them."""
    node: RedisServer = redis_servers.node(SERVER_BINARIES[0])
    cfg = default_config(pattern_web, tmp_path / "data", storage={"backend": "redis",
                                                                  "redis": {"url": node.url, "crawl": crawl_name}},
                         workers={"timeout": 5.0, "lease_timeout": 6.0}, traps={"soft_404": False})
    kill_after_a_trap_and_resume(tmp_path, pattern_web, cfg)


def test_the_default_politeness_is_adaptive_and_crawl_delay_0_is_not_none(tmp_path: Path) -> None:
    """politeness defaults: after each result the host waits 5 x the server's latency, at least 1 s (also
    under "Crawl-delay: 0") and at most 30 s; an explicit delay: 0 means none. Library level, injected clock."""
    from frontier.config import PolitenessConfig
    from frontier.crawl.messages import FetchResult, Status
    from frontier.url.scope import Scope

    now = [1000.0]
    with Frontier.open(tmp_path / "data", scope=Scope(allowed_hosts=["a.test"]), politeness=PolitenessConfig(),
                  clock=lambda: now[0]) as frontier:
        frontier.add_seeds([f"http://a.test/{n}" for n in range(4)])
        (robots,) = frontier.lease(10)
        frontier.report([FetchResult(robots, Status.OK, http_status=200, robots_txt="User-agent: *\nCrawl-delay: 0\n")])
        waits = []
        for latency in (0.01, 0.5, 60.0):
            now[0] += frontier.next_ready_in() or 0.0
            (job,) = frontier.lease(10)  # one fetch at a time
            assert frontier.lease(10) == []
            frontier.report([FetchResult(job, Status.OK, http_status=200, latency=latency)])
            waits.append(frontier.next_ready_in())
        assert waits == [1.0, 2.5, 30.0]
    assert PolitenessConfig(delay=0).adaptive is False and PolitenessConfig(adaptive=False).delay == 1.0
