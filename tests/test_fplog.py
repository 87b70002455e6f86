"""The fingerprint log, an LSM tree of sorted runs in LMDB: exact answers against a Python set over long
random streams with many levels, merges under way, reopens and deletes; maintenance that does bounded
work per call; a real SIGKILL of a child process while it adds and merges (also inside a merge step);
migration of format 1 and 2 data dirs (also an interrupted one) and refusal of an unknown format; map
growth; a full disk; the sorted-run primitives, including fingerprints whose first halves are equal.

Small run, step and chunk sizes give many levels and merges from a few thousand fingerprints.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import lmdb
import numpy as np
import pytest

from frontier.errors import ConfigError, DiskFull, VersionMismatch
from frontier.seen import fplog, fpruns
from frontier.seen.fplog import MERGE_PACE, FingerprintLog
from frontier.seen.fpset import FingerprintSet

SPAWN = multiprocessing.get_context("spawn")
SMALL = {"run_size": 60, "fanout": 3, "step_entries": 20, "chunk_entries": 7}  # levels and merges galore


def fps_of(rng: random.Random, n: int) -> list[bytes]:
    return [rng.randbytes(16) for _ in range(n)]


def twins(rng: random.Random, fps: list[bytes]) -> list[bytes]:
    """New fingerprints whose first halves equal those of the given ones (ties in the sort order)."""
    return [fp[:8] + rng.randbytes(8) for fp in fps]


def add(log: FingerprintLog, fps: list[bytes]) -> list[bytes]:
    """What URLSeen does for a batch: maintenance first, then the check and the record in one transaction."""
    log.maintain()
    new = log.write(lambda txn: [fp for fp, k in zip(fps, log.known(txn, fps)) if not k])
    new = list(dict.fromkeys(new))
    log.write(lambda txn: log.record(txn, new))
    log.committed(new)
    return new


def stored(log: FingerprintLog) -> list[bytes]:
    return [fp for chunk in log.iter_chunks(size=97) for fp in chunk]


# -- the contract: exactly a set --------------------------------------------------------------------------


@pytest.mark.parametrize("options", [
    SMALL,
    {**SMALL, "cached_levels": 0},  # every lookup reads LMDB
    {**SMALL, "cached_levels": 9},  # every run also in memory
    {**SMALL, "cached_levels": 0, "filter_bits": 0},  # probabilistic mode's log: no run filters either
    {**SMALL, "cached_levels": 0, "filter_bits": 0, "upper_fanout": 4,  # probabilistic mode's: lazier merges
     "pending_set": False},  # above level 0, the pending fingerprints as blobs
    {"run_size": 200, "fanout": 2, "step_entries": 50, "chunk_entries": 255},
], ids=["small", "uncached", "all-cached", "unfiltered", "lazy", "fanout-2"])
def test_answers_match_a_set_across_levels_merges_reopens_and_deletes(tmp_path: Path, options: dict) -> None:
    rng = random.Random(1)
    reference: set[bytes] = set()
    pool: list[bytes] = []
    levels = merging = 0
    log = FingerprintLog(tmp_path / "log", version_tag="test", **options)
    try:
        for step in range(450):
            batch = fps_of(rng, rng.randrange(0, 40))
            if pool:
                batch += [rng.choice(pool) for _ in range(rng.randrange(0, 40))]
                batch += twins(rng, [rng.choice(pool) for _ in range(3)])
            rng.shuffle(batch)
            assert log.read(lambda txn: log.known(txn, batch)) == [fp in reference for fp in batch], step
            new = add(log, batch)
            assert set(new) == set(batch) - reference
            reference.update(new)
            pool.extend(new)
            assert len(log) == len(reference)
            stats = log.stats()
            levels, merging = max(levels, stats["levels"]), max(merging, stats["merges_running"])
            if step % 89 == 88:  # reopen, merges under way or not
                log.close()
                log = FingerprintLog(tmp_path / "log", version_tag="test", **options)
            if step % 61 == 60:
                gone = rng.sample(pool, 15) + fps_of(rng, 2)
                removal = log.write(lambda txn: log.discard(txn, gone))
                log.discarded(removal)
                assert sorted(removal.removed) == sorted(set(gone) & reference)
                reference.difference_update(gone)
                pool = [fp for fp in pool if fp in reference]
                assert len(log) == len(reference)
        assert levels >= 4 and merging >= 1, (levels, merging)
        everything = stored(log)
        assert len(everything) == len(reference) and set(everything) == reference
        strangers = fps_of(rng, 500) + twins(rng, pool[:500])
        assert not any(log.read(lambda txn: log.known(txn, strangers)))
        assert all(log.read(lambda txn: log.known(txn, pool)))
    finally:
        log.close()


def test_a_log_reopened_with_other_constants_keeps_every_answer(tmp_path: Path) -> None:
    """A data dir written with one fanout (the default was 4 before 16), upper fanout, cached levels and pending
    structure goes on under others, merges under way included: the runs keep their levels, and the layout holds
    no constant."""
    rng = random.Random(5)
    reference: set[bytes] = set()
    pool: list[bytes] = []
    for fanout, upper, cached, pending_set in ((3, 3, 2, True), (8, 2, 0, False), (2, 6, 1, True), (5, 3, 3, False)):
        with FingerprintLog(tmp_path / "log", version_tag="test", **{**SMALL, "fanout": fanout},
                            upper_fanout=upper, cached_levels=cached, pending_set=pending_set) as log:
            assert len(log) == len(reference)
            merged_before = log.stats()["merges_done"]
            for step in range(120):
                batch = fps_of(rng, rng.randrange(0, 30)) + [rng.choice(pool) for _ in range(5) if pool]
                assert log.read(lambda txn: log.known(txn, batch)) == [fp in reference for fp in batch], (fanout, step)
                new = add(log, batch)
                reference.update(new)
                pool.extend(new)
            assert log.stats()["merges_done"] > merged_before, fanout
            assert set(stored(log)) == reference


def test_one_by_one_and_batch_lookups_agree(tmp_path: Path) -> None:
    """Fewer than BATCH_LOOKUP probes go one by one through LMDB; more go through numpy on the cached runs."""
    rng = random.Random(2)
    with FingerprintLog(tmp_path / "log", version_tag="test", **SMALL) as log:
        kept = []
        for _ in range(100):
            kept += add(log, fps_of(rng, 30))
        probes = kept[::7] + fps_of(rng, 200) + twins(rng, kept[::11])
        want = log.read(lambda txn: log.known(txn, probes))
        assert sum(want) == len(kept[::7])
        small = [log.read(lambda txn: log.known(txn, probes[i:i + 3])) for i in range(0, len(probes), 3)]
        assert [k for part in small for k in part] == want


def test_discarded_fingerprints_are_new_again_and_stay_gone_after_a_reopen(tmp_path: Path) -> None:
    rng = random.Random(3)
    path = tmp_path / "log"
    with FingerprintLog(path, version_tag="test", **SMALL) as log:
        old = []
        for _ in range(60):
            old += add(log, fps_of(rng, 25))
        gone = old[::5]
        removal = log.write(lambda txn: log.discard(txn, gone + fps_of(rng, 3)))
        log.discarded(removal)
        assert sorted(removal.removed) == sorted(gone)
        assert log.read(lambda txn: log.known(txn, gone)) == [False] * len(gone)
        assert len(log) == len(old) - len(gone)
    with FingerprintLog(path, version_tag="test", **SMALL) as log:
        assert log.stats()["filter_bytes"] > 0  # the runs' filters, read back from their segments
        assert len(log) == len(old) - len(gone)
        assert not any(log.read(lambda txn: log.known(txn, gone)))
        assert add(log, gone[:10]) == gone[:10]  # new again, recorded again
        assert len(log) == len(old) - len(gone) + 10
        assert sorted(stored(log)) == sorted(set(old) - set(gone[10:]))


def test_a_discard_whose_transaction_fails_changes_nothing(tmp_path: Path) -> None:
    rng = random.Random(4)
    with FingerprintLog(tmp_path / "log", version_tag="test", **SMALL) as log:
        kept = []
        for _ in range(30):
            kept += add(log, fps_of(rng, 25))

        def fail(txn: lmdb.Transaction) -> None:
            log.discard(txn, kept[:100])
            raise RuntimeError("the caller's transaction failed")

        with pytest.raises(RuntimeError):
            log.write(fail)
        assert all(log.read(lambda txn: log.known(txn, kept))) and len(log) == len(kept)


# -- bounded maintenance --------------------------------------------------------------------------------


def test_maintenance_work_per_call_is_bounded_and_merges_keep_up(tmp_path: Path) -> None:
    """No call merges a whole run: each merge step consumes about what the batches since the last call
    earned (or the minimal step), so the largest step stays far below the largest merge."""
    rng = random.Random(5)
    options = {"run_size": 1000, "fanout": 4, "step_entries": 300}
    batch = 100
    with FingerprintLog(tmp_path / "log", version_tag="test", **options) as log:
        for _ in range(400):  # 40,000 fingerprints: levels of 1,000, 4,000 and 16,000
            add(log, fps_of(rng, batch))
        stats = log.stats()
        assert stats["levels"] >= 3 and stats["merges_done"] >= 10
        assert stats["largest_step"] <= 2 * (options["step_entries"] + MERGE_PACE * batch) < 16_000 // 4
        # merges keep up: at most fanout + fanout/2 runs per level, plus the merges' inputs and outputs
        assert stats["runs"] <= 3 * (options["fanout"] + 2) + 1


@pytest.mark.parametrize("batch", [100, 1000])  # 1000: a flush due at every call
def test_one_maintenance_call_does_a_flush_or_one_merge_step_never_more(tmp_path: Path, batch: int) -> None:
    """The lumps of maintenance never land in one call (at 10^8, a flush and two merges' steps in one batch
    made the longest add_many): each call flushes, or steps the one merge with the most credit. Merges still
    keep up, also when every call could flush."""
    rng = random.Random(6)
    options = {"run_size": 1000, "fanout": 4, "step_entries": 300}
    with FingerprintLog(tmp_path / "log", version_tag="test", **options) as log:
        flush_calls = step_calls = 0
        for _ in range(40_000 // batch):  # levels of 1,000, 4,000 and 16,000: up to three merges at once
            before = log.stats()
            running = before["merges_running"]
            add(log, fps_of(rng, batch))
            after = log.stats()
            flushed, steps = after["flushes"] - before["flushes"], after["merge_steps"] - before["merge_steps"]
            assert flushed + steps <= 1, (flushed, steps, running)
            flush_calls += flushed
            step_calls += steps
        stats = log.stats()
        assert flush_calls >= 15 and step_calls >= 15 and stats["levels"] >= 3, stats
        assert stats["runs"] <= 3 * (options["fanout"] + 2) + 1
        assert stats["pending"] <= options["run_size"] + 2 * batch


def test_upper_fanout_merges_the_levels_above_0_lazily(tmp_path: Path) -> None:
    """Level-0 runs merge `fanout` at a time, the runs above `upper_fanout` at a time: with 6, five level-1 runs
    wait (one level less, each fingerprint written once less), with the default (the fanout) they merge on."""
    rng = random.Random(8)
    options = {"run_size": 100, "fanout": 2, "step_entries": 50, "chunk_entries": 7}
    levels = {}
    for upper in (None, 6):
        with FingerprintLog(tmp_path / f"log-{upper}", version_tag="test", **options, upper_fanout=upper) as log:
            for _ in range(50):  # 1,000 fingerprints: 5 runs of level 1 (200 each)
                add(log, fps_of(random.Random(rng.random()), 20))
            levels[upper] = log.stats()["levels"]
            assert log.stats()["entries_merged"] < (1_000 * 2 if upper else 1_000 * 3)
    assert levels == {None: 3, 6: 2}, levels


# -- crash safety: real SIGKILLs ----------------------------------------------------------------------------


ADDER_OPTIONS = {"run_size": 500, "fanout": 3, "step_entries": 100, "chunk_entries": 31}
LOG_KINDS = {  # URLSeen's log in each mode (seen.py), small
    "exact": ADDER_OPTIONS,
    "probabilistic": {**ADDER_OPTIONS, "filter_bits": 0, "cached_levels": 0, "upper_fanout": 4, "pending_set": False},
}


def _adder(path: str, seed: int, conn, kill_in_merge_step: int, options: dict) -> None:
    """Add seeded batches of 50 forever, reporting each batch index once its add returned. With
    kill_in_merge_step = k, SIGKILL itself inside the k-th merge step's transaction, halfway through
    writing the step's output."""
    if kill_in_merge_step:
        real_step, real_put = FingerprintLog._merge_step, fpruns.put_chunks
        steps = [0]

        def put_half_then_die(txn, db, run_id, blob, chunk):  # type: ignore[no-untyped-def]
            real_put(txn, db, run_id, blob[:len(blob) // 32 * 16], chunk)
            os.kill(os.getpid(), signal.SIGKILL)

        def merge_step(self, *args):  # type: ignore[no-untyped-def]
            steps[0] += 1
            if steps[0] == kill_in_merge_step:
                fpruns.put_chunks = put_half_then_die
            return real_step(self, *args)

        FingerprintLog._merge_step = merge_step  # type: ignore[method-assign]
    rng = random.Random(seed)
    with FingerprintLog(path, version_tag="test", **options) as log:
        index = 0
        while True:
            add(log, fps_of(rng, 50))
            conn.send(index)
            index += 1


def _acked(conn) -> int:
    """The last index a (dead or stopped) child reported."""
    last = -1
    while conn.poll(0.01):
        last = conn.recv()
    return last


@pytest.mark.parametrize("kind", LOG_KINDS)
@pytest.mark.parametrize("how", ["random moment", "inside a merge step"])
def test_sigkill_while_adding_and_merging_loses_nothing(tmp_path: Path, how: str, kind: str) -> None:
    options = LOG_KINDS[kind]
    path = tmp_path / "log"
    seed = 6
    all_returned: list[bytes] = []
    for round_ in range(3):  # three kills in a row on the same log
        parent, child = SPAWN.Pipe()
        kill_step = 7 + 5 * round_ if how == "inside a merge step" else 0
        process = SPAWN.Process(target=_adder, args=(str(path), seed + round_, child, kill_step, options), daemon=True)
        process.start()
        acked = -1
        try:
            if kill_step:
                process.join(120)
                assert process.exitcode == -signal.SIGKILL, "the child never reached the merge step"
            else:
                while acked < 20 + 9 * round_:  # one report at a time: a drain could chase the child for good
                    assert parent.poll(60), "the child stopped reporting"
                    acked = parent.recv()
                os.kill(process.pid, signal.SIGKILL)
                process.join(30)
            acked = max(acked, _acked(parent))
        finally:
            if process.is_alive():
                process.kill()
                process.join(30)
        assert acked >= 0 and process.exitcode == -signal.SIGKILL
        rng = random.Random(seed + round_)
        sent = [fps_of(rng, 50) for _ in range(acked + 2)]
        all_returned += [fp for batch in sent[:acked + 1] for fp in batch]
        in_flight = sent[acked + 1]  # being added at the kill: committed or not, all or nothing
        with FingerprintLog(path, version_tag="test", **options) as log:
            assert all(log.read(lambda txn: log.known(txn, all_returned))), f"round {round_}: lost fingerprints"
            committed = log.read(lambda txn: log.known(txn, in_flight))
            assert all(committed) or not any(committed)
            everything = stored(log)
            assert len(everything) == len(set(everything)) == len(log)
            assert len(log) == len(all_returned) + len(in_flight) * all(committed)
            assert not any(log.read(lambda txn: log.known(txn, fps_of(random.Random(99), 300))))
            # carry on: the interrupted merges resume from their boundaries and finish
            for _ in range(15):
                all_returned += add(log, fps_of(rng, 50))
            all_returned += in_flight if all(committed) else []
            assert all(log.read(lambda txn: log.known(txn, all_returned)))
            assert len(stored(log)) == len(log) == len(all_returned)


# -- formats: migration of 1 and 2, refusal of others ---------------------------------------------------------


def write_old_format(path: Path, version: bytes, tree: list[bytes], pending: list[list[bytes]]) -> None:
    """A data dir as frontier wrote it before format 3: `seen` (fingerprint -> b"", a B-tree), from format 2
    on `pending` (batch u64 BE -> fingerprints), and the versions in `meta`."""
    path.mkdir(mode=0o700)
    env = lmdb.open(str(path), map_size=64 << 20, max_dbs=16, subdir=True)
    try:
        with env.begin(write=True) as txn:
            meta, seen = env.open_db(b"meta", txn=txn), env.open_db(b"seen", txn=txn)
            txn.put(b"format", version, db=meta)
            txn.put(b"canonical", b"test", db=meta)
            txn.put(b"bloom_snapshot", b"{}", db=meta)
            txn.cursor(db=seen).putmulti([(fp, b"") for fp in sorted(tree)])
            if pending:
                queue = env.open_db(b"pending", txn=txn)
                for i, batch in enumerate(pending):
                    txn.put(i.to_bytes(8, "big"), b"".join(batch), db=queue)
    finally:
        env.close()


@pytest.mark.parametrize("version", [b"1", b"2"])
def test_an_old_format_is_migrated_on_open(tmp_path: Path, version: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fplog, "MIGRATE_STEP", 1000)  # several steps
    rng = random.Random(7)
    tree = fps_of(rng, 4321) + twins(rng, fps_of(rng, 50))
    pending = [fps_of(rng, 40) for _ in range(5)] if version == b"2" else []
    path = tmp_path / "old"
    write_old_format(path, version, tree, pending)
    everything = tree + [fp for batch in pending for fp in batch]
    with FingerprintLog(path, version_tag="test", **SMALL) as log:
        assert len(log) == len(everything)
        assert all(log.read(lambda txn: log.known(txn, everything)))
        assert sorted(stored(log)) == sorted(everything)
        new = add(log, fps_of(rng, 100) + everything[:50])
        assert len(new) == 100
    env = lmdb.open(str(path), max_dbs=16, subdir=True, readonly=True, lock=False)
    try:
        with env.begin() as txn:
            assert txn.get(b"seen") is None  # the B-tree is gone
            assert txn.get(b"format", db=env.open_db(b"meta", txn=txn)) == fplog.FORMAT_VERSION
            assert txn.get(b"bloom_snapshot", db=env.open_db(b"meta", txn=txn)) == b"{}"  # other meta kept
    finally:
        env.close()
    with FingerprintLog(path, version_tag="test", **SMALL) as log:
        assert len(log) == len(everything) + 100


def test_an_interrupted_migration_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fplog, "MIGRATE_STEP", 500)
    rng = random.Random(8)
    tree = fps_of(rng, 2600)
    path = tmp_path / "old"
    write_old_format(path, b"2", tree, [fps_of(rng, 30)])
    real = fpruns.put_chunks
    calls = []

    def failing(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) == 3:
            raise OSError("interrupted")
        return real(*args, **kwargs)

    monkeypatch.setattr(fpruns, "put_chunks", failing)
    with pytest.raises(OSError, match="interrupted"):
        FingerprintLog(path, version_tag="test")
    env = lmdb.open(str(path), max_dbs=16, subdir=True, readonly=True, lock=False)
    try:
        with env.begin() as txn:  # two steps committed; the format is current already, so older code refuses
            assert txn.get(b"format", db=env.open_db(b"meta", txn=txn)) == fplog.FORMAT_VERSION
            assert txn.get(b"seen") is not None
    finally:
        env.close()
    monkeypatch.setattr(fpruns, "put_chunks", real)
    with FingerprintLog(path, version_tag="test") as log:
        assert len(log) == len(tree) + 30
        everything = stored(log)
        assert len(everything) == len(set(everything)) == len(tree) + 30
        assert all(log.read(lambda txn: log.known(txn, tree)))


def test_an_unknown_format_is_refused_with_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "future"
    write_old_format(path, b"9", fps_of(random.Random(9), 10), [])
    with pytest.raises(VersionMismatch, match=r"format version '9'.*use the frontier version that wrote it, or a new"):
        FingerprintLog(path, version_tag="test")


@pytest.mark.parametrize("option", [{"run_size": 0}, {"fanout": 1}, {"upper_fanout": 1}, {"step_entries": 0},
                                    {"cached_levels": -1}])
def test_bad_sizes_are_config_errors_naming_the_option(tmp_path: Path, option: dict) -> None:
    with pytest.raises(ConfigError, match=next(iter(option))):
        FingerprintLog(tmp_path / "log", version_tag="test", **option)
    assert not (tmp_path / "log").exists()


def test_the_canonical_version_is_checked_too(tmp_path: Path) -> None:
    with FingerprintLog(tmp_path / "log", version_tag="a") as log:
        add(log, fps_of(random.Random(10), 5))
    with pytest.raises(VersionMismatch, match="canonical version 'a'"):
        FingerprintLog(tmp_path / "log", version_tag="b")


# -- storage ------------------------------------------------------------------------------------------


def test_the_map_grows_instead_of_failing(tmp_path: Path) -> None:
    rng = random.Random(11)
    with FingerprintLog(tmp_path / "log", version_tag="test", map_size=64 * 1024, run_size=5000, fanout=4,
                        step_entries=2000) as log:
        kept = []
        for _ in range(60):
            kept += add(log, fps_of(rng, 2000))
        assert len(log) == len(kept) == 120_000
        assert log.stats()["merges_done"] >= 1
        assert all(log.read(lambda txn: log.known(txn, kept)))
        assert log.env.info()["map_size"] > 64 * 1024
        assert sum(len(c) for c in log.iter_chunks(size=30_000)) == 120_000


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2M", "tmpfs", str(mount)], check=True,
                       capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_is_disk_full_and_what_returned_is_kept(small_disk: Path) -> None:
    rng = random.Random(12)
    path = small_disk / "log"
    returned: list[bytes] = []
    with FingerprintLog(path, version_tag="test", map_size=32 << 20, run_size=2000, step_entries=1000) as log:
        with pytest.raises(DiskFull, match="disk is full") as info:
            for _ in range(10_000):
                returned += add(log, fps_of(rng, 500))
        assert not isinstance(info.value, lmdb.Error)
    subprocess.run(["mount", "-o", "remount,size=64M", str(small_disk)], check=True)
    with FingerprintLog(path, version_tag="test", run_size=2000, step_entries=1000) as log:
        assert all(log.read(lambda txn: log.known(txn, returned)))
        add(log, fps_of(rng, 5000))  # and it carries on
        assert len(stored(log)) == len(log)


# -- the sorted-run primitives --------------------------------------------------------------------------------


def test_sorted_unique_orders_equal_first_halves_and_drops_duplicates() -> None:
    rng = random.Random(13)
    base = fps_of(rng, 300)
    fps = base + twins(rng, base[:100]) + base[:50]  # ties on the first half, and duplicates
    rng.shuffle(fps)
    blob, hi = fpruns.sorted_unique([b"".join(fps)], presorted=False)
    assert fpruns.split(blob) == sorted(set(fps))
    assert hi.tolist() == [int.from_bytes(fp[:8], "big") for fp in sorted(set(fps))]
    parts = [b"".join(sorted(set(fps[i::3]))) for i in range(3)]  # presorted parts, overlapping
    assert fpruns.split(fpruns.sorted_unique(parts, presorted=True)[0]) == sorted(set(fps))


def runs_env(path: Path, runs: dict[int, list[bytes]], chunk: int) -> tuple[lmdb.Environment, "lmdb._Database"]:
    """An LMDB environment whose `runs` database holds each run (id -> sorted fingerprints), `chunk` a chunk."""
    env = lmdb.open(str(path), map_size=64 << 20, max_dbs=4)
    db = env.open_db(b"runs")
    with env.begin(write=True) as txn:
        for run_id, fps in runs.items():
            fpruns.put_chunks(txn, db, run_id, b"".join(fps), chunk)
    return env, db


def test_a_run_in_lmdb_contains_removes_and_lists(tmp_path: Path) -> None:
    rng = random.Random(14)
    fps = sorted(set(fps_of(rng, 500) + twins(rng, fps_of(rng, 20))))
    env, db = runs_env(tmp_path / "env", {3: fps, 9: fps[:10]}, 7)  # run 9: another run beside it
    try:
        absent = fps_of(rng, 200) + twins(rng, fps[::9])
        prefix = fpruns.run_prefix(3)
        with env.begin() as txn:
            cursor = txn.cursor(db=db)
            assert all(fpruns.contains(cursor, prefix, fp) for fp in fps)
            assert not any(fpruns.contains(cursor, prefix, fp) for fp in absent)
            assert [fp for _, v in fpruns.chunks(cursor, 3) for fp in fpruns.split(v)] == fps
        gone = fps[:7] + fps[20:23] + fps[-1:]  # a whole chunk, a middle, the last (an upper bound)
        with env.begin(write=True) as txn:
            assert sorted(fpruns.remove(txn, db, 3, gone + absent[:5])) == sorted(gone)
        with env.begin() as txn:
            cursor = txn.cursor(db=db)
            kept = [fp for fp in fps if fp not in gone]
            assert [fp for _, v in fpruns.chunks(cursor, 3) for fp in fpruns.split(v)] == kept
            assert all(fpruns.contains(cursor, prefix, fp) for fp in kept)
            assert not any(fpruns.contains(cursor, prefix, fp) for fp in gone)
            assert all(fpruns.contains(cursor, fpruns.run_prefix(9), fp) for fp in fps[:10])
    finally:
        env.close()


@pytest.mark.parametrize("density", [1, 3, 40], ids=["every entry", "one in 3", "one in 40"])
def test_a_forward_pass_answers_as_one_search_per_probe(tmp_path: Path, density: int) -> None:
    """`contains_sorted` (a sweep's merge-join) against `contains` on dense and sparse probes: held ones,
    strangers between and beyond the run's ends, twins that share a first half, and another run after it."""
    rng = random.Random(density)
    fps = sorted(set(fps_of(rng, 2000) + twins(rng, fps_of(rng, 30))))
    env, db = runs_env(tmp_path / "env", {3: fps, 4: sorted(fps_of(rng, 50))}, 11)  # run 4: a cursor may step in
    try:
        probes = sorted(set(fps[::density] + fps_of(rng, 300) + twins(rng, fps[::17]) + [b"\xff" * 16, b"\x00" * 16]))
        with env.begin() as txn:
            cursor = txn.cursor(db=db)
            one_by_one = [fpruns.contains(cursor, fpruns.run_prefix(3), fp) for fp in probes]
            assert fpruns.contains_sorted(txn.cursor(db=db), fpruns.run_prefix(3), probes) == one_by_one
            assert sum(one_by_one) == len(fps[::density]) + sum(fp in set(fps) for fp in probes if fp not in fps[::density])
            assert fpruns.contains_sorted(txn.cursor(db=db), fpruns.run_prefix(5), probes) == [False] * len(probes)
            assert fpruns.contains_sorted(txn.cursor(db=db), fpruns.run_prefix(3), []) == []
    finally:
        env.close()


def test_run_filters_have_no_false_negatives_and_segments_merge(tmp_path: Path) -> None:
    rng = random.Random(16)
    fps = sorted(fps_of(rng, 3000))
    blocks = fpruns.RunFilter.blocks_for(len(fps), 8)
    env = lmdb.open(str(tmp_path / "env"), map_size=64 << 20, max_dbs=4)
    try:
        db = env.open_db(b"filters")
        with env.begin(write=True) as txn:  # steps of 7: several segments start in the same block
            for start in range(0, len(fps), 7):
                fpruns.put_segment(txn, db, 1, *fpruns.filter_segment(blocks, b"".join(fps[start:start + 7])))
        with env.begin() as txn:
            run_filter = fpruns.read_filters(txn, db, {1: blocks})[1]
    finally:
        env.close()
    assert run_filter.may_hold(*fpruns.halves(b"".join(fps))).all()
    assert all(run_filter.may_hold_one(fp) for fp in fps)
    strangers = fps_of(rng, 20_000)
    rate = run_filter.may_hold(*fpruns.halves(b"".join(strangers))).mean()
    assert 0 < rate < 0.06
    assert [run_filter.may_hold_one(fp) for fp in strangers[:2000]] == \
        run_filter.may_hold(*fpruns.halves(b"".join(strangers[:2000]))).tolist()


def test_pairs_find_and_remove() -> None:
    rng = random.Random(15)
    fps = sorted(set(fps_of(rng, 400) + twins(rng, fps_of(rng, 40))))
    pairs = fpruns.Pairs(b"".join(fps[:150]))
    pairs.extend(*fpruns.halves(b"".join(fps[150:])))
    probes = fps[::3] + fps_of(rng, 100) + twins(rng, fps[::13])
    want = np.array([fp in set(fps) for fp in probes])
    got = fpruns.find(pairs, *fpruns.halves(b"".join(probes)))
    assert (got == want).all()
    pairs.remove(*fpruns.halves(b"".join(fps[::2])))
    left = fpruns.find(pairs, *fpruns.halves(b"".join(fps)))
    assert left.tolist() == [i % 2 == 1 for i in range(len(fps))]


def test_pending_blobs_answer_as_a_fingerprint_set() -> None:
    """The probabilistic log's pending fingerprints (the blobs they came in, sorted for a lookup) give a hash
    set's answers: after each addition (the sorted copy is redone), after removals, when empty."""
    rng = random.Random(9)
    blobs, reference = fpruns.PendingBlobs(), FingerprintSet()
    pool: list[bytes] = []
    for step in range(60):
        new = [fp for fp in fps_of(rng, rng.randrange(0, 50)) if fp not in reference]
        assert blobs.add_blob(b"".join(new)) == reference.add_blob(b"".join(new)) == len(new)
        pool.extend(new)
        probe = fps_of(rng, 20) + [rng.choice(pool) for _ in range(20) if pool] + twins(rng, pool[:5])
        assert blobs.contains_blob(b"".join(probe)).tolist() == reference.contains_blob(b"".join(probe)).tolist()
        if step % 7 == 6:
            gone = rng.sample(pool, min(10, len(pool))) + fps_of(rng, 2)
            blobs.difference_update(gone)
            reference.difference_update(gone)
            pool = [fp for fp in pool if fp in reference]
        assert len(blobs) == len(reference) and sorted(blobs) == sorted(reference)
        assert all(fp in blobs for fp in pool[:30]) and b"x" * 16 not in blobs and "a str" not in blobs
    blobs.difference_update(list(blobs))
    assert len(blobs) == 0 and blobs.blob() == b"" and not blobs.contains_blob(b"".join(pool[:3])).any()


# -- the benchmark ---------------------------------------------------------------------------------------------


def test_the_scale_benchmark_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from frontier.bench import scale

    assert scale.main(["--sizes", "20000", "--batch", "5000", "--probes", "2000", "--reference", "1000",
                       "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for mode in ("exact", "probabilistic"):
        for layout in ("standard", "blocked"):
            assert f"| {mode} | {layout} | 2e4 |" in out
    assert "failed" not in out
    assert list(tmp_path.iterdir()) == []  # the data dirs are gone


@pytest.mark.parametrize("blocked", [False, True], ids=["standard", "blocked"])
def test_the_scale_benchmark_partitions_a_filter_past_the_default_limit(blocked: bool) -> None:
    """10^9 URLs at 1e-4 need more than the default 64 partitions (each under 2^28 bits): the benchmark sets
    them as an operator sets dedup.partitions (its first 10^9 run failed with the default)."""
    from frontier.bench import scale
    from frontier.seen.bloom import DEFAULT_PARTITIONS
    from frontier.seen.sizing import partitions_needed

    assert scale.partitions(10**6, blocked) == DEFAULT_PARTITIONS
    many = scale.partitions(10**9, blocked)
    assert many == partitions_needed(10**9, scale.ERROR_RATE, blocked=blocked) > DEFAULT_PARTITIONS


def test_the_scale_benchmark_judges_no_ratio_of_a_negative_rest() -> None:
    """"rest" (a run minus the filter alone) can read below 0 at 10^6 on a noisy machine: no ratio, no "met"."""
    from frontier.bench.scale import _ratio

    assert _ratio([0.20, -0.01]) == "0.20 / -0.01: no ratio (a value at or below 0 is noise: rerun)"
    assert _ratio([0.31, 0.16]).endswith("= 1.94 (goal <= 1.25: missed)")
    assert _ratio([0.12, 0.11]).endswith("= 1.09 (goal <= 1.25: met)")
