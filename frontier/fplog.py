"""The LMDB fingerprint log: the exact, durable record of every fingerprint ever seen.

One LMDB environment per data dir holds named databases: `seen` (fingerprint -> b"", a B-tree for
exact lookups), `pending` (batch number u64 BE -> the batch's new fingerprints, concatenated),
`meta` (format and canonicalisation versions, the Bloom snapshot marker) and any a caller opens
with `open_db` (the crawl store keeps its queue there), so a seen decision and the queue entry it
causes commit in one transaction.

Writes are log-structured: a batch's new fingerprints are one appended `pending` record (random
16-byte keys inserted one by one into the B-tree cost a page copy each, about 5 us), and are also
held in memory. Every `merge_every` fingerprints they move into `seen` in one sorted transaction,
and `pending` is emptied. A lookup checks the in-memory set, then the B-tree; opening the log
reloads `pending`, so a crash between merges loses nothing. `write()` runs a function in one write transaction and, when
the map is full, aborts, doubles the map and runs it again: the function must not change anything
outside the transaction. lmdb's exceptions never leave this module; they become StorageError.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

import lmdb

from frontier.errors import DiskFull, StorageError, VersionMismatch
from frontier.fingerprint import FINGERPRINT_SIZE

FORMAT_VERSION = b"2"  # 2: the pending batch log beside the seen B-tree
INITIAL_MAP_SIZE = 64 << 20
MERGE_EVERY = 500_000  # fingerprints held in memory (about 75 bytes each) before a merge into the B-tree
MAX_DBS = 16
LOCK_NAME = "frontier.lock"

T = TypeVar("T")


def prepare_data_dir(path: Path) -> None:
    """Create the dir private (0700); refuse a file, an unwritable dir or a world-writable one."""
    if path.exists() and not path.is_dir():
        raise StorageError(f"data dir {path} exists and is not a directory")
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = path.stat()
    except OSError as e:
        raise StorageError(f"cannot create data dir {path}: {e.strerror}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise StorageError(f"data dir {path} exists and is not a directory")
    if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
        raise StorageError(f"data dir {path} is world-writable; run `chmod o-w {path}` or choose another dir")
    if not os.access(path, os.W_OK | os.X_OK):
        raise StorageError(f"data dir {path} is not writable by this user")


def _translate(e: lmdb.Error, path: Path) -> StorageError:
    message = str(e)
    if "No space left" in message or getattr(e, "errno", None) == errno.ENOSPC:
        return DiskFull(f"{path}: the disk is full ({message}); free space and rerun to resume")
    if isinstance(e, (lmdb.InvalidError, lmdb.CorruptedError, lmdb.PageNotFoundError, lmdb.VersionMismatchError)):
        return StorageError(f"{path}: the fingerprint log is corrupt or not an LMDB file ({message})")
    return StorageError(f"{path}: fingerprint log error: {message}")


class FingerprintLog:
    """An exclusive handle on a data dir's LMDB environment. Open it in the process that uses it."""

    def __init__(self, path: str | os.PathLike[str], *, version_tag: str, fsync: bool = False,
                 map_size: int = INITIAL_MAP_SIZE, merge_every: int = MERGE_EVERY) -> None:
        self.path = Path(path)
        self.merge_every = merge_every
        self._env: lmdb.Environment | None = None
        self._lock_fd: int | None = None
        self._recent: set[bytes] = set()  # fingerprints of the pending batches
        self._next_batch = 0
        try:
            prepare_data_dir(self.path)
            self._lock_fd = self._acquire_dir_lock()
            data = self.path / "data.mdb"
            if data.exists() and data.stat().st_size == 0:  # LMDB would silently start a new, empty log
                raise StorageError(f"{data} is empty: the fingerprint log was truncated; restore it or use a new data dir")
            self._env = lmdb.open(str(self.path), map_size=map_size, max_dbs=MAX_DBS, subdir=True, sync=fsync,
                                  metasync=fsync, readahead=False, mode=0o600, lock=True)
            self._meta = self._env.open_db(b"meta")
            self._seen = self._env.open_db(b"seen")
            self._pending = self._env.open_db(b"pending")
            self._check_versions(version_tag)
            self._load_pending()
        except lmdb.Error as e:
            self.close()
            raise _translate(e, self.path) from None
        except BaseException:
            self.close()
            raise

    def _acquire_dir_lock(self) -> int:
        """flock the dir's lock file and write our PID into it, so that a refused opener can name the holder."""
        fd = os.open(self.path / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            os.close(fd)
            pid = f" (pid {holder})" if holder.isdigit() else ""  # empty: the holder is between flock and write
            raise StorageError(f"data dir {self.path} is in use by another frontier process{pid}") from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass  # a full disk: the PID only helps an error message; the lock is what counts
        return fd

    def _check_versions(self, version_tag: str) -> None:
        wanted = {b"format": FORMAT_VERSION, b"canonical": version_tag.encode()}
        with self.env.begin() as txn:
            stored = {key: txn.get(key, db=self._meta) for key in wanted}
            has_data = txn.stat(self._seen)["entries"] + txn.stat(self._pending)["entries"] > 0
        for key, value in wanted.items():
            if stored[key] is None and has_data:
                raise StorageError(f"{self.path}: data without a {key.decode()} version: not a frontier data dir")
            if stored[key] is not None and stored[key] != value:
                raise VersionMismatch(
                    f"{self.path} was written with {key.decode()} version {stored[key].decode()!r}, this is "
                    f"{value.decode()!r}; use a new data dir (URLs canonicalised differently are different keys)")
        if None in stored.values():
            self.write(lambda txn: [txn.put(k, v, db=self._meta) for k, v in wanted.items()])

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
                self._recent.update(value[i:i + FINGERPRINT_SIZE] for i in range(0, len(value), FINGERPRINT_SIZE))
                last = key
            return last

        last = self.read(body)
        self._next_batch = int.from_bytes(last, "big") + 1 if last else 0

    def known(self, txn: lmdb.Transaction, fps: Sequence[bytes]) -> list[bool]:
        """For each fingerprint, True if the log holds it."""
        recent, get, db = self._recent, txn.get, self._seen
        return [fp in recent or get(fp, db=db) is not None for fp in fps]

    def record(self, txn: lmdb.Transaction, new_fps: Sequence[bytes]) -> None:
        """Append fingerprints known to be new as one pending batch; call `committed` after the commit."""
        if new_fps and not txn.put(self._next_batch.to_bytes(8, "big"), b"".join(new_fps), db=self._pending,
                                   append=True):
            # py-lmdb's append returns False, writing nothing, for a key not after the last one
            raise StorageError(f"{self.path}: pending batch {self._next_batch} is not after the last one in the "
                               "fingerprint log (a batch was recorded without `committed`); nothing was recorded")

    def committed(self, new_fps: Sequence[bytes]) -> None:
        """The transaction that recorded `new_fps` committed: remember them; merge when enough wait."""
        if new_fps:
            self._next_batch += 1
            self._recent.update(new_fps)
            if len(self._recent) >= self.merge_every:
                self.merge()

    def merge(self) -> None:
        """Move the pending fingerprints into the B-tree in one sorted transaction."""
        if not self._recent:
            return
        items = [(fp, b"") for fp in sorted(self._recent)]

        def body(txn: lmdb.Transaction) -> None:
            txn.cursor(db=self._seen).putmulti(items)
            txn.drop(self._pending, delete=False)

        self.write(body)
        self._recent = set()
        self._next_batch = 0

    # -- whole-log reads ----------------------------------------------------------------------

    def __len__(self) -> int:
        return self.read(lambda txn: txn.stat(self._seen)["entries"]) + len(self._recent)

    def iter_chunks(self, size: int = 65536) -> Iterator[list[bytes]]:
        """Every stored fingerprint, in chunks (to rebuild the Bloom filter). Do not write meanwhile."""
        recent = list(self._recent)
        for start in range(0, len(recent), size):
            yield recent[start:start + size]
        try:
            with self.env.begin() as txn:
                chunk: list[bytes] = []
                for key in txn.cursor(db=self._seen).iternext(keys=True, values=False):
                    chunk.append(key)
                    if len(chunk) == size:
                        yield chunk
                        chunk = []
                if chunk:
                    yield chunk
        except lmdb.Error as e:
            raise _translate(e, self.path) from None

    def get_meta(self, key: bytes) -> bytes | None:
        return self.read(lambda txn: txn.get(key, db=self._meta))

    def put_meta(self, txn: lmdb.Transaction, key: bytes, value: bytes | None) -> None:
        """Set (or with None delete) a meta value inside a caller's write transaction."""
        if value is None:
            txn.delete(key, db=self._meta)
        else:
            txn.put(key, value, db=self._meta)

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
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> "FingerprintLog":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
