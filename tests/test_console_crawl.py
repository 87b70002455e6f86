"""Control actions applied to a real crawl: run_frontier.py over the mock web, actions given through the crawl's
action directory (frontier.console.inbox, applied by the frontier loop with Controls.apply), and the mock web's
own request log as the oracle: what was requested, and when.

LMDB: pause (no request starts while paused) and resume; an exclusion (its URLs never requested afterwards, its
purge count the URLs dropped unfetched); a block (no request to the host until its time); seeds (fetched); kill -9
with a pause or an exclusion in force (the rerun keeps it). Redis: two instances of one crawl, an action given
through one of them holds for both.
"""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from crawlcmd import crawl_env
from faultkit import (CrawlRun, expected_counts, mock_config, read_crawl_log, server_error_urls, wait_for,
                      write_config)
from frontier.testing import MockWeb, SiteSpec
from frontier.testing.sitegraph import PageKind
from frontier.testing.redis_servers import server_binaries

SERVER_BINARIES = server_binaries()
MAX_RETRIES = 2
RUN_TIMEOUT = 120.0
QUIET = 1.0  # seconds after a pause is applied by which the fetches in flight have finished
SPEC = SiteSpec(pages=1200, hosts=2, seed=41)
# slow enough to act on while it runs (about 100 pages/s: two hosts, 10 ms apart each), fast enough for a test
STEADY = {
    "limits": {"max_retries": MAX_RETRIES},
    "workers": {"processes": 1, "concurrency": 8, "timeout": 10.0, "connect_timeout": 5.0, "lease_timeout": 30.0},
    "politeness": {"delay": 0.01},
}


def leaf_regex(web: MockWeb) -> str:
    """An exclusion of the site's error pages (404 and 500, query variants included): pages without links, so
    excluding them leaves the rest of the site reachable, and every other expected URL is still requested."""
    paths = sorted({"/" + u.split("/", 3)[3] for u in web.graph.page_urls(web.ports, kinds=[PageKind.NOT_FOUND,
                                                                                         PageKind.SERVER_ERROR])})
    assert len(paths) > 10
    return "(?:" + "|".join(re.escape(p) for p in paths) + r")(?:\?|$)"


def start(web: MockWeb, tmp: Path, name: str = "crawl", **override: Any) -> tuple[CrawlRun, Path]:
    data = tmp / f"data-{name}"
    cfg = mock_config(web, data, **{**STEADY, **override})
    return CrawlRun(write_config(tmp / f"{name}.yaml", cfg), tmp, name), data


def act(data: Path, action: str, params: dict[str, Any] | None = None, timeout: float = 15.0) -> dict[str, Any]:
    """Leave a request in the crawl's action directory and wait for its answer; the effect."""
    inbox = data / "actions"
    wait_for(inbox.is_dir, timeout, "the crawl's action directory")
    name = f"{time.monotonic_ns()}-{action}.json"
    tmp = inbox / f".{name}"
    tmp.write_text(json.dumps({"action": action, "params": params or {}, "caller": "test"}))
    tmp.rename(inbox / name)
    done = inbox / "done" / name
    wait_for(done.exists, timeout, f"the answer to {action}")
    answer = json.loads(done.read_text())["answer"]
    assert answer["ok"], answer
    return answer["effect"]


def requests(web: MockWeb) -> int:
    return web.snapshot()["total"]


def started_after(web: MockWeb, t: float) -> int:
    """Requests the mock web started after monotonic time t."""
    return sum(1 for times in web.snapshot()["times"].values() for s in times if s > t)


def missing(web: MockWeb, skip: re.Pattern[str] | None = None) -> list[str]:
    counts = web.snapshot()["counts"]
    return [u for u in expected_counts(web, MAX_RETRIES) if counts.get(u, 0) < 1 and not (skip and skip.search(u))]


def pause_quietly(web: MockWeb, data: Path) -> float:
    """Pause, let the fetches in flight finish; the monotonic time from which nothing may start."""
    act(data, "pause")
    time.sleep(QUIET)
    return time.monotonic()


def test_pause_stops_requests_and_resume_restarts_them(tmp_path: Path) -> None:
    with MockWeb.serve_in_thread(SPEC) as web:
        run, data = start(web, tmp_path)
        wait_for(lambda: requests(web) >= 100, RUN_TIMEOUT, "the first pages")
        effect = act(data, "pause")
        assert effect["paused"] is True
        time.sleep(QUIET)
        quiet_from = time.monotonic()
        time.sleep(2.0)
        assert started_after(web, quiet_from) == 0
        assert run.running()  # a paused crawl does not end
        act(data, "resume")
        wait_for(lambda: started_after(web, quiet_from) >= 20, 10.0, "requests after resume")
        assert run.wait(RUN_TIMEOUT) == 0, run.output()
        assert missing(web) == []
        audit = [json.loads(line) for line in (data / "audit.jsonl").read_text().splitlines()]
        assert [(r["action"], r["caller"]) for r in audit] == [("pause", "test"), ("resume", "test")]


def test_an_exclusion_purges_the_queue_and_its_urls_are_never_requested(tmp_path: Path) -> None:
    with MockWeb.serve_in_thread(SPEC) as web:
        excluded = leaf_regex(web)
        pattern = re.compile(excluded)
        run, data = start(web, tmp_path)
        wait_for(lambda: requests(web) >= 150, RUN_TIMEOUT, "the first pages")
        pause_quietly(web, data)
        before = {u: c for u, c in web.snapshot()["counts"].items() if pattern.search(u)}
        effect = act(data, "exclude", {"regex": excluded})
        act(data, "resume")
        assert run.wait(RUN_TIMEOUT) == 0, run.output()
        after = {u: c for u, c in web.snapshot()["counts"].items() if pattern.search(u)}
        assert after == before  # not one request of a matching URL after the exclusion
        assert expected_counts(web, MAX_RETRIES).keys() - after.keys()  # the site has matching URLs left
        records, _ = read_crawl_log(data / "crawl.jsonl")
        purged = [r["url"] for r in records if r.get("reason") == "operator_excluded"]
        assert effect["purged"] == len(purged) > 0  # the count: the queued URLs dropped unfetched
        assert all(pattern.search(u) and u not in after for u in purged)
        assert missing(web, skip=pattern) == []  # everything else was crawled


def test_a_blocked_host_gets_no_request_until_its_time(tmp_path: Path) -> None:
    with MockWeb.serve_in_thread(SPEC) as web:
        run, data = start(web, tmp_path)
        wait_for(lambda: requests(web) >= 100, RUN_TIMEOUT, "the first pages")
        host = f"127.0.0.1:{web.ports[1]}"
        effect = act(data, "block", {"host": host, "seconds": 4})
        blocked_from = time.monotonic() + QUIET  # a fetch in flight may still start its request
        until = time.monotonic() + (effect["until"] - time.time())
        wait_for(lambda: time.monotonic() > until + 1.0, 10.0, "the block's end")
        times = web.snapshot()["times"][host]
        assert not [t for t in times if blocked_from < t < until]
        assert [t for t in times if t > until]  # fetched again after its time
        others = web.snapshot()["times"][f"127.0.0.1:{web.ports[0]}"]
        assert [t for t in others if blocked_from < t < until]  # the other host went on meanwhile
        assert run.wait(RUN_TIMEOUT) == 0, run.output()
        assert missing(web) == []


def test_seeds_added_to_a_running_crawl_are_fetched(tmp_path: Path) -> None:
    with MockWeb.serve_in_thread(SPEC) as web:
        run, data = start(web, tmp_path)
        wait_for(lambda: requests(web) >= 50, RUN_TIMEOUT, "the first pages")
        new = [f"{web.seed}?from=ctl-{i}" for i in range(3)]
        effect = act(data, "seeds", {"urls": [*new, "http://example.invalid/", web.seed]})
        assert effect == {"added": 3, "out_of_scope": 1, "seen": 1}
        assert run.wait(RUN_TIMEOUT) == 0, run.output()
        counts = web.snapshot()["counts"]
        assert [counts.get(u.replace("?from=", "?from="), 0) for u in new] == [1, 1, 1]


@pytest.mark.parametrize("order", ["pause", "exclude"])
def test_kill_9_with_an_order_in_force_the_rerun_keeps_it(order: str, tmp_path: Path) -> None:
    with MockWeb.serve_in_thread(SPEC) as web:
        excluded = leaf_regex(web)
        pattern = re.compile(excluded)
        run, data = start(web, tmp_path)
        wait_for(lambda: requests(web) >= 150, RUN_TIMEOUT, "the first pages")
        pause_quietly(web, data)
        if order == "exclude":
            act(data, "exclude", {"regex": excluded})
            act(data, "resume")
        run.kill_group(signal.SIGKILL)
        killed_at = time.monotonic()
        before = {u: c for u, c in web.snapshot()["counts"].items() if pattern.search(u)}
        rerun, _ = start(web, tmp_path)
        if order == "pause":
            time.sleep(5.0)  # the rerun is up and, paused, requests nothing (its robots.txt files are stored)
            assert started_after(web, killed_at) == 0, rerun.output()
            assert rerun.running()
            act(data, "resume")
        assert rerun.wait(RUN_TIMEOUT) == 0, rerun.output()
        after = {u: c for u, c in web.snapshot()["counts"].items() if pattern.search(u)}
        if order == "exclude":
            assert after == before
            assert missing(web, skip=pattern) == []
        else:
            assert missing(web) == []


@pytest.mark.skipif(not SERVER_BINARIES, reason="no Redis or Valkey server installed")
def test_on_redis_an_action_through_one_instance_holds_for_the_other(tmp_path: Path,
                                                                     request: pytest.FixtureRequest) -> None:
    server = request.getfixturevalue("redis_servers").node(SERVER_BINARIES[0])
    redis = {"storage": {"backend": "redis", "redis": {"url": server.url,
                                                       "crawl": request.getfixturevalue("crawl_name")}}}
    with MockWeb.serve_in_thread(SPEC) as web:
        excluded = leaf_regex(web)
        pattern = re.compile(excluded)
        one, data_one = start(web, tmp_path, "one", **redis)
        wait_for(lambda: requests(web) >= 50, RUN_TIMEOUT, "the first pages")
        two, data_two = start(web, tmp_path, "two", **redis)
        wait_for(lambda: (data_two / "actions").is_dir() and requests(web) >= 150, RUN_TIMEOUT, "both instances")
        act(data_one, "pause")  # through one: both stop
        time.sleep(QUIET + 0.5)  # the other reads the orders every 0.5 s
        quiet_from = time.monotonic()
        time.sleep(2.0)
        assert started_after(web, quiet_from) == 0
        before = {u: c for u, c in web.snapshot()["counts"].items() if pattern.search(u)}
        act(data_two, "exclude", {"regex": excluded})  # through the other
        act(data_two, "resume")
        for run in (one, two):
            assert run.wait(RUN_TIMEOUT) == 0, run.output()
        after = {u: c for u, c in web.snapshot()["counts"].items() if pattern.search(u)}
        assert after == before
        assert missing(web, skip=pattern) == []
        fetches = [r for name in ("one", "two") for r in read_crawl_log(tmp_path / f"data-{name}" / "crawl.jsonl")[0]
                   if "http_status" in r and r.get("ts", r.get("fetched_at", 0)) > 0]
        assert fetches


def test_a_checkpoint_taken_while_crawling_is_a_data_dir_a_crawl_resumes_from(tmp_path: Path) -> None:
    with MockWeb.serve_in_thread(SPEC) as web:
        run, data = start(web, tmp_path)
        wait_for(lambda: requests(web) >= 300, RUN_TIMEOUT, "the first pages")
        target = tmp_path / "checkpoint"
        effect = act(data, "checkpoint", {"dir": str(target)})
        at_checkpoint = web.snapshot()["counts"]
        assert effect["dir"] == str(target) and effect["bytes"] > 0
        run.kill_group(signal.SIGKILL)  # the crawl's own data dir is lost; the checkpoint is all there is
        at_kill = web.snapshot()["counts"]
        cfg = mock_config(web, target, **STEADY)
        resumed = CrawlRun(write_config(tmp_path / "resume.yaml", cfg), tmp_path, "resume")
        assert resumed.wait(RUN_TIMEOUT) == 0, resumed.output()
        assert missing(web) == []
        # what the copy knew fetched is not fetched again: only the fetches in flight when it was taken (and
        # those between the copy and the answer) are; a copy that had lost its state would refetch them all
        end = web.snapshot()["counts"]
        retried = set(server_error_urls(web, expected_counts(web, MAX_RETRIES)))
        pages = [u for u in at_checkpoint if not u.endswith("/robots.txt") and u not in retried]
        refetched = [u for u in pages if end[u] > at_kill[u]]
        assert len(pages) >= 250 and len(refetched) <= 40, (len(pages), refetched)


def test_a_retired_host_gets_no_more_requests_and_the_crawl_ends_without_it(tmp_path: Path) -> None:
    with MockWeb.serve_in_thread(SPEC) as web:
        run, data = start(web, tmp_path)
        wait_for(lambda: requests(web) >= 100, RUN_TIMEOUT, "the first pages")
        host = f"127.0.0.1:{web.ports[1]}"
        act(data, "retire", {"host": host})
        retired_from = time.monotonic() + QUIET
        assert run.wait(RUN_TIMEOUT) == 0, run.output()
        assert not [t for t in web.snapshot()["times"][host] if t > retired_from]
        summary = json.loads((data / "summary.json").read_text())
        assert summary["queued"] > 0, summary  # its URLs wait for a run that fetches them


def test_frontier_ctl_steers_a_running_crawl_through_its_console(tmp_path: Path) -> None:
    """`frontier ctl` end to end: the crawl's console (frontier.console.server) writes console.json; ctl posts."""
    pytest.importorskip("frontier.console.server", reason="the console server is not in this tree")
    import subprocess
    import sys

    def ctl(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "frontier", "ctl", *argv, "--data-dir", str(data)],
                              capture_output=True, text=True, timeout=60, env=crawl_env())

    with MockWeb.serve_in_thread(SPEC) as web:
        run, data = start(web, tmp_path)
        wait_for(lambda: (data / "console.json").exists() and requests(web) >= 100, RUN_TIMEOUT, "the console")
        paused = ctl("pause")
        assert paused.returncode == 0 and paused.stdout.startswith("pause: paused True"), paused.stderr
        time.sleep(QUIET)
        quiet_from = time.monotonic()
        time.sleep(2.0)
        assert started_after(web, quiet_from) == 0
        refused = ctl("exclude", "--regex", "(")
        assert refused.returncode == 1
        assert refused.stderr == "frontier ctl: exclude: bad regex '(': missing ), unterminated subpattern at position 0\n"
        added = ctl("seeds", f"{web.seed}?from=ctl", "--json")
        assert json.loads(added.stdout) == {"ok": True, "effect": {"added": 1, "out_of_scope": 0, "seen": 0}}
        assert ctl("resume").returncode == 0
        assert run.wait(RUN_TIMEOUT) == 0, run.output()
        assert web.snapshot()["counts"].get(f"{web.seed}?from=ctl") == 1
        gone = ctl("pause")
        assert gone.returncode == 1 and "no crawl is running in" in gone.stderr
