"""Fingerprint -> block and bits of a blocked Bloom filter (the blacklist's layout 2), in numpy.

A blocked filter keeps all k bits of an item in one block of 512 bits, one 64-byte cache line: a lookup
or an add touches one line (and one page) of a filter far larger than the caches, where a standard
filter touches k (Putze, Sanders, Singler, "Cache-, hash- and space-efficient Bloom filters"; sizing:
`frontier.sizing.blocked_parameters`). From the fingerprint's big-endian u64 halves a, b, with B blocks:

    block        (a * B) >> 64                     the high half of the 128-bit product: uniform over B
                                                   to within 2^-32 for any B < 2^32 (no partitions needed)
    word w       r_w = mix64(b + w * 0x9E3779B97F4A7C15)
                                                   splitmix64's finaliser: 63 fresh bits per 7 positions
    bit i        (r_{i // 7} >> (9 * (i % 7))) & 511   i = 0..k-1, drawn with replacement
    position     block * 512 + bit i               bit j is bit j%8 of byte j//8, as in every filter

Not double hashing inside the block: modulo a power of two, h + i*s repeats with a short period when s
is even (s = 256: two distinct bits), and a rate that depends on the stride's low bits.

frontier/_native.c (`block_test`, `block_add`) computes the same positions in one C loop, prefetching
one cache line per item; `positions`/`positions_one` here feed `frontier.positions.get_bits`/`set_bits`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from frontier.positions import MASK64
from frontier.sizing import BLOCK_BITS

GOLDEN = 0x9E3779B97F4A7C15
PER_WORD = 7  # 9-bit positions per 64-bit word
_SHIFT = BLOCK_BITS.bit_length() - 1  # 9
_LOW32 = np.uint64(0xFFFFFFFF)
_U32 = np.uint64(32)


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, elementwise on uint64 (wrapping, as in C)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def positions(fps: Sequence[bytes] | bytes, blocks: int, hashes: int) -> np.ndarray:
    """Global bit positions, shape (n, hashes), of a batch of fingerprints or their concatenation."""
    joined = fps if isinstance(fps, bytes) else b"".join(fps)
    halves = np.frombuffer(joined, dtype=">u8").reshape(-1, 2).astype(np.uint64)
    a, b = halves[:, 0], halves[:, 1]
    size = np.uint64(blocks)  # < 2^32: a * B >> 64 from two 32x32-bit products, without overflow
    block = ((a >> _U32) * size + (((a & _LOW32) * size) >> _U32)) >> _U32
    step = np.arange(-(-hashes // PER_WORD), dtype=np.uint64) * np.uint64(GOLDEN)  # wraps mod 2^64, as intended
    words = _mix(b[:, None] + step)
    i = np.arange(hashes)
    bits = (words[:, i // PER_WORD] >> (np.uint64(_SHIFT) * (i % PER_WORD).astype(np.uint64))) \
        & np.uint64(BLOCK_BITS - 1)
    return bits + (block * np.uint64(BLOCK_BITS))[:, None]


def _mix_one(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def positions_one(fp: bytes, blocks: int, hashes: int) -> Iterator[int]:
    """`positions` of one fingerprint, as Python ints, lazily: a lookup that meets an unset bit stops there."""
    base = (int.from_bytes(fp[:8], "big") * blocks >> 64) * BLOCK_BITS
    b = int.from_bytes(fp[8:16], "big")
    for w in range(-(-hashes // PER_WORD)):
        r = _mix_one((b + w * GOLDEN) & MASK64)
        for _ in range(min(PER_WORD, hashes - w * PER_WORD)):
            yield base + (r & (BLOCK_BITS - 1))
            r >>= _SHIFT
