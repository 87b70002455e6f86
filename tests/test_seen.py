"""The seen-test: one contract for MemorySeen and URLSeen (exact and probabilistic), exactness under a
saturated Bloom filter, the false-positive rate of probabilistic mode, stats, persistence (snapshot and
crash rebuild), storage errors, LMDB map growth, the crawl store's same-transaction hook, failed
transactions (no trace in the log or the filter) and the holder's PID when the data dir is in use.

Real LMDB files under tmp_path, real shared memory; the crash test SIGKILLs a spawned process.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import stat
from collections.abc import Iterator
from pathlib import Path

import lmdb
import pytest

from frontier import (
    CanonicalRules,
    ConfigError,
    InvalidURL,
    MemorySeen,
    SeenBatch,
    StorageError,
    URLSeen,
    VersionMismatch,
    canonicalize,
    fingerprint,
)
from frontier.seen.fplog import LAZY_FANOUT, FingerprintLog
from frontier.seen.shm import SHM_DIR
from frontier.seen.urlseen import SNAPSHOT_NAME, default_bloom_name

SPAWN = multiprocessing.get_context("spawn")


def segments_of(name: str) -> list[str]:
    return sorted(n for n in os.listdir(SHM_DIR) if n == name or n.startswith(f"{name}_g"))


def urls(n: int, host: str = "example.com", start: int = 0) -> list[str]:
    return [f"http://{host}/page/{i}?b=2&a=1" for i in range(start, start + n)]


# -- the contract, for every implementation --------------------------------------------------------


@pytest.fixture(params=["MemorySeen", "URLSeen-exact", "URLSeen-probabilistic"])
def seen(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemorySeen | URLSeen]:
    if request.param == "MemorySeen":
        yield MemorySeen()
        return
    path = tmp_path / "seen"
    # p tiny, so the probabilistic implementation meets the exact contract on these few URLs too
    with URLSeen(path, capacity=10_000, error_rate=1e-9, exact=request.param.endswith("exact")) as impl:
        yield impl
    assert segments_of(default_bloom_name(path)) == []


def test_contract_add_in_len(seen: MemorySeen | URLSeen) -> None:
    assert len(seen) == 0 and "http://example.com/" not in seen
    assert seen.add("http://example.com/a?b=2&a=1") is True
    assert seen.add("http://example.com/a?b=2&a=1") is False
    assert seen.add("HTTP://EXAMPLE.com:80/x/../a?a=1&b=2#frag") is False  # the same canonical URL
    assert "http://example.com/a?a=1&b=2" in seen
    assert "http://example.com/b" not in seen
    assert len(seen) == 1


def test_contract_add_many(seen: MemorySeen | URLSeen) -> None:
    seen.add("http://example.com/old")
    batch = ["http://example.com/1", "http://example.com/old", "http://example.com/2", "http://EXAMPLE.com/1",
             "http://example.com/2#x", "http://example.com/3"]
    flags = seen.add_many(batch)
    assert isinstance(flags, SeenBatch) and isinstance(flags, list)
    assert flags == [True, False, True, False, False, True]
    assert flags.invalid == {}
    assert len(seen) == 4
    assert seen.add_many([]) == []
    big = urls(5000)
    assert seen.add_many(big) == [True] * 5000
    assert seen.add_many(big[::-1] + big) == [False] * 10_000
    assert len(seen) == 5004
    assert all(u in seen for u in big[::50])


def test_contract_invalid_urls(seen: MemorySeen | URLSeen) -> None:
    batch = ["http://example.com/ok", "ftp://example.com/", "http://example.com/ok2", "http://exa mple.com/",
             "not a url", "http://example.com/ok"]
    flags = seen.add_many(batch)
    assert flags == [True, False, True, False, False, False]  # the batch is not aborted
    assert sorted(flags.invalid) == [1, 3, 4]
    assert all(isinstance(e, InvalidURL) and e.reason for e in flags.invalid.values())
    assert flags.invalid[1].url == "ftp://example.com/"
    assert len(seen) == 2

    with pytest.raises(InvalidURL) as info:
        seen.add("mailto:someone@example.com")
    assert isinstance(info.value, ValueError) and "scheme" in info.value.reason
    assert len(seen) == 2

    # membership never raises
    assert "ftp://example.com/" not in seen
    assert 42 not in seen  # type: ignore[operator]
    assert None not in seen  # type: ignore[operator]


@pytest.mark.parametrize("bare", ["http://example.com/a", b"http://example.com/a"])
def test_contract_a_bare_string_is_not_a_batch(seen: MemorySeen | URLSeen, bare: str | bytes) -> None:
    with pytest.raises(TypeError, match="batch"):
        seen.add_many(bare)  # type: ignore[arg-type]
    if isinstance(seen, URLSeen):
        with pytest.raises(TypeError, match="batch"):
            seen.add_many(bare, canonical=True)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="batch"):
            seen.add_fingerprints(fingerprint("http://example.com/a"))  # 16 bytes, not a list of them
    assert len(seen) == 0
    assert seen.add_many(["http://example.com/a"]) == [True]  # a list of one is the way


def test_contract_random_streams_match_memory_seen(seen: MemorySeen | URLSeen) -> None:
    rng = random.Random(3)
    pool = urls(400) + [u.upper().replace("HTTP://", "http://") for u in urls(50)] + ["http://bad host/"]
    reference = MemorySeen()
    for _ in range(30):
        batch = [rng.choice(pool) for _ in range(rng.randrange(0, 60))]
        got, want = seen.add_many(batch), reference.add_many(batch)
        assert got == want
        assert got.invalid.keys() == want.invalid.keys()
    assert len(seen) == len(reference)


# -- exact and probabilistic modes -------------------------------------------------------------------


def test_exact_mode_never_drops_a_new_url_with_a_saturated_filter(tmp_path: Path) -> None:
    # capacity 100 at p = 0.5: the Bloom filter says "maybe" all the time; the log must decide
    rng = random.Random(4)
    distinct = urls(1500, "a.example") + urls(1500, "b.example")
    stream = distinct + rng.sample(distinct, 1500)
    rng.shuffle(stream)
    reference = MemorySeen()
    with URLSeen(tmp_path / "seen", capacity=100, error_rate=0.5, exact=True, lru_size=0) as seen:
        reported: list[str] = []
        for start in range(0, len(stream), 100):
            batch = stream[start:start + 100]
            flags = seen.add_many(batch)
            assert flags == reference.add_many(batch)
            reported.extend(u for u, new in zip(batch, flags) if new)
        assert sorted(reported) == sorted(distinct)  # every distinct URL new exactly once
        assert len(seen) == len(distinct)
        stats = seen.stats()
        assert stats["false_positives_caught"] > 0
        assert stats["bloom_maybe"] >= stats["false_positives_caught"]
        assert stats["new"] == len(distinct)
        fresh = urls(500, "c.example")
        assert all(seen.add(u) for u in fresh)  # one at a time, too
        assert not any(u in seen for u in urls(500, "d.example"))  # membership is exact as well


@pytest.mark.parametrize("exact", [True, False], ids=["exact", "probabilistic"])
def test_answers_stay_exact_while_the_log_merges(tmp_path: Path, exact: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A long stream with repeats, through many flushes and merge steps of the log (and a reopen)."""
    small_log(monkeypatch)
    rng = random.Random(8)
    distinct = urls(6000, "merge.example")
    reference = MemorySeen()
    path = tmp_path / "seen"
    seen = URLSeen(path, capacity=10_000, error_rate=1e-9 if not exact else 0.5, exact=exact, lru_size=64)
    try:
        for i in range(60):
            batch = [rng.choice(distinct[:100 * (i + 1)]) for _ in range(150)]
            assert seen.add_many(batch) == reference.add_many(batch), i
            if i == 30:
                seen.close()
                seen = URLSeen(path, capacity=10_000, error_rate=1e-9 if not exact else 0.5, exact=exact,
                               lru_size=64)
        assert len(seen) == len(reference)
        assert seen.log.stats()["merge_steps"] > 0
    finally:
        seen.close()


@pytest.mark.parametrize("exact", [True, False], ids=["exact", "probabilistic"])
def test_only_a_log_searched_rarely_merges_lazily(tmp_path: Path, exact: bool) -> None:
    """Exact mode searches the log for every Bloom "maybe": its levels above 0 keep the fanout (fewer runs to
    search) and its pending fingerprints are a hash set; probabilistic mode merges them LAZY_FANOUT at a time
    (fewer writes per URL) and keeps the pending ones as blobs (cheaper to add to)."""
    with URLSeen(tmp_path / "seen", capacity=1000, error_rate=1e-3, exact=exact) as seen:
        assert seen.log.upper_fanout == (seen.log.fanout if exact else LAZY_FANOUT) > 2
        assert seen.log.pending_set is exact


def test_probabilistic_false_positive_rate(tmp_path: Path) -> None:
    capacity, target = 50_000, 1e-3
    with URLSeen(tmp_path / "seen", capacity=capacity, error_rate=target, exact=False) as seen:
        assert seen.add_many(urls(capacity, "known.example")).count(False) <= target * capacity
        fresh = urls(capacity, "fresh.example")
        wrongly_seen = seen.add_many(fresh).count(False)
        assert wrongly_seen / len(fresh) <= target
        stats = seen.stats()
        assert stats["mode"] == "probabilistic"
        assert stats["false_positives_caught"] == 0 and stats["trusted_maybe"] >= wrongly_seen
        assert len(seen) == 2 * capacity - stats["trusted_maybe"]


@pytest.mark.parametrize("exact", [True, False])
def test_stats_keys(tmp_path: Path, exact: bool) -> None:
    with URLSeen(tmp_path / "seen", capacity=1000, error_rate=1e-3, exact=exact) as seen:
        seen.add_many(urls(300))
        stats = seen.stats()
    for key in ("lru_hit_rate", "fill_ratio", "estimated_false_positive_rate", "false_positives_caught", "urls",
                "checked", "new", "bloom_negative", "bloom_maybe", "lru_size", "bloom_bytes", "bloom_generations"):
        assert key in stats, key
    assert stats["mode"] == ("exact" if exact else "probabilistic")
    assert stats["urls"] == stats["new"] == stats["checked"] == 300
    assert 0 < stats["fill_ratio"] < 1
    assert 0 < stats["estimated_false_positive_rate"] < 1e-3


def test_lru_hit_rate(tmp_path: Path) -> None:
    batch = urls(1000)
    with URLSeen(tmp_path / "seen", capacity=10_000, error_rate=1e-6, lru_size=2000) as seen:
        seen.add_many(batch)
        assert seen.stats()["lru_hit_rate"] == 0
        assert seen.add_many(batch) == [False] * 1000  # a repeated stream: answered by the LRU
        stats = seen.stats()
        assert stats["lru_hit_rate"] == pytest.approx(0.5)
        assert stats["lru_hits"] == 1000 and stats["bloom_maybe"] == 0


def test_lru_size_zero(tmp_path: Path) -> None:
    batch = urls(1000)
    with URLSeen(tmp_path / "seen", capacity=10_000, error_rate=1e-6, lru_size=0) as seen:
        assert seen.add_many(batch) == [True] * 1000
        assert seen.add_many(batch) == [False] * 1000
        assert all(u in seen for u in batch[::10])
        stats = seen.stats()
        assert stats["lru_size"] == 0 and stats["lru_hit_rate"] == 0
        assert stats["log_confirmed"] == 1000  # every repeat went Bloom "maybe" -> log


def test_canonical_batches(tmp_path: Path) -> None:
    with URLSeen(tmp_path / "seen", capacity=1000, error_rate=1e-6) as seen:
        canon = [canonicalize(u) for u in urls(10)]
        assert seen.add_many(canon, canonical=True) == [True] * 10
        assert seen.add_many(urls(10)) == [False] * 10


# -- persistence ------------------------------------------------------------------------------------


def test_close_and_reopen_uses_the_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "seen"
    batch = urls(3000)
    with URLSeen(path, capacity=1000, error_rate=1e-6) as seen:
        assert seen.stats().get("rebuilt_items", 0) == 0  # a new data dir: nothing to rebuild
        seen.add_many(batch)
        generations = seen.stats()["bloom_generations"]
    assert (path / SNAPSHOT_NAME).exists()
    assert segments_of(default_bloom_name(path)) == []

    with URLSeen(path, capacity=1000, error_rate=1e-6) as seen:
        stats = seen.stats()
        assert "rebuilt_items" not in stats  # loaded from the snapshot, not rebuilt from the log
        assert stats["bloom_generations"] == generations
        assert len(seen) == 3000
        assert all(u in seen for u in batch)
        assert seen.bloom.contains_many([fingerprint(canonicalize(u)) for u in batch]) == [True] * 3000
        assert seen.add_many(batch[:100] + urls(100, start=3000)) == [False] * 100 + [True] * 100
        assert len(seen) == 3100


def test_reopen_with_other_sizing_rebuilds(tmp_path: Path) -> None:
    path = tmp_path / "seen"
    with URLSeen(path, capacity=1000, error_rate=1e-6) as seen:
        seen.add_many(urls(500))
    with URLSeen(path, capacity=5000, error_rate=1e-6) as seen:  # the snapshot does not fit: rebuild
        assert seen.stats()["rebuilt_items"] == 500
        assert seen.add_many(urls(500)) == [False] * 500


def test_the_blocked_layout_is_kept_by_snapshots_and_a_switch_rebuilds(tmp_path: Path) -> None:
    path = tmp_path / "seen"
    batch = urls(2000)
    with URLSeen(path, capacity=1000, error_rate=1e-6, exact=False, blocked=True) as seen:
        assert seen.add_many(batch) == [True] * 2000
        assert seen.bloom.stats()["blocked"] is True
    for blocked, rebuilt in ((True, False), (False, True), (False, False), (True, True)):
        with URLSeen(path, capacity=1000, error_rate=1e-6, exact=False, blocked=blocked) as seen:
            stats = seen.stats()
            assert ("rebuilt_items" in stats) is rebuilt, (blocked, stats)
            assert seen.bloom.stats()["blocked"] is blocked
            assert seen.add_many(batch[:500] + urls(10, start=5000 + 10 * blocked + 20 * rebuilt)) == \
                [False] * 500 + [True] * 10
    with pytest.raises(ConfigError, match="no blocked layout"):
        URLSeen(path, blocked=True, deletable=True)


SMALL_LOG = {"run_size": 300, "fanout": 3, "step_entries": 100}  # merges under way all the time


def small_log(monkeypatch: pytest.MonkeyPatch) -> None:
    """URLSeen opens its log with these sizes (its defaults would need 10^5 URLs for a first run)."""
    for key, value in SMALL_LOG.items():
        monkeypatch.setitem(FingerprintLog.__init__.__kwdefaults__, key, value)


def _add_and_hang(path: str, batch: list[str], conn: object, log_options: dict | None = None) -> None:
    FingerprintLog.__init__.__kwdefaults__.update(log_options or {})
    seen = URLSeen(path, capacity=1000, error_rate=1e-6)
    flags = []
    for start in range(0, len(batch), 250):  # (500: the small log's merge completes in the last batch)
        flags += seen.add_many(batch[start:start + 250])
    conn.send(("added", sum(flags), len(seen)))  # type: ignore[attr-defined]
    import time

    time.sleep(120)  # killed here: no close(), no snapshot


@pytest.mark.parametrize("merging", [False, True], ids=["pending only", "merges under way"])
def test_crash_rebuilds_from_the_log(tmp_path: Path, merging: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if merging:
        small_log(monkeypatch)
    path = tmp_path / "seen"
    before = urls(1000, "before.example")
    with URLSeen(path, capacity=1000, error_rate=1e-6) as seen:  # a clean run first: a snapshot exists
        seen.add_many(before)
    during = urls(2500, "during.example")

    parent, child = SPAWN.Pipe()
    process = SPAWN.Process(target=_add_and_hang, args=(str(path), before[:200] + during, child,
                                                        SMALL_LOG if merging else None), daemon=True)
    process.start()
    try:
        assert parent.poll(60), "the child did not report"
        assert parent.recv() == ("added", 2500, 3500)
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.join(30)
    assert process.exitcode == -signal.SIGKILL

    with URLSeen(path, capacity=1000, error_rate=1e-6) as seen:  # the stale snapshot is not used
        stats = seen.stats()
        assert stats["rebuilt_items"] == 3500
        assert seen.log.stats()["runs"] >= (3 if merging else 0)
        assert len(seen) == 3500
        assert all(u in seen for u in before + during)
        assert seen.add_many(before + during) == [False] * 3500  # nothing lost
        assert seen.add("http://after.example/") is True
    assert segments_of(default_bloom_name(path)) == []  # the killed run's segment was replaced, then removed


@pytest.mark.parametrize("deletable", [False, True], ids=["SharedBloom", "CountingBloom"])
def test_a_snapshot_older_than_the_log_is_not_loaded(tmp_path: Path, deletable: bool) -> None:
    """A power loss may undo the rename of a clean stop's snapshot while the LMDB commit of its marker survives
    (or data.mdb is restored without its snapshot): the previous stop's snapshot then sits beside a newer log.
    Simulated: the first stop's snapshot file is put back in place of the second's."""
    path = tmp_path / "seen"
    first, second = urls(100, "first.example"), urls(100, "second.example")
    with URLSeen(path, capacity=1000, error_rate=1e-6, deletable=deletable) as seen:
        seen.add_many(first)
    older = (path / SNAPSHOT_NAME).read_bytes()
    with URLSeen(path, capacity=1000, error_rate=1e-6, deletable=deletable) as seen:
        assert "rebuilt_items" not in seen.stats()  # its own snapshot: loaded
        assert not (path / SNAPSHOT_NAME).exists()  # stale from now on: deleted at open
        assert seen.add_many(second) == [True] * 100
    (path / SNAPSHOT_NAME).write_bytes(older)  # the second stop's rename (and the open's unlink) lost
    with URLSeen(path, capacity=1000, error_rate=1e-6, deletable=deletable) as seen:
        assert seen.stats()["rebuilt_items"] == 200  # the old snapshot refused: rebuilt from the log
        assert seen.add_many(first + second) == [False] * 200
        assert len(seen) == 200


# -- storage errors ---------------------------------------------------------------------------------


def test_data_dir_is_a_file(tmp_path: Path) -> None:
    path = tmp_path / "file"
    path.write_text("not a dir")
    with pytest.raises(StorageError, match=str(path)):
        URLSeen(path)


def test_data_dir_unwritable(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("running as root: file permissions do not stop root, so an unwritable dir cannot be made")
    path = tmp_path / "ro"
    path.mkdir()
    path.chmod(0o500)
    try:
        with pytest.raises(StorageError, match="not writable"):
            URLSeen(path)
    finally:
        path.chmod(0o700)


def test_data_dir_world_writable(tmp_path: Path) -> None:
    path = tmp_path / "open"
    path.mkdir()
    path.chmod(0o777)
    assert stat.S_IMODE(path.stat().st_mode) == 0o777
    with pytest.raises(StorageError, match="world-writable"):
        URLSeen(path)
    assert segments_of(default_bloom_name(path)) == []


def test_new_data_dir_is_private(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b"
    with URLSeen(path, capacity=100, error_rate=0.01):
        pass
    assert stat.S_IMODE(path.stat().st_mode) == 0o700


@pytest.mark.parametrize("damage", ["whole file", "header", "pages"])
def test_corrupt_log(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "seen"
    with URLSeen(path, capacity=1000, error_rate=1e-6) as seen:
        seen.add_many(urls(30_000))
    data = path / "data.mdb"
    rng = random.Random(5)
    size = data.stat().st_size
    with open(data, "r+b") as f:
        if damage == "whole file":
            f.write(rng.randbytes(size))
        elif damage == "header":
            f.write(rng.randbytes(100))
        else:  # the B-tree pages after the two meta pages
            f.seek(8192)
            f.write(rng.randbytes(min(100_000, size - 8192)))
    (path / SNAPSHOT_NAME).unlink()  # so that opening reads the pages (a rebuild)
    with pytest.raises(StorageError) as info:
        URLSeen(path, capacity=1000, error_rate=1e-6)
    assert not isinstance(info.value, lmdb.Error)
    assert str(path) in str(info.value)
    assert segments_of(default_bloom_name(path)) == []
    # and the dir is not left locked: the same error again, not "in use"
    with pytest.raises(StorageError) as again:
        URLSeen(path, capacity=1000, error_rate=1e-6)
    assert "in use" not in str(again.value)


def test_garbage_data_mdb(tmp_path: Path) -> None:
    path = tmp_path / "seen"
    path.mkdir(mode=0o700)
    (path / "data.mdb").write_bytes(random.Random(6).randbytes(64 * 1024))
    with pytest.raises(StorageError, match="corrupt") as info:
        URLSeen(path)
    assert not isinstance(info.value, lmdb.Error)


def test_canonicalisation_version_mismatch(tmp_path: Path) -> None:
    path = tmp_path / "seen"
    with URLSeen(path, capacity=1000, error_rate=1e-6) as seen:
        seen.add("http://example.com/?b=1&a=2")
    with pytest.raises(VersionMismatch, match="canon") as info:
        URLSeen(path, capacity=1000, error_rate=1e-6, rules=CanonicalRules(sort_query=False))
    assert isinstance(info.value, StorageError)
    with URLSeen(path, capacity=1000, error_rate=1e-6) as seen:  # the dir is unharmed
        assert len(seen) == 1 and "http://example.com/?a=2&b=1" in seen


def test_second_opener_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "seen"
    with URLSeen(path, capacity=1000, error_rate=1e-6) as first:
        first.add("http://example.com/")
        with pytest.raises(StorageError, match="in use"):
            URLSeen(path, capacity=1000, error_rate=1e-6)
        assert first.add("http://example.com/2") is True  # the refused opener did not disturb the first
        assert "http://example.com/" in first
    with URLSeen(path, capacity=1000, error_rate=1e-6) as second:
        assert len(second) == 2


def test_close_is_idempotent(tmp_path: Path) -> None:
    seen = URLSeen(tmp_path / "seen", capacity=100, error_rate=0.01)
    seen.add("http://example.com/")
    seen.close()
    seen.close()
    with pytest.raises(StorageError, match="closed"):
        seen.add("http://example.com/x")


# -- the log: the same-transaction hook (the log itself: tests/test_fplog.py) ------------------------------


def test_also_runs_in_the_same_transaction_with_exactly_the_new_fingerprints(tmp_path: Path) -> None:
    calls: list[list[bytes]] = []
    with URLSeen(tmp_path / "seen", capacity=1000, error_rate=1e-6) as seen:
        queue = seen.log.open_db(b"test_queue")

        def enqueue(txn: lmdb.Transaction, new: list[bytes]) -> None:
            calls.append(list(new))
            # inside the seen-test's write transaction: the new fingerprints are not yet known to
            # anyone (they become known when it commits, checked below)
            assert not any(seen.log.read(lambda other: seen.log.known(other, new)))
            for fp in new:
                txn.put(fp, b"queued", db=queue)

        old = [fingerprint(canonicalize(u)) for u in urls(5)]
        seen.add_fingerprints(old)
        fresh = [fingerprint(canonicalize(u)) for u in urls(5, start=5)]
        batch = [old[0], fresh[0], fresh[1], fresh[0], old[1], fresh[2]]
        assert seen.add_fingerprints(batch, also=enqueue) == [False, True, True, False, False, True]
        assert len(calls) == 1 and sorted(calls[0]) == sorted(fresh[:3])
        queued = seen.log.read(lambda txn: [k for k, _ in txn.cursor(db=queue)])
        assert sorted(queued) == sorted(fresh[:3])

        calls.clear()
        assert seen.add_fingerprints(fresh[:3], also=enqueue) == [False] * 3
        assert calls == [[]]

        def fail(txn: lmdb.Transaction, new: list[bytes]) -> None:
            txn.put(b"x", b"y", db=queue)
            raise RuntimeError("enqueue failed")

        with pytest.raises(RuntimeError, match="enqueue failed"):
            seen.add_fingerprints(fresh[3:], also=fail)
        # the transaction was aborted: neither the queue entry nor the seen-test's record happened
        assert seen.log.read(lambda txn: txn.get(b"x", db=queue)) is None
        assert seen.add_fingerprints(fresh[3:]) == [True, True]


def test_truncated_log_is_refused_not_silently_restarted(tmp_path: Path) -> None:
    with URLSeen(tmp_path / "seen", capacity=1000) as seen:
        seen.add("http://example.com/")
    (tmp_path / "seen" / "data.mdb").write_bytes(b"")
    with pytest.raises(StorageError, match="truncated"):
        URLSeen(tmp_path / "seen", capacity=1000)


# -- a failed batch leaves no trace; the log refuses to lose a batch; "in use" names the holder -------------


def _fail_to_enqueue(txn: lmdb.Transaction, new: list[bytes]) -> None:
    raise RuntimeError("enqueue failed")


@pytest.mark.parametrize("exact", [True, False], ids=["exact", "probabilistic"])
def test_a_failed_transaction_leaves_the_url_new_also_after_a_reopen(tmp_path: Path, exact: bool) -> None:
    """The Bloom bits of a batch are set only once the log has it: a failed batch is not seen, now or later.

    Before, probabilistic mode set the bits first, so after an aborted transaction the URL read as seen
    (and the clean close saved that filter as a valid snapshot): never recorded, never crawled.
    """
    path = tmp_path / "seen"
    url, other = "http://example.com/lost", "http://example.com/kept"
    fp = fingerprint(canonicalize(url))
    with URLSeen(path, capacity=1000, error_rate=1e-6, exact=exact) as seen:
        assert seen.add(other) is True
        with pytest.raises(RuntimeError, match="enqueue failed"):
            seen.add_fingerprints([fp], also=_fail_to_enqueue)
        assert len(seen) == 1 and url not in seen and fp not in seen.bloom
    with URLSeen(path, capacity=1000, error_rate=1e-6, exact=exact) as seen:
        assert "rebuilt_items" not in seen.stats()  # the snapshot was valid: it never held the lost URL
        assert len(seen) == 1 and url not in seen and other in seen
        assert seen.add(url) is True
        assert len(seen) == 2
    with URLSeen(path, capacity=1000, error_rate=1e-6, exact=exact) as seen:
        assert len(seen) == 2 and seen.add_many([url, other]) == [False, False]


def test_a_failed_transaction_in_probabilistic_mode_can_be_retried(tmp_path: Path) -> None:
    batch = [fingerprint(canonicalize(u)) for u in urls(300)]
    with URLSeen(tmp_path / "seen", capacity=1000, error_rate=1e-9, exact=False) as seen:
        assert seen.add_fingerprints(batch[:100]) == [True] * 100
        with pytest.raises(RuntimeError):
            seen.add_fingerprints(batch, also=_fail_to_enqueue)
        assert seen.add_fingerprints(batch) == [False] * 100 + [True] * 200  # the retry finds the 200 new
        assert len(seen) == 300


def test_record_refuses_a_batch_key_that_is_not_after_the_last(tmp_path: Path) -> None:
    """py-lmdb's put(append=True) returns False for such a key and writes nothing: that must not pass silently."""
    rng = random.Random(12)
    first, second = [rng.randbytes(16) for _ in range(10)], [rng.randbytes(16) for _ in range(10)]
    with FingerprintLog(tmp_path / "log", version_tag="test") as log:
        log.write(lambda txn: log.record(txn, first))  # recorded, but `committed` is never called: the
        with pytest.raises(StorageError, match=r"batch 0 .*not after"):  # next batch would reuse its key
            log.write(lambda txn: log.record(txn, second))
    with FingerprintLog(tmp_path / "log", version_tag="test") as log:
        assert log.read(lambda txn: log.known(txn, first + second)) == [True] * 10 + [False] * 10


def _hold_the_data_dir(path: str, conn: object) -> None:
    with URLSeen(path, capacity=1000):
        conn.send("holding")  # type: ignore[attr-defined]
        conn.recv()  # type: ignore[attr-defined]


def test_in_use_names_the_process_that_holds_the_data_dir(tmp_path: Path) -> None:
    path = tmp_path / "seen"
    parent, child = SPAWN.Pipe()
    process = SPAWN.Process(target=_hold_the_data_dir, args=(str(path), child), daemon=True)
    process.start()
    try:
        assert parent.poll(60) and parent.recv() == "holding"
        with pytest.raises(StorageError) as info:
            URLSeen(path, capacity=1000)
        assert str(info.value) == f"data dir {path} is in use by another frontier process (pid {process.pid})"
    finally:
        parent.send("release")
        process.join(30)
    assert process.exitcode == 0
    with URLSeen(path, capacity=1000) as seen:  # released: the next opener takes it
        assert len(seen) == 0
