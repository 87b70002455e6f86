"""The spool of a bulk load into a blacklist much larger than its memory (frontier.seen.blacklist.BulkLoad).

Fingerprints are bucketed by segment of the filter and appended to one file per segment, sequentially; each
segment is then updated once, in file order, from its file: sequential disk work at any size, never random
writes into a file larger than RAM.
"""

from __future__ import annotations

import errno
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np

from frontier.errors import DiskFull, StorageError
from frontier.fingerprint import FINGERPRINT_SIZE
from frontier.seen import blocked
from frontier.seen.sizing import BLOCK_BITS


class Spool:
    """A bulk load into a filter much larger than its memory: fingerprints are bucketed by segment (a range of the
    filter of about the memory budget) and appended to one spool file per segment, sequentially; `apply` then
    updates each segment once, in ascending order, from its file (read sequentially, bucketed by slice, added),
    and empties the files. A segment's URLs keep their input order, so the bits and the count are those of adding
    one at a time. Memory: a third of the budget each for the segment buckets, a segment's slice buckets, and the
    read buffer."""

    def __init__(self, path: Path, directory: Path, blocks: int, memory: int, limit: int | None) -> None:
        if not directory.is_dir():
            raise StorageError(f"{directory}: the spool directory does not exist")
        self.path, self.directory, self.blocks, self.limit = path, directory, blocks, limit
        self.entries = memory // FINGERPRINT_SIZE // 3
        self.segment_shift = max(0, (memory // (BLOCK_BITS // 8)).bit_length() - 1)  # 2^shift blocks <= memory
        self.segments = blocked.Buckets(self.entries, blocks, shift=self.segment_shift)
        self.segment_shift = self.segments.shift  # raised if the budget is too small for the segments' buckets
        self.spooled = [0] * len(self.segments.fills)  # entries in each segment's file
        self.peak = 0
        self._dir: Path | None = None  # made at the first spill

    @property
    def prefix(self) -> str:
        return f".{self.path.name}.spool-"

    @property
    def pending(self) -> int:
        return self.segments.pending + sum(self.spooled)

    @property
    def over_limit(self) -> bool:
        """The spool reached its limit: time to `apply`."""
        return self.limit is not None and sum(self.spooled) * FINGERPRINT_SIZE >= self.limit

    def remove_stale(self) -> list[Path]:
        """Remove spools an interrupted load of the same file left (this handle holds the writer lock: no other
        load of it runs)."""
        stale = [p for p in self.directory.glob(self.prefix + "*") if p.is_dir()]
        for p in stale:
            shutil.rmtree(p, ignore_errors=True)
        return stale

    def put(self, kernels: ModuleType | None, fps: np.ndarray) -> int:
        """Bucket fingerprints by segment, spilling the buckets to the files when one is full; how many taken."""
        taken = self.segments.put(kernels, fps)
        if taken * FINGERPRINT_SIZE < len(fps):
            self.spill()
        return taken

    def spill(self) -> None:
        """Append each segment's bucket to its file."""
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix=self.prefix, dir=self.directory))
        for r in np.flatnonzero(self.segments.fills).tolist():
            data = self.segments.bucket(r)
            try:
                with open(self._dir / f"{r:06d}", "ab") as f:
                    f.write(data)
            except OSError as e:
                raise self._error(e) from None
            self.spooled[r] += len(data) // FINGERPRINT_SIZE
        self.segments.fills[:] = 0
        self.peak = max(self.peak, sum(self.spooled) * FINGERPRINT_SIZE)

    def apply(self, kernels: ModuleType | None, add: Callable[[ModuleType | None, blocked.Buckets], int],
              count: np.ndarray) -> int:
        """Add everything spooled, segment by segment in file order (`add`: the filter's add of a segment's
        slice buckets, returning how many were new, counted in `count[0]`); empty the spool; the rounds it took."""
        self.spill()
        rounds = 0
        chunk = np.empty(self.entries * FINGERPRINT_SIZE, dtype=np.uint8)
        for r, entries in enumerate(self.spooled):
            if not entries:
                continue
            first = r << self.segment_shift
            slices = blocked.Buckets(self.entries, self.blocks, first=first,
                                     stop=min(self.blocks, first + (1 << self.segment_shift)))
            name = self._dir / f"{r:06d}"
            try:
                with open(name, "rb") as f:
                    while size := f.readinto(chunk):
                        todo = chunk[:size]
                        while len(todo):
                            todo = todo[slices.put(kernels, todo) * FINGERPRINT_SIZE:]
                            if len(todo):  # a slice's bucket is full
                                count[0] += np.uint64(add(kernels, slices))
                                rounds += 1
                name.unlink()
                count[0] += np.uint64(add(kernels, slices))
                rounds += 1
            except OSError as e:
                raise self._error(e) from None
            self.spooled[r] = 0
        return rounds

    def remove(self) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        self.spooled = [0] * len(self.spooled)
        self.segments.fills[:] = 0

    def _error(self, e: OSError) -> StorageError:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            return DiskFull(f"{self._dir}: the disk is full with {sum(self.spooled) * FINGERPRINT_SIZE:,} bytes of "
                            f"bulk-load spool for {self.path}; give a --spool-dir with more room or a lower "
                            "--spool-limit (the blacklist is left marked incomplete)")
        return StorageError(f"cannot spool to {self._dir or self.directory}: {e.strerror or e}")
