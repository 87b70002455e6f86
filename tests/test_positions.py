"""frontier.seen.positions: the same positions as SharedBloom computes for the same fingerprints, the vectorised and
the one-item forms agree, every position stays in its partition, and the batch rule of `first_new`."""

from __future__ import annotations

import random

import numpy as np
import pytest
from bitarray import bitarray
from hypothesis import given, settings
from hypothesis import strategies as st

from frontier import SharedBloom
from frontier.seen.positions import first_new, get_bits, key_one, keys, partition_bits, positions, positions_one, set_bits
from frontier.seen.sizing import PARTITION_LIMIT

FP = st.binary(min_size=16, max_size=16)


def fps(n: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.randbytes(16) for _ in range(n)]


def reference_positions(fp: bytes, pbits: int, part_size: int, hashes: int) -> list[int]:
    """The documented math (module docstring), written out on Python ints: the spec the arrays must meet."""
    a, b = int.from_bytes(fp[:8], "big"), int.from_bytes(fp[8:], "big")
    part = a >> (64 - pbits) if pbits else 0
    stride = ((a << pbits) | 1) % 2**64
    return [part * part_size + ((((b + i * stride) % 2**64) >> 32) * part_size >> 32) for i in range(hashes)]


@pytest.mark.parametrize("partitions", [1, 2, 64, 4096])
def test_keys_and_positions_meet_the_documented_math_and_shared_bloom_uses_them(partitions: int) -> None:
    items = fps(2000, seed=partitions)
    pbits = partition_bits(partitions)
    with SharedBloom.create(capacity=20_000, error_rate=1e-3, partitions=partitions) as bloom:
        gen = bloom._gens[0]
        got = positions(*keys(items, pbits), gen.part_bits, gen.hashes)
        assert got.dtype == np.uint64
        assert got.tolist() == [reference_positions(fp, pbits, gen.part_bits, gen.hashes) for fp in items]
        bloom.add_many(items)
        assert get_bits(gen.u8, got).all()  # SharedBloom set exactly these


def test_setting_the_bits_reproduces_shared_blooms_generation() -> None:
    """Bits set from frontier.seen.positions alone equal the bytes SharedBloom wrote for the same items."""
    items = fps(3000, seed=7)
    with SharedBloom.create(capacity=10_000, error_rate=1e-3, partitions=8) as bloom:
        bloom.add_many(items)
        gen = bloom._gens[0]
        mine = np.zeros(len(gen.u8), dtype=np.uint8)
        set_bits(mine, positions(*keys(items, 3), gen.part_bits, gen.hashes))
        assert np.array_equal(mine, gen.u8)
        assert get_bits(mine, positions(*keys(items, 3), gen.part_bits, gen.hashes)).all()


@settings(max_examples=200, deadline=None)
@given(fp=FP, pbits=st.integers(0, 12), part_size=st.integers(1, PARTITION_LIMIT - 1), hashes=st.integers(1, 30))
def test_one_item_form_matches_the_batch_form(fp: bytes, pbits: int, part_size: int, hashes: int) -> None:
    stride, b, part = key_one(fp, pbits)
    arrays = keys([fp], pbits)
    assert (stride, b, part) == tuple(int(x[0]) for x in arrays)
    row = positions(*arrays, part_size, hashes)[0].tolist()
    assert list(positions_one(stride, b, part, part_size, hashes)) == row
    assert all(part * part_size <= p < (part + 1) * part_size for p in row)  # never leaves its partition
    assert stride & 1  # odd: the probes never collapse to one position


def test_bit_order_is_little_endian_within_a_byte() -> None:
    u8 = np.zeros(4, dtype=np.uint8)
    set_bits(u8, np.array([[31, 9], [9, 0], [1, 15]], dtype=np.uint64))  # repeats, several bits of one byte
    set_bits(u8, np.zeros((0, 2), dtype=np.uint64))
    expected = bitarray(32, endian="little")
    expected.setall(0)
    for i in (0, 1, 9, 15, 31):
        expected[i] = 1
    assert u8.tobytes() == expected.tobytes()
    assert get_bits(u8, np.arange(32, dtype=np.uint64)).tolist() == expected.tolist()


def test_keys_accepts_the_concatenation() -> None:
    items = fps(10, seed=3)
    for a, b in zip(keys(items, 5), keys(b"".join(items), 5)):
        assert np.array_equal(a, b)


def test_partition_bits() -> None:
    assert [partition_bits(p) for p in (1, 2, 64, 4096)] == [0, 1, 6, 12]
    for bad in (0, 3, -4, 2.0):
        with pytest.raises(ValueError):
            partition_bits(bad)  # type: ignore[arg-type]


@settings(max_examples=100, deadline=None)
@given(batch=st.lists(st.sampled_from(fps(12, seed=5)), max_size=40), known=st.sets(st.sampled_from(fps(12, seed=5))))
def test_first_new_is_set_semantics(batch: list[bytes], known: set[bytes]) -> None:
    """Only the first occurrence of an item that add_unique calls new is new, as adding to a set one by one."""
    calls = []

    def add_unique(unique):
        calls.append(list(unique))
        return np.array([fp not in known for fp in unique], dtype=bool)

    reference = set(known)
    expected = []
    for fp in batch:
        expected.append(fp not in reference)
        reference.add(fp)
    assert first_new(batch, add_unique) == expected
    assert len(calls) == 1 and len(set(calls[0])) == len(calls[0])  # one call, distinct items only
