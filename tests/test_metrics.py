"""output.metrics: the Prometheus endpoint of the frontier process, scraped over real HTTP during real crawls.

The real run_frontier.py crawls the mock web (served from a thread of the test process). The oracle for the
counts is the crawl itself: with the workers stopped (SIGSTOP) the frontier loop still answers scrapes, and
its counters must equal what its crawl log holds at that moment (the loop flushes the log before it answers);
summary.json at the end. A worker killed mid-crawl makes the supervisor restart the crawl processes: the new
frontier process serves again, on the same port, and counts the restart.
"""

from __future__ import annotations

import os
import signal
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from faultkit import CrawlRun, mock_config, read_crawl_log, read_summary, wait_for, worker_processes, write_config
from frontier.config import load_config
from frontier.config.checks import split_address
from frontier.errors import ConfigError
from frontier.testing import MockWeb, SiteSpec
from frontier.testing.redis_servers import server_binaries

RUN_TIMEOUT = 90.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int) -> dict[str, Any] | None:
    """name -> value (labelled samples: name -> {label value: value}); None while nothing listens."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            text = response.read().decode()
    except (urllib.error.URLError, ConnectionError):
        return None
    out: dict[str, Any] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.labels:
                out.setdefault(sample.name, {})[next(iter(sample.labels.values()))] = sample.value
            else:
                out[sample.name] = sample.value
    return out


def fetched_in_log(data_dir: Path) -> int:
    """Page results with an HTTP response in the crawl log: what `fetched` counts."""
    return sum(1 for r in read_crawl_log(data_dir / "crawl.jsonl")[0] if r.get("http_status") is not None)


def check_tiers(m: dict[str, Any]) -> None:
    """The seen-test's tiers add up: every check is a batch repeat, an LRU hit, or went to the Bloom filter,
    whose "maybe"s the log confirmed, caught as false positives or (probabilistic mode) trusted."""
    maybes = m["frontier_seen_log_hits_total"] + m["frontier_seen_false_positives_caught_total"] + \
        m["frontier_seen_trusted_maybe_total"]
    assert m["frontier_seen_checked_total"] == m["frontier_seen_batch_repeats_total"] + \
        m["frontier_seen_lru_hits_total"] + m["frontier_seen_bloom_new_total"] + maybes


@pytest.mark.parametrize("text, expected", [("127.0.0.1:9410", ("127.0.0.1", 9410)), ("[::1]:80", ("::1", 80)),
                                            ("localhost:65535", ("localhost", 65535))])
def test_split_address(text: str, expected: tuple[str, int]) -> None:
    assert split_address(text) == expected


@pytest.mark.parametrize("bad", ["9410", ":9410", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:70000", "h:x", 9410, True])
def test_bad_metrics_address_is_a_config_error_naming_the_key(bad: Any) -> None:
    with pytest.raises(ConfigError) as e:
        load_config({"seeds": ["http://example.com/"], "output": {"metrics": bad}})
    assert e.value.key == "output.metrics"
    assert load_config({"seeds": ["http://example.com/"]}).output.metrics is None  # off by default


def test_metrics_during_a_crawl_match_its_log_and_count_a_restart(tmp_path: Path) -> None:
    port = free_port()
    data_dir = tmp_path / "data"
    with MockWeb.serve_in_thread(SiteSpec(pages=900, hosts=2, seed=11)) as web:
        cfg = mock_config(web, data_dir, output={"progress": "off", "metrics": f"127.0.0.1:{port}"},
                          workers={"processes": 1, "concurrency": 8, "lease_timeout": 60.0},
                          politeness={"delay": 0.02}, limits={"max_retries": 0})
        run = CrawlRun(write_config(tmp_path / "crawl.yaml", cfg), tmp_path, "crawl")
        try:
            # during the crawl: counters only grow
            first = wait_for(lambda: (m := scrape(port)) and m.get("frontier_pages_fetched_total", 0) > 0 and m,
                             RUN_TIMEOUT, "a scrape with pages fetched")
            assert first["frontier_worker_restarts_total"] == 0
            assert first["process_resident_memory_bytes"] > 0
            later = wait_for(lambda: (m := scrape(port)) and m.get("frontier_pages_fetched_total", 0) >
                             max(100, first["frontier_pages_fetched_total"]) and m, RUN_TIMEOUT, "more pages fetched")
            for name in ("frontier_pages_fetched_total", "frontier_fetch_attempts_total", "frontier_seen_urls",
                         "frontier_seen_checked_total"):
                assert later[name] >= first[name], name
            for m in (first, later):
                check_tiers(m)
                assert m["frontier_fetch_attempts_total"] >= m["frontier_pages_fetched_total"]
                assert m["frontier_seen_urls"] == m["frontier_seen_new_total"]  # one process, a new crawl
                assert m["frontier_seen_urls"] >= m["frontier_queued_urls"] >= m["frontier_in_flight"]
                assert m["frontier_hosts"] == 2 and m["frontier_in_flight_slots"] == 8
                assert 0 < m["frontier_bloom_fill_ratio"] < 1 and m["frontier_bloom_generations"] == 1
                assert 0 <= m["frontier_bloom_estimated_false_positive_rate"] < 1e-3
                assert m["frontier_outcomes_total"]["ok"] <= m["frontier_pages_fetched_total"]

            # workers stopped: the loop still answers, and its counts are exactly those of its crawl log
            workers = wait_for(lambda: worker_processes(run, data_dir), 10, "the worker")
            for w in workers:
                os.kill(w.pid, signal.SIGSTOP)
            try:
                def settled() -> dict[str, Any] | None:
                    a = scrape(port)
                    time.sleep(0.5)
                    b = scrape(port)
                    return b if a and b and a["frontier_pages_fetched_total"] == b["frontier_pages_fetched_total"] \
                        and a["frontier_seen_checked_total"] == b["frontier_seen_checked_total"] else None

                frozen = wait_for(settled, 20, "counts that stay put")
                assert frozen["frontier_pages_fetched_total"] == fetched_in_log(data_dir)
                assert frozen["frontier_pages_fetched_total"] >= later["frontier_pages_fetched_total"]
                assert frozen["frontier_leases_expired_total"] == 0
            finally:
                for w in workers:  # killed: the supervisor restarts the frontier process and the workers
                    os.kill(w.pid, signal.SIGKILL)
                    os.kill(w.pid, signal.SIGCONT)

            # the new frontier process serves on the same port and counts the restart
            after = wait_for(lambda: (m := scrape(port)) and m.get("frontier_pages_fetched_total") is not None and m["frontier_worker_restarts_total"] == 1 and m,
                             RUN_TIMEOUT, "the restarted frontier's metrics")
            assert after["frontier_pages_fetched_total"] >= frozen["frontier_pages_fetched_total"]
            assert after["frontier_fetch_attempts_total"] > frozen["frontier_fetch_attempts_total"] - 1
            assert run.wait(RUN_TIMEOUT) == 0, run.output()
        finally:
            if run.running():
                run.kill_group()
    assert "Traceback" not in run.stderr, run.output()
    assert "restarting the frontier and workers" in run.stderr
    summary = read_summary(data_dir)
    assert summary["fetched"] == fetched_in_log(data_dir) >= after["frontier_pages_fetched_total"]
    assert scrape(port) is None  # the endpoint ends with the crawl


def test_a_port_in_use_is_a_one_line_startup_error(tmp_path: Path) -> None:
    with socket.socket() as taken, MockWeb.serve_in_thread(SiteSpec(pages=50, hosts=1, seed=3)) as web:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cfg = mock_config(web, tmp_path / "data", output={"progress": "off", "metrics": f"127.0.0.1:{port}"},
                          workers={"processes": 1})
        run = CrawlRun(write_config(tmp_path / "crawl.yaml", cfg), tmp_path, "crawl")
        assert run.wait(RUN_TIMEOUT) == 2, run.output()
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.output()
    assert lines[0].startswith(f"frontier: output.metrics: cannot serve metrics on 127.0.0.1:{port}: "), lines
    assert "in use" in lines[0]
    assert not web.snapshot()["counts"]  # nothing was fetched


@pytest.mark.skipif(not server_binaries(), reason="no Redis or Valkey server installed")
def test_metrics_of_a_redis_crawl(tmp_path: Path, redis_servers: Any, crawl_name: str) -> None:
    node = redis_servers.node(server_binaries()[0])
    port = free_port()
    with MockWeb.serve_in_thread(SiteSpec(pages=300, hosts=2, seed=12)) as web:
        cfg = mock_config(web, tmp_path / "data", output={"progress": "off", "metrics": f"127.0.0.1:{port}"},
                          storage={"backend": "redis", "redis": {"url": node.url, "crawl": crawl_name}},
                          workers={"processes": 1, "concurrency": 8}, politeness={"delay": 0.02},
                          limits={"max_retries": 0})
        run = CrawlRun(write_config(tmp_path / "crawl.yaml", cfg), tmp_path, "crawl")
        try:
            m = wait_for(lambda: (m := scrape(port)) and m.get("frontier_pages_fetched_total", 0) > 0 and m,
                         RUN_TIMEOUT, "a scrape with pages fetched")
            assert run.wait(RUN_TIMEOUT) == 0, run.output()
        finally:
            if run.running():
                run.kill_group()
    assert m["frontier_seen_urls"] >= m["frontier_queued_urls"] > 0, m
    assert m["frontier_hosts"] == 2 and m["frontier_outcomes_total"]["ok"] > 0
    # no Bloom filter, and no tiers: the seen-test runs server-side
    assert not [name for name in m if name.startswith(("frontier_bloom_", "frontier_seen_")) and
                name != "frontier_seen_urls"], m
    assert read_summary(tmp_path / "data")["fetched"] >= m["frontier_pages_fetched_total"]
