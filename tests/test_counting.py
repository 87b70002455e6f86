"""CountingBloom: the set contract with discard, saturating counters that survive a snapshot and a restart,
deletion that never makes another item a false negative (Hypothesis), atomic check-and-add across two real
processes, a SIGKILLed lock holder that wedges nobody, and no /dev/shm segment left behind."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import random
import signal
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from frontier import ConfigError, FrontierError, StorageError, canonicalize, fingerprint
from frontier.seen.bloom import LOCK_BASE
from frontier.seen.counting import SATURATED, CountingBloom
from frontier.seen.shm import SHM_DIR

SPAWN = multiprocessing.get_context("spawn")


def fps(n: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.randbytes(16) for _ in range(n)]


def counters(bloom: CountingBloom) -> np.ndarray:
    u8 = bloom._u8
    return np.stack([u8 & 0xF, u8 >> 4], axis=1).ravel()  # counter j at index j


def exists(name: str) -> bool:
    return os.path.exists(os.path.join(SHM_DIR, name))


# -- the set contract -------------------------------------------------------------------------------


def test_add_discard_contains_len() -> None:
    a, b, c, d = fps(4, seed=1)
    with CountingBloom.create(capacity=100_000, error_rate=1e-9, partitions=4) as bloom:  # p tiny: exact flags
        name = bloom.name
        assert len(bloom) == 0 and a not in bloom
        assert bloom.add(a) is True and bloom.add(a) is False
        assert bloom.add_many([b, c, b, a]) == [True, True, False, False]
        assert len(bloom) == 3 and bloom.contains_many([a, b, c, d]) == [True, True, True, False]

        assert bloom.discard(b) is True
        assert b not in bloom and len(bloom) == 2
        assert bloom.discard(b) is False  # certainly absent now: nothing changes
        assert bloom.discard_many([c, c, d]) == [True, False, False]  # a repeat in the batch is a no-op
        assert bloom.contains_many([a, b, c, d]) == [True, False, False, False]
        assert len(bloom) == 1

        assert bloom.add(b) is True  # added again after a discard: new again
        assert bloom.add_many([]) == [] and bloom.discard_many([]) == [] and bloom.contains_many([]) == []

        # URLs are canonicalised; a URL and its fingerprint are one item
        assert bloom.add("HTTP://Example.COM:80/a/./b") is True
        assert fingerprint(canonicalize("http://example.com/a/b")) in bloom
        assert bloom.discard("http://example.com/a/b") is True
        assert "http://example.com/a/b" not in bloom

        big = fps(70_000, seed=2)  # more than one vectorised chunk, repeats across the boundary
        assert bloom.add_many(big + big[:5]) == [True] * 70_000 + [False] * 5
        assert bloom.discard_many(big) == [True] * 70_000
        assert bloom.contains_many([a, b]) == [True, True]
        with pytest.raises(TypeError, match="batch"):
            bloom.add_many("http://example.com/")  # type: ignore[arg-type]
    assert not exists(name)


def test_two_phase_adding_and_discarding() -> None:
    """`adding`/`discarding` hold the locks across the caller's block and change the counters only if it ends
    without an exception (URLSeen records the new URLs in LMDB inside the block)."""
    a, b, c = fps(3, seed=15)
    with CountingBloom.create(capacity=1000, error_rate=1e-9) as bloom:
        bloom.add(a)
        with pytest.raises(RuntimeError):
            with bloom.adding([a, b]) as new:
                assert new.tolist() == [False, True]
                raise RuntimeError("the log commit failed")
        assert b not in bloom and len(bloom) == 1
        with bloom.adding([a, b, c]) as new:
            assert new.tolist() == [False, True, True]
        assert bloom.contains_many([a, b, c]) == [True, True, True] and len(bloom) == 3
        with pytest.raises(RuntimeError):
            with bloom.discarding([b, c]) as present:
                assert present.tolist() == [True, True]
                raise RuntimeError("the log delete failed")
        assert bloom.contains_many([b, c]) == [True, True]
        with bloom.discarding([b]) as present:
            assert present.tolist() == [True]
        assert b not in bloom and len(bloom) == 2
        with bloom.adding([]) as new:
            assert len(new) == 0


def test_discarding_everything_returns_every_counter_to_zero() -> None:
    items = fps(5000, seed=3)
    with CountingBloom.create(capacity=5000, error_rate=1e-3, partitions=8) as bloom:
        bloom.add_many(items)
        assert counters(bloom).any()
        assert all(bloom.discard_many(items))
        assert not counters(bloom).any() and len(bloom) == 0


def test_false_positive_rate_near_the_target() -> None:
    capacity, target = 20_000, 1e-3
    with CountingBloom.create(capacity, target, partitions=8) as bloom:
        bloom.add_many(fps(capacity, seed=4))
        rate = sum(bloom.contains_many(fps(200_000, seed=5))) / 200_000
        assert rate <= 1.3 * target, rate  # 200k probes at 1e-3: 200 expected, sd 14
        assert bloom.stats()["estimated_false_positive_rate"] <= 1.3 * target
        # memory: 4 bits per position of the plain filter's -ln p / (ln 2)^2 bits per item
        assert bloom.nbytes * 2 == pytest.approx(capacity * 14.38, rel=0.01)


# -- saturation and snapshots ------------------------------------------------------------------------


def test_counters_saturate_and_survive_a_snapshot_and_a_restart(tmp_path: Path) -> None:
    items = fps(400, seed=6)
    with CountingBloom.create(capacity=10, error_rate=0.1, partitions=1) as bloom:  # ~48 counters, 3 hashes
        bloom.add_many(items)
        before = counters(bloom).copy()
        saturated = before == SATURATED
        assert saturated.sum() >= 10, "the test needs saturated counters"
        assert bloom.stats()["saturated_counters"] == saturated.sum()
        bloom.save(tmp_path / "counting.snap")
        members = [x for x in items if x in bloom]
        length = len(bloom)
    # a restart: nothing left in shared memory, the snapshot is all there is
    with CountingBloom.load(tmp_path / "counting.snap") as restored:
        assert np.array_equal(counters(restored), before)
        assert len(restored) == length and all(restored.contains_many(members))
        restored.discard_many(items)  # saturated counters are never decremented
        after = counters(restored)
        assert (after[saturated] == SATURATED).all()
        assert restored.add_many(fps(1, seed=7)) is not None
        restored.save(tmp_path / "counting.snap")  # overwrite atomically
    assert not (tmp_path / "counting.snap.tmp").exists()


def test_load_refuses_truncated_foreign_and_corrupt_snapshots(tmp_path: Path) -> None:
    good = tmp_path / "good"
    with CountingBloom.create(capacity=1000, error_rate=1e-3, partitions=4) as bloom:
        bloom.add_many(fps(100, seed=8))
        bloom.save(good)
    raw = good.read_bytes()
    cases = {
        "truncated": raw[:-1],
        "trailing": raw + b"\0",
        "foreign": b"not a snapshot at all" * 10,
        "header": raw[:8] + raw[8:20],
        "corrupt": raw[:8 + 12] + (3).to_bytes(4, "little") + raw[8 + 16:],  # partitions = 3
    }
    for label, data in cases.items():
        path = tmp_path / label
        path.write_bytes(data)
        with pytest.raises(StorageError):
            CountingBloom.load(path)
    with pytest.raises(FileNotFoundError):
        CountingBloom.load(tmp_path / "missing")


# -- deletion never causes a false negative ----------------------------------------------------------

POOL = fps(400, seed=9)
# batches up to 200 items: a batch is tested against the filter before it, so a large one on a tiny filter
# counts many items at once and drives counters to saturation
OPS = st.lists(st.tuples(st.sampled_from(["add", "discard"]), st.lists(st.integers(0, len(POOL) - 1), max_size=200)),
               min_size=1, max_size=30)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS, partitions=st.sampled_from([1, 2]))
def test_deleting_added_items_never_makes_another_a_false_negative(ops, partitions: int) -> None:
    """Random batches of adds, and of discards of counted items (whose add returned True, not discarded since),
    on a filter far over its capacity (collisions, false positives, saturated counters): every counted item
    stays `in`. (An item whose add was a false positive was never counted: it may read absent later.)"""
    with CountingBloom.create(capacity=8, error_rate=0.2, partitions=partitions) as bloom:
        counted: set[bytes] = set()
        for op, indexes in ops:
            batch = [POOL[i] for i in indexes]
            if op == "add":
                counted.update(x for x, new in zip(batch, bloom.add_many(batch)) if new)
            else:
                batch = list(dict.fromkeys(x for x in batch if x in counted))
                assert all(bloom.discard_many(batch))  # counted items test present
                counted.difference_update(batch)
            assert all(bloom.contains_many(sorted(counted))), "a counted item became a false negative"
            assert all(x in bloom for x in counted)
            assert len(bloom) == len(counted)


def test_saturated_counters_protect_the_items_that_remain() -> None:
    """300 items counted at once in ~48 counters: most counters saturate, their true counts lost. Discarding 250
    of the items must leave the other 50 `in`: decrementing a saturated counter would zero it early."""
    items = fps(300, seed=14)
    with CountingBloom.create(capacity=10, error_rate=0.1, partitions=1) as bloom:
        assert all(bloom.add_many(items))
        assert bloom.stats()["saturated_counters"] > 20
        for start in range(0, 250, 10):
            assert all(bloom.discard_many(items[start:start + 10]))
        assert all(bloom.contains_many(items[250:]))


def test_discarding_a_false_positive_can_hide_others() -> None:
    """Why the rule exists: a never-added item that tests present takes counts that belong to others."""
    with CountingBloom.create(capacity=10, error_rate=0.3, partitions=1) as bloom:
        items = fps(10, seed=10)
        bloom.add_many(items)
        intruder = next(x for x in fps(100_000, seed=11) if x in bloom)  # a false positive
        assert bloom.discard(intruder) is True  # the filter cannot tell; it decrements
        assert not all(bloom.contains_many(items))  # at least one added item now reads absent


# -- processes ---------------------------------------------------------------------------------------

SHARED = fps(30_000, seed=12)


def _adder(name: str, worker: int, barrier, results) -> None:
    own = fps(5_000, seed=100 + worker)
    items = SHARED + own
    random.Random(worker).shuffle(items)
    bloom = CountingBloom.attach(name)
    try:
        barrier.wait(60)
        reported = []
        for start in range(0, len(items), 500):
            batch = items[start:start + 500]
            reported += [x for x, new in zip(batch, bloom.add_many(batch)) if new]
        mine = [x for x in reported if x in set(own)]  # counted own items may be discarded
        assert all(bloom.discard_many(mine))  # while the other process may still be adding
        results.put((worker, reported))
    finally:
        bloom.close()


def test_check_and_add_is_atomic_across_two_processes() -> None:
    with CountingBloom.create(capacity=40_000, error_rate=1e-6, partitions=16) as bloom:
        barrier = SPAWN.Barrier(2)
        results = SPAWN.Queue()
        procs = [SPAWN.Process(target=_adder, args=(bloom.name, w, barrier, results)) for w in range(2)]
        for p in procs:
            p.start()
        reports = dict(results.get(timeout=120) for _ in procs)
        for p in procs:
            p.join(60)
            assert p.exitcode == 0
        shared = set(SHARED)
        claimed = [x for worker in reports.values() for x in worker if x in shared]
        assert len(claimed) == len(set(claimed)), "an item was reported new by both processes"
        assert len(claimed) >= len(shared) - 3  # p = 1e-6: hardly any add is a false positive
        assert all(bloom.contains_many(SHARED)), "a concurrent discard made a shared item a false negative"
        assert len(bloom) == len(claimed)
        assert bloom.stats()["saturated_counters"] == 0


def _hold_every_lock(name: str, ready) -> None:
    bloom = CountingBloom.attach(name)
    with bloom._segment.lock(LOCK_BASE, bloom.partitions):
        ready.set()
        time.sleep(600)


def test_a_sigkilled_lock_holder_wedges_nobody() -> None:
    with CountingBloom.create(capacity=1000, error_rate=1e-3, partitions=4) as bloom:
        ready = SPAWN.Event()
        holder = SPAWN.Process(target=_hold_every_lock, args=(bloom.name, ready))
        holder.start()
        try:
            assert ready.wait(60)
            os.kill(holder.pid, signal.SIGKILL)
            holder.join(30)
            started = time.monotonic()
            assert bloom.add_many(fps(100, seed=13)) == [True] * 100
            assert time.monotonic() - started < 10
        finally:
            if holder.is_alive():
                holder.kill()
                holder.join()


# -- construction and lifetime -----------------------------------------------------------------------


def test_bad_arguments_and_attach_errors() -> None:
    for kwargs in ({"capacity": 0}, {"error_rate": 1.0}, {"partitions": 3}, {"capacity": 10**14}):
        with pytest.raises(ConfigError):
            CountingBloom.create(**{"capacity": 1000, "error_rate": 1e-3, **kwargs})  # type: ignore[arg-type]
    with pytest.raises(StorageError, match="no frontier counting Bloom filter"):
        CountingBloom.attach("frontier_test_no_such_counting_filter")


def test_attach_close_unlink_and_pickling() -> None:
    with CountingBloom.create(capacity=1000, error_rate=1e-3) as owner:
        other = CountingBloom.attach(owner.name)
        assert other.add("http://example.com/") is True
        assert "http://example.com/" in owner
        with pytest.raises(FrontierError, match="only the process that created"):
            other.unlink()
        with pytest.raises(TypeError, match="per process"):
            pickle.dumps(other)
        other.close()
        other.close()
        with pytest.raises(StorageError, match="closed"):
            other.add("http://example.com/b")
        assert exists(owner.name)
        name = owner.name
    assert not exists(name)


def test_no_segment_left_after_an_exception() -> None:
    with pytest.raises(RuntimeError):
        with CountingBloom.create(capacity=1000, error_rate=1e-3) as bloom:
            name = bloom.name
            raise RuntimeError("boom")
    assert not exists(name)
