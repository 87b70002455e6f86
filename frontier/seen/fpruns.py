"""Sorted runs of fingerprints in LMDB: the building block of the fingerprint log's LSM layout.

A run is a set of distinct 16-byte fingerprints in ascending byte order, cut into chunks of at most
`chunk_entries(page size)` fingerprints (255 with 4 KiB pages: 4080 bytes, one overflow page with LMDB's
16-byte page header). The `runs` database stores chunk `c` of run `r` as

    r (u64 BE) + an upper bound of the chunk (16 bytes)  ->  the chunk's fingerprints, concatenated

The upper bound is the chunk's last fingerprint when written; deleting fingerprints keeps it (and an
emptied chunk is deleted), so every fingerprint of a run lies in the chunk with the smallest upper bound at
or above it. The database's B-tree is thus the runs' fence index: a lookup is one `set_range` to the chunk
(on branch and leaf pages holding about 42 bytes per chunk, 0.16-0.33 bytes per fingerprint, which stay in
the page cache) and a search of one page. (Batching these through an in-memory fence and `getmulti` was
measured: no faster, as the page copy dominates.) A run may also be held in memory whole (`Pairs`, 16 bytes
per fingerprint), where numpy searches a whole batch of probes at once.

Fingerprints are uniformly distributed, so a merge works by key range: the entries whose first 8 bytes
(`hi`, a u64) fall in [lo, top) come from each input in one contiguous slice, and a merge can stop at any
key and resume there. All of this works in a transaction handed in by the caller; nothing here commits.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import lmdb
import numpy as np

from frontier.native import native
from frontier.seen.fingerprint import FINGERPRINT_SIZE as FP

RUN_ID_SIZE = 8
KEY_SPACE = 1 << 64  # hi values lie in [0, KEY_SPACE)
_PAGE_HEADER = 16  # LMDB's header on an overflow page


def chunk_entries(page_size: int) -> int:
    """Fingerprints per chunk: as many as fit one overflow page."""
    return (page_size - _PAGE_HEADER) // FP


def run_prefix(run_id: int) -> bytes:
    return run_id.to_bytes(RUN_ID_SIZE, "big")


def halves(blob: bytes) -> tuple[np.ndarray, np.ndarray]:
    """The two big-endian u64 halves of each fingerprint of a blob, as native u64 arrays."""
    both = np.frombuffer(blob, dtype=">u8").astype(np.uint64)
    return both[::2], both[1::2]


def first_at_or_above(hi: np.ndarray, bound: int) -> int:
    """Index of the first entry of sorted `hi` that is >= bound (bound may be KEY_SPACE)."""
    return len(hi) if bound >= KEY_SPACE else int(np.searchsorted(hi, np.uint64(bound), side="left"))


def sorted_unique(parts: Sequence[bytes], *, presorted: bool) -> tuple[bytes, np.ndarray]:
    """The fingerprints of the blobs in `parts` in byte order without duplicates, and their `hi` values.

    `presorted`: each part is sorted already (a merge), so a stable sort merges them in linear time. The
    compiled kernels (`merge_unique`, `sort_unique`) give the same bytes 4-6x faster."""
    kernels = native()
    if kernels is not None:
        blob = kernels.merge_unique(parts) if presorted else kernels.sort_unique(b"".join(parts))
        return blob, halves(blob)[0]
    blob = b"".join(parts)
    if not blob:
        return blob, np.empty(0, dtype=np.uint64)
    hi = halves(blob)[0]
    order = np.argsort(hi, kind="stable" if presorted else "quicksort")
    blob = np.frombuffer(blob, dtype="V16").take(order).tobytes()
    hi = hi[order]
    ties = np.flatnonzero(hi[1:] == hi[:-1])
    if ties.size:  # equal first halves (rare: about n^2 / 2^65 pairs): order them by the second half
        blob = _order_ties(blob, ties)
        hi = halves(blob)[0]
    return blob, hi


def _order_ties(blob: bytes, ties: np.ndarray) -> bytes:
    out: list[bytes] = []
    done = 0
    i = 0
    while i < len(ties):
        start = end = int(ties[i])
        while i < len(ties) and int(ties[i]) == end:
            end += 1
            i += 1
        out.append(blob[done * FP:start * FP])
        group = {blob[j * FP:(j + 1) * FP] for j in range(start, end + 1)}
        out.append(b"".join(sorted(group)))  # the set drops duplicates, which have equal first halves too
        done = end + 1
    out.append(blob[done * FP:])
    return b"".join(out)


class Pairs:
    """The fingerprints of a cached run, sorted, as a growable pair of u64 arrays (their two halves)."""

    __slots__ = ("_hi", "_lo", "size")

    def __init__(self, blob: bytes = b"") -> None:
        self._hi = np.empty(16, dtype=np.uint64)
        self._lo = np.empty(16, dtype=np.uint64)
        self.size = 0
        if blob:
            self.extend(*halves(blob))

    def extend(self, hi: np.ndarray, lo: np.ndarray) -> None:
        need = self.size + len(hi)
        if need > len(self._hi):
            grown = max(need, 2 * len(self._hi))
            self._hi = np.concatenate([self._hi[:self.size], np.empty(grown - self.size, dtype=np.uint64)])
            self._lo = np.concatenate([self._lo[:self.size], np.empty(grown - self.size, dtype=np.uint64)])
        self._hi[self.size:need] = hi
        self._lo[self.size:need] = lo
        self.size = need

    def remove(self, hi: np.ndarray, lo: np.ndarray) -> None:
        """Drop the given entries (those present)."""
        at = _lower_bound(self.hi, self.lo, hi, lo)
        ok = at < self.size
        at = at[ok][(self.hi[at[ok]] == hi[ok]) & (self.lo[at[ok]] == lo[ok])]
        keep = np.ones(self.size, dtype=bool)
        keep[at] = False
        hi_kept, lo_kept = self.hi[keep], self.lo[keep]
        self.size = 0
        self.extend(hi_kept, lo_kept)

    @property
    def hi(self) -> np.ndarray:
        return self._hi[:self.size]

    @property
    def lo(self) -> np.ndarray:
        return self._lo[:self.size]

    @property
    def nbytes(self) -> int:
        return self._hi.nbytes + self._lo.nbytes


def _lower_bound(sh: np.ndarray, sl: np.ndarray, hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """For each probe (hi, lo), the index of the first pair of sorted (sh, sl) that is >= it."""
    at = np.searchsorted(sh, hi, side="left")
    while True:  # equal first halves: step past the pairs whose second half is below the probe's
        inside = np.flatnonzero(at < len(sh))
        low = inside[(sh[at[inside]] == hi[inside]) & (sl[at[inside]] < lo[inside])]
        if not low.size:
            return at
        at[low] += 1


def find(pairs: Pairs, hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """For each probe (hi, lo), True if the sorted pairs hold it."""
    sh, sl = pairs.hi, pairs.lo
    at = _lower_bound(sh, sl, hi, lo)
    ok = at < len(sh)
    found = np.zeros(len(hi), dtype=bool)
    found[ok] = (sh[at[ok]] == hi[ok]) & (sl[at[ok]] == lo[ok])
    return found


@dataclass(frozen=True, slots=True)
class CachedRun:
    """A run held in memory, as a lookup sees it: its pairs, the range [first, last] of first halves where a
    lookup may find a fingerprint in it (a merge's input or output holds part of the key space), its filter."""

    pairs: Pairs
    first: int = 0
    last: int = KEY_SPACE - 1
    filter: RunFilter | None = None


def find_cached(blob: bytes, found: np.ndarray, runs: Sequence[CachedRun]) -> None:
    """Mark in `found` (a numpy bool array over the joined fingerprints, written in place) those the runs hold;
    the entries True already are not looked up. frontier._native does it in one C pass (an interpolation search
    per probe and run, no array per step); numpy searches the whole batch run by run."""
    if not runs or found.all():
        return
    kernels = native()
    if kernels is not None:
        kernels.runs_find(blob, found, [
            (r.pairs.hi, r.pairs.lo, r.first, r.last, None if r.filter is None else r.filter.bits,
             0 if r.filter is None else r.filter.blocks) for r in runs])
        return
    hi, lo = halves(blob)
    todo = np.flatnonzero(~found)
    for run in runs:
        mine = todo[(hi[todo] >= np.uint64(run.first)) & (hi[todo] <= np.uint64(run.last))]
        if run.filter is not None:
            mine = mine[run.filter.may_hold(hi[mine], lo[mine])]
        found[mine[find(run.pairs, hi[mine], lo[mine])]] = True
        todo = todo[~found[todo]]
        if not todo.size:
            return


class PendingBlobs:
    """The pending fingerprints of a log searched only rarely (probabilistic mode), kept as the blobs they were
    recorded in: adding a batch keeps a reference, where a hash set would place each fingerprint (measured: the
    set was a fifth of the log's cost per URL there), and a lookup sorts them once until the next addition. The
    log records only new fingerprints, so they are distinct; `blob()` may be unsorted (the flush sorts it)."""

    __slots__ = ("_blobs", "_count", "_sorted")

    def __init__(self) -> None:
        self._blobs: list[bytes] = []
        self._count = 0
        self._sorted: Pairs | None = None

    def add_blob(self, blob: bytes) -> int:
        n = len(blob) // FP
        if n:
            self._blobs.append(bytes(blob))
            self._count += n
            self._sorted = None
        return n

    def blob(self) -> bytes:
        return b"".join(self._blobs)

    def contains_blob(self, blob: bytes) -> np.ndarray:
        """For each fingerprint of a joined buffer, True if pending (a numpy bool array)."""
        if not self._count or not blob:
            return np.zeros(len(blob) // FP, dtype=bool)
        if self._sorted is None:
            self._sorted = Pairs(sorted_unique(self._blobs, presorted=False)[0])
        return find(self._sorted, *halves(blob))

    def difference_update(self, fps: Iterable[bytes]) -> None:
        gone = set(fps)
        if gone:
            kept = [fp for fp in self if fp not in gone]
            self._blobs, self._count, self._sorted = [b"".join(kept)], len(kept), None

    def __contains__(self, fp: object) -> bool:
        return isinstance(fp, bytes) and len(fp) == FP and bool(self.contains_blob(fp)[0])

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[bytes]:
        return iter(split(self.blob()))


class RunFilter:
    """A blocked Bloom filter over one run's fingerprints, held in memory so that a lookup reads a run's page
    only when the run may hold the fingerprint (the seen-test's filter cannot tell which run does).

    Bits come straight from the fingerprint, no hashing: the block of 512 bits from the top of the first
    half, so that a run, written in key order, sets bits in a contiguous range of blocks at a time (a
    "segment", stored beside the run's chunks); 3 bits in the block from the second half. At 8 bits per
    fingerprint, about 3% of the runs that do not hold a fingerprint are read anyway."""

    __slots__ = ("blocks", "_bytes", "_view")
    HASHES = 3
    BLOCK_BYTES = 64

    def __init__(self, blocks: int) -> None:
        self.blocks = blocks
        self._bytes = np.zeros(blocks * self.BLOCK_BYTES, dtype=np.uint8)
        self._view = memoryview(self._bytes)  # item access without numpy scalars, for one lookup

    @staticmethod
    def blocks_for(expected: int, bits_per_entry: int) -> int:
        return max(1, -(-expected * bits_per_entry // (8 * RunFilter.BLOCK_BYTES)))

    def merge(self, first: int, data: bytes) -> None:
        """OR a segment in."""
        start = first * self.BLOCK_BYTES
        self._bytes[start:start + len(data)] |= np.frombuffer(data, dtype=np.uint8)

    @property
    def bits(self) -> np.ndarray:
        """The filter's bytes (blocks x 64), for frontier._native.runs_find."""
        return self._bytes

    def may_hold(self, hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
        bits = _filter_bits(self.blocks, hi, lo)[1]
        return ((self._bytes[bits >> np.uint64(3)] >> (bits & np.uint64(7)).astype(np.uint8)) & 1).all(axis=0)

    def may_hold_one(self, fp: bytes) -> bool:
        hi, lo = int.from_bytes(fp[:8], "big"), int.from_bytes(fp[8:], "big")
        base = ((hi >> 32) * self.blocks >> 32) * 512
        view = self._view
        for i in range(self.HASHES):
            bit = base + ((lo >> (9 * i)) & 511)
            if not (view[bit >> 3] >> (bit & 7)) & 1:
                return False
        return True

    @property
    def nbytes(self) -> int:
        return self._bytes.nbytes


def _filter_bits(blocks: int, hi: np.ndarray, lo: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The filter block of each entry, and its HASHES bit numbers in the filter (shape (HASHES, n))."""
    block = ((hi >> np.uint64(32)) * np.uint64(blocks)) >> np.uint64(32)
    base = block * np.uint64(512)
    return block, np.stack([base + ((lo >> np.uint64(9 * i)) & np.uint64(511)) for i in range(RunFilter.HASHES)])


def filter_segment(blocks: int, blob: bytes) -> tuple[int, bytes]:
    """The filter bits of a blob of fingerprints: (first block, the bytes of the blocks from it to the last
    one they touch), for a filter of `blocks` blocks."""
    block, bits = _filter_bits(blocks, *halves(blob))
    first, end = int(block.min()), int(block.max()) + 1  # contiguous when the entries are in key order
    local = np.zeros((end - first) * 512, dtype=bool)
    local[(bits - np.uint64(first * 512)).ravel()] = True
    return first, np.packbits(local, bitorder="little").tobytes()


def put_segment(txn: lmdb.Transaction, db: lmdb._Database, run_id: int, first: int, data: bytes) -> None:
    """Store a filter segment under run id + first block, ORed with one stored there before."""
    key = run_prefix(run_id) + first.to_bytes(8, "big")
    old = txn.get(key, db=db)
    if old is not None:
        short, long = sorted((old, data), key=len)
        merged = np.frombuffer(long, dtype=np.uint8).copy()
        merged[:len(short)] |= np.frombuffer(short, dtype=np.uint8)
        data = merged.tobytes()
    txn.put(key, data, db=db)


def read_filters(txn: lmdb.Transaction, db: lmdb._Database, blocks: dict[int, int]) -> dict[int, RunFilter]:
    """The filters of the runs in `blocks` (run id -> its filter's block count), from their segments."""
    filters = {run_id: RunFilter(n) for run_id, n in blocks.items()}
    for key, value in txn.cursor(db=db):
        run_filter = filters.get(int.from_bytes(key[:RUN_ID_SIZE], "big"))
        if run_filter is not None:
            run_filter.merge(int.from_bytes(key[RUN_ID_SIZE:], "big"), value)
    return filters


def put_chunks(txn: lmdb.Transaction, db: lmdb._Database, run_id: int, blob: bytes, chunk: int) -> None:
    """Append a sorted blob to a run (all of it above the run's last chunk), `chunk` fingerprints a chunk."""
    prefix = run_prefix(run_id)
    step = chunk * FP
    put = txn.put
    for start in range(0, len(blob), step):
        value = blob[start:start + step]
        put(prefix + value[-FP:], value, db=db)


def _in_chunk(value: bytes, fp: bytes) -> bool:
    at = value.find(fp)
    while at > 0 and at % FP:  # a match across two fingerprints: look further
        at = value.find(fp, at + 1)
    return at >= 0


def contains(cursor: lmdb.Cursor, prefix: bytes, fp: bytes) -> bool:
    """True if the run holds fp: one B-tree search for its chunk, one page read (searched in C if built)."""
    if not cursor.set_range(prefix + fp) or cursor.key()[:RUN_ID_SIZE] != prefix:
        return False
    kernels = native()
    return kernels.chunk_has(cursor.value(), fp) if kernels is not None else _in_chunk(cursor.value(), fp)


def contains_sorted(cursor: lmdb.Cursor, prefix: bytes, fps: Sequence[bytes]) -> list[bool]:
    """`contains` for ascending fingerprints in one forward pass (a merge-join with the run): a probe in the
    chunk at hand reads no page; one in the next chunk steps the cursor; only a farther one searches the
    B-tree. Dense probes (a sweep of deferred confirmations) thus read the run's chunks in order, each once."""
    kernels = native()
    has = kernels.chunk_has if kernels is not None else _in_chunk
    out = [False] * len(fps)
    bound, value = b"", b""  # the chunk at hand: its key (prefix + upper bound) and fingerprints
    for i, fp in enumerate(fps):
        key = prefix + fp
        if key > bound:
            if bound and cursor.next() and cursor.key()[:RUN_ID_SIZE] == prefix and cursor.key() >= key:
                pass  # the next chunk holds the probe's place
            elif not cursor.set_range(key) or cursor.key()[:RUN_ID_SIZE] != prefix:
                break  # past the run's last chunk: so are the probes after this one
            bound, value = cursor.key(), cursor.value()
        out[i] = has(value, fp)
    return out


def chunks(cursor: lmdb.Cursor, run_id: int, below: int = KEY_SPACE) -> Iterator[tuple[bytes, bytes]]:
    """(key, value) of a run's chunks in order, from its first one, up to the first whose bound's hi is
    >= below (the chunks that may hold entries below it)."""
    prefix = run_prefix(run_id)
    if not cursor.set_range(prefix):
        return
    for key, value in cursor:
        if key[:RUN_ID_SIZE] != prefix:
            return
        yield key, value
        if bound_hi(key) >= below:
            return


def bound_hi(key: bytes) -> int:
    """The first half of a chunk key's upper bound."""
    return int.from_bytes(key[RUN_ID_SIZE:RUN_ID_SIZE + 8], "big")


def split(value: bytes) -> list[bytes]:
    """A chunk (or any blob) as a list of fingerprints."""
    return [value[i:i + FP] for i in range(0, len(value), FP)]


def drop_run(txn: lmdb.Transaction, db: lmdb._Database, run_id: int) -> None:
    """Delete what is left of a run."""
    cursor = txn.cursor(db=db)
    prefix = run_prefix(run_id)
    if cursor.set_range(prefix):
        while cursor.key()[:RUN_ID_SIZE] == prefix:
            if not cursor.delete():
                break


def remove(txn: lmdb.Transaction, db: lmdb._Database, run_id: int, fps: Sequence[bytes]) -> list[bytes]:
    """Delete fingerprints from a run in place (each one rewrites the chunk that holds it, under the same
    key, or deletes the chunk it empties); returns those it held."""
    cursor = txn.cursor(db=db)
    prefix = run_prefix(run_id)
    removed = []
    for fp in sorted(fps):
        if not contains(cursor, prefix, fp):
            continue
        removed.append(fp)
        rest = b"".join(f for f in split(cursor.value()) if f != fp)
        if rest:
            cursor.put(cursor.key(), rest)
        else:
            cursor.delete()
    return removed
