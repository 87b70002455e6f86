"""CountingBloom: a Bloom filter that can forget, with 4-bit saturating counters in POSIX shared memory.

A plain Bloom filter cannot remove an item (a bit may belong to many items); here every position is a
4-bit counter that adding increments and discarding decrements. Sized like a plain filter at p (m
counters for m bits, `frontier.seen.sizing`; with k rounded the rate at capacity is about p, 1.0013p at 1e-4),
it costs 4x the memory of one; positions come from `frontier.seen.positions`, partitions stay under 2^28
counters (where that math is uniform). Batches run as C loops (frontier._native) when it is built, numpy
otherwise: the same counters.

Layout of segment `<name>`, integers little-endian:

    offset  size       field
    0       8          magic b"FRCOUNT1"
    8       4          u32 layout version (1)
    12      4          u32 partitions P (a power of two)
    16      8          u64 capacity n
    24      8          f64 target false-positive rate p
    32      8          u64 counters per partition m_p (a multiple of 16, below 2^28)
    40      4          u32 hashes k
    44      4          reserved, zero
    48      8          u64 header size H (the counters start here; a multiple of 4096)
    56      8          reserved, zero
    64      8*P        i64 items[p]: items added to partition p minus items discarded from it
    H       P*m_p/2    counters: partition p holds counters [p*m_p, (p+1)*m_p); counter j is the low nibble
                       of byte j//2 when j is even, the high nibble when it is odd

Counters saturate: one that reached 15 is never incremented or decremented again. A counter below 15
is therefore exact (it counts the counted items whose positions include it, with multiplicity), and
discarding a counted item decrements only counters that still count that item: no other item ever
loses a counter it needs, so deletion never causes a false negative. (A decremented saturated
counter could reach 0 while other items still need it.) With counters Poisson-distributed around
k n / m = ln 2 at capacity, saturation is rare (P(>= 15) ~ 1e-15 per counter); past capacity the
filter stays correct and its false-positive rate rises, as a plain filter's does. It does not grow:
size it for the crawl (`stats()` reports the estimated rate).

Which items may be discarded: those the filter counted, i.e. whose `add` returned True and that were not
discarded since. An `add` that returns False (a repeat, or a false positive) increments nothing, so for
the filter that item was never added. Discarding an item that was never added but tests present (a
false positive) decrements counters that belong to other items and can make them false negatives
later; the filter cannot tell such an item from a member. What the API does: an item with a zero
counter is certainly absent, and `discard` returns False and changes nothing; otherwise it decrements
(clamping at 0) and returns True. A caller keeps to the rule with an exact record of what was reported
new: URLSeen's log holds exactly the URLs it reported new (in both modes), so it can refuse the rest.
(An item whose add was a false positive was never counted: discards of others may make it read absent
again, which is right, as it was never added.)

Partitions and locks are SharedBloom's: a batch holds the fcntl record locks of the partitions it
touches (one contiguous range), released by the kernel if the holder dies, so `add` (check-and-add)
and `discard` (check-and-decrement) are atomic across processes and `in` is lock-free. Unlike
SharedBloom, a partition gets no headroom over its share n/P: there is no next generation to spill
into, and a partition a little over its share runs a little fuller (at 10^6 items in 64 partitions
that raises the rate by about 0.5%).
"""

from __future__ import annotations

import os
import secrets
import struct
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import numpy as np

from frontier.errors import ConfigError, FrontierError, StorageError
from frontier.native import native
from frontier.seen.bloom import (DEFAULT_PARTITIONS, LOCK_BASE, SNAPSHOT_ID_SIZE, Admission, admitted_by, check_partitions,
                                 check_snapshot_id)
from frontier.seen.datadir import fsync_dir
from frontier.seen.fingerprint import FINGERPRINT_SIZE, check_batch, item_fingerprint, item_fingerprints
from frontier.seen.fpset import split
from frontier.seen.positions import first_new, key_one, keys, partition_bits, positions, positions_one
from frontier.seen.shm import RangeLock, Segment
from frontier.seen.sizing import (UNIFORM_LIMIT, bloom_parameters, check_capacity_and_rate, format_size, memory_shortfall,
                                  min_partitions)

MAGIC = b"FRCOUNT1"
LAYOUT_VERSION = 1
SATURATED = 15
PAGE = 4096
CHUNK = 65536  # items per vectorised step

_HEAD = struct.Struct("<8sIIQdQI4xQ8x")
_SNAPSHOT_MAGIC = b"FRCSNAP2"  # then the snapshot id (frontier.seen.bloom.SNAPSHOT_ID_SIZE bytes)

Item = str | bytes


def _header_size(partitions: int) -> int:
    return -(-(64 + 8 * partitions) // PAGE) * PAGE


def geometry(capacity: int, error_rate: float, partitions: int) -> tuple[int, int]:
    """(counters per partition, hashes) for `capacity` items at `error_rate` over `partitions`."""
    params = bloom_parameters(capacity, error_rate)
    per_part = -(-params.bits // (16 * partitions)) * 16
    if per_part >= UNIFORM_LIMIT:  # past it the positions are not uniform and the rate rises (frontier.seen.positions)
        raise ConfigError(f"{partitions} partitions of {per_part:,} counters are over 2^28 each; use "
                          f"{min_partitions(params.bits, UNIFORM_LIMIT)} or more", "partitions")
    return per_part, params.hashes


class CountingBloom:
    """A set of fingerprints in shared memory with add, discard and `in`; items are 16-byte fingerprints
    or URL strings (canonicalised first). `create` (the owner, who unlinks) or `attach(name)`.

    Args:
        segment: the shared-memory block holding it (header and bits).
        owner: True for the creator, who unlinks the block; False for a process that attached.
    """

    def __init__(self, segment: Segment, *, owner: bool) -> None:
        self._segment = segment
        self._owner = owner
        self._u8: np.ndarray | None = None
        self._items: np.ndarray | None = None
        self._view: memoryview | None = None  # the counter bytes, for single lookups without numpy
        self._native = native()  # the C kernels, or None: the numpy path
        self._spec: tuple | None = None  # the C kernels' filter tuple
        self._closed = False
        try:
            if segment.size < _HEAD.size:
                raise StorageError(f"shared memory block {segment.name!r} is not a frontier counting Bloom filter "
                                   f"({segment.size} bytes)")
            magic, version, partitions, capacity, error_rate, per_part, hashes, header = _HEAD.unpack_from(segment.buf)
            if magic != MAGIC or version != LAYOUT_VERSION:
                raise StorageError(f"shared memory block {segment.name!r} is not a frontier counting Bloom filter "
                                   f"(magic {magic!r}, version {version})")
            if segment.size != header + partitions * per_part // 2:
                raise StorageError(f"shared memory block {segment.name!r}: {segment.size} bytes, its header "
                                   f"implies {header + partitions * per_part // 2}")
            self.partitions, self.capacity, self.error_rate = partitions, capacity, error_rate
            self.part_counters, self.hashes = per_part, hashes
            self._pbits = partition_bits(partitions)
            self._items = np.frombuffer(segment.buf, dtype="<i8", count=partitions, offset=64)
            self._u8 = np.frombuffer(segment.buf, dtype=np.uint8, count=partitions * per_part // 2, offset=header)
            self._view = segment.buf[header:]
            self._spec = (self._u8, 4, per_part, hashes)
        except BaseException:
            self.close()
            raise

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def create(cls, capacity: int = 10_000_000, error_rate: float = 1e-4, *, partitions: int = DEFAULT_PARTITIONS,
               name: str | None = None) -> "CountingBloom":
        """Create and own a new filter. `name` defaults to a random one; use `.name` to attach."""
        capacity = check_capacity_and_rate(capacity, error_rate)
        check_partitions(partitions)
        per_part, hashes = geometry(capacity, error_rate, partitions)
        size = _header_size(partitions) + partitions * per_part // 2
        shortfall = memory_shortfall(size)  # asked first: a block past the free shared memory SIGBUSes when written
        if shortfall is not None:
            raise ConfigError(f"a counting Bloom filter for {capacity:,} items at error rate {error_rate:g} needs "
                              f"{format_size(size)} of shared memory; {shortfall}", "capacity")
        header = _header_size(partitions)
        segment = Segment.create(name or f"frontier_count_{secrets.token_hex(6)}", size)
        _HEAD.pack_into(segment.buf, 0, MAGIC, LAYOUT_VERSION, partitions, capacity, float(error_rate), per_part,
                        hashes, header)
        try:
            return cls(segment, owner=True)
        except BaseException:
            segment.unlink()
            raise

    @classmethod
    def attach(cls, name: str) -> "CountingBloom":
        """Attach to a filter another process created; never unlinks it."""
        return cls(Segment.attach_filter(name, "frontier counting Bloom filter"), owner=False)

    # -- counters -----------------------------------------------------------------------------

    def _counters(self, pos: np.ndarray) -> np.ndarray:
        """The counters at positions (any shape), as uint8 0..15."""
        shift = ((pos & np.uint64(1)) << np.uint64(2)).astype(np.uint8)
        return (self._u8[pos >> np.uint64(1)] >> shift) & np.uint8(0xF)

    def _change(self, pos: np.ndarray, step: int) -> None:
        """Add `step` (+1 or -1) at every position (repeats count), saturated counters untouched, 0..15 kept."""
        idx, times = np.unique(pos, return_counts=True)
        old = self._counters(idx).astype(np.int64)
        new = np.clip(old + step * times, 0, SATURATED)
        new[old == SATURATED] = SATURATED
        delta = (new - old) << ((idx & np.uint64(1)).astype(np.int64) << 2)
        # nibbles never carry into each other, so a byte's deltas add up mod 256 to its new value
        np.add.at(self._u8, idx >> np.uint64(1), (delta & 0xFF).astype(np.uint8))

    def _positions(self, fps: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
        stride, b, part = keys(fps, self._pbits)
        return positions(stride, b, part, self.part_counters, self.hashes), part

    def _locked(self, part: np.ndarray) -> RangeLock:
        low, high = int(part.min()), int(part.max())
        return self._segment.lock(LOCK_BASE + low, high - low + 1)

    # -- set protocol -------------------------------------------------------------------------

    def __contains__(self, item: Item) -> bool:
        fp = item_fingerprint(item)
        self._live()
        view = self._view
        for j in positions_one(*key_one(fp, self._pbits), self.part_counters, self.hashes):
            if not view[j >> 1] >> ((j & 1) << 2) & 0xF:  # type: ignore[index]
                return False
        return True

    def contains_many(self, items: Sequence[Item]) -> list[bool]:
        """Lock-free membership for a batch: True means "maybe present", False "certainly not"."""
        return self.contains_mask(items).tolist()

    def contains_mask(self, items: Sequence[Item]) -> np.ndarray:
        """`contains_many` as a numpy bool array."""
        fps = item_fingerprints(items)
        self._live()
        if not fps:
            return np.zeros(0, dtype=bool)
        if self._native is not None:
            return np.frombuffer(self._native.test(b"".join(fps), self._pbits, [self._spec]), dtype=bool)
        return np.concatenate([self._counters(self._positions(fps[s:s + CHUNK])[0]).all(axis=1)
                               for s in range(0, len(fps), CHUNK)])

    def add(self, item: Item) -> bool:
        """Atomic check-and-add: True if the item was certainly not in the filter (now it is)."""
        return self.add_many([item])[0]

    def add_many(self, items: Sequence[Item]) -> list[bool]:
        """Atomic check-and-add of a batch; entry i is True if items[i] is new (a later repeat in the batch is
        False). Only an item reported new is counted, and only such an item may be discarded."""
        return self._batch(items, +1, self.add_unique_mask)

    def _batch(self, items: Sequence[Item], step: int, unique: Callable[[Sequence[bytes]], np.ndarray]) -> list[bool]:
        """`add_many` (step +1) or `discard_many` (-1): CHUNK items at a time, a batch's repeats False."""
        fps = item_fingerprints(items)
        self._live()
        out: list[bool] = []
        if self._native is not None:  # the C path tells a batch's repeats apart itself
            joined, size = b"".join(fps), CHUNK * FINGERPRINT_SIZE
            for start in range(0, len(joined), size):
                with self._native_two_phase(joined[start:start + size], step, repeats=True) as chosen:
                    out.extend(chosen.tolist())
            return out
        for start in range(0, len(fps), CHUNK):
            out.extend(first_new(fps[start:start + CHUNK], unique))
        return out

    def add_unique_mask(self, fps: Sequence[bytes]) -> np.ndarray:
        """Check-and-add of distinct fingerprints, as a numpy bool array (True: new)."""
        with self.adding(fps) as new:
            return new

    @contextmanager
    def adding(self, fps: Sequence[bytes]) -> Iterator[np.ndarray]:
        """Two-phase check-and-add of distinct fingerprints, as `SharedBloom.adding`: yields which are new while
        holding their partitions' locks, and counts them when the block ends without an exception (if it
        raises, the filter is left as it was). A batch's positions are held in memory at once (k x 8 bytes
        an item): `add_many` cuts large inputs into chunks."""
        with self._two_phase(fps, +1) as new:
            yield new

    @contextmanager
    def adding_joined(self, joined: bytes) -> Iterator[np.ndarray]:
        """`adding` for distinct fingerprints joined into one buffer (b"".join of them, as `frontier.seen.fpset`
        builds), as `SharedBloom.adding_joined`: the C path works on the buffer itself, the numpy path splits it."""
        if self._native is None or not joined:
            with self.adding(split(joined)) as new:
                yield new
            return
        self._live()
        with self._native_two_phase(joined, +1, repeats=False) as new:
            yield new

    def admitting(self, joined: bytes) -> AbstractContextManager[Admission]:
        """`SharedBloom.admitting`: a batch that may repeat fingerprints, on `adding_joined`."""
        return admitted_by(self.adding_joined, joined)

    @contextmanager
    def discarding(self, fps: Sequence[bytes]) -> Iterator[np.ndarray]:
        """Two-phase discard of distinct fingerprints: yields which are present while holding their partitions'
        locks, and decrements them when the block ends without an exception. The rule of `discard` applies."""
        with self._two_phase(fps, -1) as present:
            yield present

    @contextmanager
    def _two_phase(self, fps: Sequence[bytes], step: int) -> Iterator[np.ndarray]:
        check_batch(fps)
        self._live()
        if not len(fps):
            yield np.zeros(0, dtype=bool)
            return
        if self._native is not None:
            with self._native_two_phase(b"".join(fps), step, repeats=False) as chosen:
                yield chosen
            return
        pos, part = self._positions(fps)
        with self._locked(part):
            chosen = self._counters(pos).all(axis=1)  # present
            if step > 0:
                chosen = ~chosen  # new
            yield chosen
            self._change(pos[chosen].ravel(), step)
            np.add.at(self._items, part[chosen].astype(np.intp), step)

    @contextmanager
    def _native_two_phase(self, joined: bytes, step: int, *, repeats: bool) -> Iterator[np.ndarray]:
        """`_two_phase` on the C path, for concatenated fingerprints. `repeats`: the batch may repeat one; only
        the first occurrence of a chosen one is chosen."""
        nat, pbits, spec = self._native, self._pbits, self._spec
        with self._native_locked(joined):
            chosen = np.frombuffer(nat.test(joined, pbits, [spec]), dtype=bool)  # present
            if step > 0:
                chosen = ~chosen  # new
            if repeats:
                chosen = np.frombuffer(nat.firsts(joined, chosen), dtype=bool)
            yield chosen
            nat.update(joined, pbits, spec, chosen, 1, step)
            nat.tally(joined, pbits, chosen, 1, self._items, step)

    def _native_locked(self, joined: bytes) -> RangeLock:
        low, high = self._native.partition_range(joined, self._pbits)
        return self._segment.lock(LOCK_BASE + low, high - low + 1)

    def discard(self, item: Item) -> bool:
        """Forget an item whose `add` returned True. True if it was present (its counters are decremented),
        False if it was certainly absent (nothing changes). Discarding any other item can cause false
        negatives for others: see the module docstring."""
        return self.discard_many([item])[0]

    def discard_many(self, items: Sequence[Item]) -> list[bool]:
        """`discard` for a batch, atomically per chunk; a repeat of an item in the batch is False."""
        return self._batch(items, -1, self._discard_unique)

    def _discard_unique(self, fps: Sequence[bytes]) -> np.ndarray:
        with self.discarding(fps) as present:
            return present

    def count_many(self, fps: Sequence[bytes]) -> None:
        """Count distinct fingerprints known to be members, without testing them: a rebuild from an exact record
        of what was counted (URLSeen's log). `add_many` would skip an item that tests present (a false positive
        among the others), and discarding that item later would take counters from others."""
        check_batch(fps)
        self._live()
        if self._native is not None:
            nat, pbits, joined = self._native, self._pbits, b"".join(fps)
            for start in range(0, len(joined), CHUNK * FINGERPRINT_SIZE):
                chunk = joined[start:start + CHUNK * FINGERPRINT_SIZE]
                every = np.ones(len(chunk) // FINGERPRINT_SIZE, dtype=bool)
                with self._native_locked(chunk):
                    nat.update(chunk, pbits, self._spec, every, 1, 1)
                    nat.tally(chunk, pbits, every, 1, self._items, 1)
            return
        for start in range(0, len(fps), CHUNK):
            pos, part = self._positions(fps[start:start + CHUNK])
            with self._locked(part):
                self._change(pos.ravel(), +1)
                np.add.at(self._items, part.astype(np.intp), 1)

    def __len__(self) -> int:
        """Items added minus items discarded (a false positive's add is never counted)."""
        self._live()
        return max(0, int(self._items.sum()))  # type: ignore[union-attr]

    # -- introspection ------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self._segment.name

    @property
    def nbytes(self) -> int:
        """Bytes of counters (the header excluded)."""
        return len(self._live())

    def stats(self) -> dict[str, float | int]:
        """Items, fill (nonzero counters), saturated counters and the estimated false-positive rate now."""
        u8 = self._live()
        low, high = u8 & np.uint8(0xF), u8 >> np.uint8(4)
        counters = 2 * len(u8)
        nonzero = int(np.count_nonzero(low) + np.count_nonzero(high))
        fill = nonzero / counters
        return {
            "items": len(self),
            "capacity": self.capacity,
            "bytes": len(u8),
            "counters": counters,
            "bits_per_item": len(u8) * 8 / max(1, len(self)),
            "fill_ratio": fill,
            "saturated_counters": int(np.count_nonzero(low == SATURATED) + np.count_nonzero(high == SATURATED)),
            "estimated_false_positive_rate": fill ** self.hashes,
        }

    def _live(self) -> np.ndarray:
        if self._closed or self._u8 is None:
            raise StorageError("counting Bloom filter handle is closed")
        return self._u8

    # -- persistence --------------------------------------------------------------------------

    def save(self, path: str | os.PathLike[str]) -> bytes:
        """Write a consistent snapshot (every partition locked) atomically: tmp file, fsync, rename, fsync of the
        directory. Returns its random id, as `SharedBloom.save` does."""
        self._live()
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        snapshot_id = os.urandom(SNAPSHOT_ID_SIZE)
        try:
            with self._segment.lock(LOCK_BASE, self.partitions), open(tmp, "wb") as f:
                f.write(_SNAPSHOT_MAGIC + snapshot_id)
                f.write(self._segment.buf)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)  # e.g. a full disk: leave no partial snapshot behind
            raise
        fsync_dir(path.parent)
        return snapshot_id

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, name: str | None = None,
             snapshot_id: bytes | None = None) -> "CountingBloom":
        """Create an owned filter from a snapshot; StorageError if the file is not a valid one, or (given
        `snapshot_id`) not the one `save` returned that id for."""
        with open(path, "rb") as f:
            if f.read(len(_SNAPSHOT_MAGIC)) != _SNAPSHOT_MAGIC:
                raise StorageError(f"{path}: not a frontier counting Bloom snapshot (of this version)")
            check_snapshot_id(path, f.read(SNAPSHOT_ID_SIZE), snapshot_id)
            head = f.read(_HEAD.size)
            if len(head) != _HEAD.size:
                raise StorageError(f"{path}: truncated counting Bloom snapshot")
            magic, version, partitions, capacity, error_rate, per_part, hashes, header = _HEAD.unpack(head)
            if magic != MAGIC or version != LAYOUT_VERSION:
                raise StorageError(f"{path}: counting Bloom snapshot of another layout version")
            try:
                check_partitions(partitions)
                expected = (per_part, hashes) == geometry(capacity, error_rate, partitions) \
                    and header == _header_size(partitions)
            except ConfigError:  # not a header we wrote
                expected = False
            if not expected:
                raise StorageError(f"{path}: corrupt counting Bloom snapshot header")
            size = len(_SNAPSHOT_MAGIC) + SNAPSHOT_ID_SIZE + header + partitions * per_part // 2
            actual = os.fstat(f.fileno()).st_size
            if actual != size:
                raise StorageError(f"{path}: {'truncated' if actual < size else 'corrupt'} counting Bloom snapshot "
                                   f"({actual} bytes, its header implies {size})")
            bloom = cls.create(capacity, error_rate, partitions=partitions, name=name)
            try:
                buf = bloom._segment.buf
                buf[:_HEAD.size] = head
                if f.readinto(buf[_HEAD.size:]) != len(buf) - _HEAD.size:
                    raise StorageError(f"{path}: truncated counting Bloom snapshot")
            except BaseException:
                bloom.close()
                bloom.unlink()
                raise
            return bloom

    # -- lifetime -----------------------------------------------------------------------------

    def close(self) -> None:
        """Release this handle's mapping. Idempotent; safe after a failed __init__."""
        if self._closed:
            return
        self._u8 = self._items = self._spec = None
        if self._view is not None:
            self._view.release()  # BufferError while a C call holds it: nothing closed yet, close again later
            self._view = None
        self._segment.close()
        self._closed = True

    def unlink(self) -> None:
        """Remove the segment's name. Only the owner calls this, once, in a `finally`."""
        if not self._owner:
            raise FrontierError("only the process that created a CountingBloom may unlink it")
        self._segment.unlink()

    def __enter__(self) -> "CountingBloom":
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.close()
        finally:
            if self._owner:
                self.unlink()

    def __reduce__(self):
        raise TypeError("a CountingBloom handle is per process: pass .name and CountingBloom.attach() it")
