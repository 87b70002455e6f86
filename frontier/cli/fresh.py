"""run_frontier.py --fresh: start a crawl over, deleting only what a crawl created.

    plan = FreshStart.of(cfg)        # StorageError if the data dir is not a frontier data dir (nothing deleted)
    plan.describe()                  # what would go, in words, for the confirmation
    plan.run()                       # delete it (under the data dir's lock: refused while a crawl runs on it)

What a crawl creates in its data dir (storage.data_dir): `state/` (the LMDB environment: data.mdb, lock.mdb,
frontier.lock, the Bloom snapshot), the crawl log crawl.jsonl (or output.log when it lies in the data dir),
summary.json, runs.jsonl, the audit log audit.jsonl, the answered actions (actions/done/*.json; a request not yet
answered stays) and the demo's demo_ports.json. Those names, and nothing else, are deleted; a file of
another name stays, and so does the data dir itself. A directory that holds none of the marks of a crawl
(state/data.mdb, state/frontier.lock, summary.json, runs.jsonl, crawl.jsonl) but holds something is refused: a typo in storage.data_dir must not
empty someone's directory. A path that is a file is refused too. WARC files and a crawl log outside the data
dir are left alone (a rerun appends to them). The shared memory of the crawl's Bloom filter that a killed
run left in /dev/shm (frontier.seen.shm.default_bloom_name of `state/`) is removed.

With storage.backend: redis, the crawl's keys on the server go too (frontier.state.redis_info: every key
"frontier:<crawl>:*"), refused while a lease of the crawl is live (an instance is crawling it).
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass, field
from pathlib import Path

from frontier.config import LOG_FILE_NAME, CrawlConfig
from frontier.crawl.log import RUNS_NAME, SUMMARY_NAME
from frontier.errors import StorageError
from frontier.seen.fplog import LOCK_NAME
from frontier.seen.shm import default_bloom_name, unlink_all
from frontier.console.inbox import ACTIONS_DIR, DONE_DIR
from frontier.state.controls import AUDIT_FILE

__all__ = ["FreshStart"]

STATE_DIR = "state"
# what a crawl writes in its LMDB environment (frontier.seen.fplog, frontier.seen; *.tmp: a write cut short)
STATE_FILES = ("data.mdb", "lock.mdb", "bloom.snapshot", "bloom.snapshot.tmp", LOCK_NAME)
# what it writes in the data dir besides (frontier.crawl.log, run_frontier.start_demo_web)
DATA_FILES = (LOG_FILE_NAME, SUMMARY_NAME, f"{SUMMARY_NAME}.tmp", RUNS_NAME, "demo_ports.json", AUDIT_FILE)
ANSWERED = Path(ACTIONS_DIR) / DONE_DIR  # the action directory's answers
# one of these makes a directory a crawl's (a Redis instance's first run has written only its crawl log)
MARKS = (f"{STATE_DIR}/data.mdb", f"{STATE_DIR}/{LOCK_NAME}", SUMMARY_NAME, RUNS_NAME, LOG_FILE_NAME)


@dataclass(frozen=True, kw_only=True)
class FreshStart:
    """What --fresh deletes for one crawl config: `files` of the data dir and, for a Redis crawl, `redis_keys`."""

    data_dir: Path
    files: tuple[Path, ...]
    cfg: CrawlConfig = field(repr=False)
    redis_keys: int = 0

    @classmethod
    def of(cls, cfg: CrawlConfig) -> "FreshStart":
        data_dir = Path(cfg.storage.data_dir)
        files = _crawl_files(data_dir, cfg.log_path)
        keys = 0
        if cfg.storage.backend == "redis":
            with _open_redis(cfg) as crawl:
                live = crawl.live_leases()
                if live:
                    raise StorageError(f"crawl {crawl.crawl!r} on {_shown(cfg)} has {live} live "
                                       "lease(s): an instance is crawling it; stop every instance first")
                keys = crawl.count_keys()
        return cls(data_dir=data_dir, files=files, cfg=cfg, redis_keys=keys)

    @property
    def empty(self) -> bool:
        return not self.files and not self.redis_keys

    def describe(self) -> str:
        what = []
        if self.files:
            what.append(f"{len(self.files)} file{'s' * (len(self.files) != 1)} of {self.data_dir} "
                        f"({', '.join(str(p.relative_to(self.data_dir)) for p in self.files)})")
        if self.redis_keys:
            redis = self.cfg.storage.redis
            what.append(f"{self.redis_keys} key{'s' * (self.redis_keys != 1)} of crawl {redis.crawl!r} on "
                        f"{_shown(self.cfg)} (the state every instance of it shares)")
        return " and ".join(what) if what else f"nothing: {self.data_dir} holds no crawl"

    def run(self) -> None:
        """Delete the files (holding the data dir's lock, so a crawl cannot start on it meanwhile), then the keys."""
        state = self.data_dir / STATE_DIR
        lock = None
        try:
            if state.is_dir():
                lock = os.open(state / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise StorageError(f"data dir {self.data_dir} is in use by a running crawl; stop it first") \
                        from None
            for path in self.files:
                _remove(path)
            for folder in (state, self.data_dir / ANSWERED, self.data_dir / ACTIONS_DIR):
                if folder.is_dir() and not any(folder.iterdir()):
                    folder.rmdir()
            unlink_all(default_bloom_name(state))  # a killed run's Bloom filter: no crawl holds the dir now
        finally:
            if lock is not None:
                os.close(lock)
        if self.redis_keys:
            with _open_redis(self.cfg) as crawl:
                crawl.delete()


def _crawl_files(data_dir: Path, log_path: Path) -> tuple[Path, ...]:
    """The files a crawl created in `data_dir`; StorageError if it is a file or a directory of something else."""
    if data_dir.exists() and not data_dir.is_dir():
        raise StorageError(f"--fresh: {data_dir} is not a directory; nothing deleted")
    if not data_dir.exists():
        return ()
    names = list(DATA_FILES)
    if log_path.parent == data_dir and log_path.name not in names:
        names.append(log_path.name)
    files = [data_dir / name for name in names] + [data_dir / STATE_DIR / name for name in STATE_FILES]
    answered = data_dir / ANSWERED
    if answered.is_dir():
        files += sorted(answered.glob("*.json"))
    found = tuple(p for p in files if p.is_file() and not p.is_symlink())
    if not any((data_dir / mark).is_file() for mark in MARKS) and any(data_dir.iterdir()):
        raise StorageError(f"--fresh: {data_dir} is not a frontier data dir (it has no {', '.join(MARKS)}); "
                           "nothing deleted")
    return found


def _remove(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError as e:
        raise StorageError(f"--fresh: cannot delete {path}: {e.strerror}") from None


def _open_redis(cfg: CrawlConfig):  # -> CrawlKeys (imported here: only a Redis crawl loads redis-py)
    from frontier.state.redis_info import CrawlKeys

    redis = cfg.storage.redis
    return CrawlKeys.open(redis.url, crawl=redis.crawl, cluster=redis.cluster,
                          allow_unauthenticated=redis.allow_unauthenticated,
                          allow_plaintext=redis.allow_plaintext)


def _shown(cfg: CrawlConfig) -> str:
    from frontier.state.redis_conn import redact

    return redact(cfg.storage.redis.url)
