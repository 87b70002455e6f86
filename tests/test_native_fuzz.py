"""Fuzz targets for the C extension: canonicalize_many against the Python path (FRONTIER_NO_NATIVE=1) on hostile
strings, and every kernel against its numpy or Python reference.

A short run is part of the suite and of .ci/sanitize; the long one raises Hypothesis' examples
(docs/native.md): FRONTIER_FUZZ_EXAMPLES=20000 python -m pytest -q tests/test_native_fuzz.py
"""

from __future__ import annotations

import bisect
import itertools
import os
from collections.abc import Iterator

import numpy as np
import pytest
import xxhash
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from frontier.native import NO_NATIVE_ENV, native
from frontier.seen import blocked
from frontier.seen.positions import get_bits, keys, positions, set_bits
from frontier.url.canonical import CanonicalRules, canonicalize_many

_native = pytest.importorskip("frontier._native", reason="the C extension is not built")
pytestmark = pytest.mark.skipif(native() is None, reason=f"{NO_NATIVE_ENV} is set: the numpy path only")

EXAMPLES = int(os.environ.get("FRONTIER_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=EXAMPLES <= 60,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

RULES = [CanonicalRules(sort_query=s, strip_session_ids=i, strip_tracking=t, keep_fragment=f)
         for s, i, t, f in itertools.product((False, True), repeat=4)]
BASES = [None, "http://example.com/dir/page?q=1", "https://a.b:8443/x/;jsessionid=2/", "HTTP://H/%2e%2e/a?x&y#f",
         "https://long.example/" + "seg/" * 5000 + "?" + "&".join(f"k{i}=v" for i in range(500)), "mailto:x@y",
         "http://h\u00e9.example/\ud800/"]
PIECES = ["http://", "https://", "HTTP://", "hTTpS://", "//", "/", "?", "#", "&", "&&", "=", "%", "%2", "%2e", "%2E",
          "%2F", "%41", "%7e", "%zz", "%00", ".", "..", "/../", "/./", ";jsessionid=1", ";SID=x", "utm_source=x",
          "fbclid=1", "sid=3", "a", "B", "z9", "\x00", "\x01", "\t", "\n", "\r", " ", "\x7f", "\ud800", "\udfff",
          "\u00e9", "\u20ac", "xn--", ":", ":80", ":0443", ":65536", "@", "[", "]", "[::1]", "\\", "'", '"', "<", "`",
          "{", "data:", "javascript:", "ftp:", "mailto:", "127.0.0.1", "256.1.1.1", "example.com", "EXAMPLE.COM",
          "a.b.c", "-", "_", "~", "+"]
hostile = st.lists(st.sampled_from(PIECES), max_size=24).map("".join) | st.text(max_size=40)
# the big shapes: a 10^5-segment path, more than 16 query parameters (qsort), a trailing '%', a long host
BIG = ["http://a.com/" + "a/" * 100_000, "/" + "./" * 50_000 + "x", "http://a.com/?" + "&".join(
    f"p{i % 7}=v{i}" for i in range(40)), "http://a.com/x%", "http://a.com/x?y%", "http://a.com/#%",
    "http://" + "a" * 300 + ".com/", "http://a.com/" + "%2e%2e/" * 30_000, "?" + "&".join("utm_x=1" for _ in range(99))]


def python_path(urls: list, base: str | None, rules: CanonicalRules) -> list:
    os.environ[NO_NATIVE_ENV] = "1"
    try:
        assert native() is None
        return canonicalize_many(urls, base, rules)
    finally:
        del os.environ[NO_NATIVE_ENV]


@pytest.fixture(autouse=True)
def _no_switch() -> Iterator[None]:
    assert NO_NATIVE_ENV not in os.environ
    yield


@FUZZ
@given(urls=st.lists(hostile, min_size=1, max_size=30), base=st.sampled_from(BASES),
       rules=st.sampled_from(RULES))
def test_canonicalize_many_answers_as_python(urls: list[str], base: str | None, rules: CanonicalRules) -> None:
    assert canonicalize_many(urls, base, rules) == python_path(urls, base, rules)


@pytest.mark.parametrize("base", BASES)
def test_canonicalize_many_answers_as_python_on_big_shapes(base: str | None) -> None:
    for rules in RULES[::5]:
        assert canonicalize_many(BIG, base, rules) == python_path(BIG, base, rules)


fingerprints = st.lists(st.binary(min_size=16, max_size=16) | st.sampled_from([bytes(16), b"\xff" * 16]),
                        max_size=600)


@FUZZ
@given(fps=fingerprints, pbits=st.integers(0, 4), part_size=st.integers(1, 3000), hashes=st.integers(1, 64),
       seed=st.integers(0, 2**32 - 1))
def test_bit_kernels_against_numpy(fps: list[bytes], pbits: int, part_size: int, hashes: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    u8 = rng.integers(0, 256, size=((part_size << pbits) + 7) // 8, dtype=np.uint8) & rng.integers(0, 256, dtype=np.uint8)
    joined, spec = b"".join(fps), (u8, 1, part_size, hashes)
    pos = positions(*keys(fps, pbits), part_size, hashes) if fps else np.zeros((0, hashes), dtype=np.uint64)
    found = np.frombuffer(_native.test(joined, pbits, [spec, spec]), dtype=bool)
    assert found.tolist() == get_bits(u8, pos).all(axis=1).tolist()
    select = rng.random(len(fps)) < 0.5
    expected = u8.copy()
    set_bits(expected, pos[select])
    _native.update(joined, pbits, spec, select)
    assert (u8 == expected).all()
    new = np.frombuffer(_native.add(joined, pbits, spec), dtype=bool).tolist()
    reference = []
    for row in pos:
        reference.append(not get_bits(expected, row).all())
        set_bits(expected, row)
    assert new == reference and (u8 == expected).all()


@FUZZ
@given(fps=fingerprints, pbits=st.integers(0, 3), part_size=st.integers(1, 600), hashes=st.integers(1, 16),
       caps=st.lists(st.integers(1, 40), min_size=1, max_size=3), published=st.integers(1, 3),
       seed=st.integers(0, 2**32 - 1))
def test_admit_and_insert_against_python(fps: list[bytes], pbits: int, part_size: int, hashes: int,
                                         caps: list[int], published: int, seed: int) -> None:
    """SharedBloom's batch in two calls against a Python reference: first occurrences tested against the published
    generations, the new ones placed partition by partition (a full one moves on to the next generation), then
    their bits, counts and current generations written."""
    rng = np.random.default_rng(seed)
    gens, parts = len(caps), 1 << pbits
    published = min(published, gens)
    filters = [rng.integers(0, 256, size=((part_size << pbits) + 7) // 8, dtype=np.uint8)
               & rng.integers(0, 256, dtype=np.uint8) for _ in range(gens)]
    specs = [(u8, 1, part_size, hashes) for u8 in filters]
    counts = rng.integers(0, 41, size=(gens, parts)).astype(np.uint64)
    current = rng.integers(0, published, size=parts).astype(np.uint8)
    caps_array = np.array(caps, dtype=np.uint64)
    joined = b"".join(fps)
    pos = positions(*keys(fps, pbits), part_size, hashes) if fps else np.zeros((0, hashes), dtype=np.uint64)
    # the reference
    earlier: set[bytes] = set()
    flags = []
    for fp, row in zip(fps, pos):
        first = fp not in earlier
        earlier.add(fp)
        flags.append(first and not any(get_bits(u8, row).all() for u8 in filters[:published]))
    fill = {p: int(counts[current[p], p]) for p in range(parts)}
    now = current.astype(int).tolist()
    gen_of: list[int] = []
    overflow = False
    for fp, new in zip(fps, flags):
        if not new or overflow:
            continue
        p = int.from_bytes(fp[:8], "big") >> (64 - pbits) if pbits else 0
        while fill[p] >= caps[now[p]] and not overflow:
            overflow = now[p] + 1 >= gens
            if not overflow:
                now[p] += 1
                fill[p] = int(counts[now[p], p])
        fill[p] += 1
        gen_of.append(now[p])
    if overflow:
        with pytest.raises(ValueError, match="past the last generation"):
            _native.admit(joined, pbits, specs[:published], counts, current, caps_array)
        return
    mask, new_fps, got_gens, top, got_flags, distinct = _native.admit(joined, pbits, specs[:published], counts,
                                                                      current, caps_array)
    assert got_flags == flags and np.frombuffer(mask, dtype=bool).tolist() == flags
    assert new_fps == b"".join(fp for fp, new in zip(fps, flags) if new)
    assert list(got_gens) == gen_of and top == max(gen_of, default=-1) and distinct == len(set(fps))
    expected = [u8.copy() for u8 in filters]
    expected_counts, expected_current = counts.copy(), current.copy()
    for row, fp, g in zip(pos[np.array(flags, dtype=bool)], [fp for fp, new in zip(fps, flags) if new], gen_of):
        set_bits(expected[g], row[None, :])
        p = int.from_bytes(fp[:8], "big") >> (64 - pbits) if pbits else 0
        expected_counts[g, p] += 1
        expected_current[p] = max(expected_current[p], g)
    _native.insert(new_fps, pbits, specs, got_gens, counts, current)
    assert all((u8 == e).all() for u8, e in zip(filters, expected))
    assert counts.tolist() == expected_counts.tolist() and current.tolist() == expected_current.tolist()


@FUZZ
@given(fps=fingerprints, pbits=st.integers(0, 3), part_size=st.integers(1, 500), hashes=st.integers(1, 20),
       steps=st.lists(st.sampled_from([1, -1]), min_size=1, max_size=4), seed=st.integers(0, 2**32 - 1))
def test_counter_kernels_against_a_reference(fps: list[bytes], pbits: int, part_size: int, hashes: int,
                                              steps: list[int], seed: int) -> None:
    rng = np.random.default_rng(seed)
    u8 = np.zeros(((part_size << pbits) + 1) // 2, dtype=np.uint8)
    counters = np.zeros(part_size << pbits, dtype=np.int64)
    joined, spec = b"".join(fps), (u8, 4, part_size, hashes)
    pos = positions(*keys(fps, pbits), part_size, hashes) if fps else np.zeros((0, hashes), dtype=np.uint64)
    for step in steps:
        select = rng.random(len(fps)) < 0.7
        for row in pos[select]:
            for j in row.tolist():
                if counters[j] != 15:
                    counters[j] = max(0, min(15, counters[j] + step))
        _native.update(joined, pbits, spec, select, 1, step)
        nibbles = np.stack([u8 & 0xF, u8 >> 4], axis=1).ravel()[:part_size << pbits]
        assert (nibbles == counters).all()


@FUZZ
@given(fps=fingerprints, blocks=st.integers(1, 300), hashes=st.integers(1, 64))
def test_block_kernels_against_numpy(fps: list[bytes], blocks: int, hashes: int) -> None:
    compiled, reference = np.zeros(blocks * 64, dtype=np.uint8), np.zeros(blocks * 64, dtype=np.uint8)
    joined = b"".join(fps)
    new = np.frombuffer(_native.block_add(joined, (compiled, blocks, hashes)), dtype=bool).tolist()
    pos = blocked.positions(fps, blocks, hashes) if fps else np.zeros((0, hashes), dtype=np.uint64)
    expected = []
    for row in pos:
        expected.append(not get_bits(reference, row).all())
        set_bits(reference, row)
    assert new == expected and compiled.tobytes() == reference.tobytes()
    assert np.frombuffer(_native.block_test(joined, (compiled, blocks, hashes)), dtype=bool).all()


@FUZZ
@given(fps=fingerprints, mask_seed=st.integers(0, 2**32 - 1), pbits=st.integers(0, 31))
def test_batch_kernels_against_python(fps: list[bytes], mask_seed: int, pbits: int) -> None:
    mask = np.random.default_rng(mask_seed).random(len(fps)) < 0.6
    joined = b"".join(fps)
    seen: set[bytes] = set()
    firsts = []
    for fp, m in zip(fps, mask.tolist()):
        firsts.append(bool(m) and fp not in seen)
        seen.update([fp] if m else [])
    assert np.frombuffer(_native.firsts(joined, mask), dtype=bool).tolist() == firsts
    assert _native.select(joined, mask) == b"".join(fp for fp, m in zip(fps, mask.tolist()) if m)
    assert _native.join(fps) == joined
    parts = [int.from_bytes(fp[:8], "big") >> (64 - pbits) if pbits else 0 for fp in fps]
    if fps:
        assert _native.partition_range(joined, pbits) == (min(parts), max(parts))
    if pbits <= 6:
        counts = np.zeros(1 << pbits, dtype=np.uint64)
        _native.tally(joined, pbits, mask, 1, counts, 1)
        assert counts.tolist() == np.bincount(np.array(parts, dtype=np.int64)[mask], minlength=1 << pbits).tolist()


@FUZZ
@given(fps=fingerprints, removed=st.lists(st.binary(min_size=16, max_size=16), max_size=50))
def test_set_kernels_against_a_set(fps: list[bytes], removed: list[bytes]) -> None:
    slots = 64
    while len(set(fps)) > slots // 2 or len(fps) > slots // 2:
        slots *= 2
    table = bytearray((1 + slots) * 16)
    assert _native.set_add(table, b"".join(fps)) == len(set(fps))
    gone = removed + fps[::3]
    was = bytes(_native.set_remove(table, b"".join(gone)))
    reference = set(fps)
    expected = []
    for fp in gone:
        expected.append(fp in reference)
        reference.discard(fp)
    assert [bool(b) for b in was] == expected
    items = _native.set_items(table)
    assert sorted(items[i:i + 16] for i in range(0, len(items), 16)) == sorted(reference)
    probe = fps + removed
    assert [bool(b) for b in _native.set_has(b"".join(probe), [table])] == [fp in reference for fp in probe]


@FUZZ
@given(parts=st.lists(fingerprints, max_size=5), needle=st.binary(min_size=16, max_size=16))
def test_run_kernels_against_sorted(parts: list[list[bytes]], needle: bytes) -> None:
    everything = sorted(set(itertools.chain.from_iterable(parts)))
    assert _native.sort_unique(b"".join(itertools.chain.from_iterable(parts))) == b"".join(everything)
    runs = [b"".join(sorted(set(p))) for p in parts]
    assert _native.merge_unique(runs) == b"".join(everything)
    chunk = b"".join(everything)
    for fp in everything[:20] + [needle]:
        at = bisect.bisect_left(everything, fp)
        assert _native.chunk_has(chunk, fp) == (at < len(everything) and everything[at] == fp)


@FUZZ
@given(urls=st.lists(hostile, max_size=40))
def test_hash_kernels_against_xxhash(urls: list[str]) -> None:
    expected = [xxhash.xxh3_128_digest(u.encode("utf-8", "surrogatepass")) for u in urls]
    assert _native.fingerprints(urls) == expected
    assert _native.digests(urls) == b"".join(expected)
