"""The crawl's data dir: created private, refused when unusable; checked by the supervisor before it spawns
anything and again by the fingerprint log that opens it. Plain Python: the supervisor must not import LMDB or
numpy (frontier.seen.fplog) for this check, which would hold back the crawl's start."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from frontier.errors import StorageError

__all__ = ["prepare_data_dir"]


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
