"""Fingerprint -> Bloom positions: the one implementation of the math every frontier filter shares.

A 16-byte fingerprint (xxh3_128, big-endian) is two u64 halves a, b. With P = 2^pbits partitions:

    partition    top pbits of a
    stride       s = ((a << pbits) | 1) mod 2^64   the partition bits shifted out (left in, they would
                                                   confine every stride of a partition to a band 1/P wide
                                                   and correlate the probes); odd, so never 0
    position i   h_i = (b + i*s) mod 2^64          Kirsch-Mitzenmacher double hashing, i = 0..k-1
                 partition*m_p + (((h_i >> 32) * m_p) >> 32)
                                                   Lemire's multiply-shift instead of h_i mod m_p, which
                                                   needs m_p < 2^32 positions per partition

The reduction is uniform only when m_p is small against 2^32: of the 2^32 values of h_i >> 32, each
position gets floor(2^32/m_p) or one more, so with m_p = 3e9 (10^10 URLs at 1e-4 in 64 partitions) half
the positions are twice as likely as the others, and at k = 13 that doubles the false-positive rate (the
blacklist benchmark measured 1.12e-4 instead of 0.90e-4 at m_p = 1.9e9). Up to UNIFORM_LIMIT = 2^28
positions a partition, the odds differ by at most 1/16 and the rate by under 1%: a new layout should
keep its partitions there (`min_partitions(n, UNIFORM_LIMIT)`), or reduce with all 64 bits of h_i. Those
limits and `min_partitions` are in frontier.seen.sizing (plain Python, for the supervisor). The blacklist's
blocked layout (frontier.seen.blocked) reduces with all 64 bits and needs no partitions.

A position indexes a bit (SharedBloom, version-1 Blacklist files: bit j is bit j%8 of byte j//8, `get_bits`/`set_bits`)
or a counter (CountingBloom). Everything is vectorised with numpy over a batch; `key_one` and
`positions_one` are the same math on Python ints for single lookups, lazy so a miss stops early.
Pure: numpy arrays (or bytes) in, numpy arrays out, no state.

The compiled path: `native()` (frontier.native) is the C extension frontier._native (frontier/_native.c)
when it was built and FRONTIER_NO_NATIVE is not set. It runs the same math in one C loop per batch (the
positions of a few items ahead prefetched: big filters are memory-bound), without the (n, k) position
arrays; the filters ask for it when they are created and use the numpy functions here without it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np

MASK64 = (1 << 64) - 1

_U32 = np.uint64(32)


def partition_bits(partitions: int) -> int:
    """log2 of a partition count, which must be a power of two."""
    if not isinstance(partitions, int) or partitions < 1 or partitions & (partitions - 1):
        raise ValueError(f"partitions must be a power of two, got {partitions!r}")
    return partitions.bit_length() - 1


def keys(fps: Sequence[bytes] | bytes, pbits: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(stride, b, partition) as uint64 arrays, from a batch of fingerprints or their concatenation."""
    joined = fps if isinstance(fps, bytes) else b"".join(fps)
    halves = np.frombuffer(joined, dtype=">u8").reshape(-1, 2).astype(np.uint64)
    a = halves[:, 0]
    part = a >> np.uint64(64 - pbits) if pbits else np.zeros(len(a), dtype=np.uint64)
    return (a << np.uint64(pbits)) | np.uint64(1), halves[:, 1], part


def positions(stride: np.ndarray, b: np.ndarray, part: np.ndarray, part_size: int, hashes: int) -> np.ndarray:
    """Global positions, shape (n, hashes): partition p's positions are [p*part_size, (p+1)*part_size)."""
    size = np.uint64(part_size)
    pos = np.multiply.outer(stride, np.arange(hashes, dtype=np.uint64))  # wraps mod 2^64, as intended
    pos += b[:, None]
    pos >>= _U32
    pos *= size
    pos >>= _U32
    pos += (part * size)[:, None]
    return pos


def key_one(fp: bytes, pbits: int) -> tuple[int, int, int]:
    """`keys` of one fingerprint, as Python ints."""
    a = int.from_bytes(fp[:8], "big")
    part = a >> (64 - pbits) if pbits else 0
    return ((a << pbits) & MASK64) | 1, int.from_bytes(fp[8:16], "big"), part


def positions_one(stride: int, b: int, part: int, part_size: int, hashes: int) -> Iterator[int]:
    """`positions` of one key, lazily: a lookup that meets an unset bit stops there."""
    base = part * part_size
    for i in range(hashes):
        yield base + ((((b + i * stride) & MASK64) >> 32) * part_size >> 32)


def get_bits(u8: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Bits at positions (any shape) of a little-endian bit array held in uint8 bytes, as uint8 0/1."""
    return (u8[pos >> np.uint64(3)] >> (pos & np.uint64(7)).astype(np.uint8)) & np.uint8(1)


def set_bits(u8: np.ndarray, pos: np.ndarray) -> None:
    """Set the bits at positions (any shape). Sorted first: each byte's bits are OR-ed together, then every
    byte is written once, in address order (1.7x faster than `np.bitwise_or.at` at 10^6 items, and it
    keeps that lead on a filter far larger than the CPU caches)."""
    pos = np.sort(pos, axis=None)
    if not len(pos):
        return
    byte = pos >> np.uint64(3)
    masks = np.left_shift(np.uint8(1), (pos & np.uint64(7)).astype(np.uint8))
    starts = np.flatnonzero(np.concatenate(([True], byte[1:] != byte[:-1])))
    u8[byte[starts]] |= np.bitwise_or.reduceat(masks, starts)


def first_new(fps: Sequence[bytes], add_unique: Callable[[Sequence[bytes]], np.ndarray]) -> list[bool]:
    """Check-and-add of a batch that may repeat items: `add_unique(distinct)` returns the new-mask of the
    distinct items; only the first occurrence of a new item in the batch is new, as with a `set`."""
    unique = list(dict.fromkeys(fps))
    if len(unique) == len(fps):
        return add_unique(fps).tolist()
    pending = {fp for fp, new in zip(unique, add_unique(unique).tolist()) if new}
    out = []
    for fp in fps:
        out.append(fp in pending)
        pending.discard(fp)
    return out
