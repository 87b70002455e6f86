"""The crawl's data dir: created private, refused when unusable; checked by the supervisor before it spawns
anything and again by the fingerprint log that opens it. Plain Python: the supervisor must not import LMDB or
numpy (frontier.seen.fplog) for this check, which would hold back the crawl's start."""

from __future__ import annotations

import fcntl
import os
import stat
import weakref
from pathlib import Path

from frontier.errors import StorageError

__all__ = ["DirLock", "fsync_dir", "prepare_data_dir"]


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


def fsync_dir(path: Path) -> None:
    """Make a rename, creation or unlink in a directory durable: without it a power loss may undo it, though the
    file's own fsync (and an LMDB commit written after it) survived."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class DirLock:
    """An exclusive flock on `path` (a data dir's lock file) holding the owner's PID, so that a refused opener can
    name the holder: StorageError "<busy> (pid N)", or, when the holder is this very process, one that says so
    (another object of this process has the dir open). `close()` releases it; idempotent; a lock garbage collected
    without `close()` is released then."""

    def __init__(self, path: Path, busy: str) -> None:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        self._close = weakref.finalize(self, os.close, fd)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            self.close()
            if holder == str(os.getpid()):
                raise StorageError(f"{path.parent} is in use by this very process (pid {holder}): another "
                                   "object of it holds the dir until that is closed") from None
            pid = f" (pid {holder})" if holder.isdigit() else ""  # empty: the holder is between flock and write
            raise StorageError(f"{busy}{pid}") from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass  # a full disk: the PID only helps an error message; the lock is what counts

    def close(self) -> None:
        self._close()
