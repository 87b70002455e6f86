"""Deferred confirmations (frontier.seen.parked): exact mode parks the Bloom "maybe"s that would read a run on
disk, and a sweep answers them. Whatever is parked, the URLs reported new (at once or by a sweep) are exactly
the URLs never seen before, each once: the same set a synchronous seen-test reports."""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import time
from pathlib import Path

import lmdb
import pytest

from frontier import URLSeen
from frontier.fingerprint import fingerprint
from frontier.seen.fplog import FingerprintLog
from frontier.seen.fpset import split
from frontier.seen.parked import ParkedConfirms, encode
from frontier.state import lmdb as lmdb_state

SPAWN = multiprocessing.get_context("spawn")
SMALL_LOG = {"run_size": 300, "fanout": 3, "step_entries": 100}  # level-1 runs (on disk) from 900 URLs
LOOSE_RUN_FILTERS = {**SMALL_LOG, "filter_bits": 1}  # the runs' filters let through most strangers: new URLs park


def small_log(monkeypatch: pytest.MonkeyPatch, options: dict[str, int] = SMALL_LOG) -> None:
    for key, value in options.items():
        monkeypatch.setitem(FingerprintLog.__init__.__kwdefaults__, key, value)


def url(i: int) -> str:
    return f"http://site{i % 7}.example/p/{i}"


def payload(fps: list[bytes]) -> list[bytes]:
    return [b"payload:" + fp.hex().encode() for fp in fps]


class Sink:
    """What sweeps enqueue, each fingerprint once: a rerun of a transaction (a grown map) writes it again."""

    def __init__(self) -> None:
        self.got: dict[bytes, bytes] = {}

    def __call__(self, txn: lmdb.Transaction, fps: list[bytes], payloads: list[bytes]) -> None:
        self.got.update(zip(fps, payloads))

    def commit(self) -> list[tuple[bytes, bytes]]:
        out, self.got = list(self.got.items()), {}
        return out


def open_seen(path: Path) -> URLSeen:
    # a small, loose filter: many Bloom "maybe"s for new URLs; no LRU: every repeat reaches the filter
    return URLSeen(path, capacity=400, error_rate=0.05, lru_size=0)


def add_old(seen: URLSeen) -> list[bytes]:
    """3,000 URLs in batches: with SMALL_LOG most of them end up in runs on disk."""
    old = [fingerprint(url(i)) for i in range(3000)]
    for start in range(0, len(old), 500):
        seen.add_fingerprints(old[start:start + 500])
    return old


def test_records_read_back_each_fingerprint_once_with_its_first_payload(tmp_path: Path) -> None:
    fps = [fingerprint(url(i)) for i in range(6)]
    batches = [(fps[:4], [b"", b"x", bytes(300), b"\x00\xff"]),
               ([fps[1], fps[4], fps[4], fps[5]], [b"again", b"4", b"4 again", b"last"])]
    log = FingerprintLog(tmp_path / "log", version_tag="test")
    try:
        parked = ParkedConfirms(log)
        for batch, payloads in batches:
            blob = b"".join(batch)
            log.write(lambda txn: parked.put(txn, blob, payloads))
            parked.committed(blob)
        assert len(parked) == 8
        waiting = log.read(parked.read)
        assert split(waiting.fps) == fps
        assert waiting.payloads([5, 0, 4, 2, 1, 3]) == [b"last", b"", b"4", bytes(300), b"x", b"\x00\xff"]
    finally:
        log.close()
    log = FingerprintLog(tmp_path / "log", version_tag="test")
    try:
        parked = ParkedConfirms(log)
        assert len(parked) == 8  # counted again on open
        waiting = log.read(parked.read)
        later = fingerprint(url(99))
        log.write(lambda txn: parked.put(txn, later, [b"later"]))  # parked after the sweep read its records
        parked.committed(later)
        log.write(lambda txn: parked.clear(txn, waiting))
        parked.swept(waiting)
        assert len(parked) == 1
        left = log.read(parked.read)
        assert split(left.fps) == [later] and left.payloads([0]) == [b"later"] and left.count == 1
    finally:
        log.close()
    with pytest.raises(ValueError, match="2 fingerprints but 1 payloads"):
        encode(b"".join(fps[:2]), [b"a"])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_deferred_answers_equal_synchronous_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    small_log(monkeypatch)
    rng = random.Random(seed)
    sync, deferred = open_seen(tmp_path / "sync"), open_seen(tmp_path / "deferred")
    sink = Sink()
    reported: dict[bytes, int] = {}  # fingerprint -> times reported new, now or by a sweep
    new_to_sync: set[bytes] = set()
    payloads: dict[bytes, bytes] = {}
    sweeps = parked = interleaved = 0
    stepped = [rng.random() < 0.5 for _ in range(40)]  # True: a whole sweep, False: one step
    try:
        for round_ in range(20):
            batch = [url(rng.randrange(4000)) for _ in range(rng.randrange(50, 600))]
            fps = [fingerprint(u) for u in batch]
            want = sync.add_fingerprints(fps)
            interleaved += deferred.sweeping
            got = deferred.add_fingerprints(fps, defer=payload)
            new_to_sync.update(fp for fp, w in zip(fps, want) if w)
            # a URL new now is new to the synchronous test too; one it calls new is new now or parked
            assert all(w for w, g in zip(want, got) if g)
            for fp, g in zip(fps, got):
                if g:
                    reported[fp] = reported.get(fp, 0) + 1
            parked = max(parked, deferred.parked)
            # whole sweeps, and sweeps in steps with batches between them (some parked after the sweep began)
            last = round_ == 19
            if deferred.sweeping or rng.random() < 0.4 or last:
                while True:
                    added = deferred.sweep(sink, step=None if last or stepped.pop() else rng.randrange(1, 40))
                    swept = sink.commit()
                    assert added == len(swept)
                    for fp, data in swept:
                        reported[fp] = reported.get(fp, 0) + 1
                        payloads[fp] = data
                    if not (last and (deferred.sweeping or deferred.parked)):
                        break
                sweeps += not deferred.sweeping
        assert deferred.parked == 0 and not deferred.sweeping
        assert parked > 0 and sweeps > 1, "nothing was parked: the test proves nothing"
        assert deferred.stats()["sweeps"] > 1 and interleaved > 0, "no batch came between a sweep's steps"
        assert deferred.stats()["swept"] > 0
        assert set(reported) == new_to_sync
        assert set(reported.values()) == {1}  # each new URL reported once
        assert all(data == b"payload:" + fp.hex().encode() for fp, data in payloads.items())
        assert len(deferred) == len(sync)
        assert deferred.log.stats()["runs"] >= 2
    finally:
        sync.close()
        deferred.close()


def test_a_sweep_reports_false_positives_and_drops_repeats(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Old URLs on disk park and are dropped by the sweep; new ones the filter calls "maybe" park and come back."""
    small_log(monkeypatch)
    with open_seen(tmp_path / "s") as seen:
        old = add_old(seen)
        fresh = [fingerprint(url(i)) for i in range(10_000, 14_000)]
        flags = seen.add_fingerprints(old + fresh, defer=payload)
        assert not any(flags[:len(old)])
        parked = seen.parked
        assert parked > 100  # old ones held by runs on disk
        sink = Sink()
        added = seen.sweep(sink)
        swept = [fp for fp, _ in sink.commit()]
        assert set(swept) <= set(fresh) and len(swept) == added
        assert {fp for fp, f in zip(old + fresh, flags) if f} | set(swept) == set(fresh)
        assert seen.sweep(sink) == 0 and seen.parked == 0
        stats = seen.stats()
        assert stats["parked"] == parked and stats["swept"] == parked and stats["sweeps"] == 1


def test_seeds_are_never_parked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    small_log(monkeypatch)
    with open_seen(tmp_path / "s") as seen:
        old = add_old(seen)
        assert seen.add_fingerprints(old, defer=payload, confirm=set(old)) == [False] * len(old)
        assert seen.parked == 0


def _park_and_hang(path: str, conn: object) -> None:
    FingerprintLog.__init__.__kwdefaults__.update(SMALL_LOG)
    seen = open_seen(Path(path))
    old = add_old(seen)
    seen.add_fingerprints(old + [fingerprint(url(i)) for i in range(10_000, 12_000)], defer=payload)
    conn.send(seen.parked)  # type: ignore[attr-defined]
    time.sleep(120)  # killed here


def report_then_kill_9(target: object, path: Path) -> object:
    """Run `target(path, conn)` in a spawned process; once it reports (sends), SIGKILL it; returns the report."""
    parent, child = SPAWN.Pipe()
    process = SPAWN.Process(target=target, args=(str(path), child), daemon=True)
    process.start()
    try:
        assert parent.poll(120), "the child did not report"
        return parent.recv()
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.join(30)
        assert process.exitcode == -signal.SIGKILL


def test_parked_confirmations_survive_kill_9(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s"
    parked = report_then_kill_9(_park_and_hang, path)
    assert parked > 100
    small_log(monkeypatch)
    with open_seen(path) as seen:
        assert seen.parked == parked
        sink = Sink()
        added = seen.sweep(sink)
        swept = sink.commit()
        assert added == len(swept)
        fresh = {fingerprint(url(i)) for i in range(10_000, 12_000)}
        assert {fp for fp, _ in swept} <= fresh
        assert all(data == b"payload:" + fp.hex().encode() for fp, data in swept)
        assert all(seen.contains_fingerprint(fp) for fp in fresh)  # every new one recorded, at once or swept


# -- the crawl state: parked links are queued by a sweep, never lost, never queued twice ----------------

GRAPH_PAGES = 2500


def graph_url(i: int) -> str:
    return f"http://h{i % 5}.example/p/{i}"


def outlinks(i: int) -> list[int]:
    rng = random.Random(i)
    return [rng.randrange(GRAPH_PAGES) for _ in range(12)] + [(i + 1) % GRAPH_PAGES]


def crawl_state(path: Path, defer_confirms: int = 150) -> object:
    from frontier.config import DedupConfig
    from frontier.state.base import StatePolicy
    from frontier.state.lmdb import LmdbCrawlState

    policy = StatePolicy(lease_timeout=600.0, max_per_host=50, obey_robots=False)
    dedup = DedupConfig(capacity=300, error_rate=0.5, lru_size=0, defer_confirms=defer_confirms)
    return LmdbCrawlState(path, policy, dedup=dedup, now=1000.0)


def crawl_steps(state: object, steps: int | None, fetched: list[str], sweeping: list[bool] | None = None) -> None:
    """Lease, fetch (the graph above) and commit each page's outlinks, `steps` times or until done;
    `sweeping` gets, after each commit, whether a sweep has steps left."""
    from frontier.state.base import Ack, Commit, Link, Outcome

    def allow(host: str, url: str) -> bool:
        return True

    now, step = 1000.0, 0
    while steps is None or step < steps:
        if state.done(now):  # type: ignore[attr-defined]
            return
        leases = state.lease(40, now, allow).leases  # type: ignore[attr-defined]
        links, acks = [], []
        for lease in leases:
            page = int(lease.url.rsplit("/", 1)[1])
            links += [Link(graph_url(j), lease.depth + 1) for j in outlinks(page)]
            acks.append(Ack(key=lease.key, outcome=Outcome.DONE, fetched=True))
        state.commit(Commit(links=links, acks=acks), now)  # type: ignore[attr-defined]
        fetched += [lease.url for lease in leases]
        if sweeping is not None:
            sweeping.append(state.seen.sweeping)  # type: ignore[attr-defined]
        now += 1.0
        step += 1


def reachable() -> set[str]:
    seen, todo = {0}, [0]
    while todo:
        for j in outlinks(todo.pop()):
            if j not in seen:
                seen.add(j)
                todo.append(j)
    return {graph_url(i) for i in seen}


def test_a_crawl_with_parked_links_fetches_every_page_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from frontier.state.base import Commit, Link

    small_log(monkeypatch, LOOSE_RUN_FILTERS)
    monkeypatch.setattr(lmdb_state, "SWEEP_STEP", 40)  # a sweep takes several commits
    state = crawl_state(tmp_path / "crawl")
    fetched: list[str] = []
    sweeping: list[bool] = []
    try:
        state.commit(Commit(links=[Link(graph_url(0), 0)]), 1000.0)  # type: ignore[attr-defined]
        crawl_steps(state, None, fetched, sweeping)
        stats = state.seen.stats()  # type: ignore[attr-defined]
    finally:
        state.close()  # type: ignore[attr-defined]
    assert stats["parked"] > 500 and stats["sweeps"] >= 2 and stats["swept_new"] > 0, stats
    assert stats["parked_now"] == 0 and any(sweeping)  # pages leased and acked between a sweep's steps
    assert len(fetched) == len(set(fetched))
    assert set(fetched) == reachable()


def _crawl_and_hang(path: str, conn: object) -> None:
    FingerprintLog.__init__.__kwdefaults__.update(LOOSE_RUN_FILTERS)
    lmdb_state.SWEEP_STEP = 25
    from frontier.state.base import Commit, Link

    state = crawl_state(Path(path), defer_confirms=1200)
    state.commit(Commit(links=[Link(graph_url(0), 0)]), 1000.0)  # type: ignore[attr-defined]
    fetched: list[str] = []
    crawl_steps(state, 20, fetched)
    for _ in range(200):  # on to a moment inside a sweep
        if state.seen.sweeping:  # type: ignore[attr-defined]
            break
        crawl_steps(state, 1, fetched)
    conn.send((fetched, state.seen.parked, state.seen.sweeping))  # type: ignore[attr-defined]
    time.sleep(120)  # killed here, with links parked and a sweep half done


def test_parked_links_survive_kill_9_of_the_crawl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "crawl"
    before, parked, sweeping = report_then_kill_9(_crawl_and_hang, path)  # type: ignore[misc]
    assert parked > 100 and sweeping, "no sweep under way at the kill: the test proves little"
    from frontier.cli.crawlinfo import read_status
    from frontier.cli.ops import format_status

    status = read_status(path)
    assert status["queue"]["parked"] == parked
    assert f"{parked:,} links parked for a seen-test sweep" in format_status(status)
    small_log(monkeypatch, LOOSE_RUN_FILTERS)
    state = crawl_state(path, defer_confirms=1200)
    after: list[str] = []
    try:
        assert state.seen.parked == parked  # type: ignore[attr-defined]
        crawl_steps(state, None, after)
        assert state.seen.stats()["swept_new"] > 0  # type: ignore[attr-defined]
    finally:
        state.close()  # type: ignore[attr-defined]
    assert len(before + after) == len(set(before + after))
    assert set(before + after) == reachable()


# -- a real crawl (run_frontier.py, its processes, a mock web on loopback) over a log with runs on disk --------


def test_a_real_crawl_parks_links_and_fetches_every_page_once(tmp_path: Path) -> None:
    """7 million URLs of another site first, so the log has a run on disk (level 1); a loose filter then
    calls many of the crawl's new links "maybe", the runs' filters send some of those to disk: they park, and
    the crawl is complete only if its sweeps queue them."""
    from faultkit import CrawlRun, assert_group_gone, excess_requests, expected_counts, mock_config, read_summary, write_config

    from frontier.config import load_config
    from frontier.testing import MockWeb, SiteSpec

    data = tmp_path / "data"
    dedup = {"capacity": 7_000_000, "error_rate": 0.9, "defer_confirms": 100_000}
    with MockWeb.serve_in_thread(SiteSpec(pages=3000, hosts=4, seed=5, errors=False)) as web:
        cfg = mock_config(web, data, dedup=dedup, limits={"max_retries": 1})
        with URLSeen.from_config(load_config(cfg)) as seen:  # the crawl's own rules and filter
            for start in range(0, 7_000_000, 100_000):
                seen.add_many([f"http://other.example/{i}" for i in range(start, start + 100_000)], canonical=True)
            assert seen.log.stats()["levels"] >= 2
        run = CrawlRun(write_config(tmp_path / "crawl.yaml", cfg), tmp_path, "parked")
        try:
            code = run.wait(180)
            assert_group_gone(run.pgid)
        finally:
            run.kill_group()
        assert code == 0, run.output()
        counts = web.snapshot()["counts"]
        expected = expected_counts(web, 1)
        assert excess_requests(counts, expected) == {}
        assert not [u for u in expected if counts.get(u, 0) < expected[u]]  # every page fetched, once
    seen_stats = read_summary(data)["seen"]
    assert seen_stats["parked"] > 0 and seen_stats["swept_new"] > 0, seen_stats
    assert seen_stats["parked_now"] == 0
