"""`python -m frontier status` and `export` on real data dirs: a run_frontier.py crawl while it runs, after a
kill -9 and after it finished; a Scrapy scheduler's data dir; a seen-set alone. The readers take no lock a
crawl would trip on: a crawl runs to the end while they poll it, and starts while one reads."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from crawlcmd import crawl_argv, crawl_env
from frontier.cli.crawlinfo import logged_urls, read_status, snapshot_stats
from frontier.config import DedupConfig
from frontier.seen.bloom import SharedBloom
from frontier.seen.urlseen import URLSeen
from frontier.state.base import Commit, Link, StatePolicy
from frontier.state.lmdb import LmdbCrawlState

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 90.0


def cli(*args: str | Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "frontier", *map(str, args)], capture_output=True, text=True,
                          timeout=TIMEOUT, cwd=ROOT)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def status_json(data_dir: Path) -> dict[str, Any]:
    return json.loads(cli("status", data_dir, "--json").stdout)


def started(data_dir: Path, fetched: int) -> dict[str, Any] | None:
    """The status of a crawl once it fetched `fetched` pages; None before (also while it creates the dir)."""
    done = cli("status", data_dir, "--json", check=False)
    info = json.loads(done.stdout) if done.returncode == 0 else None
    return info if info is not None and info["pages"]["fetched"] >= fetched else None


def exported(data_dir: Path, what: str) -> list[str]:
    return cli("export", data_dir, "--what", what).stdout.splitlines()


# -- a run_frontier.py crawl: while it runs, after a kill -9, after it finished ------------------------------


def demo_config(tmp_path: Path) -> Path:
    """A demo crawl slow enough to look at while it runs: a politeness delay on 2 hosts, about 8 s."""
    config = tmp_path / "crawl.yaml"
    config.write_text(json.dumps({  # JSON is YAML
        "demo": {"pages": 400, "hosts": 2, "links_per_page": 8, "seed": 3},
        "workers": {"processes": 1, "concurrency": 8},
        "politeness": {"delay": 0.04},
        "limits": {"max_retries": 1},
        "dedup": {"capacity": 100_000},
        "storage": {"data_dir": str(tmp_path / "data")},
        "output": {"progress": "off"},
    }))
    return config


def start_crawl(config: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(crawl_argv(config), cwd=ROOT, env=crawl_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)


def stop(crawl: subprocess.Popen[str]) -> None:
    """A crawl a failed test leaves running: SIGTERM (the supervisor cleans up), then SIGKILL to the group."""
    if crawl.poll() is not None:
        return
    crawl.terminate()
    try:
        crawl.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(crawl.pid, signal.SIGKILL)
        crawl.wait()


def wait_for(condition: Any, what: str) -> Any:
    deadline = time.monotonic() + TIMEOUT
    while not (value := condition()):
        assert time.monotonic() < deadline, what
        time.sleep(0.1)
    return value


def last_records(log: Path) -> dict[str, str]:
    """url -> fetched / failed / skipped / open by its last crawl-log record (an oracle for `export`)."""
    last: dict[str, dict[str, Any]] = {}
    for line in log.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        last.pop(record["url"], None)
        last[record["url"]] = record
    out = {}
    for url, r in last.items():
        if r.get("reason") == "soft_404_probe" or r.get("sitemap"):
            out[url] = "own"  # the crawler's own request (a soft-404 probe, a sitemap): no page, never exported
        elif r["status"] == "ok":
            out[url] = "fetched"
        elif "attempt" not in r:
            out[url] = "skipped"
        else:
            out[url] = "open" if r["retry"] else "failed"
    return out


@pytest.mark.timeout(180)
def test_status_and_export_while_running_after_a_kill_and_when_done(tmp_path: Path) -> None:
    config = demo_config(tmp_path)
    data = tmp_path / "data"
    crawl = start_crawl(config)
    try:
        info = wait_for(lambda: started(data, 20), "the crawl got going")
        assert info["last_stop"] == "running" and os.getpgid(info["running"]) == crawl.pid  # the frontier process
        queue = info["queue"]
        assert queue["queued"] > 0 and queue["queued"] == sum(h["queued"] for h in queue["top_hosts"])
        assert info["seen"]["urls"] > 20
        assert info["leases"]["in_flight_at_last_stop"] is None and "running crawl" in info["leases"]["note"]
        assert len(exported(data, "queued")) > 0
        text = cli("status", "--config", config).stdout  # --config finds the same data dir
        assert f"running (pid {info['running']})" in text and "queued" in text
        os.kill(info["running"], signal.SIGKILL)  # the frontier process; the supervisor then stops the rest
        out, _ = crawl.communicate(timeout=TIMEOUT)
        assert crawl.returncode != 0, out
    finally:
        stop(crawl)

    killed = status_json(data)
    assert killed["running"] is None and killed["last_stop"] == "unclean"
    assert killed["queue"]["queued"] > 0 and "killed" in killed["leases"]["note"]
    assert killed["bloom"] is None  # a snapshot is written by a clean stop only

    crawl = start_crawl(config)  # the readers left the data dir free: the rerun takes it and finishes
    try:
        out, _ = crawl.communicate(timeout=TIMEOUT)
    finally:
        stop(crawl)
    assert crawl.returncode == 0, out
    done = status_json(data)
    summary = json.loads((data / "summary.json").read_text())
    assert done["last_stop"] == "clean" and done["running"] is None
    assert done["queue"] == {"queued": 0, "hosts": 0, "requests": 0, "parked": 0, "top_hosts": []}
    assert done["pages"]["fetched"] == summary["fetched"] and done["pages"]["attempts"] == summary["attempts"]
    assert done["pages"]["outcomes"] == summary["outcomes"] and done["seen"]["urls"] == summary["seen"]["urls"]
    assert Counter(done["pages"]["outcomes"]) + Counter(done["pages"]["other"]) + Counter(
        {"robots_fetched": summary["own_requests"].get("robots.txt", 0)}) == Counter(summary["reasons"])
    assert done["leases"]["in_flight_at_last_stop"] == 0
    assert done["bloom"]["current"] and done["bloom"]["items"] == summary["seen"]["urls"]
    assert done["bloom"]["fill_ratio"] == pytest.approx(summary["seen"]["fill_ratio"])
    assert done["runs"] and done["runs"][-1]["exit_code"] == 0

    oracle = last_records(data / "crawl.jsonl")
    for what in ("fetched", "failed", "skipped"):
        urls = exported(data, what)
        assert len(urls) == len(set(urls)), what
        assert set(urls) == {u for u, o in oracle.items() if o == what}, what
    assert len(exported(data, "fetched")) > 350 and exported(data, "skipped")  # robots.txt refuses some pages
    assert exported(data, "queued") == []
    text = cli("status", data).stdout
    assert "stopped cleanly" in text and "current: the last clean stop" in text and "exit 0" in text


# -- the readers and a crawl at the same time, in two processes ---------------------------------------------


HOLD_STATE = """
import sys, time
from frontier.config import DedupConfig
from frontier.state.base import StatePolicy
from frontier.state.lmdb import LmdbCrawlState
with LmdbCrawlState(sys.argv[1], StatePolicy(obey_robots=False), dedup=DedupConfig(capacity=10_000)):
    print("open", flush=True)
    sys.stdin.read()
"""


def test_a_crawl_holding_the_dir_is_named_and_not_disturbed(tmp_path: Path) -> None:
    with LmdbCrawlState(tmp_path / "data", StatePolicy(obey_robots=False),
                        dedup=DedupConfig(capacity=10_000)) as state:
        state.commit(Commit(links=[Link("http://a.test/1", 0)]), time.time())
    holder = subprocess.Popen([sys.executable, "-c", HOLD_STATE, str(tmp_path / "data")], cwd=ROOT,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "open\n"
        info = read_status(tmp_path / "data")
        assert (info["running"], info["last_stop"], info["queue"]["queued"]) == (holder.pid, "running", 1)
    finally:
        holder.communicate("", timeout=TIMEOUT)
    assert holder.returncode == 0
    info = read_status(tmp_path / "data")
    assert (info["running"], info["last_stop"]) == (None, "clean")


def test_status_opens_the_lmdb_environment_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One process must not open an LMDB environment twice (closing one handle drops the other's locks); status
    reads the state, the suspected traps and the revisit schedule through one handle. lmdb.open is counted, not
    replaced."""
    import lmdb

    from frontier.cli import crawlinfo

    with LmdbCrawlState(tmp_path / "data", StatePolicy(obey_robots=False),
                        dedup=DedupConfig(capacity=10_000)) as state:
        state.commit(Commit(links=[Link("http://a.test/1", 0)]), time.time())
    opened, real_open = [], lmdb.open

    def counted(path: str, **options: Any) -> Any:
        opened.append(path)
        return real_open(path, **options)

    monkeypatch.setattr(crawlinfo.lmdb, "open", counted)
    info = read_status(tmp_path / "data")
    assert info["queue"]["queued"] == 1 and info["revisits"]["scheduled"] == 0
    assert len(opened) == 1, opened


GROW_MAP = """
import sys
from frontier.url.canonical import DEFAULT_RULES
from frontier.seen.fplog import FingerprintLog
sys.stdin.readline()
with FingerprintLog(sys.argv[1], version_tag=DEFAULT_RULES.version_tag(), map_size=1 << 20) as log:
    scratch = log.open_db(b"scratch")  # 3 MB: the map grows (FingerprintLog.write doubles it when full)
    log.write(lambda txn: [txn.put(b"%d" % i, bytes(1 << 16), db=scratch) for i in range(48)])
    assert log.env.info()["map_size"] > 1 << 20
print("grown", flush=True)
"""


def test_status_reads_a_dir_whose_map_grows_while_it_opens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process grows the map between status's lmdb.open and its open_db calls (the open is followed,
    in this test, by a wait for that process)."""
    import lmdb

    from frontier.seen.fplog import FingerprintLog

    monkeypatch.setitem(FingerprintLog.__init__.__kwdefaults__, "map_size", 1 << 20)  # a map of 1 MB to begin with
    with LmdbCrawlState(tmp_path / "data", StatePolicy(obey_robots=False),
                        dedup=DedupConfig(capacity=10_000)) as state:
        state.commit(Commit(links=[Link("http://a.test/1", 0)]), time.time())
    grower = subprocess.Popen([sys.executable, "-c", GROW_MAP, str(tmp_path / "data" / "state")], cwd=ROOT,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    real_open = lmdb.open

    def open_then_grow(*args: Any, **kwargs: Any) -> Any:
        env = real_open(*args, **kwargs)
        if grower.returncode is None and grower.poll() is None:  # the first open (status may open the env again)
            assert grower.stdin is not None and grower.stdout is not None
            grower.stdin.write("go\n")
            grower.stdin.flush()
            assert grower.stdout.readline() == "grown\n"
            grower.wait(timeout=TIMEOUT)
        return env

    monkeypatch.setattr(lmdb, "open", open_then_grow)
    try:
        info = read_status(tmp_path / "data")
    finally:
        grower.communicate(timeout=TIMEOUT)
    assert grower.returncode == 0
    assert info["queue"]["queued"] == 1 and info["seen"]["urls"] == 1


# -- other data dirs: a Scrapy scheduler's, a seen-set alone ------------------------------------------------


def test_a_scheduler_data_dir_and_a_seen_set_alone(tmp_path: Path) -> None:
    urls = [f"http://{host}/p/{i}" for i in range(3) for host in ("a.test", "b.test:8080")]
    with LmdbCrawlState(tmp_path / "scrapy", StatePolicy(obey_robots=False),
                        dedup=DedupConfig(capacity=10_000)) as state:
        state.commit(Commit(links=[Link(url, 1, payload=b"request") for url in urls]), time.time())
        state.lease(2, time.time(), lambda host, url: True)  # leased, never acked: still queued
    info = read_status(tmp_path / "scrapy", top=1)
    assert info["queue"]["queued"] == info["queue"]["requests"] == 6 and info["queue"]["hosts"] == 2
    assert len(info["queue"]["top_hosts"]) == 1 and info["queue"]["top_hosts"][0]["queued"] == 3
    assert info["leases"]["in_flight_at_last_stop"] == 0 and info["pages"]["outcomes"] == {}
    assert exported(tmp_path / "scrapy", "queued") == sorted(urls, key=lambda u: (u.split("/")[2] != "a.test", u))
    assert "6 URLs on 2 hosts (6 Scrapy requests)" in cli("status", tmp_path / "scrapy").stdout
    missing = cli("export", tmp_path / "scrapy", "--what", "fetched", check=False)
    assert missing.returncode == 2 and "no crawl log" in missing.stderr

    with URLSeen(tmp_path / "seen", capacity=10_000) as seen:  # frontier.scrapy.DupeFilter's data dir
        seen.add_many(urls)
    info = read_status(tmp_path / "seen")
    assert info["seen"]["urls"] == 6 and info["queue"]["queued"] == 0 and info["bloom"]["items"] == 6


def test_bad_arguments_exit_2_with_a_message(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("seeds: [1]\n")
    for args, message in ((("status", tmp_path / "nowhere"), "no such data dir"),
                          (("status", "--config", tmp_path / "bad.yaml"), "bad.yaml: seeds[0]: expected a string"),
                          (("status", tmp_path), "not a frontier data dir"),
                          (("status",), "give DATA_DIR or --config"),
                          (("status", tmp_path, "--config", tmp_path / "c.yaml"), "give DATA_DIR or --config"),
                          (("export", tmp_path, "--what", "everything"), "invalid choice")):
        done = cli(*args, check=False)
        assert done.returncode == 2 and message in done.stderr, (args, done.stderr)


# -- the pieces: the crawl log's last records, the Bloom snapshot ---------------------------------------------


def record(url: str, status: str, *, retry: bool | None = False, **more: Any) -> str:
    fields: dict[str, Any] = {"url": url, "status": status, **more}
    if retry is not None:  # an attempt (a fetch result); a skip without a fetch has no attempt fields
        fields.update(attempt=0, retry=retry)
    return json.dumps(fields)


def test_logged_urls_judge_each_url_by_its_last_record(tmp_path: Path) -> None:
    lines = [
        record("http://a.test/ok", "ok"),
        record("http://a.test/retried-then-ok", "fail", retry=True, reason="http_500"),
        record("http://a.test/gave-up", "fail", retry=True, reason="timeout"),
        '{"url": "http://a.test/torn", "sta',  # a line torn by a crash
        record("http://a.test/retried-then-ok", "ok"),
        record("http://a.test/gave-up", "fail", reason="timeout"),
        record("http://a.test/404", "skip", reason="http_404", http_status=404),
        record("http://a.test/private", "skip", retry=None, reason="robots_disallowed"),
        record("http://a.test/still-retrying", "fail", retry=True),
        record("http://a.test/held-seed", "fail", reason="connect_error"),  # given up in its run, kept queued
        record("http://a.test/ok", "ok"),  # fetched twice (a kill): listed once
        "[]",
    ]
    log = tmp_path / "crawl.jsonl"
    log.write_text("\n".join(lines) + "\n")
    assert list(logged_urls(log, "fetched")) == ["http://a.test/retried-then-ok", "http://a.test/ok"]
    assert list(logged_urls(log, "failed", exclude=iter(["http://a.test/held-seed"]))) == [
        "http://a.test/gave-up", "http://a.test/404"]
    assert list(logged_urls(log, "failed"))[-1] == "http://a.test/held-seed"
    assert list(logged_urls(log, "skipped")) == ["http://a.test/private"]
    (tmp_path / "empty.jsonl").write_text("")
    assert list(logged_urls(tmp_path / "empty.jsonl", "fetched")) == []


@pytest.fixture
def bloom() -> Iterator[SharedBloom]:
    filt = SharedBloom.create(capacity=2_000, error_rate=1e-3, partitions=4)
    yield filt
    filt.close()
    filt.unlink()


def test_snapshot_stats_match_the_filters_own(tmp_path: Path, bloom: SharedBloom) -> None:
    assert snapshot_stats(tmp_path / "none") is None
    bloom.update(f"http://a.test/{i}" for i in range(5_000))  # past its capacity: a second generation
    bloom.save(tmp_path / "bloom.snapshot")
    got, own = snapshot_stats(tmp_path / "bloom.snapshot"), bloom.stats()
    assert got is not None and own["generations"] >= 2
    for key in ("items", "capacity", "generations", "bytes"):
        assert got[key] == own[key], key
    assert got["fill_ratio"] == pytest.approx(own["fill_ratio"])
    assert got["estimated_false_positive_rate"] == pytest.approx(own["estimated_false_positive_rate"])
    (tmp_path / "junk").write_bytes(b"not a snapshot" * 10)
    with pytest.raises(Exception, match="not a frontier Bloom snapshot"):
        snapshot_stats(tmp_path / "junk")
