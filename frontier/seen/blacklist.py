"""Blacklist: a Bloom filter of URLs in a memory-mapped file, built once and checked by many processes.

Every process that opens the file read-only maps the same pages, so N checkers share one copy in the
page cache. The filter is blocked (layout 2, `frontier.seen.blocked`): each URL's k bits lie in one 512-bit block,
one cache line, so a lookup or an add costs one cache miss and one page however large the file is; a
standard filter costs k, and its build slowed 2x from 10^6 to 10^8 URLs as the file outgrew the caches.
Blocks fill unevenly, so a blocked filter needs more bits for the same rate: it is sized with the exact
blocked formula (`frontier.seen.sizing.blacklist_parameters`, for 0.9 p: sized at exactly p, a sample of the
rate at capacity would read above the target about half the time): 22.6 bits per URL at 1e-4, 18% more
than a standard filter (10^10 URLs: 28.28 GB instead of 24.24).

Files of layout 1 (a standard filter of k positions over partitions of under 2^28 bits, from
`frontier.seen.positions`) still open, check, add and report `info` with their own math; `build` makes layout 2.

File layout of PATH, integers little-endian:

    offset  size      field
    0       8         magic b"FRBLIST1"
    8       4         u32 layout version (2; 1 is read too)
    12      4         u32 state: 0 incomplete (a build or add is under way or was interrupted), 1 complete
    16      8         u64 capacity n
    24      8         f64 target false-positive rate p
    32      8         u64 bits m (= B * 512; layout 1: P * m_p)
    40      8         u64 bits per block, 512 (layout 1: bits per partition m_p, a multiple of 64 below 2^32)
    48      4         u32 blocks B, below 2^32 (layout 1: partitions P, a power of two)
    52      4         u32 hashes k
    56      8         u64 count: URLs added that were not in the filter before (a false positive never counts)
    64      8         u64 header size H (4096: the bits start on a page)
    72      128       canonicalisation tag, ASCII, NUL-padded ("canon2+sort_query"): what `add_many` applied
    200     H-200     zero
    H       m/8       the bits: block b holds bits [512 b, 512 (b+1)) (layout 1: partition p holds bits
                      [p*m_p, (p+1)*m_p)); bit j is bit j%8 of byte j//8

A writable handle sets state 0 (made durable) before it changes a bit, and 1 only after a clean close has
flushed every bit, so a killed build, a full disk or an error in the input leave a file that says it is
incomplete, and `open` refuses it unless told `allow_incomplete=True` (rerunning the same input with
`add` then completes it: adding is idempotent). One writer at a time (an open-file-description record
lock on PATH, dropped by the kernel if the writer dies); readers take no lock and may run while a writer
adds (a handle opened during the add is refused: the file says it is incomplete). The file's space is
reserved with posix_fallocate when a writer opens it: a full disk is one DiskFull then, never a SIGBUS
while writing the mapped pages (not guaranteed on copy-on-write file systems such as btrfs or ZFS).

Bulk loads (`Blacklist.bulk`, what `python -m frontier blacklist build` and `add` use): URLs are hashed into
a buffer bounded by a memory budget, in buckets by slice of the filter (8192 blocks, 512 KiB: in the L2
cache; `frontier.seen.blocked.Buckets`), and when a bucket is full the buffer is applied in one round, slice by
slice in ascending order, each slice's URLs in input order, the next slice streamed in while one is added.
The file's pages are touched once per round, in ascending order, so the cost per URL stays flat as the
filter outgrows the caches (adding directly touches one random line and page per URL: 1.6x slower at 10^8
URLs than at 10^6). A filter over SPOOL_FROM x the budget (10^10 URLs: 28 GB) would be swept sparsely by
every round: its URLs are spooled instead, appended to one file per segment of the filter (about the budget
each) in a temporary directory beside it, and each segment is updated once, at the end (or whenever the
spool reaches a limit), from its file read sequentially: the file is read and written once, in order.
The same bits and the same count as `add_many`: a block's URLs keep their order, so a repeat sees the bits
of its first occurrence. Buffered URLs are not in the filter until they are applied (`flush`, `close`);
`add_many` stays immediate for callers that check right after adding.

Past its capacity the filter stays correct (never a false negative) but its false-positive rate rises
(sized for 1e-4: 0.9e-4 at capacity, 0.97e-4 at 1.01x, 1.8e-4 at 1.1x, 0.9e-2 at 2x). Adding past capacity
warns (RuntimeWarning, once per handle) instead of refusing: refusing mid-input would leave the rest of
a blacklist out of the filter, false negatives for a tool whose job is to catch them, and would throw
away a long build for a small overshoot; `info()` shows the count against the capacity and the
estimated rate.

The whitelist, PATH.allow: URLs known to be false positives, stored exactly, so `in` is False for them
whatever the filter says. Sorted distinct 16-byte fingerprints behind a 16-byte header (magic
b"FRALLOW1", u64 little-endian entry count), rewritten whole (tmp file, fsync, rename) under an flock
on PATH (independent of the writer's record lock, and it needs no write permission on PATH). Readers
load it when opened and reload it when it changed, checked only when the filter says "maybe", so a
negative lookup costs nothing extra.
"""

from __future__ import annotations

import errno
import fcntl
import math
import mmap
import os
import struct
import threading
import warnings
from collections.abc import Iterator, Sequence
from itertools import compress
from pathlib import Path
from types import ModuleType

import numpy as np
from bitarray import bitarray

from frontier.errors import ConfigError, DiskFull, InvalidURL, StorageError, VersionMismatch
from frontier.native import native
from frontier.seen import blocked
from frontier.seen.fingerprint import FINGERPRINT_SIZE, check_batch, fingerprints
from frontier.seen.positions import first_new, get_bits, key_one, keys, partition_bits, positions, positions_one, set_bits
from frontier.seen.sizing import (BLOCK_BITS, MAX_BLOCK_HASHES, MAX_BLOCKS, BlockedParameters, blacklist_parameters,
                                  blocked_error_rate)
from frontier.seen.spool import Spool
from frontier.seen.urlseen import SeenBatch, canonicalize_batch, fingerprint_or_none
from frontier.url.canonical import DEFAULT_RULES, CanonicalRules

MAGIC = b"FRBLIST1"
LAYOUT_VERSION = 2  # what `build` makes
STANDARD, BLOCKED = 1, 2  # the layouts `open` reads
INCOMPLETE, COMPLETE = 0, 1
HEADER_SIZE = 4096
ALLOW_MAGIC = b"FRALLOW1"
CHUNK = 65536  # URLs per vectorised step (bounds temporary memory: about 7 MB of positions at k = 13)
POPCOUNT_BYTES = 1 << 24  # bytes per step when `info` counts the set bits
LOCK_WRITER = 1 << 40  # offset of the record lock the one writable handle holds
DEFAULT_BULK_MEMORY = 256 << 20  # a bulk load's buffer: rounds of up to 16M URLs (at most 1 per block of the filter)
MIN_BULK_MEMORY = 1 << 16
SPOOL_FROM = 16  # spool when the filter is over 16x the memory: a round would hold under 1 URL per 4 blocks
ROUND_PER_BLOCK = 1  # a round holds at most 1 URL per block: a larger one saves no sweep (the next slice is streamed
# while one is added: 17-18 ns a URL from 1/8 to 4 URLs per block at 10^8), and takes memory

_HEAD = struct.Struct("<8sIIQdQQIIQQ128s")
_POPCOUNT = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint16)  # set bits of each byte value
_STATE = struct.Struct("<I")
_STATE_AT = 12
_ALLOW_HEAD = struct.Struct("<8sQ")


def file_size(shape: BlockedParameters) -> int:
    """Bytes of a blacklist file of that geometry: the header, then the blocks."""
    return HEADER_SIZE + shape.bytes


class _Standard:
    """Layout 1's math: k positions over partitions (`frontier.seen.positions`), the kernels `test` and `add`."""

    name = "standard"

    def __init__(self, u8: np.ndarray, partitions: int, part_bits: int, hashes: int) -> None:
        self.partitions, self.part_bits, self.hashes = partitions, part_bits, hashes
        self._pbits = partition_bits(partitions)
        self._spec = (u8, 1, part_bits, hashes)

    def describe(self) -> str:
        return f"{self.partitions} partition(s) of {self.part_bits:,} bits"

    def positions(self, fps: Sequence[bytes]) -> np.ndarray:
        return positions(*keys(fps, self._pbits), self.part_bits, self.hashes)

    def positions_one(self, fp: bytes) -> Iterator[int]:
        return positions_one(*key_one(fp, self._pbits), self.part_bits, self.hashes)

    def test(self, kernels: ModuleType, joined: bytes) -> bytearray:
        return kernels.test(joined, self._pbits, [self._spec])

    def add(self, kernels: ModuleType, canon: Sequence[str]) -> bytearray:
        return kernels.add(b"".join(kernels.fingerprints(canon)), self._pbits, self._spec)

    def rate(self, count: int) -> float:
        return expected_false_positive_rate(self.partitions * self.part_bits, self.hashes, count)


class _Blocked:
    """Layout 2's math: k bits in one 512-bit block (`frontier.seen.blocked`), the kernels `block_test`, `block_add`."""

    name = "blocked"

    def __init__(self, u8: np.ndarray, blocks: int, hashes: int) -> None:
        self.blocks, self.hashes = blocks, hashes
        self._spec = (u8, blocks, hashes)

    def describe(self) -> str:
        return f"{self.blocks:,} blocks of {BLOCK_BITS} bits (one cache line per URL)"

    def positions(self, fps: Sequence[bytes]) -> np.ndarray:
        return blocked.positions(fps, self.blocks, self.hashes)

    def positions_one(self, fp: bytes) -> Iterator[int]:
        return blocked.positions_one(fp, self.blocks, self.hashes)

    def test(self, kernels: ModuleType, joined: bytes) -> bytearray:
        return kernels.block_test(joined, self._spec)

    def add(self, kernels: ModuleType, canon: Sequence[str]) -> bytearray:
        return kernels.block_add_urls(canon, self._spec)

    def add_buckets(self, kernels: ModuleType | None, buckets: blocked.Buckets) -> int:
        """A bulk load's round, in file order; how many URLs had an unset bit."""
        return buckets.add_to(kernels, self._spec)

    def rate(self, count: int) -> float:
        return blocked_error_rate(count / self.blocks, self.hashes)


class Blacklist:
    """A file-backed Bloom filter of URLs that behaves like a read-mostly set.

    `Blacklist.build(path, capacity, error_rate)` creates one (a writable handle), `Blacklist.open(path)`
    maps one read-only; `add_many` (writable handles), `in`, `contains_many`, `allow`, `info`, `close`.
    URLs are canonicalised with `frontier.url.canonical` unless `canonical=True` says they already are.
    """

    def __init__(self, path: str | os.PathLike[str], fd: int, *, writable: bool, allow_incomplete: bool,
                 rules: CanonicalRules) -> None:
        """Use `build` or `open`. Takes ownership of `fd` (closed by `close`, also if this fails).

        Args:
            path: the filter's file.
            fd: an open descriptor of it, which the filter maps.
            writable: mapped for `add` (else read-only).
            allow_incomplete: accept a file whose build did not finish (else an error).
            rules: the canonicalisation rules of the URLs it is asked about (the file records its own).
        """
        self.path = Path(path)
        self.writable = writable
        self._fd = fd
        self._rules = rules
        self._mm: mmap.mmap | None = None
        self._u8: np.ndarray | None = None
        self._count: np.ndarray | None = None
        self._bits: memoryview | None = None
        self._native = native()  # the C kernels, or None: the numpy path
        self._math: _Standard | _Blocked | None = None  # the layout's positions and kernels, set by _map
        self._lock = threading.Lock()
        self._allowed: frozenset[bytes] = frozenset()
        self._allow_stamp: tuple[int, int, int] | None = None
        self._warned = False
        self._closed = False
        self._load: BulkLoad | None = None  # the open bulk load, flushed by close
        self._lost = False  # a bulk load dropped buffered URLs: close leaves the file marked incomplete
        try:
            self._read_header(os.pread(fd, _HEAD.size, 0), os.fstat(fd).st_size, allow_incomplete)
            if writable:
                self._begin_writing()
            self._map()
            self._load_allow()
        except BaseException:
            self.close(complete=False)
            raise

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def build(cls, path: str | os.PathLike[str], capacity: int, error_rate: float, *,
              rules: CanonicalRules = DEFAULT_RULES) -> "Blacklist":
        """Create PATH (it must not exist) sized for `capacity` URLs at `error_rate`; a writable handle.
        DiskFull if the file does not fit: it is then left as a header that says it is incomplete."""
        shape = blacklist_parameters(capacity, error_rate)  # validates both
        tag = rules.version_tag().encode()
        if len(tag) > 128:  # struct would cut it short, and no open would match it
            raise ConfigError(f"canonicalisation tag {tag!r} is longer than the header's 128 bytes", "rules")
        head = _HEAD.pack(MAGIC, LAYOUT_VERSION, INCOMPLETE, shape.capacity, shape.error_rate, shape.bits,
                          BLOCK_BITS, shape.blocks, shape.hashes, 0, HEADER_SIZE, tag)
        path = Path(path)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            raise StorageError(f"{path} exists: add to it with `add`, or remove it to build anew") from None
        except OSError as e:
            raise _storage_error(e, path, "cannot create") from None
        try:
            os.pwrite(fd, head.ljust(HEADER_SIZE, b"\0"), 0)
            os.fsync(fd)
        except BaseException as e:
            os.close(fd)
            path.unlink()  # not even the header fits: leave nothing that could pass for a blacklist
            raise _storage_error(e, path, "cannot write") if isinstance(e, OSError) else e from None
        try:
            _reserve(fd, path, file_size(shape))
        except DiskFull:
            os.ftruncate(fd, HEADER_SIZE)  # give the space back; the header says the file is incomplete
            os.close(fd)
            raise
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd, writable=True, allow_incomplete=True, rules=rules)

    @classmethod
    def open(cls, path: str | os.PathLike[str], writable: bool = False, *, allow_incomplete: bool = False,
             rules: CanonicalRules = DEFAULT_RULES) -> "Blacklist":
        """Map an existing blacklist. StorageError if it is missing, foreign, truncated or incomplete
        (unless `allow_incomplete`), or (writable) another process is writing it."""
        try:
            fd = os.open(path, os.O_RDWR if writable else os.O_RDONLY)
        except OSError as e:
            raise _storage_error(e, Path(path), "cannot open") from None
        return cls(path, fd, writable=writable, allow_incomplete=allow_incomplete, rules=rules)

    def _read_header(self, raw: bytes, size: int, allow_incomplete: bool) -> None:
        path = self.path
        if len(raw) < _HEAD.size or raw[:8] != MAGIC:
            raise StorageError(f"{path}: not a frontier blacklist ({size} bytes, magic {raw[:8]!r})")
        (_, version, state, capacity, error_rate, bits, part_bits, partitions, hashes, _, header,
         tag) = _HEAD.unpack(raw)
        if version not in (STANDARD, BLOCKED):
            raise VersionMismatch(f"{path}: blacklist layout version {version}, this frontier reads "
                                  f"{STANDARD} and {BLOCKED}")
        if version == STANDARD:  # partitions P (a power of two) of part_bits (whole words, under 2^32)
            shape_ok = (partitions & (partitions - 1) == 0 and part_bits < 1 << 32 and part_bits % 64 == 0)
        else:  # blocks B (under 2^32) of BLOCK_BITS
            shape_ok = part_bits == BLOCK_BITS and partitions < MAX_BLOCKS
        if not (shape_ok and state in (INCOMPLETE, COMPLETE) and capacity >= 1 and 0.0 < error_rate < 1.0
                and header == HEADER_SIZE and partitions >= 1 and part_bits > 0 and bits == part_bits * partitions
                and 1 <= hashes <= MAX_BLOCK_HASHES):
            raise StorageError(f"{path}: corrupt blacklist header")
        self.capacity, self.error_rate, self.bits, self.hashes = capacity, error_rate, bits, hashes
        self.layout_version = version
        self._geometry = (partitions, part_bits)
        self.canonical_tag = tag.rstrip(b"\0").decode("ascii", "replace")
        if self.writable:
            _lock_writer(self._fd, path)  # first: "another writer" says more than "incomplete"
        if state != COMPLETE and not allow_incomplete:
            raise StorageError(f"{path} is incomplete: {self._incomplete_reason()}")
        if self.canonical_tag != self._rules.version_tag():
            raise VersionMismatch(f"{path} was built with canonicalisation {self.canonical_tag!r}, "
                                  f"this frontier applies {self._rules.version_tag()!r}")
        expected = header + bits // 8
        if size != expected:
            raise StorageError(f"{path}: {'truncated' if size < expected else 'corrupt'} blacklist "
                               f"({size:,} bytes, its header implies {expected:,})")

    def _incomplete_reason(self) -> str:
        if not _ofd_lock(self._fd, fcntl.F_RDLCK):  # a reader's test: conflicts with a writer's lock
            return "another handle is building or adding to it now; wait for it to finish"
        _ofd_lock(self._fd, fcntl.F_UNLCK)
        return ("a build or add was interrupted (killed, a full disk, bad input); rerun that input with "
                "`add --allow-incomplete` to complete it, or remove the file and build again")

    def _begin_writing(self) -> None:
        """Reserve the file's blocks and mark it incomplete until a clean close (the writer lock is held)."""
        _reserve(self._fd, self.path, HEADER_SIZE + self.bits // 8)  # a sparse copy gets its blocks now
        self._set_state(INCOMPLETE)

    def _set_state(self, state: int) -> None:
        try:
            os.pwrite(self._fd, _STATE.pack(state), _STATE_AT)
            os.fdatasync(self._fd)
        except OSError as e:
            raise _storage_error(e, self.path, "cannot write") from None

    def _map(self) -> None:
        size = HEADER_SIZE + self.bits // 8
        self._mm = mmap.mmap(self._fd, size, access=mmap.ACCESS_WRITE if self.writable else mmap.ACCESS_READ)
        _ask_for_huge_pages(self._mm)
        self._u8 = np.frombuffer(self._mm, dtype=np.uint8, count=self.bits // 8, offset=HEADER_SIZE)
        self._count = np.frombuffer(self._mm, dtype="<u8", count=1, offset=56)
        self._bits = memoryview(self._mm)[HEADER_SIZE:]
        partitions, part_bits = self._geometry
        self._math = (_Standard(self._u8, partitions, part_bits, self.hashes) if self.layout_version == STANDARD
                      else _Blocked(self._u8, partitions, self.hashes))

    # -- adding -------------------------------------------------------------------------------

    def add_many(self, urls: Sequence[str], *, canonical: bool = False) -> SeenBatch:
        """Add a batch; entry i is True if urls[i] was new to the filter. URLs that cannot be canonicalised
        are False and listed in `.invalid`. `canonical=True`: take the strings as they are."""
        self._writable_view()
        canon, invalid = self._canonical(urls, canonical)
        flags: list[bool] = []
        with self._lock:
            if self._native is not None:  # the C path hashes, and tells a batch's repeats apart, itself
                for start in range(0, len(canon), CHUNK):
                    flags.extend(self._native_add(canon[start:start + CHUNK]).tolist())
            else:
                fps = fingerprints(canon)
                for start in range(0, len(fps), CHUNK):
                    flags.extend(first_new(fps[start:start + CHUNK], self._add_unique))
        self._warn_over_capacity(3)
        return SeenBatch(_expand(flags, invalid), invalid)

    def bulk(self, memory: int = DEFAULT_BULK_MEMORY, *, spool_dir: str | os.PathLike[str] | None = None,
             spool_limit: int | None = None) -> "BulkLoad":
        """A bulk load into this writable handle, buffering at most `memory` bytes (see the module docstring):
        for large inputs, whose cost per URL then stays flat however large the file. A filter over SPOOL_FROM x
        `memory` spools to a temporary directory in `spool_dir` (default: beside the file), applied at the end or
        whenever it holds `spool_limit` bytes (default: no limit). One at a time."""
        self._writable_view()
        if self._load is not None:
            raise StorageError(f"{self.path}: a bulk load is already open on this handle")
        self._load = BulkLoad(self, memory, spool_dir, spool_limit)
        return self._load

    def _writable_view(self) -> None:
        self._view()
        if not self.writable:
            raise StorageError(f"{self.path} is open read-only; open it with writable=True to add")

    def _warn_over_capacity(self, stacklevel: int) -> None:
        if len(self) > self.capacity and not self._warned:
            self._warned = True
            warnings.warn(f"{self.path}: {len(self):,} URLs is over its capacity of {self.capacity:,}; the "
                          f"false-positive rate rises past the target {self.error_rate:g} (now about "
                          f"{self.expected_error_rate():.2g})",
                          RuntimeWarning, stacklevel=stacklevel)

    def add(self, url: str, *, canonical: bool = False) -> bool:
        """Add one URL; True if it was new. InvalidURL if it cannot be canonicalised."""
        batch = self.add_many([url], canonical=canonical)
        if batch.invalid:
            raise batch.invalid[0]
        return batch[0]

    def _add_unique(self, fps: Sequence[bytes]) -> np.ndarray:
        pos = self._math.positions(fps)
        new = ~get_bits(self._u8, pos).all(axis=1)
        set_bits(self._u8, pos[new])
        self._count[0] += np.uint64(np.count_nonzero(new))
        return new

    def _native_add(self, canon: Sequence[str]) -> np.ndarray:
        """`_add_unique` on the C path, for canonical URLs that may repeat: one pass that hashes each URL and tests
        and sets its bits while their cache lines are in (half the memory traffic of test-all-then-set, and the
        hashing overlaps the cache misses: the build's cost per URL stays flat as the file outgrows the caches).
        As if the URLs were added one at a time: a repeat is not new, and neither is the rare URL whose bits
        earlier URLs of the same batch all set (the numpy path calls it new, and counts it); the bits are the
        same either way."""
        new = np.frombuffer(self._math.add(self._native, canon), dtype=bool)
        self._count[0] += np.uint64(np.count_nonzero(new))
        return new

    # -- checking -----------------------------------------------------------------------------

    def __contains__(self, url: object) -> bool:
        """True if the URL is (probably) blacklisted and not allowed; never raises (an invalid URL is False)."""
        fp = fingerprint_or_none(url, self._rules)
        if fp is None:
            return False
        bits = self._view()
        for j in self._math.positions_one(fp):
            if not bits[j >> 3] >> (j & 7) & 1:
                return False
        return fp not in self._current_allow()

    def contains_many(self, urls: Sequence[str], *, canonical: bool = False) -> SeenBatch:
        """Entry i is True if urls[i] is (probably) blacklisted and not allowed; invalid URLs are False and
        listed in `.invalid`."""
        fps, invalid = self._fingerprints(urls, canonical)
        found = self.contains_fingerprints(fps)
        return SeenBatch(_expand(found.tolist(), invalid), invalid)

    def contains_fingerprints(self, fps: Sequence[bytes]) -> np.ndarray:
        """The filter and the whitelist on fingerprints of canonical URLs, as a numpy bool array."""
        self._view()
        if not fps:
            return np.zeros(0, dtype=bool)
        if self._native is not None:
            found = np.frombuffer(self._math.test(self._native, b"".join(fps)), dtype=bool)
        else:
            found = np.concatenate([get_bits(self._u8, self._math.positions(fps[s:s + CHUNK])).all(axis=1)
                                    for s in range(0, len(fps), CHUNK)])
        if found.any():
            allowed = self._current_allow()
            if allowed:
                maybe = np.flatnonzero(found)
                found[maybe] = [fp not in allowed for fp in compress(fps, found.tolist())]
        return found

    def _canonical(self, urls: Sequence[str], canonical: bool) -> tuple[Sequence[str], dict[int, InvalidURL]]:
        """The batch's valid URLs, canonicalised unless `canonical`, and its invalid ones by index."""
        check_batch(urls)
        if canonical:
            return urls, {}
        canon, invalid = canonicalize_batch(urls, self._rules)
        return ([c for c in canon if c is not None] if invalid else canon), invalid  # type: ignore[return-value]

    def _fingerprints(self, urls: Sequence[str], canonical: bool) -> tuple[list[bytes], dict[int, InvalidURL]]:
        canon, invalid = self._canonical(urls, canonical)
        return fingerprints(canon), invalid

    # -- the whitelist ------------------------------------------------------------------------

    @property
    def allow_path(self) -> Path:
        return self.path.with_name(self.path.name + ".allow")

    def allow(self, urls: Sequence[str], *, canonical: bool = False) -> SeenBatch:
        """Whitelist URLs (known false positives): `in` is False for them from now on, in every process.
        Entry i is True if urls[i] was not allowed before; invalid URLs are False and in `.invalid`."""
        self._view()
        fps, invalid = self._fingerprints(urls, canonical)
        with self._lock:
            fcntl.flock(self._fd, fcntl.LOCK_EX)  # flock works on a read-only descriptor too
            try:
                current = set(self._read_allow())
                flags = first_new(fps, lambda unique: np.array([fp not in current for fp in unique], dtype=bool))
                if any(flags):
                    self._write_allow(sorted(current.union(fps)))
                self._load_allow()
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        return SeenBatch(_expand(flags, invalid), invalid)

    def _read_allow(self) -> list[bytes]:
        try:
            with open(self.allow_path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return []
        except OSError as e:
            raise _storage_error(e, self.allow_path, "cannot read") from None
        if len(raw) < _ALLOW_HEAD.size or raw[:8] != ALLOW_MAGIC:
            raise StorageError(f"{self.allow_path}: not a frontier blacklist whitelist")
        _, entries = _ALLOW_HEAD.unpack_from(raw)
        if len(raw) != _ALLOW_HEAD.size + entries * FINGERPRINT_SIZE:
            raise StorageError(f"{self.allow_path}: truncated or corrupt whitelist ({len(raw):,} bytes for "
                               f"{entries:,} entries)")
        body = raw[_ALLOW_HEAD.size:]
        return [body[i:i + FINGERPRINT_SIZE] for i in range(0, len(body), FINGERPRINT_SIZE)]

    def _write_allow(self, fps: list[bytes]) -> None:
        tmp = self.allow_path.with_name(self.allow_path.name + ".tmp")
        try:
            with open(tmp, "wb") as f:
                f.write(_ALLOW_HEAD.pack(ALLOW_MAGIC, len(fps)))
                f.write(b"".join(fps))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.allow_path)
        except OSError as e:
            tmp.unlink(missing_ok=True)  # the old whitelist stays as it was
            raise _storage_error(e, self.allow_path, "cannot write") from None

    def _allow_stat(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.allow_path)
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_mtime_ns, st.st_size

    def _load_allow(self) -> None:
        stamp = self._allow_stat()
        self._allowed = frozenset(self._read_allow()) if stamp else frozenset()
        self._allow_stamp = stamp

    def _current_allow(self) -> frozenset[bytes]:
        """The whitelist, reloaded if another handle changed it since."""
        if self._allow_stat() != self._allow_stamp:
            self._load_allow()
        return self._allowed

    # -- introspection ------------------------------------------------------------------------

    def __len__(self) -> int:
        """URLs added (a URL whose add was a false positive is not counted)."""
        return int(self._view_count()[0])

    @property
    def complete(self) -> bool:
        return _STATE.unpack_from(os.pread(self._fd, _STATE.size, _STATE_AT))[0] == COMPLETE

    def expected_error_rate(self, count: int | None = None) -> float:
        """The false-positive rate the layout's formula gives after `count` URLs (default: those added)."""
        self._view()
        return self._math.rate(len(self) if count is None else count)

    def info(self) -> dict[str, object]:
        """Capacity, count, layout, fill (set bits counted), estimated false-positive rate, bytes on disk, whitelist.
        The estimate is from the bits as they are: fill^k for a standard filter; for a blocked one the mean of
        each block's own fill^k (a fuller block gives more false positives: the overall fill would hide it)."""
        bits = self._view()
        ones, blocked_rate = 0, 0.0
        for start in range(0, len(bits), POPCOUNT_BYTES):
            chunk = bits[start:start + POPCOUNT_BYTES]
            if self.layout_version == BLOCKED:
                per_block = _POPCOUNT[np.frombuffer(chunk, dtype=np.uint8)].reshape(-1, BLOCK_BITS // 8).sum(axis=1)
                ones += int(per_block.sum())
                blocked_rate += float(((per_block / BLOCK_BITS) ** self.hashes).sum())
            else:
                ones += bitarray(buffer=chunk).count()
        fill = ones / self.bits
        estimate = blocked_rate * BLOCK_BITS / self.bits if self.layout_version == BLOCKED else fill ** self.hashes
        st = os.fstat(self._fd)
        return {
            "path": str(self.path),
            "state": "complete" if self.complete else "incomplete",
            "capacity": self.capacity,
            "count": len(self),
            "error_rate": self.error_rate,
            "layout": f"{self.layout_version} ({self._math.name})",
            "geometry": self._math.describe(),
            "bits": self.bits,
            "hashes": self.hashes,
            "fill_ratio": fill,
            "estimated_false_positive_rate": estimate,
            "bits_per_url": self.bits / max(1, len(self)),
            "file_bytes": st.st_size,
            "disk_bytes": st.st_blocks * 512,
            "allowed": len(self._current_allow()),
            "canonicalisation": self.canonical_tag,
        }

    def _view(self) -> memoryview:
        if self._closed or self._bits is None:
            raise StorageError(f"blacklist {self.path} is closed")
        return self._bits

    def _view_count(self) -> np.ndarray:
        self._view()
        return self._count  # type: ignore[return-value]

    # -- lifetime -----------------------------------------------------------------------------

    def close(self, *, complete: bool = True) -> None:
        """Release the handle. A writable one runs an open bulk load's last round, flushes its bits, then marks
        the file complete (unless `complete=False`: the bulk load's buffer is dropped and the file stays marked
        incomplete). Idempotent; safe after a failed __init__. BufferError while another thread is inside a C
        call on the handle (the mapping stays valid): close again once it returned."""
        if self._fd < 0:
            return
        try:
            if not self._closed:  # the first call: the last round, the flush, the state
                if self._load is not None:
                    self._load.close(apply=complete)  # its last round, before the bits are flushed
                self._closed = True
                if self.writable and self._mm is not None:
                    try:
                        self._mm.flush()
                    except OSError as e:
                        raise _storage_error(e, self.path, "cannot write") from None
                    if complete and not self._lost:
                        self._set_state(COMPLETE)
        finally:
            self._closed = True
            self._u8 = self._count = self._math = None
            if self._bits is not None:
                self._bits.release()
                self._bits = None
            if self._mm is not None:
                self._mm.close()
                self._mm = None
            os.close(self._fd)  # drops the writer lock
            self._fd = -1

    def __enter__(self) -> "Blacklist":
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.close(complete=exc_type is None)  # an exception leaves a writer's file marked incomplete

    def __reduce__(self):
        raise TypeError("a Blacklist handle is per process: pass its path and Blacklist.open() it")


class BulkLoad:
    """Adds to a writable Blacklist buffered and applied in rounds in file order (see the module docstring).
    `add_many` returns the batch's invalid URLs by index (a counted skip): whether a URL was new is known only
    when its round runs, and the handle's `len` counts it then. `flush` applies everything buffered (and spooled)
    now; `close` (or a clean exit of `with`) does it last. An exception inside `with`, or `close(apply=False)`,
    drops what was buffered or spooled, and the handle then leaves its file marked incomplete; the spool directory
    is removed on every exit path (one a killed load left is removed by the next load of the same file into the
    same directory: `stale_spools`). Layout 1 files are added to directly."""

    def __init__(self, blacklist: Blacklist, memory: int, spool_dir: str | os.PathLike[str] | None = None,
                 spool_limit: int | None = None) -> None:
        """Use `Blacklist.bulk`."""
        if not isinstance(memory, int) or memory < MIN_BULK_MEMORY:
            raise ConfigError(f"a bulk load's memory must be at least {MIN_BULK_MEMORY:,} bytes, got {memory!r}",
                              "memory")
        if spool_limit is not None and (not isinstance(spool_limit, int) or spool_limit < MIN_BULK_MEMORY):
            raise ConfigError(f"a bulk load's spool limit must be at least {MIN_BULK_MEMORY:,} bytes, got "
                              f"{spool_limit!r}", "spool_limit")
        self.memory = memory
        self.rounds = 0
        self.stale_spools: list[Path] = []
        self._bl: Blacklist | None = blacklist
        self._buckets: blocked.Buckets | None = None
        self._spool: Spool | None = None
        blocks = blacklist._geometry[0]
        if blacklist.layout_version == STANDARD:
            return
        if blacklist.bits // 8 > SPOOL_FROM * memory:
            self._spool = Spool(blacklist.path, Path(spool_dir) if spool_dir else blacklist.path.parent, blocks,
                                 memory, spool_limit)
            self.stale_spools = self._spool.remove_stale()
        else:
            self._buckets = blocked.Buckets(min(memory // FINGERPRINT_SIZE, ROUND_PER_BLOCK * blocks), blocks)

    @property
    def pending(self) -> int:
        """URLs buffered or spooled, not yet in the filter."""
        if self._spool is not None:
            return self._spool.pending
        return 0 if self._buckets is None else self._buckets.pending

    @property
    def spool_peak(self) -> int:
        """The most bytes the spool held (0 if the filter is small enough for rounds in memory)."""
        return 0 if self._spool is None else self._spool.peak

    def add_many(self, urls: Sequence[str], *, canonical: bool = False) -> dict[int, InvalidURL]:
        """Buffer a batch (as `Blacklist.add_many`); the URLs that cannot be canonicalised, by index."""
        bl = self._handle()
        if self._buckets is None and self._spool is None:
            return bl.add_many(urls, canonical=canonical).invalid
        canon, invalid = bl._canonical(urls, canonical)
        joined = bl._native.digests(canon) if bl._native is not None else b"".join(fingerprints(canon))
        incoming = np.frombuffer(joined, dtype=np.uint8)
        while len(incoming):
            if self._spool is not None:
                taken = self._spool.put(bl._native, incoming)
                if self._spool.over_limit:
                    self.flush()
            else:
                taken = self._buckets.put(bl._native, incoming)
                if taken * FINGERPRINT_SIZE < len(incoming):  # a bucket is full
                    self.flush()
            incoming = incoming[taken * FINGERPRINT_SIZE:]
        return invalid

    def flush(self) -> None:
        """Apply what is buffered or spooled now: in ascending file order, each URL's bits once."""
        bl = self._handle()
        if not self.pending:
            return
        with bl._lock:
            if self._spool is not None:
                self.rounds += self._spool.apply(bl._native, bl._math.add_buckets, bl._count)
            else:
                bl._count[0] += np.uint64(bl._math.add_buckets(bl._native, self._buckets))
                self.rounds += 1
        bl._warn_over_capacity(4)

    def close(self, *, apply: bool = True) -> None:
        """Apply the rest (unless `apply=False`: it is dropped and the handle leaves its file marked incomplete),
        remove the spool, release the buffers. Idempotent."""
        bl = self._bl
        if bl is None:
            return
        try:
            if apply:
                self.flush()
        finally:
            if self.pending:  # dropped (apply=False), or the flush failed: the file must not pass for complete
                bl._lost = True
            self._bl = None
            bl._load = None
            self._buckets = None
            if self._spool is not None:
                self._spool.remove()

    def _handle(self) -> Blacklist:
        if self._bl is None:
            raise StorageError("this bulk load is closed")
        self._bl._writable_view()
        return self._bl

    def __enter__(self) -> "BulkLoad":
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.close(apply=exc_type is None)


_FLOCK = struct.Struct("hhqqi4x")  # struct flock on Linux LP64: type, whence, start, len, pid (0 for OFD locks)


def _ofd_lock(fd: int, kind: int) -> bool:
    """Set (F_WRLCK, F_RDLCK) or drop (F_UNLCK) the writer's record lock without waiting; False if another
    handle holds a conflicting one. An open-file-description lock (Linux): it belongs to the handle, so
    closing another descriptor of the file in the same process does not drop it as it would a POSIX
    lock, two handles of one process exclude each other, and the kernel drops it when its holder dies."""
    try:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, _FLOCK.pack(kind, os.SEEK_SET, LOCK_WRITER, 1, 0))
    except OSError as e:
        if e.errno in (errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


def _lock_writer(fd: int, path: Path) -> None:
    if not _ofd_lock(fd, fcntl.F_WRLCK):
        raise StorageError(f"{path} is being written by another handle (another process, or this one)")


def _ask_for_huge_pages(mm: mmap.mmap) -> None:
    """madvise(MADV_HUGEPAGE): map the file in 2 MB pages where the kernel can (Linux 6.x on a file system with
    large folios, such as ext4 or xfs, THP "madvise" or "always"): one TLB entry covers 2 MB, so a random block's
    address translation stays cached; with 4 KB pages the page walks of a 283 MB file cost 70 ns a URL in the
    build's kernel, with 2 MB pages 42 (10^8 URLs, the blacklist benchmark's URLs). Elsewhere it does nothing or
    is refused; nothing depends on it."""
    if hasattr(mmap, "MADV_HUGEPAGE"):
        try:
            mm.madvise(mmap.MADV_HUGEPAGE)
        except OSError:
            pass


def _reserve(fd: int, path: Path, size: int) -> None:
    """Allocate the file's blocks up front: a full disk is a DiskFull here, not a SIGBUS on a mapped page."""
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise DiskFull(f"{path}: the disk is full: a blacklist of {size:,} bytes does not fit; "
                           "the file is left marked incomplete") from None
        raise _storage_error(e, path, "cannot reserve space for") from None


def _storage_error(e: OSError, path: Path, doing: str) -> StorageError:
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return DiskFull(f"{path}: the disk is full")
    if isinstance(e, FileNotFoundError):
        return StorageError(f"{path}: no such file")
    return StorageError(f"{doing} {path}: {e.strerror or e}")


def _expand(flags: list[bool], invalid: dict[int, InvalidURL]) -> list[bool]:
    """Flags of the valid URLs spread back over the whole batch, False at the invalid ones."""
    if not invalid:
        return flags
    it = iter(flags)
    return [False if i in invalid else next(it) for i in range(len(flags) + len(invalid))]


def expected_false_positive_rate(bits: int, hashes: int, count: int) -> float:
    """(1 - e^(-k n / m))^k: the rate a filter of m bits and k hashes has after n distinct URLs."""
    return (1.0 - math.exp(-hashes * count / bits)) ** hashes
