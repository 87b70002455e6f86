"""A crawl's data dir read without taking it: what `python -m frontier status` and `export` show; and a
Redis crawl's shared state (`read_redis_status`), read from the server.

A crawl holds its data dir with an exclusive flock on `<env>/frontier.lock` (frontier.seen.fplog). Nothing here
takes that lock, not even to test it (a crawl starting at that instant would stop with "in use"):
  * the LMDB environment is opened read-only. LMDB readers and its one writer never block each other (MVCC);
    a reader registers in lock.mdb's reader table, which is all it writes. Long scans (the queue) read in
    chunks, one short transaction each, so a running crawl can reuse its free pages.
  * whether a crawl holds the dir comes from /proc/locks (the holder's PID), not from trying the flock.
  * the Bloom filter's figures come from its snapshot file (plain reads, no shared memory). The snapshot
    is current only after a clean stop, whose marker in LMDB names its id: the crawl clears the marker and
    deletes the file when it starts.
  * a data dir of a format or value encoding this code cannot read is refused with one line (VersionMismatch).
  * pages by outcome and the run history come from summary.json and runs.jsonl (frontier.crawl.log), which a
    crawl rewrites atomically.

The environment is `<data_dir>/state` (run_frontier.py, frontier.scrapy.Scheduler) or `<data_dir>` itself
(the seen-set alone of frontier.scrapy.DupeFilter, a URLSeen). One process must not open an environment
twice (an LMDB rule): do not call these while the same process has the data dir open.

fetched / failed / skipped URLs come from the crawl log (crawl.jsonl): the LMDB state keeps the text of
queued URLs only (a fetched URL is a 16-byte fingerprint there, by design). See `logged_urls` for what each
means and what a kill -9 costs the log.
"""

from __future__ import annotations

import json
import math
import mmap
import os
import time
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import lmdb
import numpy as np
import xxhash
from bitarray import bitarray

from frontier.config import CrawlConfig
from frontier.crawl.events import SOFT_404_PROBE
from frontier.crawl.log import RUNS_NAME, SUMMARY_NAME, RunHistory, other_reasons
from frontier.crawl.traps import TrapDetector, suspected_rows
from frontier.errors import StorageError
from frontier.seen.bloom import (BLOCKED_LAYOUT_VERSION, GROWTH, HEADER_FIELDS, LAYOUT_VERSIONS, MAGIC, MAX_GENERATIONS,
                                 SNAPSHOT_ID_SIZE, SNAPSHOT_MAGIC)
from frontier.seen.fingerprint import FINGERPRINT_SIZE
from frontier.seen.fplog import ENCODING_KEY, LOCK_NAME, Layout, encoding_mismatch, format_mismatch
from frontier.seen.parked import ENCODING as PARKED_ENCODING
from frontier.seen.parked import PARKED_DB, record_count
from frontier.seen.sizing import blocked_generation, generation_error_rate, generation_geometry, generation_rate, header_size
from frontier.seen.urlseen import MARKER_ID, SNAPSHOT_KEY, SNAPSHOT_NAME
from frontier.state.crawlstore import (COUNTERS_DB, DUE_DB, ENCODINGS, HOST_ID_SIZE, HOST_STATE_DB, HOSTS_DB,
                                       PAYLOADS_DB, QUEUE_DB, REVISIT_DB, ROBOTS_DB, LOW_BAND, STILL_READ, decode_counter, decode_entry, decode_host,
                                       decode_revisit, due_key, due_of_key, host_key)

STATE_DIR = "state"
WHAT = ("fetched", "failed", "skipped", "queued", "suspected", "due")
CHUNK = 10_000  # queue entries read per transaction
_MAP_SIZE = 1 << 20  # a read-only open maps what the file holds; this only sets a floor
_MAX_DBS = 32
_SNAPSHOT_WITHOUT_ID = b"FRBSNAP1"  # a snapshot of a data dir of format 3, read for its figures (never current)
RESIZE_RETRIES = 8  # a crawl doubles its map when it fills: growing it 8 times during one open takes some doing
T = TypeVar("T")
_FETCHED, _FAILED, _SKIPPED, _OPEN, _OWN = 1, 2, 3, 0, 4  # the last crawl-log record of a URL says it was...
_META, _PENDING, _SEEN_TREE = b"meta", b"pending", b"seen"  # frontier.seen.fplog's (the B-tree of formats 1 and 2)
_DBS = (_META, _PENDING, _SEEN_TREE, QUEUE_DB, HOSTS_DB, ROBOTS_DB, COUNTERS_DB, PAYLOADS_DB, PARKED_DB, DUE_DB, REVISIT_DB,
        HOST_STATE_DB)


def env_dir(data_dir: str | os.PathLike[str]) -> Path:
    """The LMDB environment of a data dir; StorageError if there is none."""
    data_dir = Path(data_dir)
    for env in (data_dir / STATE_DIR, data_dir):
        if (env / "data.mdb").is_file():
            return env
    if not data_dir.is_dir():
        raise StorageError(f"{data_dir}: no such data dir")
    if any((data_dir / name).is_file() for name in (SUMMARY_NAME, RUNS_NAME)):
        raise StorageError(f"{data_dir}: the data dir of an instance of a Redis crawl (its crawl log and runs; the "
                           "crawl's state is on the server): give the crawl's config instead, "
                           "`status --config crawl.yaml`")
    raise StorageError(f"{data_dir}: not a frontier data dir (no LMDB environment in it or in its {STATE_DIR}/)")


def lock_holder(env: Path) -> int | None:
    """The PID of the process holding the environment's flock (a crawl running on it), or None."""
    try:
        st = os.stat(env / LOCK_NAME)
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            lines = f.readlines()
    except OSError:
        return None
    device = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in lines:
        fields = line.split()  # "1: FLOCK  ADVISORY  WRITE 1234 fe:00:2147746 0 EOF" ("->" marks a waiter)
        if "->" not in fields and len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == device:
            return int(fields[4])
    return None


class ReadOnlyEnv:
    """A read-only handle on a data dir's LMDB environment, with the named databases it has (opened up front:
    a database is opened in a transaction of its own, which cannot nest in a reader's). StorageError for what
    lmdb refuses."""

    def __init__(self, env: Path) -> None:
        self.path = env
        try:
            self.env = lmdb.open(str(env), readonly=True, lock=True, subdir=True, max_dbs=_MAX_DBS,
                                 map_size=_MAP_SIZE, readahead=False)
        except lmdb.Error as e:
            raise StorageError(f"{env}: cannot open the LMDB environment read-only: {e}") from None
        self._dbs: dict[bytes, Any] = {}
        for name in _DBS:
            try:
                self._dbs[name] = self._resized(lambda: self.env.open_db(name, create=False))
            except lmdb.NotFoundError:
                continue
            except lmdb.Error as e:
                self.env.close()
                raise StorageError(f"{env}: cannot read the LMDB environment: {e}") from None
        try:
            self._check_versions()
        except BaseException:
            self.env.close()
            raise

    def _check_versions(self) -> None:
        """VersionMismatch (one line) for a data dir of a format or value encoding this code cannot read."""
        meta = self._dbs.get(_META)
        if meta is None:
            return
        with self.begin() as txn:
            refused = format_mismatch(self.path, txn.get(b"format", db=meta))
            for name, version in {**ENCODINGS, PARKED_DB.decode(): PARKED_ENCODING}.items():
                stored = txn.get(ENCODING_KEY + name.encode(), db=meta)
                if stored not in STILL_READ.get(name, ()):  # an older version the decoders read too
                    refused = refused or encoding_mismatch(self.path, name, stored, version)
        if refused is not None:
            raise refused

    def _resized(self, begin: Callable[[], T]) -> T:
        """`begin()` (anything that starts a transaction), again after adopting the map's size each time the
        crawl has grown it since (lmdb.MapResizedError), at most RESIZE_RETRIES times."""
        for _ in range(RESIZE_RETRIES):
            try:
                return begin()
            except lmdb.MapResizedError:
                self.env.set_mapsize(0)
        return begin()

    def db(self, name: bytes) -> Any:
        """A named database, or None if the environment has none by that name."""
        return self._dbs.get(name)

    def begin(self) -> lmdb.Transaction:
        return self._resized(self.env.begin)

    def close(self) -> None:
        self.env.close()

    def __enter__(self) -> "ReadOnlyEnv":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- status -------------------------------------------------------------------------------------------------


def read_status(data_dir: str | os.PathLike[str], *, top: int = 10, runs: int = 5) -> dict[str, Any]:
    """Everything `status` shows, as plain JSON values:

    data_dir, env, running (the holder's PID or None), last_stop ("running", "clean": a clean stop since the
    last start, "unclean": killed or crashed since), canonical (rules version), pages (fetched, attempts:
    LMDB counters, exact, crawl-wide; `recorded_counts` of summary.json, this data dir's runs), queue (queued, hosts
    with a queue, the `top` hosts by queued URLs with their fetched pages, requests: queued Scrapy requests),
    hosts (known, robots cached), leases (in_flight_at_last_stop, note), seen (urls), bloom (the snapshot's
    figures and whether it is current) and runs (the last `runs` lines of runs.jsonl).
    """
    data_dir = Path(data_dir)
    env_path = env_dir(data_dir)
    holder = lock_holder(env_path)
    with ReadOnlyEnv(env_path) as env:  # once: an environment opened twice in one process breaks LMDB's locks
        state = _read_state(env, top)
        suspected = _suspected_report(env)
        revisits = _revisit_counts(env, time.time())
    marker = state.pop("bloom_marker")
    last_stop = "running" if holder is not None else "clean" if marker is not None else "unclean"
    history = RunHistory(data_dir)
    summary = history.summary()
    bloom = snapshot_stats(env_path / SNAPSHOT_NAME)
    if bloom is not None:  # current: the one the marker of the last clean stop names
        bloom["current"] = last_stop == "clean" and bloom["id"] is not None and bloom["id"] == marker.get(MARKER_ID)
    return {
        "data_dir": str(data_dir),
        "env": str(env_path),
        "running": holder,
        "last_stop": last_stop,
        "canonical": state.pop("canonical"),
        "pages": {**state.pop("pages"), **recorded_counts(summary)},
        **state,
        "suspected": suspected,
        "long_crawl_delay": summary.get("long_crawl_delay"),  # as of the last clean stop
        "revisits": revisits,
        "leases": _leases(last_stop, holder, summary),
        "bloom": bloom,
        "runs": history.runs()[-runs:] if runs > 0 else [],
    }


def _leases(last_stop: str, holder: int | None, summary: dict[str, Any]) -> dict[str, Any]:
    """Leases live in the crawl process's memory: none outlives it."""
    if last_stop == "running":
        return {"in_flight_at_last_stop": None,
                "note": f"held in the memory of the running crawl (pid {holder}); none survive it"}
    if last_stop == "unclean":
        return {"in_flight_at_last_stop": None,
                "note": "the last run was killed: its leases ended with it; every queued URL is leasable again "
                        "(those it had in flight are fetched again)"}
    return {"in_flight_at_last_stop": int(summary.get("in_flight", 0)),
            "note": "a clean stop: every queued URL is leasable by the next run"}


def _read_state(env: ReadOnlyEnv, top: int) -> dict[str, Any]:
    """The LMDB side, one read transaction (one consistent snapshot) apart from the queue scan."""
    meta, queue, hosts, counters = env.db(_META), env.db(QUEUE_DB), env.db(HOSTS_DB), env.db(COUNTERS_DB)
    robots, payloads = env.db(ROBOTS_DB), env.db(PAYLOADS_DB)
    with env.begin() as txn:
        names = {} if hosts is None else {int.from_bytes(k, "big"): decode_host(v) for k, v in txn.cursor(db=hosts)}
        count = {} if counters is None else {bytes(k).decode(): decode_counter(v) for k, v in txn.cursor(db=counters)}
        marker = None if meta is None else txn.get(SNAPSHOT_KEY, db=meta)
        canonical = None if meta is None else txn.get(b"canonical", db=meta)
        seen = seen_count(env, txn)
        robots_cached = 0 if robots is None else txn.stat(robots)["entries"]
        requests = 0 if payloads is None else txn.stat(payloads)["entries"]
        parked_db = env.db(PARKED_DB)
        parked = 0 if parked_db is None else sum(map(record_count, txn.cursor(db=parked_db).iternext(keys=False)))
    per_host: Counter[int] = Counter()
    if queue is not None:
        for keys in _chunks(env, queue, values=False):
            per_host.update(int.from_bytes(key[:HOST_ID_SIZE], "big") for key in keys)
    legacy = count.get("pages", 0)  # a data dir from before "fetched" and "attempts" (see crawlstore)
    return {
        "bloom_marker": None if marker is None else json.loads(marker),
        "canonical": None if canonical is None else bytes(canonical).decode(),
        "pages": {"fetched": count.get("fetched", legacy), "attempts": count.get("attempts", legacy)},
        "queue": {"queued": per_host.total(), "hosts": len(per_host), "requests": requests, "parked": parked,
                  "top_hosts": [{"host": names.get(hid, (f"#{hid}", 0))[0], "queued": n,
                                 "fetched": names.get(hid, ("", 0))[1]} for hid, n in per_host.most_common(top)]},
        "hosts": {"known": len(names), "robots_cached": robots_cached},
        "seen": {"urls": seen},
    }


def seen_count(env: ReadOnlyEnv, txn: lmdb.Transaction) -> int:
    """Distinct URLs in the fingerprint log (frontier.seen.fplog's layout: the runs' counts plus the pending batches;
    a format 1/2 log not migrated yet: its `seen` B-tree plus the pending batches)."""
    meta, pending, tree = env.db(_META), env.db(_PENDING), env.db(_SEEN_TREE)
    count = 0 if pending is None else sum(len(v) for v in txn.cursor(db=pending).iternext(keys=False)) // \
        FINGERPRINT_SIZE
    layout = None if meta is None else txn.get(b"runs", db=meta)
    if layout is not None:
        return count + Layout.from_json(bytes(layout)).count
    return count + (0 if tree is None else txn.stat(tree)["entries"])


def _chunks(env: ReadOnlyEnv, db: Any, *, values: bool) -> Iterator[list[Any]]:
    """The keys (or (key, value) pairs) of a database in key order, CHUNK per read transaction."""
    after: bytes | None = None
    while True:
        with env.begin() as txn:
            cursor = txn.cursor(db=db)
            found = cursor.set_range(after) if after is not None else cursor.first()
            if found and after is not None and cursor.key() == after:
                found = cursor.next()
            out: list[Any] = []
            while found and len(out) < CHUNK:
                out.append((cursor.key(), cursor.value()) if values else cursor.key())
                found = cursor.next()
        if not out:
            return
        yield out
        if not found:
            return
        after = out[-1][0] if values else out[-1]


def snapshot_stats(path: Path) -> dict[str, Any] | None:
    """The figures `SharedBloom.stats()` gives, from a snapshot file (frontier.seen.bloom's layout), with plain
    reads, and its id (None: a snapshot written before ids, which no marker names); None if there is no
    snapshot. StorageError if the file is not a snapshot."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return None
    with f:
        size = os.fstat(f.fileno()).st_size
        magic = f.read(len(SNAPSHOT_MAGIC))
        at = len(SNAPSHOT_MAGIC) + (SNAPSHOT_ID_SIZE if magic == SNAPSHOT_MAGIC else 0)
        if magic not in (SNAPSHOT_MAGIC, _SNAPSHOT_WITHOUT_ID) or size < at + 4 + HEADER_FIELDS.size:
            raise StorageError(f"{path}: not a frontier Bloom snapshot")
        snapshot_id = f.read(SNAPSHOT_ID_SIZE).hex() if magic == SNAPSHOT_MAGIC else None
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            gens = int.from_bytes(mm[at:at + 4], "little")
            magic, version, partitions, capacity, error_rate, _, max_gens, header = \
                HEADER_FIELDS.unpack_from(mm, at + 4)
            if magic != MAGIC or version not in LAYOUT_VERSIONS or max_gens != MAX_GENERATIONS or \
                    header != header_size(partitions) or not 1 <= gens <= max_gens:
                raise StorageError(f"{path}: a Bloom snapshot of another layout version, or corrupt")
            base = at + 4  # where the segment (header, then generation 0) starts
            counts = np.frombuffer(mm, dtype="<u8", count=max_gens * partitions, offset=base + 64)
            items = int(counts[:gens * partitions].sum())
            offset, nbytes, fill, log_miss = base + header, 0, 0.0, 0.0
            for g in range(gens):
                blocked = blocked_generation(version == BLOCKED_LAYOUT_VERSION, g)
                _, part_bits, hashes = generation_geometry(
                    capacity * GROWTH ** g, generation_rate(error_rate, g), partitions, blocked=blocked)
                length = part_bits * partitions // 8
                if offset + length > size:
                    raise StorageError(f"{path}: truncated Bloom snapshot")
                bits = bitarray(buffer=memoryview(mm)[offset:offset + length], endian="little")
                fill = bits.count() / len(bits)
                del bits  # release the view before the map closes
                rate = generation_error_rate(int(counts[g * partitions:(g + 1) * partitions].sum()),
                                             part_bits * partitions, hashes, fill, blocked=blocked)
                log_miss += math.log1p(-rate) if rate < 1.0 else -math.inf
                offset += length
                nbytes += length
            del counts
    return {"path": str(path), "id": snapshot_id, "items": items, "capacity": capacity, "error_rate": error_rate,
            "generations": gens, "bytes": nbytes, "fill_ratio": fill,
            "estimated_false_positive_rate": -math.expm1(log_miss)}  # 1 - prod(1 - rate), exact when tiny


def recorded_counts(summary: dict[str, Any]) -> dict[str, Any]:
    """What summary.json counted, summed over this data dir's runs (with Redis: this instance's): outcomes of
    the site's pages, own_requests (robots.txt, soft_404_probe, sitemap), other (links refused, robots.txt
    and sitemap results), as of `as_of`."""
    return {"outcomes": summary.get("outcomes", {}), "own_requests": summary.get("own_requests", {}),
            "other": other_reasons(summary), "as_of": (summary.get("last_run") or {}).get("ended_at")}


def read_redis_status(cfg: CrawlConfig, *, top: int = 10, runs: int = 5) -> dict[str, Any]:
    """`status` of a crawl with storage.backend: redis: the shared state read from the server
    (frontier.state.redis_info.CrawlKeys.status: counts, queue and top hosts, leases by instance, seen URLs),
    plus this instance's records in its data dir (outcomes from summary.json, the last `runs` runs). Reads
    only: it works beside running instances. StorageError if the server cannot be read or holds no such crawl."""
    from frontier.state.redis_info import CrawlKeys

    redis = cfg.storage.redis
    with CrawlKeys.open(redis.url, crawl=redis.crawl, cluster=redis.cluster,
                        allow_unauthenticated=redis.allow_unauthenticated,
                        allow_plaintext=redis.allow_plaintext) as crawl:
        info = crawl.status(top=top)
        info["revisits"] = crawl.revisits()
    history = RunHistory(cfg.storage.data_dir)
    summary = history.summary()
    info["data_dir"] = str(cfg.storage.data_dir)
    info["pages"].update(recorded_counts(summary))
    info["suspected"] = summary.get("suspected", [])  # as of this instance's last stop
    info["long_crawl_delay"] = summary.get("long_crawl_delay")
    info["runs"] = history.runs()[-runs:] if runs > 0 else []
    return info


# -- URL lists ----------------------------------------------------------------------------------------------


def redis_due_urls(cfg: CrawlConfig) -> Iterator[tuple[str, float, float, float]]:
    """`due_urls` of a crawl with storage.backend: redis, read from the server (frontier.state.redis_info)."""
    from frontier.state.redis_info import CrawlKeys

    redis = cfg.storage.redis
    with CrawlKeys.open(redis.url, crawl=redis.crawl, cluster=redis.cluster,
                        allow_unauthenticated=redis.allow_unauthenticated,
                        allow_plaintext=redis.allow_plaintext) as crawl:
        yield from crawl.due()


def suspected_report(data_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """`suspected_rows` of the low band per host and the pattern whose budget each URL spends, with the trap
    detector's growth figures as of the last commit (its per-host state in the data dir)."""
    with ReadOnlyEnv(env_dir(data_dir)) as env:
        return _suspected_report(env)


def _suspected_report(env: ReadOnlyEnv) -> list[dict[str, Any]]:
    detector = TrapDetector()
    states = env.db(HOST_STATE_DB)
    if states is not None:
        with env.begin() as txn:
            for name, data in txn.cursor(db=states):
                try:
                    detector.load_host(bytes(name).decode("utf-8", "surrogatepass"), bytes(data))
                except StorageError:
                    continue  # a host whose state does not read: its URLs are counted by their own pattern
    return suspected_rows(_suspected_urls(env), detector)


def suspected_urls(data_dir: str | os.PathLike[str]) -> Iterator[tuple[str, str]]:
    """(host, URL) of every entry of the hosts' low queues (frontier.state.crawlstore: LOW_BAND), host by host in
    lease order: URLs queued as suspected traps; once the crawl is done, those skipped (traps.max_suspect_pages)."""
    with ReadOnlyEnv(env_dir(data_dir)) as env:
        yield from _suspected_urls(env)


def _suspected_urls(env: ReadOnlyEnv) -> Iterator[tuple[str, str]]:
    queue, hosts = env.db(QUEUE_DB), env.db(HOSTS_DB)
    if queue is None or hosts is None:
        return
    with env.begin() as txn:
        names = {int.from_bytes(k, "big"): decode_host(v)[0] for k, v in txn.cursor(db=hosts)}
    for hid, name in sorted(names.items()):
        prefix = host_key(hid)
        with env.begin() as txn:
            cursor = txn.cursor(db=queue)
            found = cursor.set_range(prefix + bytes([LOW_BAND]))
            urls = []
            while found and cursor.key()[:HOST_ID_SIZE] == prefix:
                urls.append(decode_entry(cursor.key(), cursor.value()).url)
                found = cursor.next()
        yield from ((name, url) for url in urls)


def revisit_counts(data_dir: str | os.PathLike[str], now: float) -> dict[str, Any]:
    """The revisit schedule (revisit.after): URLs with one, how many are due by `now`, and the next due time after
    it (wall clock, None if none), read from the `due` index (frontier.state.crawlstore)."""
    with ReadOnlyEnv(env_dir(data_dir)) as env:
        return _revisit_counts(env, now)


def _revisit_counts(env: ReadOnlyEnv, now: float) -> dict[str, Any]:
    due = env.db(DUE_DB)
    if due is None:
        return {"scheduled": 0, "due_now": 0, "next_due": None}
    end = due_key(now, b"\xff" * 16)
    with env.begin() as txn:
        scheduled = txn.stat(due)["entries"]
        cursor = txn.cursor(db=due)
        due_now = 0
        next_due = None
        if cursor.first():
            for key in cursor.iternext(keys=True, values=False):
                if bytes(key) > end:
                    next_due = due_of_key(key)
                    break
                due_now += 1
    return {"scheduled": scheduled, "due_now": due_now, "next_due": next_due}


def due_urls(data_dir: str | os.PathLike[str]) -> Iterator[tuple[str, float, float, float]]:
    """(URL, due time, interval, last change) of every scheduled revisit, earliest due first."""
    with ReadOnlyEnv(env_dir(data_dir)) as env:
        due, revisit = env.db(DUE_DB), env.db(REVISIT_DB)
        if due is None or revisit is None:
            return
        for keys in _chunks(env, due, values=False):
            with env.begin() as txn:
                rows = [txn.get(bytes(key)[-16:], db=revisit) for key in keys]
            for value in rows:
                if value is not None:
                    r = decode_revisit(value)
                    yield r.url, r.due, r.interval, r.changed_at


def queued_urls(data_dir: str | os.PathLike[str]) -> Iterator[str]:
    """The queued URLs (leased ones included: a lease is not durable), host by host, each host's in FIFO order.
    With frontier.scrapy.Scheduler, a request other than a GET without a body is queued under its Scrapy
    fingerprint's URL (http://fp-XX.scrapy.invalid/...)."""
    with ReadOnlyEnv(env_dir(data_dir)) as env:
        queue = env.db(QUEUE_DB)
        if queue is None:
            return
        for pairs in _chunks(env, queue, values=True):
            for key, value in pairs:
                yield decode_entry(key, value).url


def _url_hash(url: str) -> int:
    return xxhash.xxh3_64_intdigest(url.encode("utf-8", "surrogatepass"))


def _outcome(record: dict[str, Any]) -> int:
    if record.get("reason") == SOFT_404_PROBE or record.get("sitemap"):  # the crawler's own request: no page
        return _OWN
    status = record.get("status")
    if status == "ok":
        return _FETCHED
    if "attempt" not in record:  # skipped without a fetch (robots.txt)
        return _SKIPPED if status == "skip" else _OPEN
    if record.get("retry"):
        return _OPEN
    return _FAILED


def logged_urls(log_path: str | os.PathLike[str], what: str, *, exclude: Iterable[str] = ()) -> Iterator[str]:
    """URLs of the crawl log (crawl.jsonl) by the outcome of their last record, in the order of those records:

        fetched   the last attempt got a page (status ok: HTML, another content type, or a redirect)
        failed    the last attempt was final and got none: a failure given up after its retries, or an error
                  response or refusal that is not retried (4xx, too_large, invalid_url, ...)
        skipped   never fetched: refused before a fetch (robots_disallowed)

    A URL whose last record is a retry is none of these (it is queued), nor is a request of the crawler's own
    (a host's soft-404 probe, a sitemap: not pages of the site). `exclude`: URLs to leave out (the
    queued ones, for `failed`: an unreachable seed's last failure is final for its run, but it stays queued).

    The log is a trace, not the record (frontier.crawl.log): after a kill -9 the lines of the last batch may be
    missing, so a URL acked in it is in no list, and a URL fetched twice appears once, by its last record.
    Two passes over the file; memory: about 20 bytes per record (numpy), not the URLs.
    """
    target = {"fetched": _FETCHED, "failed": _FAILED, "skipped": _SKIPPED}[what]
    hashes, kinds, lines = array("Q"), array("B"), array("Q")
    with open(log_path, "rb") as f:
        for number, line in enumerate(f):
            try:
                record = json.loads(line)
                url = record["url"]
            except (ValueError, TypeError, KeyError):  # a torn line (a crash), or not a record
                continue
            hashes.append(_url_hash(url))
            kinds.append(_outcome(record))
            lines.append(number)
    if not hashes:
        return
    h = np.frombuffer(hashes, dtype=np.uint64)
    k = np.frombuffer(kinds, dtype=np.uint8)
    _, from_end = np.unique(h[::-1], return_index=True)
    last = len(h) - 1 - from_end  # each URL's last record
    chosen = last[k[last] == target]
    excluded = np.fromiter((_url_hash(url) for url in exclude), dtype=np.uint64)
    if excluded.size:
        chosen = chosen[~np.isin(h[chosen], excluded)]
    wanted = np.sort(np.frombuffer(lines, dtype=np.uint64)[chosen])
    if not wanted.size:
        return
    at = 0
    with open(log_path, "rb") as f:
        for number, line in enumerate(f):
            if number == wanted[at]:
                yield json.loads(line)["url"]
                at += 1
                if at == wanted.size:
                    return
