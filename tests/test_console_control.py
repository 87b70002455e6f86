"""The control actions (frontier.console.control) on a real Frontier over real LMDB and a real Redis server.

Each test drives `Controls.apply` as the frontier loop does, and looks at what the frontier then leases, refuses
and keeps: one contract, run against both backends. The crawl-level tests (the mock web's request log as the
oracle) are in tests/test_console_crawl.py.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from frontier.config import load_config
from frontier.console.control import ControlError, Controls
from frontier.crawl.messages import FetchResult, Status
from frontier.crawl.scheduler import Frontier
from frontier.testing.redis_servers import server_binaries

SERVER_BINARIES = server_binaries()
HOSTS = ["a.test", "b.test"]

Opener = Callable[[], tuple[Frontier, Controls]]


def crawl_config(data_dir: Path, redis: dict[str, Any] | None = None, **override: Any) -> Any:
    raw: dict[str, Any] = {
        "seeds": ["http://a.test/"],
        "storage": {"data_dir": str(data_dir), **({"backend": "redis", "redis": redis} if redis else {})},
        "scope": {"allowed_hosts": HOSTS},
        "traps": {"patterns": False, "soft_404": False},
        "politeness": {"delay": 0.0, "obey_robots": False, "max_per_host": 8},
        **override,
    }
    return load_config(raw)


@pytest.fixture(params=["lmdb", "redis", "redis-cluster"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., tuple[Frontier, Controls]]]:
    """Opens the test's crawl (again: the same crawl), as a frontier process does: Frontier + Controls."""
    redis = None
    if request.param != "lmdb":
        if not SERVER_BINARIES:
            pytest.skip("no Redis or Valkey server installed")
        pool = request.getfixturevalue("redis_servers")
        server = pool.cluster(SERVER_BINARIES[0]) if request.param == "redis-cluster" else pool.node(SERVER_BINARIES[0])
        redis = {"url": server.url, "crawl": request.getfixturevalue("crawl_name")}
    opened: list[Frontier] = []
    stops: list[int] = []

    def open_(**override: Any) -> tuple[Frontier, Controls]:
        cfg = crawl_config(tmp_path / f"data-{len(opened)}" if redis else tmp_path / "data", redis, **override)
        frontier = Frontier.from_config(cfg)
        opened.append(frontier)
        return frontier, Controls.from_config(frontier, cfg, on_stop=lambda: stops.append(1))

    open_.stops = stops  # type: ignore[attr-defined]
    open_.backend = request.param  # type: ignore[attr-defined]
    yield open_
    for frontier in opened:
        frontier.close()


def ok(job: Any, *links: str) -> FetchResult:
    return FetchResult(job=job, status=Status.OK, http_status=200, outlinks=tuple(links))


def urls(jobs: list[Any]) -> set[str]:
    return {job.url for job in jobs}


def lease_soon(frontier: Frontier, n: int = 20, within: float = 2.0) -> list[Any]:
    """The first non-empty lease within `within` seconds (a host that just had a result waits its turn)."""
    deadline = time.monotonic() + within
    while not (jobs := frontier.lease(n)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return jobs


def test_pause_stops_leases_keeps_the_crawl_open_and_resume_restarts(opener: Callable[..., Any]) -> None:
    frontier, controls = opener()
    frontier.add_seeds(["http://a.test/", "http://b.test/"])
    first = frontier.lease(1)  # one fetch in flight when the pause comes
    effect = controls.apply("pause", {}, "test")
    assert effect == {"paused": True, "in_flight": 1}
    assert controls.paused
    assert frontier.lease(10) == []
    frontier.report([ok(first[0])])  # the fetch in flight finishes
    assert frontier.lease(10) == []
    assert not frontier.done  # a paused crawl does not end, though its queue waits
    assert controls.apply("resume", {}, "test") == {"paused": False, "was_paused": True}
    assert len(frontier.lease(10)) == 1


def test_exclude_purges_the_queue_with_its_count_and_refuses_new_links(opener: Callable[..., Any]) -> None:
    frontier, controls = opener()
    frontier.add_seeds(["http://a.test/", *(f"http://a.test/cal/{i}" for i in range(5)), "http://b.test/x"])
    effect = controls.apply("exclude", {"regex": r"/cal/\d+$"}, "test")
    assert effect == {"purged": 5}
    jobs = frontier.lease(20)
    assert urls(jobs) == {"http://a.test/", "http://b.test/x"}
    assert frontier.reasons["operator_excluded"] == 5
    assert frontier.queued == 2  # the purged URLs left the queue unfetched
    frontier.report([ok(jobs[0], "http://a.test/cal/9", "http://a.test/ok"),
                     ok(jobs[1])])
    assert urls(lease_soon(frontier)) == {"http://a.test/ok"}
    assert frontier.reasons["link_operator_excluded"] == 1
    # by host: its queued URLs purged, its links refused, other hosts untouched
    frontier.add_seeds(["http://b.test/1", "http://b.test/2"])
    assert controls.apply("exclude", {"host": "B.test"}, "test") == {"purged": 2}
    assert frontier.lease(20) == []
    assert controls.apply("unexclude", {"host": "b.test"}, "test") == {"removed": 1}
    assert frontier.add_seeds(["http://b.test/3"]) == 1


def test_seeds_are_scope_checked_counted_and_forced_past_the_seen_test(opener: Callable[..., Any]) -> None:
    frontier, controls = opener()
    effect = controls.apply("seeds", {"urls": ["http://a.test/1", "http://a.test/1", "http://elsewhere.test/",
                                               "not a url"]}, "test")
    assert effect == {"added": 1, "out_of_scope": 2, "seen": 1}
    jobs = frontier.lease(10)
    frontier.report([ok(job) for job in jobs])
    assert controls.apply("seeds", {"urls": ["http://a.test/1"]}, "test") == {"added": 0, "out_of_scope": 0, "seen": 1}
    assert controls.apply("seeds", {"urls": ["http://a.test/1"], "force": True}, "test") == \
        {"added": 1, "out_of_scope": 0, "seen": 0}
    assert urls(lease_soon(frontier)) == {"http://a.test/1"}


def test_block_holds_a_host_until_its_time_without_an_attempt(opener: Callable[..., Any]) -> None:
    frontier, controls = opener()
    frontier.add_seeds(["http://a.test/1", "http://b.test/1"])
    effect = controls.apply("block", {"host": "a.test", "seconds": 1.5}, "test")
    assert effect["host"] == "a.test" and effect["until"] == pytest.approx(time.time() + 1.5, abs=0.5)
    assert urls(frontier.lease(10)) == {"http://b.test/1"}
    deadline = time.time() + 1.2
    while time.time() < deadline:
        assert frontier.lease(10) == []
        time.sleep(0.1)
    time.sleep(0.5)
    jobs = frontier.lease(10)
    assert urls(jobs) == {"http://a.test/1"}
    assert jobs[0].attempt == 0  # held back, not failed
    assert frontier.attempts == 0


def test_unblock_and_unretire_act_at_once(opener: Callable[..., Any]) -> None:
    frontier, controls = opener()
    frontier.add_seeds(["http://a.test/1", "http://b.test/1"])
    controls.apply("block", {"host": "a.test", "until": time.time() + 3600}, "test")
    assert urls(frontier.lease(10)) == {"http://b.test/1"}
    controls.apply("unblock", {"host": "a.test"}, "test")
    time.sleep(1.1)  # a blocked host's orders are looked at again after BLOCK_RECHECK
    assert urls(frontier.lease(10)) == {"http://a.test/1"}


def test_retire_parks_a_host_so_the_crawl_ends_without_it(opener: Callable[..., Any]) -> None:
    frontier, controls = opener()
    frontier.add_seeds(["http://a.test/1", "http://a.test/2", "http://b.test/1"])
    controls.apply("retire", {"host": "a.test"}, "test")
    jobs = frontier.lease(10)
    assert urls(jobs) == {"http://b.test/1"}
    frontier.report([ok(job) for job in jobs])
    assert frontier.done
    assert frontier.queued == 2  # kept for a later run
    assert frontier.reasons["operator_retired"] == 2


def test_delay_makes_a_host_wait_after_each_result(opener: Callable[..., Any]) -> None:
    frontier, controls = opener()
    frontier.add_seeds(["http://a.test/1"])
    controls.apply("delay", {"host": "a.test", "seconds": 2}, "test")
    job = frontier.lease(10)[0]
    frontier.report([ok(job, "http://a.test/2")])
    assert frontier.lease(10) == []
    assert frontier.next_ready_in() == pytest.approx(2.0, abs=0.3)
    controls.apply("delay", {"host": "a.test", "seconds": 0}, "test")  # removes the order
    assert controls.steering.orders.delays == {}


def test_stop_calls_the_loops_stop(opener: Callable[..., Any]) -> None:
    _, controls = opener()
    assert controls.apply("stop", {}, "test") == {"stopping": True, "in_flight": 0}
    assert opener.stops == [1]


BAD = [
    ("nosuch", {}, "unknown action 'nosuch'"),
    ("pause", [], "pause: the body must be a JSON object, not list"),
    ("pause", {"now": True}, "pause: unknown key 'now'"),
    ("exclude", {"regex": "(unclosed"}, "exclude: bad regex '(unclosed': missing ), unterminated subpattern"),
    ("exclude", {}, "exclude: give one of 'regex' or 'host'"),
    ("exclude", {"regex": "x", "host": "a.test"}, "exclude: give one of 'regex' or 'host'"),
    ("exclude", {"regex": 5}, "exclude: 'regex' must be str, not int"),
    ("exclude", {"host": "http://a.test/"}, "exclude: give a bare host"),
    ("unexclude", {"regex": "never"}, "unexclude: no exclusion 'never' is in force"),
    ("seeds", {"urls": "http://a.test/"}, "seeds: 'urls' must be list, not str"),
    ("seeds", {"urls": []}, "seeds: 'urls' must be a list of 1 to"),
    ("seeds", {"urls": [1]}, "seeds: 'urls' must be a list of 1 to"),
    ("seeds", {"urls": ["http://a.test/"], "force": "yes"}, "seeds: 'force' must be bool, not str"),
    ("block", {"host": "nowhere.test", "seconds": 5}, "block: unknown host 'nowhere.test'"),
    ("block", {"host": "a.test", "seconds": -1}, "block: 'seconds' must be a number of seconds from more than 0"),
    ("block", {"host": "a.test", "seconds": True}, "block: 'seconds' must be int or float, not bool"),
    ("block", {"host": "a.test"}, "block: give one of 'seconds' (from now) or 'until'"),
    ("block", {"host": "a.test", "until": 1.0}, "block: 'until' must be a Unix time in the next"),
    ("block", {"host": 7, "seconds": 5}, "block: 'host' must be str, not int"),
    ("unblock", {"host": "a.test"}, "unblock: host 'a.test' is not blocked"),
    ("delay", {"host": "a.test", "seconds": "2"}, "delay: 'seconds' must be int or float, not str"),
    ("delay", {"host": "a.test", "seconds": float("nan")}, "delay: 'seconds' must be a number of seconds from 0"),
    ("retire", {}, "retire: 'host' is required"),
    ("unretire", {"host": "a.test"}, "unretire: host 'a.test' is not retired"),
    ("release", {"host": "a.test", "pattern": "/x/*"}, "release: trap detection is off"),
    ("release", {"host": "a.test", "pattern": "x"}, "release: a pattern starts with \"/\""),
    ("checkpoint", {"dir": "relative/dir"}, None),
    ("checkpoint", {}, "checkpoint: 'dir' is required"),
]


@pytest.mark.parametrize("name,params,message", BAD, ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(BAD)])
def test_bad_input_is_one_clear_line_and_changes_nothing(opener: Callable[..., Any], name: str, params: Any,
                                                         message: str | None) -> None:
    frontier, controls = opener()
    frontier.add_seeds(["http://a.test/"])
    before = (controls.steering.store.orders(), controls.audit(10))
    with pytest.raises(ControlError) as raised:
        controls.apply(name, params, "test")
    text = str(raised.value)
    assert "\n" not in text
    if message is None:  # the backend decides: LMDB wants an absolute path, Redis has no checkpoint
        message = "checkpoint: give an absolute directory" if opener.backend == "lmdb" else \
            "checkpoint: a Redis crawl lives on its server"
    assert text.startswith(message), text
    assert (controls.steering.store.orders(), controls.audit(10)) == before


def test_every_applied_action_is_audited(opener: Callable[..., Any]) -> None:
    frontier, controls = opener()
    frontier.add_seeds(["http://a.test/", "http://a.test/x"])
    controls.apply("pause", {}, "ctl alice")
    controls.apply("exclude", {"regex": "/x$"}, "console 127.0.0.1")
    with pytest.raises(ControlError):
        controls.apply("exclude", {"regex": "("}, "ctl")
    records = controls.audit(10)
    assert [(r["caller"], r["action"], r["params"], r["effect"]) for r in records] == [
        ("ctl alice", "pause", {}, {"paused": True, "in_flight": 0}),
        ("console 127.0.0.1", "exclude", {"regex": "/x$"}, {"purged": 1}),
    ]
    assert all(abs(r["time"] - time.time()) < 60 for r in records)
    assert controls.audit(1) == records[-1:]


def test_orders_survive_a_reopen(opener: Callable[..., Any]) -> None:
    frontier, controls = opener()
    frontier.add_seeds(["http://a.test/1", "http://a.test/skip-1", "http://b.test/1"])
    controls.apply("pause", {}, "test")
    controls.apply("exclude", {"regex": "skip"}, "test")
    controls.apply("block", {"host": "b.test", "seconds": 3600}, "test")
    frontier.close()
    again, controls = opener()
    assert controls.paused
    assert again.lease(10) == []
    controls.apply("resume", {}, "test")
    assert urls(again.lease(10)) == {"http://a.test/1"}
    assert [r["action"] for r in controls.audit(10)] == ["pause", "exclude", "block", "resume"]


def test_an_order_through_one_instance_reaches_the_other(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    if not SERVER_BINARIES:
        pytest.skip("no Redis or Valkey server installed")
    server = request.getfixturevalue("redis_servers").node(SERVER_BINARIES[0])
    redis = {"url": server.url, "crawl": request.getfixturevalue("crawl_name")}
    one = Frontier.from_config(crawl_config(tmp_path / "one", redis))
    two = Frontier.from_config(crawl_config(tmp_path / "two", redis))
    try:
        controls = Controls(one)
        one.add_seeds(["http://a.test/1", "http://a.test/x-1", "http://b.test/1"])
        controls.apply("pause", {}, "test")
        time.sleep(0.6)  # the other instance reads the orders every REDIS_REFRESH
        assert two.lease(10) == [] and not two.done
        controls.apply("exclude", {"regex": "/x-"}, "test")
        controls.apply("resume", {}, "test")
        time.sleep(0.6)
        assert urls(two.lease(10)) == {"http://a.test/1", "http://b.test/1"}
        assert two.reasons["operator_excluded"] == 1
        assert Controls(two).audit(10)[-1]["action"] == "resume"  # one audit log for the crawl
    finally:
        one.close()
        two.close()


def test_checkpoint_is_a_data_dir_a_crawl_resumes_from(tmp_path: Path) -> None:
    wide = {"politeness": {"delay": 0.0, "obey_robots": False, "max_per_host": 100}}
    cfg = crawl_config(tmp_path / "data", **wide)
    frontier = Frontier.from_config(cfg)
    controls = Controls.from_config(frontier, cfg)
    try:
        frontier.add_seeds([f"http://a.test/{i}" for i in range(50)])
        jobs = frontier.lease(10)
        frontier.report([ok(job) for job in jobs])
        controls.apply("exclude", {"regex": "/4[0-9]$"}, "test")
        target = tmp_path / "checkpoint"
        effect = controls.apply("checkpoint", {"dir": str(target)}, "test")
        assert effect["dir"] == str(target) and effect["bytes"] > 0
        # the crawl goes on after the copy; the copy keeps the state at the checkpoint
        frontier.report([ok(job) for job in frontier.lease(5)])
        for bad, why in [(target, "exists (a directory)"), (tmp_path / "data" / "inside", "inside the crawl's data"),
                         (tmp_path / "no" / "parent", "is not a directory")]:
            with pytest.raises(ControlError, match=re.escape(why)):
                controls.apply("checkpoint", {"dir": str(bad)}, "test")
        (tmp_path / "a-file").write_text("x")
        with pytest.raises(ControlError, match="exists \\(a file\\)"):
            controls.apply("checkpoint", {"dir": str(tmp_path / "a-file")}, "test")
    finally:
        frontier.close()
    resumed = Frontier.from_config(crawl_config(target, **wide))
    try:
        assert resumed.fetched == 10
        assert resumed.queued == 40  # 50 seeds, 10 fetched; the excluded ones still queued, purged when leased
        leased = urls(resumed.lease(100))
        assert len(leased) == 30 and not any(u.endswith(tuple(f"/4{i}" for i in range(10))) for u in leased)
        assert Controls(resumed).audit(10)[-1]["action"] == "exclude"  # the audit log so far went along
    finally:
        resumed.close()


def test_a_stored_release_reaches_the_trap_detector_at_open_and_on_a_reread() -> None:
    from frontier.crawl.steering import Steering
    from frontier.crawl.traps import TRAP_PATTERN, TrapDetector
    from frontier.state.controls import MemoryControls

    cal = [f"http://shop.test/cal/{n}/01" for n in range(2000)]

    def suspecting() -> TrapDetector:
        detector = TrapDetector(soft_404=False, max_suspect_pages=10)
        for i in range(200):
            detector.learn(cal[i], None, [cal[2 * i + 1], cal[2 * i + 2]])
        assert detector.check(cal[1999]) == TRAP_PATTERN
        return detector

    store = MemoryControls()
    store.put("release:shop.test /cal/N/N", "")
    at_open = suspecting()
    Steering(store, traps=at_open)  # a restart: the stored order is applied when the steering opens
    assert at_open.check(cal[1999]) is None
    shared = MemoryControls()
    other = suspecting()
    steering = Steering(shared, refresh=0.5, traps=other)
    assert other.check(cal[1999]) == TRAP_PATTERN
    shared.put("release:shop.test /cal/N/N", "")  # given through another instance of the crawl
    steering.poll(time.time())
    assert other.check(cal[1999]) is None
