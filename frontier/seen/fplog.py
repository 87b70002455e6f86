"""The LMDB fingerprint log: the exact, durable record of every fingerprint ever seen.

One LMDB environment per data dir holds named databases: `pending` (batch number u64 BE -> the batch's
new fingerprints, concatenated), `runs` (sorted runs of fingerprints, see `frontier.seen.fpruns`), `meta`
(`format`, `canonical`: the versions; `runs`: the layout as JSON, {"next_id": n, "runs": [[id, level,
count, filter blocks], ...], "merges": [{"output": run, "inputs": [run, ...], "boundary": u64}],
"migration": null or {"run": run, "after": hex key}}; the Bloom snapshot marker), `filters` (run id u64 BE
+ first block u64 BE -> a segment of the run's filter) and any a caller opens with `open_db` (the crawl store
keeps its queue there), so a seen decision and the queue entry it causes commit in one transaction.

Layout: an LSM tree of sorted runs, merged by size classes (levels).
* A batch's new fingerprints are one appended `pending` record and go into an in-memory set. Opening
  the log reloads `pending`, so a crash loses nothing that committed.
* Once `run_size` fingerprints are pending, they are sorted into a run of level 0 and `pending` is
  emptied, in one transaction.
* When `fanout` runs of level 0 (`upper_fanout` runs of a higher level) are idle, a merge of them into one
  run of the next level starts. A
  merge advances by key range: entries whose first 8 bytes are below its `boundary` are in the output
  run, the rest in the inputs, which keep only the chunks still holding entries at or above it. Every
  lookup thus finds a fingerprint in exactly one place, a kill -9 between steps loses nothing, and a
  merge needs little more than its inputs' space. Each new fingerprint earns every running merge
  `MERGE_PACE` entries of work, so a merge ends in half the time the level below takes to refill it: at
  most about 1.5 x the level's fanout runs per level, and each fingerprint is written once per level: with
  fanout 16 everywhere (exact mode) 3 times by 10^8, 4 by 10^9. Probabilistic mode searches the log only
  for a whitelisted URL's rare "maybe", so it merges the levels above 0 lazily (`LAZY_FANOUT`, 64): 2
  times by 10^8 (as at 10^7), 3 by 10^10, at the price of up to about 100 runs to search instead of 40.
* `maintain()` does, in one transaction, the flush or one merge step: the step of the merge that has earned
  the most since its last step (at least `step_entries`, or what its inputs have left), never a whole merge.
  The lumps never add up in one call: a flush and the steps of every merge (all due at once every other batch)
  in one call made the longest `add_many`s at 10^8 (measured: a flush and two steps, 60 ms). A merge's unspent
  credit waits for a later call, and the step that spends it takes all of it, so the merges keep up as before:
  running merges' credit stays below a few batches' worth (the largest is spent each call). When a flush and a
  step are both due, the step goes first unless the last call stepped: each waits at most one call, even with
  batches of `run_size`. URLSeen calls it before each batch, so a batch either commits and returns its answers
  or raises (a full disk) before committing anything.
* A lookup checks the pending set, then the runs of the `cached_levels` smallest levels, which are also
  held in memory as sorted arrays (numpy searches a whole batch of probes at once), then the other runs
  from the biggest down (where a stored fingerprint most likely is): per run one B-tree search for the
  chunk, in the page cache, and one page read. The probes of a batch go in sorted order. With
  `filter_bits` (exact mode: 8) every run has a small blocked Bloom filter in memory (1 byte per
  fingerprint), written beside it as it is written, so a lookup reads a run only when it may hold the
  fingerprint: about one page read per stored fingerprint looked up, and almost none for a fingerprint
  the log does not hold (a false positive of the seen-test's filter).
* Deleting (`discard`) rewrites the pending record or the run chunk that holds each fingerprint, in
  place under the same key: no tombstones, one page per deleted fingerprint.

Formats 1 and 2 (a keyed B-tree `seen`, 2 with `pending` as above) are migrated on open: the B-tree's keys,
already in order, are copied into one run a bounded transaction at a time; the format becomes current in the
first of them (so older code refuses the dir from then on), and the B-tree is dropped in the last. Format 4
added the parked records (frontier.seen.parked) and a version per value encoding (`check_encoding`): code of format
3 would open a dir with parked records and never sweep them, so it must refuse it, and does (its one line:
"written with format version '4' ... cannot read"). A format 3 dir is taken as it is: only its format changes.

`write()` runs a function in one write transaction and, when the map is full, aborts, doubles the map and
runs it again: the function must not change anything outside the transaction. lmdb's exceptions never
leave this module; they become StorageError.
"""

from __future__ import annotations

import errno
import json
import math
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from itertools import chain
from pathlib import Path
from typing import TypeVar

import lmdb
import numpy as np

from frontier.errors import ConfigError, DiskFull, StorageError, VersionMismatch
from frontier.seen import fpruns
from frontier.seen.datadir import DirLock, prepare_data_dir
from frontier.seen.fingerprint import FINGERPRINT_SIZE as FP
from frontier.seen.fpruns import KEY_SPACE
from frontier.seen.fpset import FingerprintSet, select

FORMAT_VERSION = b"4"  # 3: sorted runs (LSM) instead of the seen B-tree; 4: parked records, versioned encodings
MIGRATED_FORMATS = (b"1", b"2", b"3")  # the seen B-tree (2: with pending batches), migrated on open; 3: as is
ENCODING_KEY = b"encoding/"  # + a value encoding's name (queue, done, parked...) -> its version (ASCII digits)
INITIAL_MAP_SIZE = 64 << 20
RUN_SIZE = 1 << 17  # pending fingerprints (a set in memory, about 75 bytes each) sorted into a run at once
FANOUT = 16  # runs of one level merged into one of the next: 16 writes each fingerprint 3 times by 10^8 (4: 5
# times; measured at 10^8, merges 0.14 instead of 0.17 CPU us/URL; exact-mode confirms 7% dearer at 10^7, more runs)
LAZY_FANOUT = 64  # runs of a level above 0 merged at once in a log searched only rarely (probabilistic mode):
# one level less by 10^8 (measured at 10^8: maintenance 0.13 instead of 0.17 CPU us/URL)
STEP_ENTRIES = 1 << 15  # the smallest merge step worth a transaction
MERGE_PACE = 2.0  # merge entries earned per new fingerprint, per running merge
BATCH_LOOKUP = 16  # probes from which numpy searches the cached runs for a whole batch at once
CACHED_LEVELS = 1  # levels whose runs are held in memory too (16 bytes a fingerprint: at most 1.5 x fanout runs
# of run_size x fanout^level fingerprints each, 50 MB with the defaults, at any size of the log)
FILTER_BITS = 8  # bits per fingerprint of the runs' filters (about 3% false positives), 0: no filters
MIGRATE_STEP = 1 << 20  # B-tree keys copied per transaction when migrating
MAX_DBS = 32
NEARLY_FULL = 64 << 20  # free bytes below which an I/O error from LMDB is taken for a full disk
LOCK_NAME = "frontier.lock"
_LAYOUT_KEY = b"runs"

T = TypeVar("T")


def _translate(e: lmdb.Error, path: Path) -> StorageError:
    message = str(e)
    if "No space left" in message or getattr(e, "errno", None) == errno.ENOSPC or (
            "Input/output error" in message and _nearly_full(path)):  # LMDB reports a short write as EIO
        return DiskFull(f"{path}: the disk is full ({message}); free space and rerun to resume")
    if isinstance(e, (lmdb.InvalidError, lmdb.CorruptedError, lmdb.PageNotFoundError, lmdb.VersionMismatchError)):
        return StorageError(f"{path}: the fingerprint log is corrupt or not an LMDB file ({message})")
    return StorageError(f"{path}: fingerprint log error: {message}")


def format_mismatch(path: Path, fmt: bytes | None) -> VersionMismatch | None:
    """The one-line refusal of a data dir whose format (meta `format`) this code cannot read, or None."""
    if fmt is None or fmt == FORMAT_VERSION or fmt in MIGRATED_FORMATS:
        return None
    return VersionMismatch(
            f"{path} was written with format version {fmt.decode(errors='replace')!r} of the fingerprint log, which "
            f"this version of frontier ({FORMAT_VERSION.decode()!r}, migrating "
            f"{b', '.join(MIGRATED_FORMATS).decode()}) cannot read; use the frontier version that wrote it, or a new "
            "data dir")


def encoding_mismatch(path: Path, name: str, stored: bytes | None, version: int) -> VersionMismatch | None:
    """The one-line refusal of a data dir that holds a value encoding in a version other than `version`, or None
    (none recorded: version 1, see `FingerprintLog.check_encoding`)."""
    if stored is None or stored == str(version).encode():
        return None
    return VersionMismatch(f"{path}: its {name} values are of encoding version {stored.decode(errors='replace')!r}, "
                           f"this frontier reads {version}; use the frontier version that wrote it, or a new data dir")


def _nearly_full(path: Path) -> bool:
    try:
        st = os.statvfs(path)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < NEARLY_FULL


# -- the run layout, stored as JSON in meta ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Run:
    """A sorted run: `count` fingerprints (of an input being merged: those not yet consumed); `blocks`: the
    size of its filter (0: none)."""

    id: int
    level: int
    count: int
    blocks: int = 0


@dataclass(frozen=True, slots=True)
class Merge:
    """Runs being merged: fingerprints whose first 8 bytes are below `boundary` are in `output`, the others in
    `inputs`."""

    output: Run
    inputs: tuple[Run, ...]
    boundary: int = 0

    @property
    def remaining(self) -> int:
        return sum(run.count for run in self.inputs)


@dataclass(frozen=True, slots=True)
class Migration:
    """A format 1/2 B-tree being copied into `run`; `after` is the last key copied."""

    run: Run
    after: bytes | None = None


@dataclass(frozen=True, slots=True)
class Layout:
    next_id: int = 0
    runs: tuple[Run, ...] = ()  # complete runs, oldest first
    merges: tuple[Merge, ...] = ()
    migration: Migration | None = None

    @property
    def count(self) -> int:
        """Fingerprints in runs (pending ones apart)."""
        merged = sum(m.output.count + m.remaining for m in self.merges)
        return sum(r.count for r in self.runs) + merged + (self.migration.run.count if self.migration else 0)

    def to_json(self) -> bytes:
        def run(r: Run) -> list[int]:
            return [r.id, r.level, r.count, r.blocks]

        return json.dumps({
            "next_id": self.next_id,
            "runs": [run(r) for r in self.runs],
            "merges": [{"output": run(m.output), "inputs": [run(r) for r in m.inputs], "boundary": m.boundary}
                       for m in self.merges],
            "migration": None if self.migration is None else {
                "run": run(self.migration.run),
                "after": None if self.migration.after is None else self.migration.after.hex()},
        }).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> "Layout":
        d = json.loads(raw)
        mig = d["migration"]
        return cls(
            next_id=d["next_id"],
            runs=tuple(Run(*r) for r in d["runs"]),
            merges=tuple(Merge(Run(*m["output"]), tuple(Run(*r) for r in m["inputs"]), m["boundary"])
                         for m in d["merges"]),
            migration=None if mig is None else Migration(
                Run(*mig["run"]), None if mig["after"] is None else bytes.fromhex(mig["after"])))


@dataclass(frozen=True, slots=True)
class _Source:
    """A run where a lookup may find a fingerprint whose first 8 bytes h satisfy lo <= h < hi."""

    run_id: int
    count: int
    lo: int = 0
    hi: int = KEY_SPACE

    @property
    def prefix(self) -> bytes:
        return fpruns.run_prefix(self.run_id)


@dataclass(frozen=True, slots=True)
class Removal:
    """What `discard` removed inside a transaction; hand it to `discarded` once that commits."""

    removed: list[bytes]
    layout: "Layout"
    by_run: dict[int, list[bytes]]


@dataclass
class _Counters:
    flushes: int = 0
    merge_steps: int = 0
    merges_done: int = 0
    entries_merged: int = 0
    maintain_cpu_seconds_max: float = 0.0  # CPU time (user + system) of this process in maintain()
    maintain_cpu_seconds: float = 0.0
    largest_step: int = 0
    credits: dict[int, float] = field(default_factory=dict)  # merge output id -> entries of work earned


class FingerprintLog:
    """An exclusive handle on a data dir's LMDB environment. Open it in the process that uses it."""

    def __init__(self, path: str | os.PathLike[str], *, version_tag: str, fsync: bool = False,
                 map_size: int = INITIAL_MAP_SIZE, run_size: int = RUN_SIZE, fanout: int = FANOUT,
                 upper_fanout: int | None = None, step_entries: int = STEP_ENTRIES, chunk_entries: int | None = None,
                 cached_levels: int = CACHED_LEVELS, filter_bits: int = FILTER_BITS, pending_set: bool = True) -> None:
        """`filter_bits` 0 (for probabilistic mode, which looks nothing up) saves the filters' memory;
        `upper_fanout` (default: `fanout`) is the fanout of the levels above 0; `pending_set` False keeps the
        pending fingerprints as their blobs (`fpruns.PendingBlobs`: cheaper to add to, dearer to search)."""
        upper_fanout = fanout if upper_fanout is None else upper_fanout
        for key, value, least in (("run_size", run_size, 1), ("fanout", fanout, 2), ("upper_fanout", upper_fanout, 2),
                                  ("step_entries", step_entries, 1),
                                  ("chunk_entries", chunk_entries or 1, 1), ("cached_levels", cached_levels, 0),
                                  ("filter_bits", filter_bits, 0)):
            if value < least:
                raise ConfigError(f"must be at least {least}, got {value}", key)
        self.path = Path(path)
        self.run_size = run_size
        self.fanout = fanout
        self.upper_fanout = upper_fanout
        self.step_entries = step_entries
        self.cached_levels = cached_levels
        self.filter_bits = filter_bits
        self.pending_set = pending_set
        self._env: lmdb.Environment | None = None
        self._lock: DirLock | None = None
        self._recent = self._pending_set()  # fingerprints of the pending batches
        self._next_batch = 0
        self._earned = 0  # new fingerprints since the last maintain()
        self._stepped_last = False  # the last maintain() did a merge step
        self._layout = Layout()
        self._sources: list[_Source] = []
        self._cached: list[fpruns.CachedRun] = []  # the runs of `_cache` as lookups see them
        self._disk: list[_Source] = []  # the other runs, biggest first
        self._cache: dict[int, fpruns.Pairs] = {}  # run id -> its fingerprints, for runs of the cached levels
        self._filters: dict[int, fpruns.RunFilter] = {}  # run id -> its filter
        self._counters = _Counters()
        try:
            prepare_data_dir(self.path)
            self._lock = DirLock(self.path / LOCK_NAME, f"data dir {self.path} is in use by another frontier process")
            data = self.path / "data.mdb"
            if data.exists() and data.stat().st_size == 0:  # LMDB would silently start a new, empty log
                raise StorageError(f"{data} is empty: the fingerprint log was truncated; restore it or use a new data dir")
            self._env = lmdb.open(str(self.path), map_size=map_size, max_dbs=MAX_DBS, subdir=True, sync=fsync,
                                  metasync=fsync, readahead=False, mode=0o600, lock=True)
            self._chunk = chunk_entries or fpruns.chunk_entries(self._env.stat()["psize"])
            self._meta = self._env.open_db(b"meta")
            self._pending = self._env.open_db(b"pending")
            self._runs = self._env.open_db(b"runs")
            self._filter_db = self._env.open_db(b"filters")
            self._open_layout(version_tag)
            self._load_pending()
        except lmdb.Error as e:
            self.close()
            raise _translate(e, self.path) from None
        except BaseException:
            self.close()
            raise

    # -- versions, layout and migration -----------------------------------------------------------

    def _open_layout(self, version_tag: str) -> None:
        """Check the versions, load the run layout; migrate a format 1/2 dir or finish a migration."""
        canonical = version_tag.encode()

        def body(txn: lmdb.Transaction) -> tuple[dict[bytes, bytes | None], bool, bool]:
            stored = {key: txn.get(key, db=self._meta) for key in (b"format", b"canonical", _LAYOUT_KEY)}
            old_tree = txn.get(b"seen") is not None  # a named database is a key of the main one
            has_data = old_tree or stored[_LAYOUT_KEY] is not None or txn.stat(self._pending)["entries"] > 0
            return stored, old_tree, has_data

        stored, old_tree, has_data = self.read(body)
        for key in (b"format", b"canonical"):
            if stored[key] is None and has_data:
                raise StorageError(f"{self.path}: data without a {key.decode()} version: not a frontier data dir")
        if stored[b"canonical"] is not None and stored[b"canonical"] != canonical:
            raise VersionMismatch(
                f"{self.path} was written with canonical version {stored[b'canonical'].decode()!r}, this is "
                f"{version_tag!r}; use a new data dir (URLs canonicalised differently are different keys)")
        fmt = stored[b"format"]
        if (refused := format_mismatch(self.path, fmt)) is not None:
            raise refused
        if stored[_LAYOUT_KEY] is not None:
            self._layout = Layout.from_json(stored[_LAYOUT_KEY])
        if fmt != FORMAT_VERSION or stored[b"canonical"] is None:
            def mark(txn: lmdb.Transaction) -> Layout:
                txn.put(b"format", FORMAT_VERSION, db=self._meta)
                txn.put(b"canonical", canonical, db=self._meta)
                layout = self._layout
                if old_tree and layout.migration is None:
                    entries = txn.stat(self.env.open_db(b"seen", txn=txn))["entries"]
                    run = Run(layout.next_id, 0, 0, self._filter_blocks(entries))
                    layout = replace(layout, next_id=run.id + 1, migration=Migration(run))
                    self._put_layout(txn, layout)
                return layout

            self._layout = self.write(mark)
        while self._layout.migration is not None:
            self._layout = self.write(self._migrate_step)
        self._cache = self.read(self._read_cache)
        if self.filter_bits:
            blocks = {r.id: r.blocks for r in self._all_runs(self._layout) if r.blocks}
            self._filters = self.read(lambda txn: fpruns.read_filters(txn, self._filter_db, blocks))
        self._set_layout(self._layout)

    @staticmethod
    def _all_runs(layout: Layout) -> list[Run]:
        return [*layout.runs, *(m.output for m in layout.merges), *(r for m in layout.merges for r in m.inputs)]

    def _filter_blocks(self, expected: int) -> int:
        return fpruns.RunFilter.blocks_for(expected, self.filter_bits) if self.filter_bits else 0

    def _put_segment(self, txn: lmdb.Transaction, run: Run, blob: bytes) -> tuple[int, bytes] | None:
        """Write the filter bits of a blob being appended to a run (if it has a filter); returns them."""
        if not run.blocks or not blob:
            return None
        segment = fpruns.filter_segment(run.blocks, blob)
        fpruns.put_segment(txn, self._filter_db, run.id, *segment)
        return segment

    def _read_cache(self, txn: lmdb.Transaction) -> dict[int, fpruns.Pairs]:
        cursor = txn.cursor(db=self._runs)
        return {run.id: fpruns.Pairs(b"".join(v for _, v in fpruns.chunks(cursor, run.id)))
                for run in self._all_runs(self._layout) if run.level < self.cached_levels}

    def _put_layout(self, txn: lmdb.Transaction, layout: Layout) -> None:
        txn.put(_LAYOUT_KEY, layout.to_json(), db=self._meta)

    def _migrate_step(self, txn: lmdb.Transaction) -> Layout:
        """Copy up to MIGRATE_STEP keys of the old `seen` B-tree (in order) into the migration's run; in the
        last step, drop the tree and make the run a complete one."""
        layout, mig = self._layout, self._layout.migration
        assert mig is not None
        seen = self.env.open_db(b"seen", txn=txn)
        cursor = txn.cursor(db=seen)
        keys: list[bytes] = []
        if mig.after is None or cursor.set_range(mig.after):
            for key in cursor.iternext(keys=True, values=False):
                if key != mig.after:
                    keys.append(key)
                    if len(keys) == MIGRATE_STEP:
                        break
        blob = b"".join(keys)  # B-tree keys: sorted, distinct
        fpruns.put_chunks(txn, self._runs, mig.run.id, blob, self._chunk)
        self._put_segment(txn, mig.run, blob)  # (the filters are read once the migration is done)
        run = replace(mig.run, count=mig.run.count + len(keys))
        if len(keys) == MIGRATE_STEP:
            layout = replace(layout, migration=Migration(run, keys[-1]))
        else:
            txn.drop(seen, delete=True)
            done = (replace(run, level=self._level_for(run.count)),) if run.count else ()
            layout = replace(layout, runs=(*layout.runs, *done), migration=None)
        self._put_layout(txn, layout)
        return layout

    def _level_for(self, count: int) -> int:
        """The level whose runs are about `count` long (a migrated B-tree's run)."""
        level_1 = self.run_size * self.fanout
        return 0 if count < level_1 else 1 + int(math.log(count / level_1, self.upper_fanout))

    def _fanout_of(self, level: int) -> int:
        return self.fanout if level == 0 else self.upper_fanout

    @property
    def env(self) -> lmdb.Environment:
        if self._env is None:
            raise StorageError("the fingerprint log is closed")
        return self._env

    def open_db(self, name: bytes) -> "lmdb._Database":
        """A named database in the same environment, for writes that share the seen-test's transaction."""
        try:
            return self.env.open_db(name)
        except lmdb.Error as e:
            raise _translate(e, self.path) from None

    # -- transactions -------------------------------------------------------------------------

    def write(self, body: Callable[[lmdb.Transaction], T]) -> T:
        """Run `body` in one write transaction and commit; grow the map and rerun when it is full."""
        env = self.env
        while True:
            try:
                with env.begin(write=True) as txn:
                    return body(txn)
            except lmdb.MapFullError:
                env.set_mapsize(env.info()["map_size"] * 2)
            except lmdb.MapResizedError:
                env.set_mapsize(0)  # another process grew it: adopt the new size
            except lmdb.Error as e:
                raise _translate(e, self.path) from None
            except OSError as e:
                if e.errno == errno.ENOSPC:
                    raise DiskFull(f"{self.path}: the disk is full; free space and rerun to resume") from None
                raise

    def read(self, body: Callable[[lmdb.Transaction], T]) -> T:
        """Run `body` in a read-only transaction."""
        try:
            with self.env.begin() as txn:
                return body(txn)
        except lmdb.Error as e:
            raise _translate(e, self.path) from None

    def _load_pending(self) -> None:
        def body(txn: lmdb.Transaction) -> bytes | None:
            last = None
            for key, value in txn.cursor(db=self._pending):
                self._recent.add_blob(value)
                last = key
            return last

        last = self.read(body)
        self._next_batch = int.from_bytes(last, "big") + 1 if last else 0

    # -- the seen-test's batch ------------------------------------------------------------------------

    def known(self, txn: lmdb.Transaction, fps: Sequence[bytes]) -> list[bool]:
        """For each fingerprint, True if the log holds it (see `known_joined`)."""
        return self.known_joined(txn, b"".join(fps)).tolist()

    def known_joined(self, txn: lmdb.Transaction, blob: bytes) -> np.ndarray:
        """For each fingerprint of a joined buffer, True if the log holds it (a numpy bool array): the pending
        set, then the cached runs (one pass over the whole batch), then the runs on disk, biggest first (where a
        stored fingerprint most likely is), the probes in sorted order so each run is read forward."""
        found = self._in_memory(blob)
        if self._disk and not found.all():
            todo = np.flatnonzero(~found)
            hi, lo = fpruns.halves(select(blob, ~found))
            order = np.lexsort((lo, hi))  # each run is read forward
            todo, hi, lo = todo[order], hi[order], lo[order]
            probes = [blob[i * FP:(i + 1) * FP] for i in todo.tolist()]
            cursor = txn.cursor(db=self._runs)
            if len(probes) < BATCH_LOOKUP:
                found[todo[self._held_one_by_one(cursor, probes)]] = True
            else:
                found[todo[self._held(cursor, probes, hi, lo)]] = True
        return found

    def _in_memory(self, blob: bytes) -> np.ndarray:
        """Which fingerprints of a joined buffer the pending set or a cached run holds (a writable bool array)."""
        found = self._recent.contains_blob(blob)
        if not found.flags.writeable:
            found = found.copy()
        if self._cached:
            fpruns.find_cached(blob, found, self._cached)
        return found

    def _held_one_by_one(self, cursor: lmdb.Cursor, probes: list[bytes]) -> np.ndarray:
        """Which of a few sorted probes the runs on disk hold (a bool array): no numpy step per run."""
        held = np.zeros(len(probes), dtype=bool)
        for src in self._disk:
            limited, prefix, run_filter = src.lo or src.hi != KEY_SPACE, src.prefix, self._filters.get(src.run_id)
            for i, fp in enumerate(probes):
                if held[i] or (limited and not src.lo <= int.from_bytes(fp[:8], "big") < src.hi):
                    continue
                if (run_filter is None or run_filter.may_hold_one(fp)) and fpruns.contains(cursor, prefix, fp):
                    held[i] = True
        return held

    def _held(self, cursor: lmdb.Cursor, probes: list[bytes], hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
        """Which sorted probes (their halves `hi`, `lo`) the runs on disk hold: numpy applies each run's key
        range and filter to the whole batch; the probes they allow are read in one forward pass over the run."""
        todo = np.arange(len(probes))
        found = np.zeros(len(probes), dtype=bool)
        for src in self._disk:
            mine = self._may_hold(src, todo, hi, lo)
            if mine.size:
                held = fpruns.contains_sorted(cursor, src.prefix, [probes[i] for i in mine.tolist()])
                found[mine[np.array(held, dtype=bool)]] = True
            todo = todo[~found[todo]]
            if not todo.size:
                break
        return found

    def _may_hold(self, src: _Source, todo: np.ndarray, hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
        """The probes of `todo` (indices into hi, lo) that a run's key range and filter allow."""
        mine = todo
        if src.lo:
            mine = mine[hi[mine] >= np.uint64(src.lo)]
        if src.hi != KEY_SPACE:
            mine = mine[hi[mine] < np.uint64(src.hi)]
        run_filter = self._filters.get(src.run_id)
        return mine if run_filter is None else mine[run_filter.may_hold(hi[mine], lo[mine])]

    def sift(self, blob: bytes) -> tuple[np.ndarray, np.ndarray]:
        """What memory alone tells of a joined batch, without a page read: (held, unsure) numpy bool arrays.
        held: in the pending set or a cached run. unsure: not held there, and a run on disk may hold it (its
        key range and filter allow); `known_joined` reads those runs. The rest the log certainly does not hold."""
        held = self._in_memory(blob)
        unsure = np.zeros(len(held), dtype=bool)
        if not self._disk or held.all():
            return held, unsure
        hi, lo = fpruns.halves(blob)
        todo = np.flatnonzero(~held)
        for src in self._disk:
            unsure[self._may_hold(src, todo, hi, lo)] = True
        return held, unsure

    def record(self, txn: lmdb.Transaction, new_fps: Sequence[bytes]) -> None:
        """Append fingerprints known to be new as one pending batch; call `committed` after the commit."""
        self.record_joined(txn, b"".join(new_fps))

    def record_joined(self, txn: lmdb.Transaction, blob: bytes) -> None:
        """`record` for fingerprints joined into one buffer (the seen-test's batch path); `committed_joined` after."""
        if blob and not txn.put(self._next_batch.to_bytes(8, "big"), blob, db=self._pending, append=True):
            # py-lmdb's append returns False, writing nothing, for a key not after the last one
            raise StorageError(f"{self.path}: pending batch {self._next_batch} is not after the last one in the "
                               "fingerprint log (a batch was recorded without `committed`); nothing was recorded")

    def committed(self, new_fps: Sequence[bytes]) -> None:
        """The transaction that recorded `new_fps` committed: remember them (`maintain` merges later)."""
        self.committed_joined(b"".join(new_fps))

    def committed_joined(self, blob: bytes) -> None:
        """`committed` for fingerprints joined into one buffer."""
        if blob:
            self._next_batch += 1
            self._recent.add_blob(blob)
            self._earned += len(blob) // FP

    # -- maintenance: the pending flush and merge steps ---------------------------------------------------

    def maintain(self) -> None:
        """Flush the pending set into a run once it holds `run_size`, or do one step of the merge with the most
        credit (the batches since its last step earned it), in one transaction: never both, never a whole
        merge, never two merges' steps at once. When both are due, the step goes first unless the last call
        stepped."""
        c = self._counters
        earned, self._earned = self._earned, 0
        for merge in self._layout.merges:
            c.credits[merge.output.id] = c.credits.get(merge.output.id, 0.0) + MERGE_PACE * earned
        ready = [m for m in self._layout.merges if c.credits[m.output.id] >= min(self.step_entries, m.remaining)]
        flush = len(self._recent) >= self.run_size and not (ready and not self._stepped_last)
        self._stepped_last = bool(ready) and not flush
        due: dict[int, int] = {}
        if self._stepped_last:
            richest = max(ready, key=lambda m: c.credits[m.output.id])
            due[richest.output.id] = int(c.credits[richest.output.id])
        if not flush and not due:
            return
        started = time.process_time()

        def body(txn: lmdb.Transaction) -> tuple[Layout, dict[int, int], list[tuple[Run, bytes, tuple | None]]]:
            layout = self._layout
            written: list[tuple[Run, bytes, tuple | None]] = []  # (run, blob appended, its filter segment)
            if flush:
                layout = self._flush(txn, layout, written)
            done: dict[int, int] = {}
            for merge in layout.merges:
                if merge.output.id in due:
                    layout, done[merge.output.id] = self._merge_step(txn, layout, merge, due[merge.output.id],
                                                                     written)
            layout = self._start_merges(layout)
            self._put_layout(txn, layout)
            return layout, done, written

        layout, done, written = self.write(body)
        if flush:
            self._recent = self._pending_set()
            self._next_batch = 0
            c.flushes += 1
        for out_id, entries in done.items():
            c.merge_steps += 1
            c.entries_merged += entries
            c.largest_step = max(c.largest_step, entries)
            c.credits[out_id] -= entries
        live = {m.output.id for m in layout.merges}
        c.merges_done += sum(1 for out_id in c.credits if out_id not in live)
        c.credits = {out_id: credit for out_id, credit in c.credits.items() if out_id in live}
        for run, blob, segment in written:
            if run.level < self.cached_levels:
                self._cache.setdefault(run.id, fpruns.Pairs()).extend(*fpruns.halves(blob))
            if segment is not None:
                if run.id not in self._filters:  # (not setdefault: a big output's filter is hundreds of MB)
                    self._filters[run.id] = fpruns.RunFilter(run.blocks)
                self._filters[run.id].merge(*segment)
        self._set_layout(layout)
        took = time.process_time() - started
        c.maintain_cpu_seconds += took
        c.maintain_cpu_seconds_max = max(c.maintain_cpu_seconds_max, took)

    def _pending_set(self) -> FingerprintSet | fpruns.PendingBlobs:
        """An empty pending set (or `PendingBlobs`, without `pending_set`) with room for a flush's worth and the
        batch that crosses it: grown from its minimum, its table was rehashed at every doubling, each flush cycle
        (4% of URLSeen's time at 10^7)."""
        if not self.pending_set:
            return fpruns.PendingBlobs()
        return FingerprintSet(expected=self.run_size + self.run_size // 4)

    def _set_layout(self, layout: Layout) -> None:
        """Adopt a committed layout: drop what belonged to runs that are gone; order the lookups' sources."""
        self._layout = layout
        sources = self._lookup_sources(layout)
        live = {s.run_id for s in sources} | {m.output.id for m in layout.merges}
        self._cache = {run_id: c for run_id, c in self._cache.items() if run_id in live}
        self._filters = {run_id: f for run_id, f in self._filters.items() if run_id in live}
        self._sources = sorted(sources, key=lambda s: (s.run_id not in self._cache, -s.count))
        # the cached runs in one pass (a lookup there reads no page), then the others biggest first
        self._cached = [fpruns.CachedRun(self._cache[s.run_id], s.lo, s.hi - 1, self._filters.get(s.run_id))
                        for s in sources if s.run_id in self._cache and s.hi > s.lo]
        self._disk = sorted((s for s in sources if s.run_id not in self._cache), key=lambda s: -s.count)

    @staticmethod
    def _lookup_sources(layout: Layout) -> list[_Source]:
        sources = [_Source(r.id, r.count) for r in layout.runs]
        for m in layout.merges:
            sources.append(_Source(m.output.id, m.output.count, hi=m.boundary))
            sources.extend(_Source(r.id, r.count, lo=m.boundary) for r in m.inputs)
        return [s for s in sources if s.count]

    def _flush(self, txn: lmdb.Transaction, layout: Layout, written: list) -> Layout:
        blob, _ = fpruns.sorted_unique([self._recent.blob()], presorted=False)
        count = len(blob) // FP
        run = Run(layout.next_id, 0, count, self._filter_blocks(count))
        fpruns.put_chunks(txn, self._runs, run.id, blob, self._chunk)
        written.append((run, blob, self._put_segment(txn, run, blob)))
        txn.drop(self._pending, delete=False)
        return replace(layout, next_id=run.id + 1, runs=(*layout.runs, run))

    def _start_merges(self, layout: Layout) -> Layout:
        """Start a merge on each level with its fanout's idle runs and no merge of its own under way."""
        busy = {m.inputs[0].level for m in layout.merges}
        for level in sorted({r.level for r in layout.runs} - busy):
            idle = [r for r in layout.runs if r.level == level]
            fanout = self._fanout_of(level)
            if len(idle) >= fanout:
                inputs = tuple(idle[:fanout])  # the oldest
                output = Run(layout.next_id, level + 1, 0, self._filter_blocks(sum(r.count for r in inputs)))
                merge = Merge(output, inputs)
                layout = replace(layout, next_id=layout.next_id + 1, merges=(*layout.merges, merge),
                                 runs=tuple(r for r in layout.runs if r not in inputs))
        return layout

    def _merge_step(self, txn: lmdb.Transaction, layout: Layout, merge: Merge, want: int,
                    written: list) -> tuple[Layout, int]:
        """Merge about `want` entries of `merge` from its boundary on; returns the new layout and the entries
        consumed. The output is cut at a chunk boundary, so that its chunks are full."""
        lo = merge.boundary
        span = KEY_SPACE - lo if want >= merge.remaining else max(1, -(-want * (KEY_SPACE - lo) // merge.remaining))
        cursor = txn.cursor(db=self._runs)
        while True:
            top = min(KEY_SPACE, lo + span)
            parts, taken, keys = [], [], []
            for run in merge.inputs:
                got = list(fpruns.chunks(cursor, run.id, below=top))
                blob = b"".join(v for _, v in got)
                hi = fpruns.halves(blob)[0]
                start, end = fpruns.first_at_or_above(hi, lo), fpruns.first_at_or_above(hi, top)
                parts.append(blob[start * FP:end * FP])
                taken.append((hi, start))
                keys.append([k for k, _ in got])
            merged, mhi = fpruns.sorted_unique(parts, presorted=True)
            n = len(mhi)
            cut = n if top == KEY_SPACE else n - n % self._chunk
            while 0 < cut < n and mhi[cut - 1] == mhi[cut]:
                cut -= 1  # equal first halves stay on one side of the boundary
            if cut or top == KEY_SPACE:
                break
            span *= 2  # too few entries in the range to fill a chunk: take a wider one
        boundary = int(mhi[cut]) if cut < n else top
        fpruns.put_chunks(txn, self._runs, merge.output.id, merged[:cut * FP], self._chunk)
        written.append((merge.output, merged[:cut * FP], self._put_segment(txn, merge.output, merged[:cut * FP])))
        inputs = []
        consumed_all = 0
        for run, (hi, start), chunk_keys in zip(merge.inputs, taken, keys):
            consumed = fpruns.first_at_or_above(hi, boundary) - start
            consumed_all += consumed
            for key in chunk_keys:
                if fpruns.bound_hi(key) < boundary:  # all its entries are in the output now
                    txn.delete(key, db=self._runs)
            inputs.append(replace(run, count=run.count - consumed))
        output = replace(merge.output, count=merge.output.count + cut)
        if boundary == KEY_SPACE:
            for run in merge.inputs:  # nothing is left of them; drop any remains for certain
                fpruns.drop_run(txn, self._runs, run.id)
                fpruns.drop_run(txn, self._filter_db, run.id)
            runs = (*layout.runs, output)
            merges = tuple(m for m in layout.merges if m is not merge)
        else:
            runs = layout.runs
            merges = tuple(replace(m, output=output, inputs=tuple(inputs), boundary=boundary) if m is merge else m
                           for m in layout.merges)
        return replace(layout, runs=runs, merges=merges), consumed_all

    # -- deletion -------------------------------------------------------------------------------

    def discard(self, txn: lmdb.Transaction, fps: Sequence[bytes]) -> Removal:
        """Remove fingerprints inside a caller's write transaction (the pending record or the run chunk that
        holds each is rewritten). Call `discarded` with the result once the transaction commits."""
        wanted = set(fps)
        removed: list[bytes] = []
        pending = {fp for fp in wanted if fp in self._recent}
        if pending:
            for key, value in list(txn.cursor(db=self._pending)):
                kept = [fp for fp in fpruns.split(value) if fp not in pending]
                if len(kept) * FP != len(value):
                    txn.put(key, b"".join(kept), db=self._pending)  # an empty record keeps the batch numbers
            removed.extend(pending)
        rest = sorted(wanted - pending)
        layout = self._layout
        by_run: dict[int, list[bytes]] = {}
        for src in self._sources:
            if not rest:
                break
            here = [fp for fp in rest if src.lo <= int.from_bytes(fp[:8], "big") < src.hi]
            gone = fpruns.remove(txn, self._runs, src.run_id, here)
            if gone:
                by_run[src.run_id] = gone
                removed.extend(gone)
                gone_set = set(gone)
                rest = [fp for fp in rest if fp not in gone_set]
        if by_run:
            def less(run: Run) -> Run:
                return replace(run, count=run.count - len(by_run.get(run.id, ())))

            layout = replace(layout, runs=tuple(map(less, layout.runs)), merges=tuple(
                replace(m, output=less(m.output), inputs=tuple(map(less, m.inputs))) for m in layout.merges))
            self._put_layout(txn, layout)
        return Removal(removed, layout, by_run)

    def discarded(self, removal: Removal) -> None:
        """The transaction of a `discard` committed: forget the removed fingerprints here too."""
        self._recent.difference_update(removal.removed)
        for run_id, gone in removal.by_run.items():
            if run_id in self._cache:
                self._cache[run_id].remove(*fpruns.halves(b"".join(sorted(gone))))
        self._set_layout(removal.layout)

    # -- whole-log reads ----------------------------------------------------------------------

    def __len__(self) -> int:
        return self._layout.count + len(self._recent)

    def iter_chunks(self, size: int = 65536) -> Iterator[list[bytes]]:
        """Every stored fingerprint once, in chunks (to rebuild the Bloom filter). Do not write meanwhile."""
        recent = list(self._recent)
        for start in range(0, len(recent), size):
            yield recent[start:start + size]
        try:
            with self.env.begin() as txn:
                chunk: list[bytes] = []
                for fps in self._stored(txn):
                    chunk.extend(fps)
                    if len(chunk) >= size:
                        yield chunk[:size]
                        chunk = chunk[size:]
                if chunk:
                    yield chunk
        except lmdb.Error as e:
            raise _translate(e, self.path) from None

    def _stored(self, txn: lmdb.Transaction) -> Iterator[list[bytes]]:
        cursor = txn.cursor(db=self._runs)
        layout = self._layout
        for run in chain(layout.runs, (m.output for m in layout.merges)):
            for _, value in fpruns.chunks(cursor, run.id):
                yield fpruns.split(value)
        for merge in layout.merges:
            for run in merge.inputs:
                for _, value in fpruns.chunks(cursor, run.id):
                    yield [fp for fp in fpruns.split(value) if int.from_bytes(fp[:8], "big") >= merge.boundary]

    def stats(self) -> dict[str, int | float]:
        """The layout and the maintenance done since opening (for benchmarks and tuning)."""
        c = self._counters
        layout = self._layout
        return {
            "pending": len(self._recent),
            "runs": len(layout.runs) + sum(1 + len(m.inputs) for m in layout.merges),
            "levels": 1 + max([r.level for r in layout.runs] + [m.output.level for m in layout.merges], default=-1),
            "merges_running": len(layout.merges),
            "flushes": c.flushes,
            "merge_steps": c.merge_steps,
            "merges_done": c.merges_done,
            "entries_merged": c.entries_merged,
            "largest_step": c.largest_step,
            "cached_runs": len(self._cache),
            "cache_bytes": sum(p.nbytes for p in self._cache.values()),
            "filter_bytes": sum(f.nbytes for f in self._filters.values()),
            "maintain_cpu_seconds": c.maintain_cpu_seconds,
            "maintain_cpu_seconds_max": c.maintain_cpu_seconds_max,
        }

    def get_meta(self, key: bytes) -> bytes | None:
        return self.read(lambda txn: txn.get(key, db=self._meta))

    def put_meta(self, txn: lmdb.Transaction, key: bytes, value: bytes | None) -> None:
        """Set (or with None delete) a meta value inside a caller's write transaction."""
        if value is None:
            txn.delete(key, db=self._meta)
        else:
            txn.put(key, value, db=self._meta)

    def check_encoding(self, name: str, version: int) -> None:
        """Record the version of a value encoding this code writes (`name`: a database's values), or refuse the dir
        with one line (VersionMismatch) if it holds that encoding in another version. A dir that records none is
        new, or of format 3 or older, whose encodings are all version 1: the first versions recorded (a later
        version must convert those dirs, or refuse them by the format)."""
        key = ENCODING_KEY + name.encode()
        stored = self.get_meta(key)
        if stored is None:
            self.write(lambda txn: self.put_meta(txn, key, str(version).encode()))
        elif (refused := encoding_mismatch(self.path, name, stored, version)) is not None:
            raise refused

    def sync(self) -> None:
        """Flush to disk (meaningful when opened with fsync=False)."""
        try:
            self.env.sync(True)
        except lmdb.Error as e:
            raise _translate(e, self.path) from None

    def close(self) -> None:
        """Close the environment and release the data dir. Idempotent; safe after a failed __init__."""
        if self._env is not None:
            self._env.close()
            self._env = None
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def __enter__(self) -> "FingerprintLog":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
