"""SharedBloom: a partitioned, growable Bloom filter in POSIX shared memory, visible to every process.

Layout. The primary segment `<name>` starts with a header, then generation 0's bits; generation g > 0
lives in segment `<name>_g<g>`. All integers little-endian:

    offset        size    field
    0             8       magic b"FRBLOOM1"
    8             4       u32 layout version (2)
    12            4       u32 partitions P (a power of two)
    16            8       u64 capacity of generation 0
    24            8       f64 target false-positive rate of the whole filter
    32            4       u32 generations published (>= 1; a new one is zero-filled before this grows)
    36            4       u32 maximum generations G
    40            8       u64 header size H (generation 0's bits start here; a multiple of 4096)
    48            16      reserved, zero
    64            G*P*8   u64 counts[g][p]: items added to partition p of generation g
    64+G*P*8      P       u8 current generation of partition p (the newest it was added to; adds skip it once full)

Item -> bits. A 16-byte fingerprint is two big-endian u64 halves a, b. The partition is the top log2(P) bits
of a. A filter created with `blocked=True` (layout version 4; 3 is the standard one) keeps generation 0 blocked
(`frontier.seen.blocked.partition_positions`, `sizing.blocked_generation`): all k bits of an item lie in one 512-bit
block of its partition, block ((a << log2(P)) * blocks per partition) >> 64 (the low bit of the shifted a
cleared, as in the stride below), bits as in the blacklist's blocks, so a check-and-add touches one cache line
instead of k, for about 18% more bits at 1e-4. Every other generation uses `frontier.seen.positions` (shared with
CountingBloom and Blacklist's layout 1): the stride is
s = ((a << log2(P)) | 1) mod 2^64, the partition bits shifted out (left in, they would confine every stride
of a partition to a band 1/P wide and correlate the probes: layout 1 did, and at 4x capacity measured 1.5x
the target rate at P = 64, 27x at P = 512). Position i inside the partition's m_p bits is
h_i = (b + i*s) mod 2^64 (Kirsch-Mitzenmacher double hashing) reduced without division as
((h_i >> 32) * m_p) >> 32 (Lemire's multiply-shift), so m_p < 2^32. That reduction is uniform only while
m_p is small against 2^32 (near it some positions are twice as likely, and the rate rises): generation 0,
which holds 90% of the rate budget, must keep its partitions under UNIFORM_LIMIT = 2^28 bits
(`partitions_needed`; `create` refuses fewer partitions). Growth generations may reach 2^32: together they
hold 5% of the budget, so even twice their share keeps the compound rate under p. (The limit changes which
partition counts are accepted, not the layout of a given (capacity, rate, P): a snapshot reads as before.)
Bit j of a generation is bit j%8 of byte j//8. A batch's test, placement and set run as C loops
(frontier._native) when the extension is built, as numpy otherwise (`frontier.native`): the same bits.

Growth (Scalable Bloom Filters, Almeida et al. 2007). Generation g holds capacity*2^g items at
rate p*(1-r)*r^g with r = TIGHTENING, times LATER_SHARE for g >= 1, so the compound rate stays below
p(1-r) + p*r*LATER_SHARE = 0.95p however far the filter grows (r = 0.1 costs generation 0 only 1.1%
more bits than a plain filter at p; r = 0.2 cost 2.4%). Without the LATER_SHARE headroom it would be
near p at 4x, and (measured with r = 0.2) a sample of 400k absent items read above p for
about one seed in four. Each partition moves to its next generation on its own when its share is full.

Concurrency. `add`/`add_many` are atomic check-and-add: a writer holds the fcntl record locks of
the partitions it touches (one contiguous range per batch); the kernel releases them if the holder
dies. `adding()` splits that in two, for a caller that must record the new items elsewhere first:
it tests under the locks, and sets the bits only if the caller's block succeeds (`adding_joined()`: the
same on one joined buffer of fingerprints). `in` is lock-free: it can only miss an add still in progress,
never a finished one. A new generation is created and published under a growth lock, taken after
partition locks; a segment by that name that is not yet published is a dead writer's leftover and is
replaced. `save()` takes every partition lock, then the growth lock, so a snapshot is the filter at one
instant.
"""

from __future__ import annotations

import math
import os
import secrets
import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from pathlib import Path

import numpy as np
from bitarray import bitarray

from frontier.errors import FrontierError, StorageError
from frontier.native import native
from frontier.seen.blocked import partition_positions, partition_positions_one
from frontier.seen.datadir import fsync_dir
from frontier.seen.fingerprint import FINGERPRINT_SIZE, check_batch, item_fingerprint, item_fingerprints
from frontier.seen.fpset import firsts, select, split
from frontier.seen.positions import first_new, get_bits, key_one, keys, positions, positions_one, set_bits
from frontier.seen.shm import RangeLock, Segment, generation_name, unlink_all, unlink_name
# The layout's geometry (GROWTH, TIGHTENING, LATER_SHARE, ...) is plain Python in frontier.seen.sizing, for the supervisor's
# memory check; the names other modules import from here are re-exported.
from frontier.seen.sizing import (GROWTH, MAX_GENERATIONS, MAX_PARTITIONS, PARTITION_LIMIT, TIGHTENING,  # noqa: F401
                                  allocation_bytes, blocked_generation, check_capacity_and_rate, check_fits_in_memory,
                                  check_partitions, format_size, generation_bytes, generation_error_rate,
                                  generation_geometry, generation_rate, is_partition_count,
                                  memory_shortfall, partition_limit, partitions_needed)
from frontier.seen.sizing import header_size as _header_size

MAGIC = b"FRBLOOM1"
LAYOUT_VERSION = 3  # 2: the stride drops the partition bits; 3: partitions sized with headroom
BLOCKED_LAYOUT_VERSION = 4  # 3 with generation 0 blocked (`create(blocked=True)`); code before it refuses it
LAYOUT_VERSIONS = (LAYOUT_VERSION, BLOCKED_LAYOUT_VERSION)
DEFAULT_PARTITIONS = 64
LOCK_BASE = 1 << 40  # fcntl lock offsets: partition p at LOCK_BASE + p, growth at LOCK_BASE - 1
CHUNK = 65536  # items per vectorised step (bounds temporary memory)

HEADER_FIELDS = struct.Struct("<8sIIQdIIQ")  # the header's fields at offsets 0-47 (magic ... header size H)
# A snapshot file (`save`) holds SNAPSHOT_MAGIC, its random id (SNAPSHOT_ID_SIZE bytes: which save wrote it, so
# a data dir's marker names the one snapshot it matches), u32 generations published, the primary segment, then
# the bits of generations 1, 2, ...  (FRBSNAP1, before the id, is refused: the filter is rebuilt once.)
SNAPSHOT_MAGIC = b"FRBSNAP2"
SNAPSHOT_ID_SIZE = 16

Item = str | bytes


def check_snapshot_id(path: str | os.PathLike[str], found: bytes, expected: bytes | None) -> None:
    """StorageError unless a snapshot's id is the expected one: another save's file (older than the log that
    names the expected one: a rename lost in a power loss, a data.mdb restored from a backup) is refused."""
    if len(found) != SNAPSHOT_ID_SIZE:
        raise StorageError(f"{path}: truncated Bloom snapshot")
    if expected is not None and found != expected:
        raise StorageError(f"{path}: not the Bloom snapshot the log's marker names (another save's)")


class _Generation:
    """One generation's geometry and its views on shared memory."""

    __slots__ = ("index", "segment", "capacity", "part_capacity", "part_bits", "hashes", "blocked", "u8", "bits",
                 "spec")

    def __init__(self, index: int, segment: Segment, offset: int, capacity: int, error_rate: float,
                 partitions: int, blocked: bool) -> None:
        self.index = index
        self.segment = segment
        self.capacity = capacity
        self.part_capacity, self.part_bits, self.hashes = self.geometry(capacity, error_rate, partitions,
                                                                        blocked=blocked)
        self.blocked = blocked
        if self.part_bits >= PARTITION_LIMIT:
            raise ValueError(f"a partition of {self.part_bits} bits exceeds 2^32; use more partitions")
        nbytes = self.part_bits * partitions // 8
        self.u8 = np.frombuffer(segment.buf, dtype=np.uint8, count=nbytes, offset=offset)
        self.bits = bitarray(buffer=segment.buf[offset:offset + nbytes], endian="little")
        self.spec = (self.u8, 1, self.part_bits, self.hashes, self.blocked)  # the C kernels' filter tuple

    geometry = staticmethod(generation_geometry)  # (items per partition, bits per partition, hashes)
    nbytes = staticmethod(generation_bytes)

    def positions(self, stride: np.ndarray, b: np.ndarray, part: np.ndarray) -> np.ndarray:
        return (partition_positions if self.blocked else positions)(stride, b, part, self.part_bits, self.hashes)

    def test(self, stride: np.ndarray, b: np.ndarray, part: np.ndarray) -> np.ndarray:
        return get_bits(self.u8, self.positions(stride, b, part)).all(axis=1)

    def set(self, stride: np.ndarray, b: np.ndarray, part: np.ndarray) -> None:
        set_bits(self.u8, self.positions(stride, b, part))

    def test_one(self, stride: int, b: int, part: int) -> bool:
        bits = self.bits
        one = partition_positions_one if self.blocked else positions_one
        for j in one(stride, b, part, self.part_bits, self.hashes):
            if not bits[j]:
                return False
        return True

    def release(self) -> None:
        self.u8 = None  # type: ignore[assignment]
        self.bits = None  # type: ignore[assignment]
        self.spec = None  # type: ignore[assignment]


class SharedBloom:
    """A Bloom filter of fingerprints in shared memory that behaves like a set.

    Build with `SharedBloom.create(...)` (the owner, who unlinks) or `SharedBloom.attach(name)` in
    another process. Items are 16-byte fingerprints or URL strings (canonicalised first).

    Args:
        segment: the shared-memory block holding it (header and bits).
        owner: True for the creator, who unlinks the block; False for a process that attached.
    """

    def __init__(self, segment: Segment, *, owner: bool) -> None:
        self._segment = segment
        self._owner = owner
        self._gens: list[_Generation] = []
        self._created: list[Segment] = [segment] if owner else []  # tracked by this process; unlinked by unlink()
        self._closed = False
        self._native = native()  # the C kernels, or None: the numpy path
        self._caps: np.ndarray | None = None  # items per partition of each generation, for the C `place`
        try:
            if segment.size < HEADER_FIELDS.size:
                raise StorageError(f"shared memory block {segment.name!r} is not a frontier Bloom filter "
                                   f"({segment.size} bytes)")
            magic, version, partitions, capacity, error_rate, _, max_gens, header = \
                HEADER_FIELDS.unpack_from(segment.buf, 0)
            if magic != MAGIC or version not in LAYOUT_VERSIONS or max_gens != MAX_GENERATIONS:
                raise StorageError(f"shared memory block {segment.name!r} is not a frontier Bloom filter "
                                   f"(magic {magic!r}, version {version})")
            self.blocked = version == BLOCKED_LAYOUT_VERSION
            self.partitions = partitions
            self.capacity = capacity
            self.error_rate = error_rate
            self._header_size = header
            self._pbits = partitions.bit_length() - 1
            self._counts = np.frombuffer(segment.buf, dtype="<u8", count=MAX_GENERATIONS * partitions,
                                         offset=64).reshape(MAX_GENERATIONS, partitions)
            self._current = np.frombuffer(segment.buf, dtype=np.uint8, count=partitions,
                                          offset=64 + MAX_GENERATIONS * partitions * 8)
            self._refresh()
        except BaseException:
            self.close()
            raise

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def create(cls, capacity: int = 10_000_000, error_rate: float = 1e-4, *, partitions: int = DEFAULT_PARTITIONS,
               name: str | None = None, blocked: bool = False) -> "SharedBloom":
        """Create and own a new filter. `name` defaults to a random one; use `bloom.name` to attach. `blocked`:
        generation 0 keeps each item's bits in one cache line (see the module docstring)."""
        capacity = check_capacity_and_rate(capacity, error_rate)
        # before allocating: past it, a write is a SIGBUS
        check_fits_in_memory(capacity, error_rate, partitions, blocked=blocked)
        name = name or f"frontier_{secrets.token_hex(6)}"
        header = _header_size(partitions)
        segment = _new_segment(name, allocation_bytes(capacity, error_rate, partitions, blocked=blocked), tracked=True)
        version = BLOCKED_LAYOUT_VERSION if blocked else LAYOUT_VERSION
        HEADER_FIELDS.pack_into(segment.buf, 0, MAGIC, version, partitions, capacity, float(error_rate), 1,
                                MAX_GENERATIONS, header)
        try:
            return cls(segment, owner=True)
        except BaseException:
            segment.unlink()
            raise

    @classmethod
    def attach(cls, name: str) -> "SharedBloom":
        """Attach to a filter another process created; never unlinks it."""
        return cls(Segment.attach_filter(name, "frontier Bloom filter"), owner=False)

    def _gen_capacity(self, g: int) -> int:
        return self.capacity * GROWTH ** g

    def _gen_name(self, g: int) -> str:
        return generation_name(self.name, g)

    def _refresh(self) -> None:
        """Map generations another process published since we last looked."""
        published = struct.unpack_from("<I", self._segment.buf, 32)[0]
        while len(self._gens) < published:
            g = len(self._gens)
            if g == 0:
                segment, offset = self._segment, self._header_size
            else:
                try:
                    segment, offset = Segment.attach(self._gen_name(g)), 0
                except OSError as e:
                    raise StorageError(f"generation {g} of Bloom filter {self.name!r} is published but its shared "
                                       f"memory block cannot be opened: {e.strerror or e}") from None
            self._gens.append(_Generation(g, segment, offset, self._gen_capacity(g),
                                          generation_rate(self.error_rate, g), self.partitions,
                                          blocked_generation(self.blocked, g)))

    def _ensure_generation(self, g: int) -> _Generation:
        """Publish generation g if nobody has (caller holds partition locks)."""
        if g >= MAX_GENERATIONS:
            raise FrontierError(f"Bloom filter {self.name!r} has grown {MAX_GENERATIONS} generations; "
                                "rebuild it with a larger capacity")
        self._refresh()
        if g < len(self._gens):
            return self._gens[g]
        with self._segment.lock(LOCK_BASE - 1, 1):
            self._refresh()
            while len(self._gens) <= g:
                n = len(self._gens)
                size = _Generation.nbytes(self._gen_capacity(n), generation_rate(self.error_rate, n), self.partitions,
                                          blocked=blocked_generation(self.blocked, n))
                # checked before publishing: a generation that cannot be mapped would wedge every handle
                if size * 8 // self.partitions >= PARTITION_LIMIT:
                    raise FrontierError(f"Bloom filter {self.name!r} cannot grow to generation {n}: a partition would "
                                        f"need {size * 8 // self.partitions} bits (limit 2^32); create it with more "
                                        "partitions (see `python -m frontier params`)")
                created = self._create_generation(n, size)
                created.close()
                if self._owner:
                    self._created.append(created)
                struct.pack_into("<I", self._segment.buf, 32, n + 1)
                self._refresh()
        return self._gens[g]

    def _create_generation(self, g: int, size: int) -> Segment:
        """A zero-filled segment for generation g (caller holds the growth lock, g is not yet published)."""
        name = self._gen_name(g)
        try:
            # Nobody maps a generation before it is published, and only the growth lock's holder creates
            # one: a block by this name is what a writer killed between creating and publishing it left.
            unlink_name(name)
        except OSError as e:
            raise StorageError(f"cannot create shared memory block {name!r}: {e.strerror or e}") from None
        shortfall = memory_shortfall(size)
        if shortfall is not None:
            raise StorageError(f"Bloom filter {self.name!r} cannot grow to generation {g}: it needs "
                               f"{format_size(size)} more shared memory; {shortfall}")
        return _new_segment(name, size, tracked=self._owner)

    def _test(self, a: np.ndarray, b: np.ndarray, part: np.ndarray) -> np.ndarray:
        """Which items some generation may hold, CHUNK items at a time (bounds the (n, k) position arrays)."""
        found = np.zeros(len(a), dtype=bool)
        for start in range(0, len(a), CHUNK):
            chunk = slice(start, start + CHUNK)
            for gen in self._gens:
                found[chunk] |= gen.test(a[chunk], b[chunk], part[chunk])
        return found

    # -- set protocol -------------------------------------------------------------------------

    def __contains__(self, item: Item) -> bool:
        key = key_one(item_fingerprint(item), self._pbits)
        self._refresh()
        return any(gen.test_one(*key) for gen in self._gens)

    def contains_many(self, items: Sequence[Item]) -> list[bool]:
        """Lock-free membership for a batch: True means "maybe seen", False means "certainly not"."""
        return self.contains_mask(items).tolist()

    def contains_mask(self, items: Sequence[Item]) -> np.ndarray:
        """`contains_many` as a numpy bool array."""
        fps = item_fingerprints(items)
        self._refresh()
        if not fps:
            return np.zeros(0, dtype=bool)
        if self._native is not None:
            return np.frombuffer(self._native.test(b"".join(fps), self._pbits, self._specs()), dtype=bool)
        return self._test(*keys(fps, self._pbits))

    def add(self, item: Item) -> bool:
        """Atomic check-and-add: True if the item was certainly not in the filter (now it is)."""
        return self.add_many([item])[0]

    def update(self, items: Iterable[Item]) -> None:
        """Add every item (set.update)."""
        check_batch(items)
        batch: list[Item] = []
        for item in items:
            batch.append(item)
            if len(batch) == CHUNK:
                self.add_many(batch)
                batch = []
        if batch:
            self.add_many(batch)

    def add_many(self, items: Sequence[Item]) -> list[bool]:
        """Atomic check-and-add of a batch; entry i is True if items[i] is new (later repeats in the batch are False)."""
        result: list[bool] = []
        if self._native is not None:  # the C path tells a batch's repeats apart itself
            check_batch(items)
            joined = self._native.join(items)  # None unless all are fingerprints
            if joined is None:
                joined = b"".join(item_fingerprints(items))
            step = CHUNK * FINGERPRINT_SIZE
            for start in range(0, len(joined), step):
                with _Admitting(self, joined[start:start + step]) as admitted:
                    pass
                result.extend(admitted.flags)
            return result
        fps = item_fingerprints(items)
        for start in range(0, len(fps), CHUNK):
            result.extend(first_new(fps[start:start + CHUNK], self.add_unique_mask))
        return result

    def add_unique_mask(self, fps: Sequence[bytes]) -> np.ndarray:
        """`add_many` for distinct fingerprints, as a numpy bool array (True: new)."""
        with self.adding(fps) as is_new:
            return is_new

    @contextmanager
    def adding(self, fps: Sequence[bytes]) -> Iterator[np.ndarray]:
        """Two-phase atomic check-and-add of distinct fingerprints.

        Yields which are new (a numpy bool array) while holding their partitions' locks, and sets their
        bits when the block ends without an exception; if it raises, the filter is left as it was. A
        caller that records the new items elsewhere does it inside the block (URLSeen: the LMDB
        transaction), so a failed record leaves them new, and no other writer tests them in between.
        """
        check_batch(fps)
        if not len(fps):
            yield np.zeros(0, dtype=bool)
            return
        if self._native is not None:
            with self.adding_joined(b"".join(fps)) as is_new:
                yield is_new
            return
        a, b, part = keys(fps, self._pbits)
        low, high = int(part.min()), int(part.max())
        with self._segment.lock(LOCK_BASE + low, high - low + 1):
            self._refresh()
            is_new = ~self._test(a, b, part)
            placed = self._place(a[is_new], b[is_new], part[is_new])
            yield is_new
            self._set(*placed)

    @contextmanager
    def adding_joined(self, joined: bytes) -> Iterator[np.ndarray]:
        """`adding` for distinct fingerprints joined into one buffer (b"".join of them, as `frontier.seen.fpset`
        builds): the same two phases under the same partition locks, the bits set only if the block ends
        without an exception. The C path works on the buffer itself, with no bytes object per fingerprint
        (URLSeen's batch path); the numpy path splits it."""
        if self._native is None or not joined:
            with self.adding(split(joined)) as is_new:
                yield is_new
            return
        with _Admitting(self, joined) as admitted:
            yield admitted.mask

    def admitting(self, joined: bytes) -> AbstractContextManager["Admission"]:
        """`adding_joined` for a batch that may repeat fingerprints, its answers made in the same pass: entering
        tests each one's first occurrence under the partition locks and gives an `Admission`; the new ones' bits
        are set when the block ends without an exception (URLSeen's batch: one C call each way, no numpy step)."""
        if self._native is None or not joined:
            return admitted_by(self.adding_joined, joined)
        return _Admitting(self, joined)

    def _native_lock(self, joined: bytes) -> RangeLock:
        low, high = self._native.partition_range(joined, self._pbits)
        return self._segment.lock(LOCK_BASE + low, high - low + 1)

    def _specs(self) -> list[tuple]:
        return [gen.spec for gen in self._gens]

    def _generation_caps(self) -> np.ndarray:
        """Items per partition of every generation that can be created (up to the first that cannot)."""
        if self._caps is None:
            caps = []
            for g in range(MAX_GENERATIONS):
                try:
                    caps.append(_Generation.geometry(self._gen_capacity(g), generation_rate(self.error_rate, g),
                                                     self.partitions)[0])  # items per partition: any layout
                except ValueError:  # ConfigError: that capacity is out of range
                    break
            self._caps = np.array(caps, dtype=np.uint64)
        return self._caps

    def _place(self, a: np.ndarray, b: np.ndarray, part: np.ndarray) -> tuple[np.ndarray, ...]:
        """Phase one of an insert: the generation of each new item (a partition fills its current generation,
        then the next), publishing generations as needed, so that `_set` only writes. Returns the items
        sorted by partition, their partition indexes and their generations."""
        order = np.argsort(part, kind="stable")
        a, b, part = a[order], b[order], part[order]
        pidx = part.astype(np.intp)
        starts = np.searchsorted(pidx, pidx, side="left")
        offset = np.arange(len(pidx)) - starts  # rank of the item among this batch's items of its partition
        gen = self._current[pidx].astype(np.intp)
        while len(gen):
            self._ensure_generation(int(gen.max()))
            caps = np.array([g.part_capacity for g in self._gens], dtype=np.int64)
            room = np.maximum(caps[gen] - self._counts[gen, pidx].astype(np.int64), 0)
            over = offset >= room
            if not over.any():
                break
            offset[over] -= room[over]
            gen[over] += 1
        return a, b, part, pidx, gen

    def _set(self, a: np.ndarray, b: np.ndarray, part: np.ndarray, pidx: np.ndarray, gen: np.ndarray) -> None:
        """Phase two: set the bits and counts of the items `_place` placed (their locks still held)."""
        if not len(a):
            return
        for g in np.unique(gen).tolist():
            members = np.flatnonzero(gen == g)
            for start in range(0, len(members), CHUNK):
                sel = members[start:start + CHUNK]
                self._gens[g].set(a[sel], b[sel], part[sel])
        np.add.at(self._counts, (gen, pidx), 1)
        last = np.append(pidx[1:] != pidx[:-1], True)  # each partition's last item has its newest generation
        self._current[pidx[last]] = gen[last]

    def __len__(self) -> int:
        """Items added (approximate only in that a false positive is never counted)."""
        return int(self._counts.sum())

    # -- introspection ------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self._segment.name

    @property
    def generations(self) -> int:
        self._refresh()
        return len(self._gens)

    @property
    def nbytes(self) -> int:
        """Bytes of bits over all generations (the header excluded)."""
        self._refresh()
        return sum(len(g.u8) for g in self._gens)

    def stats(self) -> dict[str, float | int]:
        """Counts, fill ratio and the estimated false-positive rate for a new item right now (a blocked generation's
        from its items per block, whose spread makes its rate higher than its fill ^ k)."""
        self._refresh()
        miss = 1.0
        fills = []
        for g, gen in enumerate(self._gens):
            fill = gen.bits.count() / len(gen.bits)
            fills.append(fill)
            miss *= 1.0 - generation_error_rate(int(self._counts[g].sum()), len(gen.bits), gen.hashes, fill,
                                                blocked=gen.blocked)
        return {
            "items": len(self),
            "capacity": self.capacity,
            "blocked": self.blocked,
            "generations": len(self._gens),
            "bytes": self.nbytes,
            "bits_per_item": self.nbytes * 8 / max(1, len(self)),
            "fill_ratio": fills[-1] if fills else 0.0,
            "estimated_false_positive_rate": 1.0 - miss,
        }

    # -- persistence --------------------------------------------------------------------------

    def save(self, path: str | os.PathLike[str]) -> bytes:
        """Write a snapshot (all segments, header included) atomically: tmp file, fsync, rename, fsync of the
        directory. Returns the snapshot's random id (`load(snapshot_id=)` checks it).

        It copies under every partition's lock and the growth lock, so that counts and bits are of one
        instant: adds from any process wait for the copy (lock-free reads do not); the fsync comes after.
        """
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        snapshot_id = os.urandom(SNAPSHOT_ID_SIZE)
        try:
            with open(tmp, "wb") as f:
                with self._all_locks():
                    self._refresh()
                    f.write(SNAPSHOT_MAGIC + snapshot_id)
                    f.write(struct.pack("<I", len(self._gens)))
                    f.write(self._segment.buf)
                    for gen in self._gens[1:]:
                        f.write(gen.u8.data)
                    f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)  # e.g. a full disk: leave no partial snapshot behind
            raise
        fsync_dir(path.parent)
        return snapshot_id

    @contextmanager
    def _all_locks(self) -> Iterator[None]:
        """Every partition's lock, one at a time in partition order (a stream of writers cannot starve one
        request for the whole range), then the growth lock, which writers too take after their partitions'."""
        with ExitStack() as stack:
            for p in range(self.partitions):
                stack.enter_context(self._segment.lock(LOCK_BASE + p, 1))
            stack.enter_context(self._segment.lock(LOCK_BASE - 1, 1))
            yield

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, name: str | None = None,
             snapshot_id: bytes | None = None) -> "SharedBloom":
        """Create an owned filter from a snapshot; StorageError if the file is not a valid one, or (given
        `snapshot_id`) not the one `save` returned that id for."""
        with open(path, "rb") as f:
            if f.read(8) != SNAPSHOT_MAGIC:
                raise StorageError(f"{path}: not a frontier Bloom snapshot (of this version)")
            check_snapshot_id(path, f.read(SNAPSHOT_ID_SIZE), snapshot_id)
            raw = f.read(4 + HEADER_FIELDS.size)
            if len(raw) != 4 + HEADER_FIELDS.size:
                raise StorageError(f"{path}: truncated Bloom snapshot")
            (gens,) = struct.unpack_from("<I", raw)
            head = raw[4:]
            magic, version, partitions, capacity, error_rate, _, max_gens, header = HEADER_FIELDS.unpack(head)
            if magic != MAGIC or version not in LAYOUT_VERSIONS or max_gens != MAX_GENERATIONS:
                raise StorageError(f"{path}: Bloom snapshot of another layout version")
            blocked = version == BLOCKED_LAYOUT_VERSION
            expected = cls._snapshot_size(gens, partitions, capacity, error_rate, header, blocked)
            actual = os.fstat(f.fileno()).st_size
            if expected is None:
                raise StorageError(f"{path}: corrupt Bloom snapshot header")
            if actual != expected:
                raise StorageError(f"{path}: {'truncated' if actual < expected else 'corrupt'} Bloom snapshot "
                                   f"({actual} bytes, its header implies {expected})")
            bloom = cls.create(capacity, error_rate, partitions=partitions, name=name, blocked=blocked)
            try:
                bloom._read_into(f, head, gens, path)
            except BaseException:
                bloom.close()
                bloom.unlink()
                raise
            return bloom

    @staticmethod
    def _snapshot_size(gens: int, partitions: int, capacity: int, error_rate: float, header: int,
                       blocked: bool) -> int | None:
        """The file size a snapshot header implies, or None if the header cannot be a valid one."""
        if not 1 <= gens <= MAX_GENERATIONS or not is_partition_count(partitions):
            return None
        if header != _header_size(partitions):
            return None
        try:
            return 8 + SNAPSHOT_ID_SIZE + 4 + header + sum(
                _Generation.nbytes(capacity * GROWTH ** g, generation_rate(error_rate, g), partitions,
                                   blocked=blocked_generation(blocked, g))
                for g in range(gens))
        except ValueError:  # ConfigError: capacity or rate out of range
            return None

    def _read_into(self, f, head: bytes, gens: int, path: object) -> None:
        buf = self._segment.buf
        buf[:len(head)] = head
        if f.readinto(buf[len(head):]) != len(buf) - len(head):
            raise StorageError(f"{path}: truncated Bloom snapshot")
        struct.pack_into("<I", buf, 32, 1)
        for g in range(1, gens):
            gen = self._ensure_generation(g)
            if f.readinto(gen.u8.data) != len(gen.u8):
                raise StorageError(f"{path}: truncated Bloom snapshot")
        if f.read(1):
            raise StorageError(f"{path}: Bloom snapshot has trailing bytes")

    # -- lifetime -----------------------------------------------------------------------------

    def close(self) -> None:
        """Release this handle's mappings. Idempotent; safe after a failed __init__. BufferError while another
        thread is inside a C call on the filter (the mappings stay valid): close again once it returned."""
        if self._closed:
            return
        segments = [g.segment for g in self._gens[1:]]
        for gen in self._gens:
            gen.release()
        self._counts = None  # type: ignore[assignment]
        self._current = None  # type: ignore[assignment]
        for segment in segments:
            segment.close()
        self._segment.close()
        self._gens = []
        self._closed = True

    def unlink(self) -> None:
        """Remove every generation's segment name. Only the owner calls this, once, in a `finally`."""
        if not self._owner:
            raise FrontierError("only the process that created a SharedBloom may unlink it")
        for segment in self._created:
            segment.unlink()
        unlink_all(self.name)

    def __enter__(self) -> "SharedBloom":
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.close()
        finally:
            if self._owner:
                self.unlink()

    def __reduce__(self):
        raise TypeError("a SharedBloom handle is per process: pass bloom.name and SharedBloom.attach() it")

class Admission:
    """What the first phase of a batch's check-and-add found (`admitting`): `mask` (numpy bool, True: new; a
    repeat of an earlier fingerprint of the batch is not), `flags` (the same as a list), `new` (the new
    fingerprints joined, in batch order) and `distinct` (fingerprints of the batch, each counted once)."""

    __slots__ = ("mask", "flags", "new", "distinct")

    def __init__(self, mask: np.ndarray, flags: list[bool], new: bytes, distinct: int) -> None:
        self.mask = mask
        self.flags = flags
        self.new = new
        self.distinct = distinct


class _Admitting:
    """SharedBloom's C path of `admitting`: a plain class, as a generator's context manager costs more than the
    C calls of a small batch. Enter: lock the batch's partitions, `admit` (test and place, publishing the
    generations it needs). Exit without an exception: `insert` (bits, counts, current generations). Unlock."""

    __slots__ = ("_bloom", "_joined", "_lock", "_gen_of", "_admission")

    def __init__(self, bloom: SharedBloom, joined: bytes) -> None:
        self._bloom = bloom
        self._joined = joined
        self._lock = bloom._native_lock(joined)

    def __enter__(self) -> Admission:
        bloom = self._bloom
        self._lock.__enter__()
        try:
            bloom._refresh()
            caps = bloom._generation_caps()
            try:
                mask, new, self._gen_of, top, flags, distinct = bloom._native.admit(
                    self._joined, bloom._pbits, bloom._specs(), bloom._counts[:len(caps)], bloom._current, caps)
            except ValueError:  # past the generations that can exist: the error _ensure_generation gives
                bloom._ensure_generation(len(caps))
                raise
            if top >= 0:
                bloom._ensure_generation(top)
        except BaseException:
            self._lock.__exit__(None, None, None)
            raise
        self._admission = Admission(np.frombuffer(mask, dtype=bool), flags, new, distinct)
        return self._admission

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        bloom = self._bloom
        try:
            new = self._admission.new
            if exc_type is None and new:
                specs = bloom._specs()
                bloom._native.insert(new, bloom._pbits, specs, self._gen_of, bloom._counts[:len(specs)],
                                     bloom._current)
        finally:
            self._lock.__exit__(None, None, None)


@contextmanager
def admitted_by(adding_joined: Callable[[bytes], AbstractContextManager[np.ndarray]],
                joined: bytes) -> Iterator[Admission]:
    """`admitting` on a filter's `adding_joined` (distinct fingerprints only): the numpy path, CountingBloom."""
    unique = firsts(joined)
    rest = select(joined, unique)
    with adding_joined(rest) as is_new:
        mask = np.zeros(len(unique), dtype=bool)
        mask[np.flatnonzero(unique)[is_new]] = True
        yield Admission(mask, mask.tolist(), select(rest, is_new), len(rest) // FINGERPRINT_SIZE)



def _new_segment(name: str, size: int, *, tracked: bool) -> Segment:
    try:
        return Segment.create(name, size, tracked=tracked)
    except OSError as e:
        raise StorageError(f"cannot create shared memory block {name!r} of {format_size(size)}: "
                           f"{e.strerror or e}") from None


def expected_bits_per_item(error_rate: float) -> float:
    """-ln p / (ln 2)^2: the optimum the layout is measured against."""
    return -math.log(error_rate) / math.log(2) ** 2
