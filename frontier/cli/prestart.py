"""Before a crawl starts: its crawl.yaml read (the only place the YAML is parsed) into the frozen config, and
the checks that need no process yet: the Bloom filter and the workers fit in memory, an output path can be
written. Each fails with one ConfigError naming the key; the supervisor (frontier.cli.supervisor) runs them
before it spawns anything, and the other commands read their --config here too.

Plain Python: no numpy, LMDB or aiohttp (start-up is on the clock: frontier.cli.supervisor).
"""

from __future__ import annotations

import os
from pathlib import Path

from frontier.config import CrawlConfig, load_config
from frontier.errors import ConfigError
from frontier.seen.sizing import allocation_bytes, available_memory, check_fits_in_memory, format_size

# Resident memory of one fetcher worker: 63 MB peak measured (Python, aiohttp, uvloop, selectolax, one
# session; 2,000 pages of 20 KB at 64 in flight, with or without WARC output). The startup check counts
# 100 MB: real pages are larger.
WORKER_RSS_BYTES = 100 * 2**20


def read_config(path: Path) -> CrawlConfig:
    """Parse and validate; ConfigError names the file and the key."""
    import yaml

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"{path} is not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a mapping of sections, got {type(data).__name__}")
    return load_config(data, base_dir=Path.cwd())


def check_output_path(path: Path, key: str) -> None:
    """ConfigError unless `path` can be written: not a directory, and it exists writable, or its
    nearest existing ancestor is a writable directory (the missing ones are created)."""
    if path.is_dir():
        raise ConfigError(f"{path} is a directory; give a file name", key=key)
    if path.exists():
        if not os.access(path, os.W_OK):
            raise ConfigError(f"{path} is not writable", key=key)
        return
    ancestor = path.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise ConfigError(f"cannot create {path}: {ancestor} is not a directory", key=key)
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise ConfigError(f"cannot create {path}: {ancestor} is not writable", key=key)


def check_memory(cfg: CrawlConfig) -> None:
    """ConfigError when the Bloom filter, or it and the workers, would not fit in memory: checked before
    anything is created (a filter too large for /dev/shm or RAM used to end in tracebacks)."""
    dedup = cfg.dedup
    try:
        check_fits_in_memory(dedup.capacity, dedup.error_rate, dedup.partitions, blocked=dedup.blocked)
    except ConfigError as e:
        message = str(e).removeprefix(f"{e.key}: ") if e.key else str(e)
        raise ConfigError(message, key=f"dedup.{e.key or 'capacity'}") from None
    bloom = allocation_bytes(dedup.capacity, dedup.error_rate, dedup.partitions, blocked=dedup.blocked)
    workers = cfg.workers.processes * WORKER_RSS_BYTES
    _, available = available_memory()
    if bloom + workers > available:
        raise ConfigError(f"{cfg.workers.processes} worker processes need about {format_size(workers)} of RAM "
                          f"({WORKER_RSS_BYTES // 2**20} MiB each) besides the Bloom filter's {format_size(bloom)}; "
                          f"MemAvailable is {format_size(available)}", key="workers.processes")
