"""The operator's console: its HTTP API over real requests to a real crawl of the mock web (run_frontier.py in
its own process group), its config checks, and its tables at the scale of 10^5 hosts.

The oracle for "the numbers rise" is the snapshot itself during a crawl slowed by a politeness delay; for the
counts at the end, the crawl's own summary.json.
"""

from __future__ import annotations

import csv
import io
import json
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from faultkit import CrawlRun, mock_config, read_summary, wait_for, write_config
from frontier.config import load_config
from frontier.console.reports import HOST_KEYS, QUEUE_KEYS, SEED_KEYS, HostFacts, LogTally, ReportError, host_rows, page_rows, select_rows
from frontier.errors import ConfigError
from frontier.testing import MockWeb, SiteSpec

RUN_TIMEOUT = 90.0


def call(url: str, *, token: str | None = None, method: str = "GET", body: bytes | None = None,
         content_type: str | None = None) -> tuple[int, Any]:
    """(status, parsed JSON or text) of one request; a connection refused raises URLError."""
    request = urllib.request.Request(url, data=body, method=method)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    if content_type is not None:
        request.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(request, timeout=15) as response:
            status, raw, kind = response.status, response.read(), response.headers.get_content_type()
    except urllib.error.HTTPError as e:
        status, raw, kind = e.code, e.read(), e.headers.get_content_type()
    return status, json.loads(raw) if kind == "application/json" else raw.decode()


def report(data_dir: Path, table: str, form: str) -> list[dict[str, Any]]:
    """`frontier report TABLE DATA_DIR --json|--csv` in a process of its own, its rows as dicts (CSV: strings)."""
    done = subprocess.run([sys.executable, "-m", "frontier", "report", table, str(data_dir), f"--{form}"],
                          capture_output=True, text=True, timeout=60, check=True)
    if form == "json":
        return json.loads(done.stdout)
    return list(csv.DictReader(io.StringIO(done.stdout)))


def console_file(data_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads((data_dir / "console.json").read_text())
    except (OSError, ValueError):
        return None


def slow_crawl(web: Any, tmp_path: Path, **override: Any) -> tuple[CrawlRun, Path]:
    """A crawl of `web` paced by a politeness delay (it lasts several seconds), its console on an ephemeral port."""
    data_dir = tmp_path / "data"
    cfg = mock_config(web, data_dir, workers={"processes": 1, "concurrency": 4}, politeness={"delay": 0.01},
                      limits={"max_retries": 0}, **override)
    return CrawlRun(write_config(tmp_path / "crawl.yaml", cfg), tmp_path, "crawl"), data_dir


def test_the_page_and_the_api_during_a_crawl(tmp_path: Path) -> None:
    with MockWeb.serve_in_thread(SiteSpec(pages=600, hosts=3, seed=5)) as web:
        run, data_dir = slow_crawl(web, tmp_path, output={"progress": "plain", "progress_interval": 5.0})
        try:
            info = wait_for(lambda: console_file(data_dir), RUN_TIMEOUT, "console.json")
            url, token = info["url"], info["token"]
            assert url.startswith("http://127.0.0.1:") and info["pid"] > 0
            mode = stat.S_IMODE((data_dir / "console.json").stat().st_mode)
            assert mode == 0o600, oct(mode)

            status, page = call(url)
            assert status == 200 and f'<meta name="frontier-token" content="{token}">' in page
            first = wait_for(lambda: (s := call(url + "api/snapshot", token=token)[1])["crawl"]["fetched"] > 0 and s,
                             RUN_TIMEOUT, "a snapshot with pages fetched")
            later = wait_for(lambda: (s := call(url + "api/snapshot", token=token)[1])["crawl"]["fetched"] >
                             first["crawl"]["fetched"] + 20 and len(s["rate"]) >= 2 and s, RUN_TIMEOUT,
                             "the numbers rising")
            crawl = later["crawl"]
            assert crawl["state"] == "running" and crawl["queued"] >= crawl["in_flight"] >= 0
            assert crawl["pages_per_s_avg"] > 0 and crawl["bytes_per_s_avg"] > 0
            assert later["outcomes"].get("ok", 0) > 0
            assert 0 < later["seen"]["bloom_fill"] < 1 and 0 <= later["seen"]["fp_rate"] < 1e-3
            assert 0 <= later["seen"]["lru_hit_rate"] <= 1
            names = sorted(w["name"] for w in later["workers"])
            assert names == ["frontier", "worker-0"], later["workers"]
            assert all(w["rss"] > 10_000_000 and 0 <= w["in_flight"] <= 4 for w in later["workers"]), later["workers"]
            wait_for(lambda: any(w["name"] == "worker-0" and w["in_flight"] > 0
                                 for w in call(url + "api/snapshot", token=token)[1]["workers"]), 30,
                     "the worker's fetches in flight")
            assert later["log_tail"] and json.loads(later["log_tail"][-1])["url"].startswith("http://127.0.0.1:")
            assert set(later["waiting"]) <= {"host_delay", "host_cap", "ready", "robots", "retry_backoff",
                                             "budget", "parked", "unreachable"}
            assert sum(later["waiting"].values()) <= crawl["queued"]

            status, hosts = call(url + "api/hosts?sort=fetched&desc=1&limit=2", token=token)
            assert status == 200 and hosts["total"] == 3 and len(hosts["rows"]) == 2
            assert hosts["rows"][0]["fetched"] >= hosts["rows"][1]["fetched"]
            assert set(hosts["rows"][0]) == set(HOST_KEYS)
            port = web.ports[0]
            status, one = call(url + f"api/hosts?q=:{port}", token=token)
            assert one["total"] == 1 and one["rows"][0]["host"] == f"127.0.0.1:{port}"

            # refused: no token, a wrong one, a bad query, an action by GET, an action that is not JSON
            assert call(url + "api/snapshot")[0] == 401
            assert call(url + "api/snapshot", token="wrong")[0] == 401
            assert call(url + "api/hosts", token=None)[0] == 401
            status, body = call(url + "api/hosts?sort=nope", token=token)
            assert status == 400 and "sort" in body["error"]
            assert call(url + "api/hosts?limit=x", token=token)[0] == 400
            assert call(url + "api/actions/pause", token=token)[0] == 405
            assert call(url + "api/actions/pause", method="POST", body=b"{}")[0] == 401
            status, body = call(url + "api/actions/pause", token=token, method="POST", body=b"{}",
                                content_type="text/plain")
            assert status == 400 and "application/json" in body["error"]
            status, body = call(url + "api/actions/pause", token=token, method="POST", body=b"[1",
                                content_type="application/json")
            assert status == 400 and body["error"] == "the body is not valid JSON"
            assert run.running()  # none of it hurt the crawl

            # actions: pause holds every request (the mock web's own count stays put), bad input is one error line
            def act(name: str, params: Any) -> tuple[int, Any]:
                return call(url + f"api/actions/{name}", token=token, method="POST",
                            body=json.dumps(params).encode(), content_type="application/json")

            status, body = act("pause", {})
            assert status == 200 and body["ok"] and body["effect"]["paused"] is True, body
            paused = wait_for(lambda: (s := call(url + "api/snapshot", token=token)[1])["crawl"]["in_flight"] == 0
                              and s, 30, "nothing in flight")
            assert paused["crawl"]["state"] == "paused" and paused["crawl"]["queued"] > 0
            assert [w["in_flight"] for w in paused["workers"]] == [0, 0]
            assert paused["waiting"] == {"paused": paused["crawl"]["queued"]}
            requests = web.snapshot()["counts"]
            time.sleep(1.5)
            assert web.snapshot()["counts"] == requests
            status, body = act("exclude", {"regex": "("})
            assert status == 400 and "\n" not in body["error"] and "exclude" in body["error"], body
            assert act("nope", {})[0] == 400

            # the reports read the data dir beside the running (paused) crawl
            running = {row["host"]: row for row in report(data_dir, "hosts", "json")}
            assert len(running) == 3 and sum(row["fetched"] for row in running.values()) > 0
            queues = report(data_dir, "queues", "json")
            assert queues and all(sorted(row) == sorted(QUEUE_KEYS) and row["queued"] > 0 for row in queues)
            assert sum(row["queued"] for row in queues) == paused["crawl"]["queued"]

            status, body = act("resume", {})
            assert status == 200 and body["effect"]["was_paused"] is True
            resumed = wait_for(lambda: (s := call(url + "api/snapshot", token=token)[1])["crawl"]["fetched"] >
                               paused["crawl"]["fetched"] and s, 30, "fetching again")
            assert [r["action"] for r in resumed["audit"]] == ["pause", "resume"]
            assert resumed["audit"][0]["caller"].startswith("http 127.0.0.1")

            assert run.wait(RUN_TIMEOUT) == 0, run.output()
        finally:
            if run.running():
                run.kill_group()
    assert "Traceback" not in run.stderr, run.output()
    assert f"console: {url}" in run.stdout
    assert console_file(data_dir) is None and not (data_dir / "console.json").exists()  # removed at a clean stop
    assert read_summary(data_dir)["fetched"] >= later["crawl"]["fetched"]
    with pytest.raises(urllib.error.URLError):
        call(url + "api/snapshot", token=token)  # the console ends with the crawl

    # the reports of the finished crawl: its summary's counts, the same rows in JSON and CSV
    hosts = report(data_dir, "hosts", "json")
    assert sorted(hosts[0]) == sorted(HOST_KEYS) and len(hosts) == 3
    assert sum(row["fetched"] for row in hosts) == read_summary(data_dir)["fetched"]
    assert all(row["queued"] == 0 and row["state"] == "done" and row["bytes"] > 0 for row in hosts)
    as_csv = report(data_dir, "hosts", "csv")
    assert [(r["host"], int(r["fetched"]), int(r["bytes"])) for r in as_csv] == \
        [(r["host"], r["fetched"], r["bytes"]) for r in hosts]
    assert report(data_dir, "queues", "json") == [] and report(data_dir, "queues", "csv") == []
    seeds = report(data_dir, "seeds", "json")
    assert [(s["url"], s["state"], s["http_status"]) for s in seeds] == [(web.seed, "fetched", 200)]
    assert sorted(seeds[0]) == sorted(SEED_KEYS)
    assert report(data_dir, "seeds", "csv")[0]["url"] == web.seed


def test_a_non_loopback_console_without_a_token_is_refused_with_one_line(tmp_path: Path) -> None:
    with MockWeb.serve_in_thread(SiteSpec(pages=20, hosts=1, seed=3)) as web:
        cfg = mock_config(web, tmp_path / "data", console={"listen": "0.0.0.0:0"}, workers={"processes": 1})
        run = CrawlRun(write_config(tmp_path / "crawl.yaml", cfg), tmp_path, "crawl")
        assert run.wait(RUN_TIMEOUT) == 2, run.output()
        assert not web.snapshot()["counts"]  # nothing was fetched
    lines = run.stderr.strip().splitlines()
    assert lines == ["frontier: console.listen: 0.0.0.0 is not a loopback address: the console there needs a token "
                     "(console.token or console.token_file) and TLS (console.tls_cert, console.tls_key) or "
                     "console.insecure: true"], run.output()


@pytest.mark.parametrize("console, error", [
    ({"listen": "0.0.0.0:8080", "token": "t"}, "needs TLS"),
    ({"listen": "[::]:8080", "insecure": True}, "needs a token"),
    ({"listen": "127.0.0.1"}, 'expected "host:port"'),
    ({"listen": "127.0.0.1:0", "tls_cert": "c.pem"}, "tls_cert and tls_key together"),
    ({"token": "t", "token_file": "f"}, "not both"),
    ({"token": ""}, "expected a token"),
])
def test_console_config_errors_name_the_key(console: dict[str, Any], error: str) -> None:
    with pytest.raises(ConfigError, match=error) as e:
        load_config({"seeds": ["http://127.0.0.1:1/"], "console": console})
    assert e.value.key.startswith("console.")


def test_console_config_accepts_a_token_off_loopback_with_tls_or_insecure(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("s3cret\n")
    cfg = load_config({"seeds": ["http://127.0.0.1:1/"],
                       "console": {"listen": "0.0.0.0:0", "token_file": str(token_file), "insecure": True}})
    assert cfg.console.secret() == "s3cret" and "s3cret" not in repr(cfg)
    assert load_config({"seeds": ["http://127.0.0.1:1/"], "console": {"listen": "10.1.2.3:0", "enabled": False}})


# -- the tables -------------------------------------------------------------------------------------------


def test_host_rows_from_facts_and_log_records() -> None:
    tally = LogTally().read([
        json.dumps({"url": "http://a.test/", "status": "ok", "http_status": 200, "bytes": 100, "depth": 0}),
        json.dumps({"url": "http://a.test/x", "status": "ok", "http_status": 304, "reason": "not_modified",
                    "bytes": 0, "depth": 1}),
        json.dumps({"url": "http://a.test/y", "status": "fail", "http_status": 503, "bytes": 7, "depth": 1}),
        json.dumps({"url": "http://b.test/z", "status": "skip", "reason": "robots_disallowed", "depth": 1}),
        "{torn",
    ])
    rows = host_rows([HostFacts(host="a.test", fetched=3, queued=2, state="waiting", delay=1.0)], tally)
    by_host = {row[0]: dict(zip(HOST_KEYS, row)) for row in rows}
    assert by_host["a.test"] == {"host": "a.test", "group": "a.test", "fetched": 3, "bytes": 107, "robots_refused": 0,
                                 "queued": 2, "not_modified": 1, "errors": 1, "delay": 1.0, "state": "waiting"}
    assert by_host["b.test"]["robots_refused"] == 1 and by_host["b.test"]["state"] == "done"
    assert tally.bad_lines == 1 and list(tally.seeds) == ["http://a.test/"]


def test_paging_sorts_filters_and_refuses_bad_input() -> None:
    rows = [(f"h{i}.test", "", i % 7, 0, 0, i, 0, 0, None if i % 2 else 0.5, "waiting") for i in range(50)]
    chosen = select_rows(rows, HOST_KEYS, sort="fetched", desc=True, q="H1")
    assert [r[0] for r in chosen][:4] == ["h13.test", "h12.test", "h19.test", "h11.test"]  # by i % 7: 6, 5, 5, 4
    assert len(chosen) == 11  # h1, h10..h19
    delays = [r[8] for r in select_rows(rows, HOST_KEYS, sort="delay")]
    assert delays[:25] == [0.5] * 25 and delays[25:] == [None] * 25  # unknown last
    page = page_rows(chosen, HOST_KEYS, offset=10, limit=5)
    assert page["total"] == 11 and len(page["rows"]) == 1
    for bad in ({"sort": "nope"},):
        with pytest.raises(ReportError):
            select_rows(rows, HOST_KEYS, **bad)
    with pytest.raises(ReportError):
        page_rows(chosen, HOST_KEYS, limit=0)
    with pytest.raises(ReportError):
        page_rows(chosen, HOST_KEYS, offset=-1)


def test_a_sorted_page_of_100000_hosts() -> None:
    """The figure the console's hosts table costs at 10^5 hosts (printed; the bound is loose, a slow CI box)."""
    tally = LogTally()
    facts = [HostFacts(host=f"host{i:06d}.example", fetched=(i * 7919) % 1000, queued=i % 50, state="waiting",
                       delay=1.0) for i in range(100_000)]
    start = time.perf_counter()
    rows = host_rows(facts, tally)
    built = time.perf_counter()
    chosen = select_rows(rows, HOST_KEYS, sort="fetched", desc=True)
    page = page_rows(chosen, HOST_KEYS, offset=500, limit=100)
    done = time.perf_counter()
    searched = select_rows(rows, HOST_KEYS, sort="queued", q="host09")
    found = time.perf_counter()
    print(f"\n10^5 hosts: rows built in {built - start:.3f} s, sorted and paged in {done - built:.3f} s, "
          f"searched and sorted in {found - done:.3f} s")
    assert page["total"] == 100_000 and len(page["rows"]) == 100
    assert page["rows"][0]["fetched"] >= page["rows"][-1]["fetched"]
    assert len(searched) == 10_000
    assert done - start < 10.0


def test_host_states_and_what_their_urls_wait_for() -> None:
    """classify over real host records: each condition of the scheduler named, the operator's orders first."""
    from frontier.console.live import classify
    from frontier.state.base import StatePolicy
    from frontier.state.controls import Orders
    from frontier.state.hosts import HostRecord, HostSchedule

    now = 1000.0
    sched = HostSchedule(StatePolicy(delay=1.0, max_pages_per_host=10))

    def host(name: str, **fields: Any) -> HostRecord:
        record = HostRecord(hid=len(sched.hosts), name=name, delay=1.0, **{"robots_ready": True, **fields})
        sched.add(record)
        return record

    def group_pause(record: HostRecord, until: float) -> HostRecord:  # a Retry-After or a backoff, on its group
        record.group.pause_until = until
        return record

    def group_time(record: HostRecord, when: float) -> HostRecord:  # its group's delay after another host's fetch
        record.group.next_time = when
        return record

    cases = {
        "done": (host("a", queued=0), ("done", None)),
        "in flight": (host("b", queued=1, leased={b"k"}), ("active", None)),
        "at its cap": (host("c", queued=3, leased={b"k"}), ("active", "host_cap")),
        "delay": (host("d", queued=2, next_time=now + 1), ("waiting", "host_delay")),
        "retry-after": (group_pause(host("e", queued=2), now + 60), ("backing_off", "retry_backoff")),
        "group delay": (group_time(host("k", queued=2), now + 1), ("waiting", "group_delay")),
        "robots": (host("f", queued=2, robots_ready=False), ("robots", "robots")),
        "budget": (host("g", queued=2, fetched=10), ("retired", "budget")),
        "parked": (host("h", queued=1, held={b"k": ("http://h/", "parked")}), ("parked", "parked")),
        "unreachable": (host("i", queued=2, unreachable="dns_error"), ("unreachable", "unreachable")),
        "ready": (host("j", queued=2), ("active", "ready")),
    }
    for what, (record, expected) in cases.items():
        assert classify(record, sched, now, obey_robots=True) == expected, what
    orders = Orders(blocks={"d": now + 30}, retired=frozenset({"j"}))
    assert classify(cases["delay"][0], sched, now, True, orders) == ("blocked", "blocked")
    assert classify(cases["ready"][0], sched, now, True, orders) == ("retired", "retired")
    assert classify(cases["robots"][0], sched, now, obey_robots=False) == ("active", "ready")


def test_a_redis_crawls_console_and_reports(tmp_path: Path, redis_node: Any, crawl_name: str) -> None:
    """On Redis the hosts live on the server: the live table has this instance's log figures; `report --config`
    reads every host's counts from the server."""
    with MockWeb.serve_in_thread(SiteSpec(pages=200, hosts=2, seed=12)) as web:
        data_dir = tmp_path / "data"
        cfg = mock_config(web, data_dir, storage={"backend": "redis", "redis": {"url": redis_node.url,
                                                                              "crawl": crawl_name}},
                          workers={"processes": 1, "concurrency": 4}, politeness={"delay": 0.01},
                          limits={"max_retries": 0})
        config = write_config(tmp_path / "crawl.yaml", cfg)
        run = CrawlRun(config, tmp_path, "crawl")
        try:
            info = wait_for(lambda: console_file(data_dir), RUN_TIMEOUT, "console.json")
            snapshot = wait_for(lambda: (s := call(info["url"] + "api/snapshot", token=info["token"])[1])["crawl"]
                                ["fetched"] > 0 and s, RUN_TIMEOUT, "pages fetched")
            assert snapshot["seen"]["bloom_fill"] is None and snapshot["waiting"] == {}
            status, hosts = call(info["url"] + "api/hosts?sort=bytes&desc=1", token=info["token"])
            assert status == 200 and hosts["rows"] and hosts["rows"][0]["bytes"] > 0
            assert hosts["rows"][0]["state"] is None and hosts["rows"][0]["queued"] is None
            assert run.wait(RUN_TIMEOUT) == 0, run.output()
        finally:
            if run.running():
                run.kill_group()
    done = subprocess.run([sys.executable, "-m", "frontier", "report", "hosts", "--config", str(config), "--json"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert len(rows) == 2 and all(row["state"] == "done" and row["bytes"] > 0 for row in rows)
    assert sum(row["fetched"] for row in rows) == read_summary(data_dir)["fetched"]


def test_the_snapshot_names_the_suspected_trap_patterns(tmp_path: Path) -> None:
    """The trap site (frontier.testing.traps) crawled with the trap defences: the snapshot's traps name the
    calendar's and the fan-out's patterns with their figures while the crawl runs."""
    from frontier.testing.traps import TRAPS, TrapSpec, TrapWeb

    spec = TrapSpec(items=100, traps=tuple(t for t in TRAPS if t != "soft404"))
    with TrapWeb.serve_in_thread(spec) as web:
        data_dir = tmp_path / "data"
        cfg = {"seeds": [web.seed, web.items_seed], "politeness": {"delay": 0}, "storage": {"data_dir": str(data_dir)},
               "output": {"progress": "off"}, "traps": {"soft_404": False}, "workers": {"processes": 1}}
        run = CrawlRun(write_config(tmp_path / "crawl.yaml", cfg), tmp_path, "crawl")
        seen: dict[str, dict[str, Any]] = {}
        try:
            info = wait_for(lambda: console_file(data_dir), RUN_TIMEOUT, "console.json")
            deadline = time.monotonic() + RUN_TIMEOUT
            while run.running() and time.monotonic() < deadline:
                try:
                    status, snapshot = call(info["url"] + "api/snapshot", token=info["token"])
                except urllib.error.URLError:
                    break  # the crawl ended between two looks
                seen.update({row["pattern"]: row for row in snapshot.get("traps", [])})
                time.sleep(0.1)
            assert run.wait(RUN_TIMEOUT) == 0, run.output()
        finally:
            if run.running():
                run.kill_group()
    assert {"/cal/N/N", "/fan/N"} <= set(seen), sorted(seen)
    calendar = seen["/cal/N/N"]
    assert calendar["fetched"] > 0 and calendar["state"] in ("suspected", "parked") and calendar["host"]
    assert {"new_per_page", "queued", "growing", "spent", "budget"} <= set(calendar)


def test_the_server_over_tls_with_a_configured_token_refuses_foreign_hosts(tmp_path: Path) -> None:
    """ConsoleServer alone, with the loop's side played by a thread that answers as the frontier loop does:
    HTTPS with the configured token, a Host header naming another site refused (DNS rebinding), an error of the
    loop's answer as one line, console.json written 0600 and removed by close()."""
    import socket
    import ssl
    import threading

    from frontier.config import ConsoleConfig
    from frontier.console.server import ActionUnavailable, ConsoleServer

    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", str(tmp_path / "key.pem"),
                    "-out", str(tmp_path / "cert.pem")], check=True, capture_output=True, timeout=60)
    cfg = ConsoleConfig(listen="127.0.0.1:0", token="s3cret", tls_cert=tmp_path / "cert.pem",
                        tls_key=tmp_path / "key.pem")

    def handle(what: str, params: dict[str, Any]) -> Any:
        if what == "snapshot":
            return {"crawl": {"state": "running"}}
        if what == "hosts":
            return [("a.test", "a.test", 1, 10, 0, 2, 0, 0, 1.0, "waiting")]
        raise ActionUnavailable("this crawl has no control actions")

    server = ConsoleServer.start(cfg, tmp_path)
    server.publish()
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            server.answer(handle)
            time.sleep(0.02)

    turns = threading.Thread(target=loop, daemon=True)
    turns.start()
    try:
        assert server.url.startswith("https://127.0.0.1:")
        assert stat.S_IMODE((tmp_path / "console.json").stat().st_mode) == 0o600
        assert json.loads((tmp_path / "console.json").read_text())["token"] == "s3cret"
        context = ssl.create_default_context(cafile=str(tmp_path / "cert.pem"))
        https = urllib.request.build_opener(urllib.request.HTTPSHandler(context=context))

        def get(path: str, token: str | None = "s3cret", method: str = "GET") -> tuple[int, Any]:
            request = urllib.request.Request(server.url + path, method=method, data=b"{}" if method == "POST" else None,
                                             headers={"Content-Type": "application/json",
                                                      **({"Authorization": f"Bearer {token}"} if token else {})})
            try:
                with https.open(request, timeout=10) as response:
                    return response.status, json.loads(response.read())
            except urllib.error.HTTPError as e:
                return e.code, json.loads(e.read())

        assert get("api/snapshot") == (200, {"crawl": {"state": "running"}})
        assert get("api/snapshot", token="other")[0] == 401
        assert get("api/hosts?q=A.TEST")[1]["rows"][0]["host"] == "a.test"
        assert get("api/actions/pause", method="POST") == (501, {"error": "this crawl has no control actions"})
        port = int(server.url.rsplit(":", 1)[1].rstrip("/"))
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            with ssl.create_default_context(cafile=str(tmp_path / "cert.pem")).wrap_socket(
                    raw, server_hostname="localhost") as tls:
                tls.sendall(b"GET / HTTP/1.1\r\nHost: attacker.example:%d\r\nConnection: close\r\n\r\n" % port)
                answer = b""
                while chunk := tls.recv(65536):
                    answer += chunk
        assert answer.startswith(b"HTTP/1.1 403") and b"s3cret" not in answer
    finally:
        stop.set()
        turns.join(5)
        server.close()
    assert not (tmp_path / "console.json").exists()


@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_server_closed_as_it_starts_stops_cleanly(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A crawl that is done at its first turn (a rerun of a finished crawl) starts the server's thread and closes
    it at once: no error, whatever point of its start the close meets."""
    from frontier.config import ConsoleConfig
    from frontier.console.server import ConsoleServer

    for delay in (0.0, 0.001, 0.01, 0.05, 0.2):
        server = ConsoleServer.start(ConsoleConfig(), tmp_path)
        server.publish()
        server.answer(lambda what, params: None)  # the first turn starts the thread
        time.sleep(delay)
        server.close()
        assert not server.thread.is_alive() and not (tmp_path / "console.json").exists()
    assert not [r for r in caplog.records if r.levelno >= 30], caplog.text


def test_the_server_serves_the_page_files_and_nothing_beside_them(tmp_path: Path) -> None:
    """ConsoleServer alone: the page's files and the vendored chart library under static/vendor/, byte for byte
    with their types; a path that climbs out of static/ (plain or percent-encoded dots) or names a folder is 404."""
    import socket
    from importlib import resources

    from frontier.config import ConsoleConfig
    from frontier.console.server import ConsoleServer

    static = resources.files("frontier.console").joinpath("static")
    server = ConsoleServer.start(ConsoleConfig(listen="127.0.0.1:0"), tmp_path)
    server.answer(lambda what, params: None)  # starts the server's thread
    port = int(server.url.rsplit(":", 1)[1].rstrip("/"))

    def raw_get(path: str) -> tuple[int, bytes]:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
        return int(answer.split(b" ", 2)[1]), answer.partition(b"\r\n\r\n")[2]

    try:
        wait_for(lambda: call(server.url)[0] == 200, 10, "the console serving")
        for name, kind in (("console.js", "text/javascript"), ("console.css", "text/css"),
                           ("vendor/uplot/uPlot.iife.min.js", "text/javascript"),
                           ("vendor/uplot/uPlot.min.css", "text/css")):
            with urllib.request.urlopen(server.url + "static/" + name, timeout=10) as response:
                assert response.headers.get_content_type() == kind, name
                assert response.read() == static.joinpath(*name.split("/")).read_bytes(), name
        for path in ("/static/../server.py", "/static/%2e%2e/server.py", "/static/vendor/%2e%2e/%2e%2e/server.py",
                     "/static/..%2fserver.py", "/static/vendor/.%2e/.%2e/server.py", "/static/vendor",
                     "/static/vendor/uplot/", "/static/.hidden", "/static/vendor//uplot/LICENSE"):
            status, body = raw_get(path)
            assert status == 404 and b"ConsoleServer" not in body, (path, status, body[:200])
    finally:
        server.close()
