"""Fingerprint -> block and bits of a blocked Bloom filter (the blacklist's layout 2), in numpy.

A blocked filter keeps all k bits of an item in one block of 512 bits, one 64-byte cache line: a lookup
or an add touches one line (and one page) of a filter far larger than the caches, where a standard
filter touches k (Putze, Sanders, Singler, "Cache-, hash- and space-efficient Bloom filters"; sizing:
`frontier.seen.sizing.blocked_parameters`). From the fingerprint's big-endian u64 halves a, b, with B blocks:

    block        (a * B) >> 64                     the high half of the 128-bit product: uniform over B
                                                   to within 2^-32 for any B < 2^32 (no partitions needed)
    word w       r_w = mix64(b + w * 0x9E3779B97F4A7C15)
                                                   splitmix64's finaliser: 63 fresh bits per 7 positions
    bit i        (r_{i // 7} >> (9 * (i % 7))) & 511   i = 0..k-1, drawn with replacement
    position     block * 512 + bit i               bit j is bit j%8 of byte j//8, as in every filter

Not double hashing inside the block: modulo a power of two, h + i*s repeats with a short period when s
is even (s = 256: two distinct bits), and a rate that depends on the stride's low bits.

frontier/_native.c (`block_test`, `block_add`) computes the same positions in one C loop, prefetching
one cache line per item; `positions`/`positions_one` here feed `frontier.seen.positions.get_bits`/`set_bits`.
`Buckets` holds a bulk load's fingerprints grouped by slice of the filter (`frontier.seen.blacklist.BulkLoad`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from types import ModuleType

import numpy as np

from frontier.seen.positions import MASK64, get_bits, set_bits
from frontier.seen.sizing import BLOCK_BITS

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
    return bits_in_block(halves[:, 1], hashes) + (block_of(halves[:, 0], blocks) * np.uint64(BLOCK_BITS))[:, None]


def bits_in_block(b: np.ndarray, hashes: int) -> np.ndarray:
    """Each item's bits inside its block, shape (n, hashes), from the second halves b (uint64)."""
    step = np.arange(-(-hashes // PER_WORD), dtype=np.uint64) * np.uint64(GOLDEN)  # wraps mod 2^64, as intended
    words = _mix(b[:, None] + step)
    i = np.arange(hashes)
    return (words[:, i // PER_WORD] >> (np.uint64(_SHIFT) * (i % PER_WORD).astype(np.uint64))) \
        & np.uint64(BLOCK_BITS - 1)


def partition_positions(stride: np.ndarray, b: np.ndarray, part: np.ndarray, part_size: int,
                        hashes: int) -> np.ndarray:
    """`frontier.seen.positions.positions` for a partitioned blocked filter (SharedBloom's generation 0): the block
    in the partition from the partition-free first half (the stride without its low bit), the bits as above.
    Shape (n, hashes); part_size is a multiple of BLOCK_BITS."""
    block = block_of(stride & ~np.uint64(1), part_size // BLOCK_BITS)
    return bits_in_block(b, hashes) + (part * np.uint64(part_size) + block * np.uint64(BLOCK_BITS))[:, None]


def block_of(a: np.ndarray, blocks: int) -> np.ndarray:
    """The block of each fingerprint from its first half a (uint64): (a * B) >> 64."""
    size = np.uint64(blocks)  # < 2^32: a * B >> 64 from two 32x32-bit products, without overflow
    return ((a >> _U32) * size + (((a & _LOW32) * size) >> _U32)) >> _U32


def add_in_file_order(u8: np.ndarray, fps: np.ndarray, blocks: int, hashes: int, chunk: int = 65536) -> int:
    """Add a round of fingerprints (a uint8 array of n x 16 bytes) block by block in ascending order, each
    block's items in input order; the number that had an unset bit. Exactly as if added one at a time (as the C
    path's `block_add_buckets` and `block_add`): items of one rank within their block lie in distinct blocks,
    so each rank is one vectorised test-then-set; exact repeats are dropped first (never new; same bits)."""
    halves = fps.view(">u8").reshape(-1, 2)
    block = block_of(halves[:, 0].astype(np.uint64), blocks)
    order = np.argsort(block, kind="stable")
    added = 0
    for start in range(0, len(order), chunk):
        take = order[start:start + chunk]
        rows = halves[take]
        first = np.sort(np.unique(rows, axis=0, return_index=True)[1])
        rows, blk = rows[first], block[take[first]]
        pos = positions(rows.tobytes(), blocks, hashes)
        rank = _rank_in_group(blk)
        by_rank = np.argsort(rank, kind="stable")
        bounds = np.searchsorted(rank[by_rank], np.arange(int(rank.max()) + 2))
        for r in range(len(bounds) - 1):
            p = pos[by_rank[bounds[r]:bounds[r + 1]]]
            added += int(np.count_nonzero(~get_bits(u8, p).all(axis=1)))
            set_bits(u8, p)
    return added


def _mix_one(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def positions_one(fp: bytes, blocks: int, hashes: int) -> Iterator[int]:
    """`positions` of one fingerprint, as Python ints, lazily: a lookup that meets an unset bit stops there."""
    base = (int.from_bytes(fp[:8], "big") * blocks >> 64) * BLOCK_BITS
    return _bits_from(base, int.from_bytes(fp[8:16], "big"), hashes)


def partition_positions_one(stride: int, b: int, part: int, part_size: int, hashes: int) -> Iterator[int]:
    """`partition_positions` of one key, as Python ints, lazily."""
    base = part * part_size + ((stride & ~1) * (part_size // BLOCK_BITS) >> 64) * BLOCK_BITS
    return _bits_from(base, b, hashes)


def _bits_from(base: int, b: int, hashes: int) -> Iterator[int]:
    for w in range(-(-hashes // PER_WORD)):
        r = _mix_one((b + w * GOLDEN) & MASK64)
        for _ in range(min(PER_WORD, hashes - w * PER_WORD)):
            yield base + (r & (BLOCK_BITS - 1))
            r >>= _SHIFT


class Buckets:
    """A bulk load's buffer (`frontier.seen.blacklist.BulkLoad`): the blocks [first, stop) of a filter of `blocks` blocks
    cut into slices of 2^shift blocks, each with a bucket of the buffer sized in proportion to its blocks, so one
    round's fingerprints sit grouped by slice as they arrive (no sort pass, no second buffer) and `add_to` adds them
    slice by slice in ascending file order. Slices are 2^SLICE_SHIFT blocks (512 KiB of filter: in L2) unless told
    (a spool's segments) or the budget is too small for MIN_BUCKET entries each. The kernels are frontier._native's
    `block_bucket`/`block_add_buckets`, or their numpy versions here."""

    SLICE_SHIFT = 13
    MIN_BUCKET = 64

    def __init__(self, entries: int, blocks: int, *, shift: int = SLICE_SHIFT, first: int = 0,
                 stop: int | None = None) -> None:
        stop = blocks if stop is None else stop
        while ((stop - first - 1) >> shift) + 1 > max(1, entries // self.MIN_BUCKET):
            shift += 1
        self.blocks, self.shift, self.first = blocks, shift, first
        slices = ((stop - first - 1) >> shift) + 1
        ends = np.minimum(np.arange(slices + 1, dtype=np.int64) << shift, stop - first)
        # bucket r holds entries * (its blocks / all blocks), at least 1; a round ends when the first bucket is
        # full, for random fingerprints at about 1 - 4/sqrt(bucket size) of the whole (98% at 8M entries over 540)
        self.starts = np.zeros(slices + 1, dtype=np.uint64)
        self.starts[1:] = np.cumsum(np.maximum(1, np.diff(ends) * entries // (stop - first)))
        self.fills = np.zeros(slices, dtype=np.uint64)
        self.buffer = np.empty(int(self.starts[-1]) * 16, dtype=np.uint8)  # its pages are taken as they fill

    @property
    def pending(self) -> int:
        return int(self.fills.sum())

    def bucket(self, r: int) -> np.ndarray:
        """Slice r's fingerprints, in their order (uint8, n x 16), a view of the buffer."""
        start = int(self.starts[r])
        return self.buffer[start * 16:(start + int(self.fills[r])) * 16]

    def put(self, kernels: ModuleType | None, fps: np.ndarray) -> int:
        """Copy fingerprints (uint8, n x 16) in order into their buckets, up to the first whose bucket is full;
        how many were copied. ValueError for one outside the blocks [first, stop)."""
        spec = (self.shift, self.first, self.buffer, self.starts, self.fills)
        if kernels is not None:
            return kernels.block_bucket(fps, self.blocks, spec)
        rows = fps.reshape(-1, 16)
        block = block_of(rows.view(">u8")[:, 0].astype(np.uint64), self.blocks).astype(np.int64)
        slice_ = (block - self.first) >> self.shift
        outside = (block < self.first) | (slice_ >= len(self.fills))
        limit = int(np.argmax(outside)) if outside.any() else len(rows)
        slice_ = slice_[:limit]
        starts = self.starts.astype(np.int64)
        slot = self.fills.astype(np.int64)[slice_] + _rank_in_group(slice_)
        full = slot >= starts[1:][slice_] - starts[:-1][slice_]
        taken = int(np.argmax(full)) if full.any() else limit
        slice_ = slice_[:taken]
        self.buffer.reshape(-1, 16)[starts[:-1][slice_] + slot[:taken]] = rows[:taken]
        self.fills += np.bincount(slice_, minlength=len(self.fills)).astype(np.uint64)
        if taken == limit < len(rows):
            raise ValueError(f"fingerprint {limit} lies outside the buckets' blocks")
        return taken

    def add_to(self, kernels: ModuleType | None, spec: tuple[np.ndarray, int, int]) -> int:
        """Add every bucket's fingerprints to the blocked filter `spec` (u8, blocks, hashes), in ascending file
        order; how many had an unset bit (exactly as if added one at a time in input order). Empties the buckets."""
        if kernels is not None:
            new = kernels.block_add_buckets(spec, (self.shift, self.first, self.buffer, self.starts, self.fills))
        else:
            fills = self.fills.astype(np.int64)
            before = np.cumsum(fills) - fills
            rows = np.repeat(self.starts[:-1].astype(np.int64) - before, fills) + np.arange(int(fills.sum()))
            new = add_in_file_order(spec[0], self.buffer.reshape(-1, 16)[rows].reshape(-1), spec[1], spec[2])
        self.fills[:] = 0
        return new


def _rank_in_group(keys: np.ndarray) -> np.ndarray:
    """For each entry, how many entries before it have the same key."""
    order = np.argsort(keys, kind="stable")
    ranked = keys[order]
    at = np.arange(len(keys))
    rank = np.empty(len(keys), dtype=np.int64)
    rank[order] = at - np.maximum.accumulate(np.where(np.r_[True, ranked[1:] != ranked[:-1]], at, 0))
    return rank
