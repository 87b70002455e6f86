"""Counts that add up, on LMDB and on Redis / Valkey: real crawls (the real supervisor as a
subprocess) of a mock web served from a thread of the test, whose request counts are the oracle.

"fetched" means the site's pages that got an HTTP response (each attempt that got one); the crawler's own
requests (robots.txt, a host's soft-404 probe, sitemaps) are counted apart. Each count is this instance's
(summary.json's last_run: this data dir's frontier processes) or crawl-wide (the crawl state's counters), and:

    outcomes of this instance's page attempts + its soft-404 probes + its sitemaps = its attempts
    crawl-wide fetched = the site's requests the mock web answered = the instances' fetched summed
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from faultkit import CrawlRun, mock_config, read_crawl_log, read_summary, wait_for, write_config
from frontier.crawl.traps import TrapDetector
from frontier.testing import MockWeb, SiteSpec
from frontier.testing.redis_servers import server_binaries

ROOT = Path(__file__).resolve().parent.parent
RUN_TIMEOUT = 120.0
# the soft-404 defence on: each host's probe is a request of the crawler's own
COUNTED = {"traps": {"patterns": False, "soft_404": True}, "limits": {"max_retries": 1},
           "workers": {"processes": 1, "concurrency": 16}, "output": {"progress": "plain", "progress_interval": 0.3}}


def probe_urls(web: MockWeb) -> set[str]:
    detector = TrapDetector()
    return {detector.probe_url(f"http://127.0.0.1:{port}/") for port in web.ports}


def site_requests(web: MockWeb) -> int:
    """Requests of the site's pages the mock web answered: not robots.txt, not the probes."""
    probes = probe_urls(web)
    return sum(n for url, n in web.snapshot()["counts"].items() if not url.endswith("/robots.txt")
               and url not in probes)


def check_instance(data_dir: Path, hosts: int) -> dict[str, Any]:
    """This instance's counts add up, against themselves and its crawl log; returns its last run."""
    last = read_summary(data_dir)["last_run"]
    outcomes, own = last["outcomes"], last["own_requests"]
    assert "soft_404_probe" not in outcomes and "robots_fetched" not in outcomes, outcomes
    assert sum(outcomes.values()) + own.get("soft_404_probe", 0) + own.get("sitemap", 0) == last["attempts"], last
    records = read_crawl_log(data_dir / "crawl.jsonl")[0]
    attempts = [r for r in records if "attempt" in r]
    assert len(attempts) == last["attempts"], last
    pages = [r for r in attempts if r["http_status"] is not None and r["reason"] != "soft_404_probe"]
    assert len(pages) == last["fetched"], last
    assert own.get("robots.txt", 0) <= hosts and own.get("soft_404_probe", 0) <= hosts, own
    return last


def frontier_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "frontier", *args], capture_output=True, text=True, timeout=60,
                          env=env, cwd=ROOT)


def test_counts_add_up_on_lmdb(tmp_path: Path) -> None:
    with MockWeb.serve_in_thread(SiteSpec(pages=150, hosts=2, seed=27)) as web:
        data = tmp_path / "data"
        run = CrawlRun(write_config(tmp_path / "crawl.yaml", mock_config(web, data, **COUNTED)), tmp_path, "lmdb")
        assert run.wait(RUN_TIMEOUT) == 0, run.output()
        last = check_instance(data, hosts=2)
        summary = read_summary(data)
        assert last["own_requests"] == {"robots.txt": 2, "soft_404_probe": 2}, last
        # one instance, one run: this instance's counts are the crawl's
        assert summary["fetched"] == last["fetched"] == site_requests(web), (summary, site_requests(web))
        assert summary["attempts"] == last["attempts"]
    out = run.stdout
    assert (f"{last['fetched']} pages fetched ({last['attempts']} attempts) in " in out and "by this instance; "
            f"crawl-wide: {summary['fetched']} pages fetched ({summary['attempts']} attempts) over 1 run") in out, out
    assert "the crawler's own requests (this instance): robots.txt 2, soft_404_probe 2" in out, out
    outcomes_line = next(line for line in out.splitlines() if line.startswith("outcomes (this instance's pages): "))
    assert "soft_404_probe" not in outcomes_line and "robots" not in outcomes_line, outcomes_line
    failed = frontier_cli("export", str(data), "--what", "failed")
    assert failed.returncode == 0, failed.stderr
    assert not probe_urls(web) & set(failed.stdout.split()), failed.stdout  # the probes are no failed pages
    status = frontier_cli("status", str(data))
    assert f"pages      {summary['fetched']:,} of the site fetched" in status.stdout, status.stdout
    assert "own reqs   robots.txt 2, soft_404_probe 2" in status.stdout, status.stdout


@pytest.mark.skipif(not server_binaries(), reason="no Redis or Valkey server installed")
def test_counts_add_up_on_redis_with_two_instances(redis_servers: Any, tmp_path: Path, crawl_name: str) -> None:
    server = redis_servers.node(server_binaries()[0])
    redis = {"storage": {"backend": "redis", "redis": {"url": server.url, "crawl": crawl_name}}}
    with MockWeb.serve_in_thread(SiteSpec(pages=900, hosts=3, seed=28)) as web:
        runs = []
        for name in ("a", "b"):
            config = mock_config(web, tmp_path / f"data-{name}", **{**COUNTED, **redis})
            runs.append(CrawlRun(write_config(tmp_path / f"{name}.yaml", config), tmp_path, name))
            if name == "a":  # the second joins mid-crawl
                wait_for(lambda: site_requests(web) >= 30 or not runs[0].running(), RUN_TIMEOUT, "the first pages")
        for run in runs:
            assert run.wait(RUN_TIMEOUT) == 0, run.output()
        lasts = [check_instance(tmp_path / f"data-{name}", hosts=3) for name in ("a", "b")]
        crawl_wide = max(read_summary(tmp_path / f"data-{name}")["fetched"] for name in ("a", "b"))
        assert sum(last["fetched"] for last in lasts) == crawl_wide == site_requests(web), (lasts, crawl_wide)
    assert lasts[1]["fetched"] > 0, runs[1].output()  # the late instance took work
    for run in runs:  # the progress line shows what the Redis seen-test knows, not LMDB's counts as zeros
        progress = [line for line in run.stdout.splitlines() if "crawl-wide: fetched" in line]
        assert progress and all("bloom-new" not in line and " checked, " in line for line in progress), run.stdout
    status = frontier_cli("status", str(tmp_path / "data-a"))
    assert status.returncode == 2 and "status --config crawl.yaml" in status.stderr, status.stderr
