"""The recrawl spool: files of URLs that `python -m frontier recrawl` (frontier.cli.recrawl) writes into an LMDB
crawl's data dir and the crawl (frontier.state.lmdb) applies, each in one transaction that records its name.

A file is written to a hidden temporary name, fsynced, renamed to `<time_ns>-<pid>-<n>.urls`, then the
directory is fsynced: it either is there whole or not at all. Here, below both the command and the state, so
neither imports the other.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path

from frontier.seen.datadir import fsync_dir

SPOOL_DIR = "recrawl"  # in the data dir
SPOOL_SUFFIX = ".urls"
SPOOL_HEADER = b"# frontier recrawl spool 1\n"
SPOOL_CHUNK = 50_000  # URLs per spool file: what one LMDB transaction of the crawl applies
TMP_MAX_AGE = 3600.0  # seconds after which a temporary file of a killed `recrawl` is removed by the crawl


def spool_dir(data_dir: str | os.PathLike[str]) -> Path:
    return Path(data_dir) / SPOOL_DIR


def write_spool(data_dir: str | os.PathLike[str], urls: Sequence[str], *, chunk: int = SPOOL_CHUNK) -> list[Path]:
    """Write canonical URLs as spool files (atomically each, in order); returns their paths. OSError as raised."""
    directory = spool_dir(data_dir)
    directory.mkdir(mode=0o700, exist_ok=True)
    written: list[Path] = []
    stamp = f"{time.time_ns():020d}-{os.getpid()}"
    for n, start in enumerate(range(0, len(urls), chunk)):
        name = f"{stamp}-{n:05d}{SPOOL_SUFFIX}"
        tmp = directory / f".{name}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with open(fd, "wb") as f:
                f.write(SPOOL_HEADER)
                f.write("".join(url + "\n" for url in urls[start:start + chunk]).encode("utf-8", "surrogatepass"))
                f.flush()
                os.fsync(f.fileno())
            os.rename(tmp, directory / name)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        written.append(directory / name)
    fsync_dir(directory)
    return written


def pending_spool(data_dir: str | os.PathLike[str]) -> list[Path]:
    """The spool files waiting to be applied, oldest first (cheap: one directory read)."""
    try:
        with os.scandir(spool_dir(data_dir)) as entries:
            names = [e.name for e in entries if e.name.endswith(SPOOL_SUFFIX) and not e.name.startswith(".")]
    except FileNotFoundError:
        return []
    return [spool_dir(data_dir) / name for name in sorted(names)]


def read_spool(path: Path) -> list[str] | None:
    """A spool file's URLs; None if it is not one (no header: a stray file, set aside by the caller)."""
    data = path.read_bytes()
    if not data.startswith(SPOOL_HEADER):
        return None
    lines = data[len(SPOOL_HEADER):].decode("utf-8", "surrogatepass").split("\n")
    return [line for line in lines if line]


def remove_stale_tmp(data_dir: str | os.PathLike[str], now: float) -> None:
    """Temporary files of `recrawl` runs killed before their rename (never applied: nothing is lost)."""
    try:
        with os.scandir(spool_dir(data_dir)) as entries:
            for e in entries:
                if e.name.startswith(".") and e.name.endswith(".tmp") and e.stat().st_mtime + TMP_MAX_AGE < now:
                    Path(e.path).unlink(missing_ok=True)
    except FileNotFoundError:
        pass
