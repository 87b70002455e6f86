"""frontier.seen.fpset on both paths (the C hash table of frontier._native, and Python sets with
FRONTIER_NO_NATIVE=1): against a Python set over random batches with repeats, collisions, growth, deletions
(backward shifts) and the all-zero fingerprint, which the C table stores apart from its empty slots."""

from __future__ import annotations

import random

import numpy as np
import pytest

from frontier.fingerprint import fingerprints
from frontier.native import NO_NATIVE_ENV, native
from frontier.seen.fpset import FingerprintSet, digests, firsts, joined, select, split
from frontier.seen.lru import BufferLRU

PATHS = ["native", "python"]


@pytest.fixture(params=PATHS)
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "native":
        if native() is None:
            pytest.skip("frontier._native is not built or switched off")
    else:
        monkeypatch.setenv(NO_NATIVE_ENV, "1")
    return request.param


def _pool(rng: random.Random) -> list[bytes]:
    # the same low bits of the second half (the home slot) for many: long probe runs, shifted on removal
    same_home = [rng.randbytes(8) + bytes(7) + bytes([rng.randrange(4)]) for _ in range(60)]
    return [rng.randbytes(16) for _ in range(400)] + same_home + [bytes(16)]


def test_fingerprint_set_behaves_as_a_set(path: str) -> None:
    rng = random.Random(7)
    for _ in range(10):
        pool, ref, s = _pool(rng), set(), FingerprintSet()
        for _ in range(150):
            batch = [rng.choice(pool) for _ in range(rng.randint(0, 80))]  # repeats in a batch too
            if rng.random() < 0.6:
                before = len(ref)
                ref.update(batch)
                assert s.add_blob(b"".join(batch)) == len(ref) - before
            else:
                ref.difference_update(batch)
                s.discard_blob(b"".join(batch))
            probes = rng.sample(pool, 50)
            assert s.contains_blob(b"".join(probes)).tolist() == [p in ref for p in probes]
            assert all((p in s) == (p in ref) for p in probes[:5])
            assert len(s) == len(ref) and set(s) == ref and sorted(split(s.blob())) == sorted(ref)


def test_contains_blob_over_several_sets_with_a_mask(path: str) -> None:
    rng = random.Random(3)
    a, b = [rng.randbytes(16) for _ in range(100)], [rng.randbytes(16) for _ in range(100)]
    sa, sb = FingerprintSet(a), FingerprintSet(b, expected=1000)
    probes = a[:30] + b[:30] + [rng.randbytes(16) for _ in range(30)]
    mask = np.array([i % 3 != 0 for i in range(len(probes))])
    got = sa.contains_blob(b"".join(probes), sb, mask=mask).tolist()
    assert got == [bool(m) and i < 60 for i, m in enumerate(mask)]


def test_batch_helpers(path: str) -> None:
    rng = random.Random(5)
    urls = [f"http://example.com/{rng.randrange(50)}" for _ in range(300)]
    fps = fingerprints(urls)
    assert digests(urls) == joined(fps) == b"".join(fps)
    mask = firsts(joined(fps))
    assert [fps[i] for i in np.flatnonzero(mask)] == list(dict.fromkeys(fps))
    assert select(joined(fps), mask) == b"".join(dict.fromkeys(fps))
    with pytest.raises(ValueError):
        joined([b"short"])


def test_buffer_lru_counts_and_forgets_like_the_set_lru(path: str) -> None:
    rng = random.Random(11)
    lru = BufferLRU(64)
    pool = [rng.randbytes(16) for _ in range(200)]
    for _ in range(50):
        batch = b"".join(rng.choice(pool) for _ in range(40))
        unique = firsts(batch)
        cached = [fp in lru for fp in split(batch)]
        hits = lru.hits
        missing = lru.misses_mask(batch, unique)
        assert missing.tolist() == [bool(u) and not c for u, c in zip(unique, cached)]
        assert lru.hits - hits == int(np.count_nonzero(unique)) - int(np.count_nonzero(missing))
        lru.add_blob(batch)
        assert all(fp in lru for fp in split(batch))  # just refreshed: in the young generation
        assert len(lru) <= 64 + 40
    gone = split(batch)[:5]
    lru.discard_many(gone)
    assert not any(fp in lru for fp in gone)
