"""Integration tests of the multi-process engine: `python run_frontier.py --config <yaml>` as a subprocess,
crawling a `MockWeb` served from a thread of the test process (127.0.0.1 only), so the test reads the
server's `counts` and `times` directly.

The oracle is the mock's own site graph: `SiteGraph.expected_requests(ports)` is what a correct crawl
requests (each reachable URL once, robots.txt once per host). The one planned difference is the permanent
500 pages: the engine retries a FAIL `limits.max_retries` times, so each is requested 1 + max_retries
times (`expected_counts`). `oracle_crawl` is a BFS over the graph's public API that also applies a
URL filter (include/exclude, URL length) and a depth limit; it is checked against `reachable()` first.

Every crawl runs with short timeouts and `limits.max_retries: 2`: the retry backoff (0.5-1 s, then
1-2 s) is the tail of every crawl, and it stays within 3 s.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from crawlcmd import crawl_argv, crawl_env
from frontier.testing import MockWeb, PageKind, SiteGraph, SiteSpec
from frontier.testing.sitegraph import QUERIES

ROOT = Path(__file__).resolve().parents[1]
MAX_RETRIES = 2
CRAWL_TIMEOUT = 90.0  # seconds one crawl may take before the test gives up on it
# Every field the crawl log carries for a page fetch ("url, status, depth, content_type,
# bytes, elapsed, links, new_links, fetched_at, error"; the error is named by `reason`).
FETCH_LOG_FIELDS = {"url", "status", "depth", "content_type", "bytes", "elapsed", "links", "new_links",
                    "fetched_at", "reason"}
# Outcomes in summary.json that are not one crawl-log line per fetch.
NON_FETCH_REASONS = {"robots_fetched", "robots_unreachable", "lease_expired", "stale_result"}
ROBOTS = "/robots.txt"


# -- the mock web and the oracle ----------------------------------------------------------------------


def hostport(port: int) -> str:
    return f"127.0.0.1:{port}"


def path_of(url: str) -> str:
    parts = urlsplit(url)
    return parts.path + ("?" + parts.query if parts.query else "")


def page_kind(graph: SiteGraph, url: str) -> PageKind | None:
    page = graph.page_at(urlsplit(url).path)
    return None if page is None else graph.kind(page)


def expected_counts(graph: SiteGraph, ports: list[int], *, max_retries: int = MAX_RETRIES,
                    **kwargs: Any) -> Counter[str]:
    """`expected_requests`, with each permanent-500 URL requested 1 + max_retries times."""
    expected = graph.expected_requests(ports, **kwargs)
    for url in expected:
        if page_kind(graph, url) == PageKind.SERVER_ERROR:
            expected[url] = 1 + max_retries
    return expected


def oracle_crawl(graph: SiteGraph, ports: list[int], *, allow: Callable[[str], bool] = lambda url: True,
                 max_depth: int | None = None) -> tuple[set[str], set[str], dict[str, int]]:
    """(fetched URLs, robots-disallowed URLs, depth of each fetched URL) of a correct crawl from the seed
    that only fetches, and follows links and redirects to, URLs `allow` admits: the 0-1 BFS of SiteGraph._walk, over
    the graph's public API (a redirect target keeps its source's depth)."""
    origins = [f"http://{hostport(p)}" for p in ports]

    def url_of(node: tuple[int, int]) -> str:
        page, q = node
        return origins[graph.host_of(page)] + graph.path(page) + ("?" + QUERIES[q] if q else "")

    depth = {(0, 0): 0}
    done: set[tuple[int, int]] = set()
    fetched: dict[str, int] = {}
    disallowed: set[str] = set()
    queue = deque([(0, 0)] if allow(url_of((0, 0))) else [])  # a seed given up is not crawled either
    while queue:
        node = queue.popleft()
        if node in done:
            continue
        done.add(node)
        url, d = url_of(node), depth[node]
        if graph.is_disallowed(path_of(url)):
            disallowed.add(url)
            continue
        fetched[url] = d
        page = node[0]
        kind = graph.kind(page)
        if kind in (PageKind.REDIRECT_301, PageKind.REDIRECT_302):
            target = (graph.redirect_target(page), 0)
            if allow(url_of(target)) and depth.get(target, d + 1) > d:
                depth[target] = d
                queue.appendleft(target)
        elif kind in (PageKind.NORMAL, PageKind.PRIVATE) and (max_depth is None or d < max_depth):
            for child in graph.outlinks(page):
                if child not in depth and allow(url_of(child)):
                    depth[child] = d + 1
                    queue.append(child)
    return set(fetched), disallowed, fetched


def count_diff(actual: dict[str, int], expected: dict[str, int], limit: int = 12) -> dict[str, tuple[int, int]]:
    """{url: (requested, expected)} for up to `limit` URLs where they differ; {} when equal."""
    diff = {}
    for url in sorted(set(actual) | set(expected)):
        if actual.get(url, 0) != expected.get(url, 0):
            diff[url] = (actual.get(url, 0), expected.get(url, 0))
            if len(diff) >= limit:
                break
    return diff


def page_requests(counts: dict[str, int]) -> dict[str, int]:
    return {url: n for url, n in counts.items() if not url.endswith(ROBOTS)}


@pytest.fixture
def serve() -> Iterator[Callable[..., MockWeb]]:
    """serve(spec) -> a MockWeb running in a thread until the test ends."""
    stack: list[Any] = []

    def start(spec: SiteSpec, cls: type[MockWeb] = MockWeb) -> MockWeb:
        ctx = cls.serve_in_thread(spec)
        web = ctx.__enter__()
        stack.append(ctx)
        return web

    yield start
    for ctx in reversed(stack):
        ctx.__exit__(None, None, None)


# -- running run_frontier.py ---------------------------------------------------------------------------


def merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        out[key] = merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def write_config(tmp_path: Path, web: MockWeb, name: str = "crawl", **sections: Any) -> Path:
    """A crawl YAML for `web` under tmp_path (data dir tmp_path/<name>-data); `sections` override keys."""
    data = {
        "seeds": [web.seed],
        "scope": {"allowed_hosts": [hostport(p) for p in web.ports]},
        "limits": {"max_retries": MAX_RETRIES},
        "workers": {"processes": 2, "concurrency": 16, "timeout": 5, "lease_timeout": 10},
        "politeness": {"delay": 0.0, "max_per_host": 8},
        "traps": {"patterns": False, "soft_404": False},  # exact request counts; see faultkit.mock_config
        "dedup": {"capacity": 100_000},
        "storage": {"data_dir": str(tmp_path / f"{name}-data")},
        "output": {"progress": "plain", "progress_interval": 1.0},
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(merge(data, sections)))
    return path


def start_crawl(config: Path) -> subprocess.Popen[str]:
    """`frontier crawl` in its own process group, so a hung run is killed with all its children."""
    return subprocess.Popen(crawl_argv(config), cwd=config.parent, env=crawl_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def finish_crawl(proc: subprocess.Popen[str], timeout: float = CRAWL_TIMEOUT) -> subprocess.CompletedProcess[str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"the crawl ran over {timeout} s\nstdout:\n{out[-2000:]}\nstderr:\n{err[-2000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def run_crawl(config: Path, timeout: float = CRAWL_TIMEOUT) -> subprocess.CompletedProcess[str]:
    return finish_crawl(start_crawl(config), timeout)


def data_dir(config: Path) -> Path:
    return Path(yaml.safe_load(config.read_text())["storage"]["data_dir"])


def read_log(config: Path) -> list[dict[str, Any]]:
    path = data_dir(config) / "crawl.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def read_summary(config: Path) -> dict[str, Any]:
    return json.loads((data_dir(config) / "summary.json").read_text())


def read_runs(config: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (data_dir(config) / "runs.jsonl").read_text().splitlines()]


def assert_done(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == 0, (
        f"exit {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}")


def fetch_lines(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line for line in log if line.get("reason") != "robots_disallowed"]


def outcome(line: dict[str, Any]) -> str:
    """The summary.json `reasons` key a crawl-log line is counted under."""
    if line["status"] == "ok":
        return "ok" if line["reason"] is None else line["reason"]
    return line["reason"] or line["status"]


# -- 1. a full crawl -----------------------------------------------------------------------------------


def test_full_crawl_fetches_each_reachable_url_exactly_once(tmp_path: Path, serve: Callable[..., MockWeb]) -> None:
    web = serve(SiteSpec(pages=3000, hosts=4, links_per_page=20, seed=11))
    graph, ports = web.graph, web.ports
    config = write_config(tmp_path, web)

    proc = run_crawl(config)
    assert_done(proc)
    counts = web.snapshot()["counts"]

    # the oracle agrees with the graph's own answer, and the graph has what this test is about
    fetched, disallowed, depths = oracle_crawl(graph, ports)
    assert fetched == graph.reachable(ports)
    assert depths == graph.depths(ports)
    expected = expected_counts(graph, ports)
    server_errors = {u for u in expected if page_kind(graph, u) == PageKind.SERVER_ERROR}
    assert server_errors and disallowed and len(expected) > 3000
    assert {page_kind(graph, u) for u in fetched} >= {PageKind.NOT_FOUND, PageKind.REDIRECT_301,
                                                       PageKind.REDIRECT_302, PageKind.NORMAL}

    # every expected request made exactly as often as expected, nothing else requested
    assert count_diff(counts, expected) == {}
    for url in server_errors:
        assert counts[url] == 1 + MAX_RETRIES
    for port in ports:
        assert counts[f"http://{hostport(port)}{ROBOTS}"] == 1
    assert not set(counts) & disallowed
    assert not set(counts) & graph.orphan_urls(ports)
    assert all(urlsplit(u).port in ports for u in counts)

    # the crawl log: one line per page fetch, with its fields; one skip line per disallowed URL
    log = read_log(config)
    lines = fetch_lines(log)
    for line in lines:
        missing = FETCH_LOG_FIELDS - set(line)
        assert not missing, (missing, line)
        assert line["status"] in ("ok", "skip", "fail")
        assert line["depth"] == depths[line["url"]], line
    assert Counter(line["url"] for line in lines) == Counter(page_requests(counts))
    ok = [line for line in lines if line["status"] == "ok" and line["reason"] is None]
    assert all(line["content_type"] == "text/html" and line["bytes"] > 0 and line["links"] > 0 for line in ok)
    assert sum(line["new_links"] for line in lines) == len(fetched) + len(disallowed) - 1  # all but the seed
    for line in lines:
        if line["url"] in server_errors:
            assert line["status"] == "fail" and line["reason"] == "http_500"
    retried = Counter(line["url"] for line in lines if line["retry"])
    assert retried == Counter({u: MAX_RETRIES for u in server_errors})
    skips = [line for line in log if line.get("reason") == "robots_disallowed"]
    assert Counter(line["url"] for line in skips) == Counter(disallowed)
    assert all(line["status"] == "skip" for line in skips)

    # summary.json agrees with the log: attempts are the fetch lines, fetched those with an HTTP response
    summary = read_summary(config)
    assert summary["done"] is True and summary["exit_code"] == 0 and summary["runs"] == 1
    fetched_lines = [line for line in lines if line["http_status"] is not None]
    assert summary["attempts"] == summary["last_run"]["attempts"] == len(lines)
    assert summary["fetched"] == summary["last_run"]["fetched"] == len(fetched_lines)
    assert f"crawl done: {len(fetched_lines)} pages fetched ({len(lines)} attempts) in " in proc.stdout
    assert summary["queued"] == 0 and summary["in_flight"] == 0 and summary["hosts"] == len(ports)
    reasons = summary["reasons"]
    log_outcomes = Counter(outcome(line) for line in log)
    assert {k: v for k, v in reasons.items() if k not in NON_FETCH_REASONS and v} == dict(log_outcomes)
    assert reasons["robots_fetched"] == len(ports)
    assert summary["crawl_log"] == str(data_dir(config) / "crawl.jsonl")
    assert str(data_dir(config) / "summary.json") in proc.stdout


def test_probabilistic_crawl_workers_drop_known_links_and_nothing_is_missed(
        tmp_path: Path, serve: Callable[..., MockWeb]) -> None:
    """dedup.exact false: the workers attach the shared Bloom filter and leave out links it holds; the
    crawl still requests every expected URL exactly as often as expected, the seen-test's counts include
    the workers' share, and jobs and results cross the queues in batches."""
    web = serve(SiteSpec(pages=2000, hosts=2, links_per_page=20, seed=5))
    config = write_config(tmp_path, web, dedup={"exact": False})
    proc = run_crawl(config)
    assert_done(proc)
    counts = web.snapshot()["counts"]
    assert count_diff(counts, expected_counts(web.graph, web.ports)) == {}

    summary = read_summary(config)
    seen = summary["seen"]
    assert seen["mode"] == "probabilistic"
    known = seen["worker_known"]
    assert known > summary["links_received"] / 4, seen  # most repeated links never crossed the queue
    assert seen["trusted_maybe"] >= known and seen["checked"] >= known
    lines = fetch_lines(read_log(config))
    assert summary["links_received"] - known == sum(line["links"] for line in lines)  # what was sent
    fetched, disallowed, _ = oracle_crawl(web.graph, web.ports)
    assert sum(line["new_links"] for line in lines) == len(fetched) + len(disallowed) - 1  # all but the seed

    # one message per job and one per result would be 2 per job: batches make it well under 1
    messages = summary["queue_messages"]
    jobs = len(lines) + len(web.ports)  # page attempts and robots.txt fetches
    assert 0 < messages["jobs"] + messages["results"] < jobs, messages


# -- 2. politeness -------------------------------------------------------------------------------------

# Allowed shortfall of a measured gap between two request starts. The frontier leases a host's next URL
# no sooner than `delay` after the previous *result* (time.time() in the frontier process), and that
# request's start on the server (time.monotonic() in this process) came before its result, so the true
# gap is at least `delay` plus a fetch. The tolerance only covers the two clocks drifting apart
# (NTP slews time.time() by at most 0.5 ms/s) and float rounding: 10 ms is 20 times that over the gaps here.
GAP_TOLERANCE = 0.01


def min_gaps(times: dict[str, list[float]]) -> dict[str, float]:
    gaps = {}
    for host, starts in times.items():
        starts = sorted(starts)
        gaps[host] = min(b - a for a, b in zip(starts, starts[1:]))
    return gaps


def test_politeness_delay_spaces_requests_per_host(tmp_path: Path, serve: Callable[..., MockWeb]) -> None:
    web = serve(SiteSpec(pages=30, hosts=2, seed=3))
    config = write_config(tmp_path, web, politeness={"delay": 0.2})
    assert_done(run_crawl(config))
    snap = web.snapshot()
    assert count_diff(snap["counts"], expected_counts(web.graph, web.ports)) == {}
    assert all(len(t) >= 10 for t in snap["times"].values())
    for host, gap in min_gaps(snap["times"]).items():
        assert gap >= 0.2 - GAP_TOLERANCE, (host, gap)


def test_robots_crawl_delay_spaces_requests_per_host(tmp_path: Path, serve: Callable[..., MockWeb]) -> None:
    web = serve(SiteSpec(pages=30, hosts=2, seed=3, crawl_delay=0.2))
    config = write_config(tmp_path, web, politeness={"delay": 0.0})
    assert_done(run_crawl(config))
    snap = web.snapshot()
    assert count_diff(snap["counts"], expected_counts(web.graph, web.ports)) == {}
    assert all(len(t) >= 8 for t in snap["times"].values())
    for host, gap in min_gaps(snap["times"]).items():
        assert gap >= 0.2 - GAP_TOLERANCE, (host, gap)


HOLD = 0.03  # seconds the gauged server holds each request, so that concurrent fetches overlap


class GaugedMockWeb(MockWeb):
    """MockWeb that holds each request HOLD s and records the peak of requests in progress per host."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.active: Counter[int] = Counter()
        self.peak: Counter[int] = Counter()

    def _make_handler(self, host: int, *args: Any) -> Any:
        inner = super()._make_handler(host, *args)

        async def handle(request: Any) -> Any:
            self.active[host] += 1  # on the server's loop thread only: no lock needed
            self.peak[host] = max(self.peak[host], self.active[host])
            try:
                await asyncio.sleep(HOLD)
                return await inner(request)
            finally:
                self.active[host] -= 1

        return handle


def test_max_per_host_bounds_concurrent_requests(tmp_path: Path, serve: Callable[..., MockWeb]) -> None:
    web = serve(SiteSpec(pages=120, hosts=2, seed=5, errors=False), cls=GaugedMockWeb)
    config = write_config(tmp_path, web, politeness={"delay": 0.0, "max_per_host": 2})
    assert_done(run_crawl(config))
    assert count_diff(web.snapshot()["counts"], expected_counts(web.graph, web.ports)) == {}
    # 32 fetches may be in flight and each host has ~80 URLs: only the limit keeps the peak at 2,
    # and the peak reaching 2 shows the gauge sees overlapping requests at all
    assert dict(web.peak) == {0: 2, 1: 2}


def test_progress_line_says_when_max_per_host_caps_in_flight(tmp_path: Path, serve: Callable[..., MockWeb]) -> None:
    """One site: politeness.max_per_host, not the 32 worker slots, bounds the fetches in flight. Say so."""
    web = serve(SiteSpec(pages=150, hosts=1, seed=5, errors=False), cls=GaugedMockWeb)
    config = write_config(tmp_path, web, politeness={"delay": 0.0, "max_per_host": 2},
                          output={"progress": "plain", "progress_interval": 0.3})
    proc = run_crawl(config)
    assert_done(proc)
    assert dict(web.peak) == {0: 2}
    assert "in flight    2/32 (capped: politeness.max_per_host 2 x 1 host)" in proc.stdout, proc.stdout


# -- 3. limits and scope -------------------------------------------------------------------------------

LIMITS_SPEC = SiteSpec(pages=300, hosts=2, seed=9, errors=False)  # no 500s: no retry tail


def test_max_pages(tmp_path: Path, serve: Callable[..., MockWeb]) -> None:
    web = serve(LIMITS_SPEC)
    config = write_config(tmp_path, web, limits={"max_pages": 50})
    assert_done(run_crawl(config))
    pages = page_requests(web.snapshot()["counts"])
    assert sum(pages.values()) == 50  # at most 50; and no lease of the 50 was lost
    assert set(pages) <= set(expected_counts(web.graph, web.ports))
    assert read_summary(config)["fetched"] == 50 == len(fetch_lines(read_log(config)))


def test_max_pages_per_host(tmp_path: Path, serve: Callable[..., MockWeb]) -> None:
    web = serve(LIMITS_SPEC)
    config = write_config(tmp_path, web, limits={"max_pages_per_host": 30})
    assert_done(run_crawl(config))
    per_host = Counter(urlsplit(u).port for u, n in page_requests(web.snapshot()["counts"]).items() for _ in range(n))
    expected_per_host = Counter(urlsplit(u).port for u in page_requests(expected_counts(web.graph, web.ports)))
    assert all(expected_per_host[p] > 30 for p in web.ports)  # so the limit binds on every host
    assert per_host == {p: 30 for p in web.ports}


def test_max_depth(tmp_path: Path, serve: Callable[..., MockWeb]) -> None:
    web = serve(LIMITS_SPEC)
    config = write_config(tmp_path, web, scope={"max_depth": 2})
    assert_done(run_crawl(config))
    counts = web.snapshot()["counts"]
    expected = expected_counts(web.graph, web.ports, max_depth=2)
    assert set(page_requests(expected)) == web.graph.reachable(web.ports, max_depth=2)
    assert len(web.graph.reachable(web.ports)) > len(page_requests(expected))  # the limit cuts something
    assert count_diff(counts, expected) == {}
    assert max(line["depth"] for line in read_log(config)) == 2  # links of depth-2 pages are not followed


INCLUDE = r"^http://[^/]+/(index|p/\d+)\.html$"  # no query strings, no /private/ pages
EXCLUDE = r"/p/\d*7\.html"  # no page number ending in 7


def test_include_and_exclude(tmp_path: Path, serve: Callable[..., MockWeb]) -> None:
    web = serve(LIMITS_SPEC)
    config = write_config(tmp_path, web, scope={"include": [INCLUDE], "exclude": [EXCLUDE]})
    assert_done(run_crawl(config))
    counts = page_requests(web.snapshot()["counts"])

    def allow(url: str) -> bool:
        return re.search(INCLUDE, url) is not None and re.search(EXCLUDE, url) is None

    fetched, disallowed, _ = oracle_crawl(web.graph, web.ports, allow=allow)
    assert 20 < len(fetched) < len(web.graph.reachable(web.ports)) and not disallowed
    assert all(allow(u) for u in counts)
    assert any(re.search(EXCLUDE, u) for u in web.graph.reachable(web.ports))  # the exclude has work to do
    expected = {u: (1 + MAX_RETRIES if page_kind(web.graph, u) == PageKind.SERVER_ERROR else 1) for u in fetched}
    assert count_diff(counts, expected) == {}


def test_max_url_length(tmp_path: Path, serve: Callable[..., MockWeb]) -> None:
    web = serve(LIMITS_SPEC)
    limit = len(f"http://{hostport(web.ports[0])}/p/100.html")  # query URLs and most private pages are longer
    config = write_config(tmp_path, web, limits={"max_url_length": limit})
    assert_done(run_crawl(config))
    counts = page_requests(web.snapshot()["counts"])
    fetched, _, _ = oracle_crawl(web.graph, web.ports, allow=lambda u: len(u) <= limit)
    too_long = {u for u in web.graph.reachable(web.ports) if len(u) > limit}
    assert too_long and fetched
    assert max(len(u) for u in counts) <= limit
    expected = {u: (1 + MAX_RETRIES if page_kind(web.graph, u) == PageKind.SERVER_ERROR else 1) for u in fetched}
    assert count_diff(counts, expected) == {}


# -- 4. stop, then resume ------------------------------------------------------------------------------


def test_sigint_then_resume_completes_without_refetching(tmp_path: Path, serve: Callable[..., MockWeb]) -> None:
    web = serve(SiteSpec(pages=3000, hosts=3, seed=21))
    config = write_config(tmp_path, web)
    expected = expected_counts(web.graph, web.ports)
    in_flight_bound = 2 * 16  # workers.processes x workers.concurrency: the most leases at any time

    proc = start_crawl(config)
    try:
        deadline = time.monotonic() + 60
        while web.snapshot()["total"] < 800:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the crawl did not get going"
            time.sleep(0.02)
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    proc.send_signal(signal.SIGINT)  # to the supervisor only: it asks the frontier process to stop
    stopped = time.monotonic()
    done = finish_crawl(proc, timeout=30)
    stop_seconds = time.monotonic() - stopped
    out = done.stdout
    assert proc.returncode == 130, (out, done.stderr)
    assert stop_seconds < 8.0, stop_seconds
    assert "rerun the same command to resume" in out
    first = web.snapshot()["counts"]
    assert sum(first.values()) < sum(expected.values()) - in_flight_bound  # it really stopped early
    first_log = read_log(config)
    summary = read_summary(config)
    assert summary["done"] is False and summary["exit_code"] == 130 and summary["queued"] > 0

    assert_done(run_crawl(config))
    counts = web.snapshot()["counts"]
    log = read_log(config)
    second_log = log[len(first_log):]

    # everything expected was requested at least as often as expected, nothing else was requested,
    # and the only extra requests are fetches in flight at the stop (their results never came back)
    assert set(counts) == set(expected)
    short = {u: (counts[u], n) for u, n in expected.items() if counts[u] < n}
    assert short == {}
    extra = sum(counts.values()) - sum(expected.values())
    assert 0 <= extra <= in_flight_bound

    # nothing fetched and acked in the first run was requested again by the second
    acked = {line["url"] for line in first_log if not line.get("retry")}
    refetched = {u for u in acked if counts.get(u, 0) > first.get(u, 0)}
    assert refetched == set()
    # so across both runs each page's final (not retried) outcome is logged exactly once
    final = Counter(line["url"] for line in log if not line.get("retry"))
    assert {u: n for u, n in final.items() if n != 1} == {}
    assert set(final) == set(page_requests(expected)) | {line["url"] for line in log
                                                         if line.get("reason") == "robots_disallowed"}
    assert second_log and not {line["url"] for line in second_log} & acked
    summary = read_summary(config)
    assert summary["done"] is True and summary["queued"] == 0
    assert summary["attempts"] == len(fetch_lines(log))
    # one runs.jsonl line per run; summary.json adds them up
    runs = read_runs(config)
    assert [run["exit_code"] for run in runs] == [130, 0] and summary["runs"] == 2
    assert sum(run["attempts"] for run in runs) == summary["attempts"]
    assert summary["reasons"] == dict(Counter(runs[0]["reasons"]) + Counter(runs[1]["reasons"]))


# -- 5. a finished crawl, rerun ------------------------------------------------------------------------


def test_rerun_of_finished_crawl_fetches_nothing(tmp_path: Path, serve: Callable[..., MockWeb]) -> None:
    web = serve(SiteSpec(pages=30, hosts=2, seed=4))
    config = write_config(tmp_path, web)
    assert_done(run_crawl(config))
    assert count_diff(web.snapshot(reset=True)["counts"], expected_counts(web.graph, web.ports)) == {}
    lines = len(read_log(config))

    proc = run_crawl(config)
    assert_done(proc)
    assert web.snapshot()["total"] == 0
    assert len(read_log(config)) == lines
    summary = read_summary(config)
    assert summary["done"] is True and summary["queued"] == 0
    assert summary["last_run"]["fetched"] == summary["last_run"]["attempts"] == 0
    assert summary["fetched"] == read_runs(config)[0]["fetched"] > 0  # the first run's pages still count
    assert "crawl done: 0 pages fetched (0 attempts) in " in proc.stdout


def test_each_run_is_a_line_of_runs_jsonl_and_summary_json_adds_them_up(
        tmp_path: Path, serve: Callable[..., MockWeb]) -> None:
    web = serve(LIMITS_SPEC)
    first = run_crawl(write_config(tmp_path, web, limits={"max_pages": 40}))
    assert_done(first)
    config = write_config(tmp_path, web, limits={"max_pages": 100})  # the same data dir, a higher limit
    second = run_crawl(config)
    assert_done(second)

    runs = read_runs(config)
    assert len(runs) == 2 and runs[0]["run_id"] != runs[1]["run_id"]
    assert [(run["exit_code"], run["done"], run["fetched"]) for run in runs] == [(0, True, 40), (0, True, 60)]
    assert all(run["started_at"] <= run["ended_at"] for run in runs) and runs[0]["ended_at"] <= runs[1]["started_at"]
    assert "crawl done: 60 pages fetched (60 attempts) in " in second.stdout
    assert "crawl-wide: 100 pages fetched (100 attempts) over 2 runs" in second.stdout
    summary = read_summary(config)
    assert summary["runs"] == 2 and summary["fetched"] == 100 and summary["last_run"] == runs[1]
    # the first run's outcomes are kept: summed over the runs, they are the crawl log's
    assert summary["reasons"] == dict(Counter(runs[0]["reasons"]) + Counter(runs[1]["reasons"]))
    log_outcomes = Counter(outcome(line) for line in read_log(config))
    assert {k: v for k, v in summary["reasons"].items() if k not in NON_FETCH_REASONS} == dict(log_outcomes)
    assert summary["attempts"] == runs[0]["attempts"] + runs[1]["attempts"] == len(fetch_lines(read_log(config)))


# -- 6. unreachable seeds ------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_unreachable_seed_exits_4_and_a_rerun_tries_it_again(tmp_path: Path) -> None:
    """Nothing listens at the seed's port: exit 4 and say so. Once a server listens there, a rerun crawls it."""
    spec = SiteSpec(pages=30, hosts=1, seed=4, errors=False)
    port = free_port()
    seed = f"http://{hostport(port)}/index.html"
    data = {"seeds": [seed], "scope": {"allowed_hosts": [hostport(port)]}, "limits": {"max_retries": 1},
            "workers": {"processes": 1, "concurrency": 4, "timeout": 2, "connect_timeout": 1, "lease_timeout": 10},
            "storage": {"data_dir": str(tmp_path / "data")}, "output": {"progress": "off"},
            "politeness": {"delay": 0.0}, "traps": {"patterns": False, "soft_404": False}}  # see write_config
    config = tmp_path / "crawl.yaml"
    config.write_text(yaml.safe_dump(data))

    proc = run_crawl(config)
    assert proc.returncode == 4, (proc.stdout, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines[0].startswith(f"frontier: seed {seed} unreachable: connection refused"), proc.stderr
    assert "rerun the same command to try it again" in lines[-1] and "Traceback" not in proc.stderr
    assert "crawl done: 0 pages fetched" in proc.stdout
    (run,) = read_runs(config)
    assert run["exit_code"] == 4 and run["fetched"] == 0
    assert read_summary(config)["unreachable_seeds"] == [[seed, "connection refused or host unreachable"]]

    with MockWeb.serve_in_thread(spec, ports=[port]) as web:
        assert_done(run_crawl(config))
        assert count_diff(web.snapshot()["counts"], expected_counts(web.graph, web.ports, max_retries=1)) == {}
    assert read_summary(config)["unreachable_seeds"] == []


# -- 7. bad configuration ------------------------------------------------------------------------------

GOOD = {"seeds": ["http://127.0.0.1:9/index.html"]}  # never fetched: every case stops before crawling


def run_yaml(tmp_path: Path, data: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    return run_crawl(path, timeout=30)


def test_unknown_key_exits_2_naming_the_key(tmp_path: Path) -> None:
    proc = run_yaml(tmp_path, {**GOOD, "politeness": {"dealy": 1.0}, "storage": {"data_dir": str(tmp_path / "d")}})
    assert proc.returncode == 2
    assert "politeness.dealy" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "d").exists()  # stopped before it started


def test_missing_config_file_exits_2(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    proc = run_crawl(missing, timeout=30)
    assert proc.returncode == 2
    assert str(missing) in proc.stderr and "Traceback" not in proc.stderr


def test_data_dir_that_is_a_file_exits_2_with_one_line(tmp_path: Path) -> None:
    a_file = tmp_path / "data"
    a_file.write_text("not a directory")
    proc = run_yaml(tmp_path, {**GOOD, "storage": {"data_dir": str(a_file)}})
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("frontier: ") and str(a_file) in lines[0]
    assert "not a directory" in lines[0]
    assert a_file.read_text() == "not a directory"


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    """The one stderr line of a run that stopped before it started (exit 2, no traceback)."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("frontier: ")
    return lines[0]


def test_runaway_worker_processes_exit_2_before_spawning(tmp_path: Path) -> None:
    line = one_line_error(run_yaml(tmp_path, {**GOOD, "workers": {"processes": 10_000},
                                               "storage": {"data_dir": str(tmp_path / "d")}}))
    assert line.startswith("frontier: workers.processes: must be <= ")
    assert not (tmp_path / "d").exists()


def test_bloom_filter_too_large_for_memory_exits_2_saying_what_it_needs(tmp_path: Path) -> None:
    line = one_line_error(run_yaml(tmp_path, {**GOOD, "dedup": {"capacity": 1.0e15},
                                               "storage": {"data_dir": str(tmp_path / "d")}}))
    assert line.startswith("frontier: dedup.capacity: ")
    assert re.search(r"needs [\d,.]+ GB", line) and "MemAvailable is" in line, line
    assert not (tmp_path / "d").exists()  # nothing created, nothing spawned


@pytest.mark.parametrize("where", ["directory", "under_a_file"])
def test_unwritable_output_paths_exit_2_with_one_line(tmp_path: Path, where: str) -> None:
    (tmp_path / "a_dir").mkdir()
    (tmp_path / "a_file").write_text("x")
    path = tmp_path / "a_dir" if where == "directory" else tmp_path / "a_file" / "crawl.jsonl"
    line = one_line_error(run_yaml(tmp_path, {**GOOD, "storage": {"data_dir": str(tmp_path / "d")},
                                               "output": {"log": str(path)}}))
    assert line.startswith("frontier: output.log: ") and str(path) in line
    assert ("is a directory" if where == "directory" else "is not a directory") in line
    warc = tmp_path / "a_dir" / "crawl.warc.gz"
    (tmp_path / "a_dir" / "crawl-w1.warc.gz").mkdir()  # the second worker's file
    line = one_line_error(run_yaml(tmp_path, {**GOOD, "storage": {"data_dir": str(tmp_path / "d")},
                                               "output": {"warc": str(warc)}}))
    assert line == f"frontier: output.warc: {tmp_path / 'a_dir' / 'crawl-w1.warc.gz'} is a directory; give a file name"


# -- 8. the demo ---------------------------------------------------------------------------------------


def test_demo_config_runs_and_says_where_the_output_is(tmp_path: Path) -> None:
    demo = yaml.safe_load((ROOT / "configs" / "demo.yaml").read_text())
    demo["storage"]["data_dir"] = str(tmp_path / "demo-data")
    config = tmp_path / "demo.yaml"
    config.write_text(yaml.safe_dump(demo))
    proc = run_crawl(config)
    assert_done(proc)
    log = re.search(r"^crawl log: (.+)$", proc.stdout, re.M)
    summary = re.search(r"^summary: +(.+)$", proc.stdout, re.M)
    assert log and summary, proc.stdout
    assert Path(log[1]) == tmp_path / "demo-data" / "crawl.jsonl" and Path(log[1]).stat().st_size > 0
    assert Path(summary[1]) == tmp_path / "demo-data" / "summary.json"
    assert json.loads(Path(summary[1]).read_text())["done"] is True
    assert "crawl done" in proc.stdout


def test_banner_and_progress_line_say_what_paces_the_crawl(tmp_path: Path, serve: Callable[..., MockWeb]) -> None:
    """A crawl slowed by politeness.delay says so: in its start-up banner and in the progress line, also while
    no fetch is in flight (each host waiting out its delay). It used to show `in flight 0/32` and nothing else."""
    web = serve(SiteSpec(pages=30, hosts=1, seed=5, errors=False))
    config = write_config(tmp_path, web, politeness={"delay": 0.1, "adaptive": True, "max_delay": 0.2},
                          output={"progress": "plain", "progress_interval": 0.3})
    proc = run_crawl(config)
    assert_done(proc)
    lines = proc.stdout.splitlines()
    assert lines[0] == f"frontier: crawling 1 seed: {web.seed}", proc.stdout
    assert f"  data dir  {tmp_path / 'crawl-data'}  backend lmdb" in lines[1], proc.stdout
    assert lines[2].startswith("  pace      politeness.delay 0.1 s adaptive (5 x the server's latency, up to 0.2 s); "
                               "one fetch per host at a time"), proc.stdout
    assert lines[3].startswith("  traps     patterns off, soft_404 off"), proc.stdout
    assert "/32 (capped: politeness.delay 0.1 s adaptive x 1 host)" in proc.stdout, proc.stdout
