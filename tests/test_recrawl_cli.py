"""`python -m frontier recrawl` and `dedup.recrawl_after` on real crawls: run_frontier.py against a mock web served
from a thread of this process, whose per-URL request counts are the ground truth (as in tests/test_faults.py)."""

from __future__ import annotations

import gzip
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from faultkit import CrawlRun, expected_counts, merge, mock_config, wait_for, write_config
from frontier.config import load_config
from frontier.state.recrawl_spool import pending_spool, spool_dir
from frontier.testing import MockWeb, SiteSpec

SEED = 9090
RUN_TIMEOUT = 60.0
# one worker, one fetch at a time: "in flight at a kill" is at most one page
QUIET = {
    "limits": {"max_retries": 2},
    "workers": {"processes": 1, "concurrency": 4, "timeout": 10.0, "connect_timeout": 5.0, "lease_timeout": 30.0},
    "politeness": {"delay": 0.0, "max_per_host": 4},
    "dedup": {"capacity": 10_000},
}


def page_counts(web: MockWeb) -> Counter[str]:
    return Counter({u: c for u, c in web.snapshot()["counts"].items() if not u.endswith("/robots.txt")})


def requests_since(web: MockWeb, before: Counter[str]) -> Counter[str]:
    now = Counter(web.snapshot()["counts"])
    return Counter({u: n - before.get(u, 0) for u, n in now.items() if n > before.get(u, 0)})


def crawl(tmp: Path, cfg: dict, name: str) -> CrawlRun:
    run = CrawlRun(write_config(tmp / f"{name}.yaml", cfg), tmp, name)
    assert run.wait(RUN_TIMEOUT) == 0, run.output()
    return run


def recrawl_cli(tmp: Path, cfg: dict, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    config = write_config(tmp / "recrawl.yaml", cfg)
    return subprocess.run([sys.executable, "-m", "frontier", "recrawl", "--config", str(config), *args],
                          input=stdin, capture_output=True, timeout=60, cwd=tmp)


def messages(stderr: bytes) -> list[str]:
    return [line for line in stderr.decode().splitlines() if line.startswith("frontier: recrawl:")]


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory):
    """A finished crawl of a small mock web: (its data dir, the config dict, the web)."""
    tmp = tmp_path_factory.mktemp("finished")
    spec = SiteSpec(pages=40, hosts=1, seed=SEED, redirects=False, errors=False)
    with MockWeb.serve_in_thread(spec) as web:
        cfg = mock_config(web, tmp / "data", **QUIET)
        crawl(tmp, cfg, "first")
        yield tmp / "data", cfg, web


def copy_of(finished, tmp_path: Path) -> tuple[dict, MockWeb]:
    data_dir, cfg, web = finished
    shutil.copytree(data_dir, tmp_path / "data")
    return merge(cfg, {"storage": {"data_dir": str(tmp_path / "data")}}), web


def test_recrawl_of_a_finished_crawl_fetches_exactly_those_urls(finished, tmp_path: Path) -> None:
    cfg, web = copy_of(finished, tmp_path)
    fetched = sorted(page_counts(web))
    one, two, three = random.Random(SEED).sample(fetched, 3)
    # the crawl's canonical rules apply: an upper-case scheme and host, a fragment
    loud = one.replace("http://127.0.0.1", "HTTP://127.0.0.1") + "#top"
    (tmp_path / "urls.txt").write_text(f"# the pages to fetch again\n{two}\n\nhttp://[::1\n{three}\n"
                                       f"http://example.com/elsewhere\n{two}\n")
    before = Counter(web.snapshot()["counts"])
    done = recrawl_cli(tmp_path, cfg, loud, "--input", str(tmp_path / "urls.txt"))
    assert done.returncode == 1, done  # some lines skipped
    bad = messages(done.stderr)
    assert len(bad) == 2 and "malformed" in bad[0] and "urls.txt:4" in bad[0], bad
    assert "out of scope" in bad[1] and "urls.txt:6" in bad[1], bad
    out = done.stdout.decode()
    assert "3 URLs queued" in out and "next run" in out and "1 malformed, 1 out of scope" in out, out
    assert "1 repeated" in out, out
    assert requests_since(web, before) == {}, "the command fetched something itself"
    assert len(pending_spool(tmp_path / "data")) == 1

    crawl(tmp_path, cfg, "rerun")
    assert requests_since(web, before) == {one: 1, two: 1, three: 1}
    assert pending_spool(tmp_path / "data") == [] and list(spool_dir(tmp_path / "data").iterdir()) == []
    crawl(tmp_path, cfg, "again")  # done: the request was applied once
    assert requests_since(web, before) == {one: 1, two: 1, three: 1}


def test_exit_codes_and_inputs(finished, tmp_path: Path) -> None:
    cfg, web = copy_of(finished, tmp_path)
    urls = sorted(page_counts(web))[:4]
    with gzip.open(tmp_path / "urls.gz", "wt") as f:
        f.write("\n".join(urls[:2]) + "\n")
    done = recrawl_cli(tmp_path, cfg, "--input", str(tmp_path / "urls.gz"), "--input", "-",
                       stdin="\n".join(urls[2:]).encode())
    assert (done.returncode, messages(done.stderr)) == (0, []), done
    assert "4 URLs queued" in done.stdout.decode()

    # a truncated .gz, a missing file, no URL at all, a config without a data dir: 2, nothing queued
    (tmp_path / "cut.gz").write_bytes((tmp_path / "urls.gz").read_bytes()[:-12])
    for args, needle in [(["--input", str(tmp_path / "cut.gz")], "cut.gz"),
                         (["--input", str(tmp_path / "nope.txt")], "nope.txt"), ([], "give URLs")]:
        done = recrawl_cli(tmp_path, cfg, *args)
        assert done.returncode == 2 and needle in done.stderr.decode() and b"Traceback" not in done.stderr, done
    none = merge(cfg, {"storage": {"data_dir": str(tmp_path / "none")}})
    done = recrawl_cli(tmp_path, none, urls[0])
    assert done.returncode == 2 and "data dir" in done.stderr.decode(), done
    assert not (tmp_path / "none").exists()
    assert len(pending_spool(tmp_path / "data")) == 1  # the first call's only

    # every line bad: 1, nothing queued
    done = recrawl_cli(tmp_path, cfg, "not a url", "http://example.com/")
    assert done.returncode == 1 and len(messages(done.stderr)) == 2 and "0 URLs queued" in done.stdout.decode()
    assert len(pending_spool(tmp_path / "data")) == 1


def test_recrawl_while_the_crawl_runs(tmp_path: Path) -> None:
    spec = SiteSpec(pages=40, hosts=1, seed=SEED + 1, redirects=False, errors=False)
    with MockWeb.serve_in_thread(spec) as web:
        cfg = mock_config(web, tmp_path / "data", **merge(QUIET, {"politeness": {"delay": 0.1}}))
        run = CrawlRun(write_config(tmp_path / "slow.yaml", cfg), tmp_path, "slow")
        wait_for(lambda: len(page_counts(web)) >= 5 or not run.running(), RUN_TIMEOUT, "the first pages")
        assert run.running(), run.output()
        again = sorted(page_counts(web))[:2]
        done = recrawl_cli(tmp_path, cfg, *again)
        assert done.returncode == 0 and "by the running crawl (pid" in done.stdout.decode(), done
        assert run.wait(RUN_TIMEOUT) == 0, run.output()
        expected = expected_counts(web, 2)
        for url in again:
            expected[url] += 1
        assert Counter(web.snapshot()["counts"]) == expected


def test_kill_9_after_the_spool_is_written_and_while_it_is_applied(finished, tmp_path: Path) -> None:
    """The crawl killed (the whole process group, SIGKILL) around applying the spool and while fetching what it
    queued, then run to the end: every URL asked for is fetched once more; only a page in flight at a kill
    (at most one: one worker, one fetch at a time) may be fetched once more again; nothing else is fetched."""
    cfg, web = copy_of(finished, tmp_path)
    cfg = merge(cfg, {"workers": {"concurrency": 1}, "politeness": {"delay": 0.05, "max_per_host": 1}})
    asked = random.Random(SEED + 2).sample(sorted(page_counts(web)), 20)
    before = Counter(web.snapshot()["counts"])
    done = recrawl_cli(tmp_path, cfg, *asked)
    assert done.returncode == 0, done
    config = write_config(tmp_path / "killed.yaml", cfg)
    kills = 0
    for name, until in [("at-start", lambda: False), ("mid-fetch", lambda: len(requests_since(web, before)) >= 8)]:
        run = CrawlRun(config, tmp_path, name)
        if name == "at-start":
            time.sleep(random.Random(SEED).uniform(0.3, 1.0))
        else:
            wait_for(lambda: until() or not run.running(), RUN_TIMEOUT, "refetches")
        assert run.running(), run.output()
        run.kill_group(signal.SIGKILL)
        kills += 1
    crawl(tmp_path, cfg, "to-the-end")
    got = requests_since(web, before)
    assert set(got) == set(asked), sorted(set(got) ^ set(asked))
    assert sum(got.values()) - len(asked) <= kills, got
    assert pending_spool(tmp_path / "data") == []


def test_recrawl_after_refetches_pages_once_they_are_stale(tmp_path: Path) -> None:
    """dedup.recrawl_after: a rerun soon after fetches nothing; one after it fetches every page once more (the
    seed is stale, so are the links its refetch finds: each queued once however many pages link it)."""
    after = 8.0
    spec = SiteSpec(pages=30, hosts=1, seed=SEED + 3, redirects=False, errors=False)
    with MockWeb.serve_in_thread(spec) as web:
        cfg = mock_config(web, tmp_path / "data", **merge(QUIET, {"dedup": {"recrawl_after": after}}))
        started = time.monotonic()
        crawl(tmp_path, cfg, "first")
        ended = time.monotonic()
        first = page_counts(web)
        assert set(first.values()) == {1}
        crawl(tmp_path, cfg, "soon")
        if time.monotonic() - started < after:  # (a machine so slow that the seed is stale already proves nothing)
            assert page_counts(web) == first, "a rerun within recrawl_after fetched again"
        time.sleep(max(0.0, ended + after + 0.5 - time.monotonic()))
        crawl(tmp_path, cfg, "stale")
        assert page_counts(web) == Counter({url: 2 for url in first})


def test_recrawl_of_a_redis_crawl_commits_to_the_server(redis_node, crawl_name: str, tmp_path: Path) -> None:
    """No data dir: the command commits the recrawl links to the server, as an instance would."""
    from frontier.state.base import Ack, Commit, Link, Outcome, StatePolicy
    from frontier.state.redis_state import RedisCrawlState

    a, b, c = "http://a.test/1", "http://a.test/2", "http://a.test/3"
    cfg = {"seeds": [a], "scope": {"allowed_domains": ["a.test"]}, "output": {"progress": "off"},
           "storage": {"backend": "redis", "redis": {"url": redis_node.url, "crawl": crawl_name}}}
    policy = StatePolicy(obey_robots=False)
    canonical = load_config(cfg, base_dir=tmp_path).canonical  # the rules the command reads from the config
    with RedisCrawlState(redis_node.url, policy, crawl=crawl_name, canonical=canonical, now=1.0) as state:
        state.commit(Commit(links=[Link(a, 0), Link(b, 1)]), 1.0)
        leases = state.lease(10, 1.0, lambda host, url: True).leases
        state.commit(Commit(acks=[Ack(key=lease.key, outcome=Outcome.DONE, fetched=True) for lease in leases]), 2.0)
        assert state.done(3.0)
        done = recrawl_cli(tmp_path, cfg, a, c, "http://b.test/")
        assert done.returncode == 1 and len(messages(done.stderr)) == 1, done
        assert "2 URLs queued" in done.stdout.decode() and crawl_name in done.stdout.decode(), done
        assert sorted(lease.url for lease in state.lease(10, 4.0, lambda host, url: True).leases) == [a, c]
