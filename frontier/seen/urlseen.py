"""The seen-test: "have we seen this URL?", tier by tier, batch by batch.

    canonicalize -> fingerprint -> LRU (recent) -> SharedBloom (certainly new?) -> LMDB log (exact)

A URL the LRU holds is seen. One the Bloom filter has certainly not seen is new. A Bloom "maybe" is
confirmed in the log in exact mode (so a new URL is never dropped by a false positive) and trusted
in probabilistic mode, except for whitelisted URLs (seeds, known pages), which are confirmed in the log
in both modes. New fingerprints are written to the log in the batch's one write transaction either way,
so the Bloom filter can always be rebuilt from the log; their Bloom bits are set only once that
transaction has committed, so the filter never holds a URL the log does not.

Deletion (`discard`). The log holds exactly the URLs reported new and not discarded since, in both modes;
a discard removes them from it in one write transaction, and a URL it does not hold is refused (False):
that rule keeps a discard from ever making another URL a false negative. Exact mode: the Bloom bits stay
(the log confirm makes the URL new again). Probabilistic mode needs `deletable=True`: a CountingBloom
(frontier.seen.counting) instead of SharedBloom, 4x the memory, whose counters are decremented after the commit.
Its invariant is that it counts exactly the log's URLs, once each: a URL confirmed new in the log after a
Bloom "maybe" (exact mode, whitelist) is counted too, and a rebuild from the log counts every URL without
testing it. A counting filter does not grow: past its capacity URLSeen rebuilds it from the log at twice
the capacity (a pause of about a second per 10^6 URLs, amortised over the doubling), so the false-positive
rate stays at the target.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import lmdb
import numpy as np

from frontier.errors import ConfigError, FrontierError, InvalidURL, StorageError
from frontier.seen.bloom import DEFAULT_PARTITIONS, SharedBloom
from frontier.seen.counting import CountingBloom
from frontier.seen.fingerprint import FINGERPRINT_SIZE as FP, check_batch, fingerprint, fingerprints
from frontier.seen.fplog import CACHED_LEVELS, FILTER_BITS, LAZY_FANOUT, FingerprintLog, Removal
from frontier.seen.fpruns import halves
from frontier.seen.fpset import digests, firsts, joined, select, split
from frontier.seen.lru import BufferLRU
from frontier.seen.parked import ParkedConfirms, Waiting
from frontier.seen.shm import default_bloom_name, unlink_all
from frontier.seen.sizing import check_capacity_and_rate
from frontier.url.canonical import DEFAULT_RULES, CanonicalRules, canonicalize

DEFAULT_CAPACITY = 10_000_000
DEFAULT_ERROR_RATE = 1e-4
DEFAULT_LRU_SIZE = 65536
SNAPSHOT_NAME = "bloom.snapshot"
# The fingerprint log's meta key for the snapshot's marker: cleared on open (and the snapshot deleted), set on
# a clean close; the snapshot is loaded only while it is set, matches this log and names the snapshot's id.
SNAPSHOT_KEY = b"bloom_snapshot"
MARKER_ID = "snapshot"  # the marker's field naming the snapshot's id (hex); a marker without one is not trusted

AlsoWrite = Callable[[lmdb.Transaction, list[bytes]], None]
Payloads = Callable[[list[bytes]], list[bytes]]  # what to keep with parked fingerprints (see frontier.seen.parked)
Enqueue = Callable[[lmdb.Transaction, list[bytes], list[bytes]], None]  # new fingerprints, their payloads
Filter = SharedBloom | CountingBloom


class SeenTest(Protocol):
    """What a crawler needs from a seen-test; `URLSeen` and `MemorySeen` both provide it."""

    def add(self, url: str) -> bool:
        """True if the URL is new (first time seen): the caller then schedules it. False if seen before.
        Raises InvalidURL for a URL that cannot be canonicalised."""

    def add_many(self, urls: Sequence[str]) -> list[bool]:
        """`add` for a batch, in one step. False means "do not schedule it" for a duplicate and for an invalid
        URL alike; the result's `.invalid` ({index: InvalidURL}) tells the invalid ones apart."""

    def __contains__(self, url: object) -> bool:
        """True if the URL was added before (never raises: an invalid URL is not contained)."""

    def __len__(self) -> int:
        """How many distinct URLs have been added."""


class ForgettingSeenTest(SeenTest, Protocol):
    """A seen-test that can forget (recrawl); `URLSeen` (exact, or deletable) and `MemorySeen` provide it."""

    def discard(self, url: str) -> bool:
        """True if the URL was added (and not discarded since): it is forgotten, the next `add` of it is new.
        False if it was not (nothing changes). Raises InvalidURL for a URL that cannot be canonicalised."""

    def discard_many(self, urls: Sequence[str]) -> list[bool]:
        """`discard` for a batch, in one step; an invalid URL is False and listed in `.invalid` of the result."""


class SeenBatch(list):
    """The list[bool] of an `add_many`, plus `.invalid`: {index: InvalidURL} for the URLs refused.

    Args:
        flags: one per URL: True if it was new (and is added now).
        invalid: index -> InvalidURL of each URL refused (its flag is False).
    """

    def __init__(self, flags: Iterable[bool], invalid: dict[int, InvalidURL]) -> None:
        super().__init__(flags)
        self.invalid = invalid


def canonicalize_batch(urls: Sequence[str], rules: CanonicalRules) -> tuple[list[str | None], dict[int, InvalidURL]]:
    """The canonical form of each URL (None where it is invalid) and each InvalidURL by index: what every
    seen-test (and the blacklist) builds its `SeenBatch` from."""
    canon: list[str | None] = []
    invalid: dict[int, InvalidURL] = {}
    for i, url in enumerate(urls):
        try:
            canon.append(canonicalize(url, rules=rules))
        except InvalidURL as e:
            canon.append(None)
            invalid[i] = e
    return canon, invalid


def fingerprint_or_none(url: object, rules: CanonicalRules) -> bytes | None:
    """The fingerprint of a URL's canonical form; None for anything that is not a valid URL string: what a
    membership test (`in`, which never raises) of a seen-test or the blacklist looks up."""
    if not isinstance(url, str):
        return None
    try:
        return fingerprint(canonicalize(url, rules=rules))
    except InvalidURL:
        return None


class MemorySeen:
    """The reference seen-test: an exact Python set of canonical URLs, in memory, not shared, not durable.
    For tests and small scripts: the same answers as URLSeen (the contract tests run both).

    Args:
        rules: the canonicalisation rules of the URLs it is given.
    """

    def __init__(self, rules: CanonicalRules = DEFAULT_RULES) -> None:
        self._rules = rules
        self._urls: set[str] = set()

    def add(self, url: str) -> bool:
        canon = canonicalize(url, rules=self._rules)
        if canon in self._urls:
            return False
        self._urls.add(canon)
        return True

    def add_many(self, urls: Sequence[str]) -> SeenBatch:
        check_batch(urls)
        canon, invalid = canonicalize_batch(urls, self._rules)
        flags = []
        for c in canon:
            new = c is not None and c not in self._urls
            if new:
                self._urls.add(c)
            flags.append(new)
        return SeenBatch(flags, invalid)

    def discard(self, url: str) -> bool:
        canon = canonicalize(url, rules=self._rules)
        if canon not in self._urls:
            return False
        self._urls.remove(canon)
        return True

    def discard_many(self, urls: Sequence[str]) -> SeenBatch:
        check_batch(urls)
        canon, invalid = canonicalize_batch(urls, self._rules)
        flags = []
        for c in canon:
            held = c is not None and c in self._urls
            if held:
                self._urls.remove(c)
            flags.append(held)
        return SeenBatch(flags, invalid)

    def __contains__(self, url: object) -> bool:
        try:
            return isinstance(url, str) and canonicalize(url, rules=self._rules) in self._urls
        except InvalidURL:
            return False

    def __len__(self) -> int:
        return len(self._urls)


def read_url_file(path: str | os.PathLike[str]) -> list[str]:
    """The URLs of a whitelist file: one a line; blank lines and lines starting with # are skipped."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = [line.strip() for line in f]
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}", "whitelist") from None
    return [line for line in lines if line and not line.startswith("#")]


@dataclass(slots=True)
class _Sweep:
    """A sweep under way: the parked fingerprints read at its start, in key order, and how many are answered."""

    waiting: Waiting
    probes: list[bytes]
    order: list[int]
    done: int = 0


class URLSeen:
    """The durable, exact (or probabilistic) seen-test over a data dir. One process opens a dir at a time.

    The Bloom filter is sized for `capacity` up front: the default, 10,000,000 URLs at 1e-4, takes 24 MB of
    shared memory (and a 24 MB snapshot) even for one URL; give the number of URLs you expect (it grows past
    it, keeping the rate). `rules` default to DEFAULT_RULES, which keep session ids (the crawl strips them:
    see frontier.url.canonical).

    Other processes may read the Bloom filter with `SharedBloom.attach(seen.bloom.name)` (with
    `deletable=True`: `CountingBloom.attach`). `whitelist`: URLs never dropped as seen by a false positive
    in probabilistic mode (their Bloom "maybe" is confirmed in the log); `allow()` adds more (seeds).

    Args:
        path: the data dir (created if missing).
        capacity: the URLs the Bloom filter is sized for.
        error_rate: its false-positive rate up to `capacity`.
        exact: confirm every Bloom "maybe" in the fingerprint log (False: trust the filter, probabilistic).
        lru_size: fingerprints of recent URLs kept to answer repeats at once (0: none).
        partitions: the filter's partitions, one lock each.
        rules: the canonicalisation rules of the URLs it is given.
        fsync: sync the log to disk on every commit.
        bloom_name: the shared-memory name of the filter (None: a fresh one).
        deletable: a counting filter (`CountingBloom`), so that `discard` works.
        whitelist: URLs never dropped by a false positive (see above).
        blocked: the cache-line-blocked filter layout (one memory access a lookup).
    """

    def __init__(self, path: str | os.PathLike[str], *, capacity: int = DEFAULT_CAPACITY,
                 error_rate: float = DEFAULT_ERROR_RATE, exact: bool = True, lru_size: int = DEFAULT_LRU_SIZE,
                 partitions: int = DEFAULT_PARTITIONS, rules: CanonicalRules = DEFAULT_RULES, fsync: bool = False,
                 bloom_name: str | None = None, deletable: bool = False, whitelist: Iterable[str] = (),
                 blocked: bool = False) -> None:
        self._log: FingerprintLog | None = None
        self._bloom: Filter | None = None
        self.path = Path(path)
        self.capacity = check_capacity_and_rate(capacity, error_rate)
        self.error_rate = float(error_rate)
        self.exact = exact
        self.deletable = deletable
        if blocked and deletable:
            raise ConfigError("the counting filter (deletable) has no blocked layout", "blocked")
        self.blocked = blocked
        self._rules = rules
        self._whitelist: set[bytes] = set()
        self.allow(whitelist)
        # The LRU saves LMDB lookups; in probabilistic mode there are none to save, and a Bloom
        # test costs less than the cache check (measured), so it is off there.
        self._lru = BufferLRU(lru_size if exact else 0)
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(
            ("checked", "new", "batch_repeats", "invalid", "bloom_negative", "bloom_maybe", "log_confirmed",
             "false_positives_caught", "trusted_maybe", "discarded", "filter_rebuilds", "parked", "swept",
             "swept_new", "sweeps"), 0)
        self._rebuild: dict[str, float] = {}
        self._bloom_matches_log = True  # False if a batch's bits could not be set: no snapshot then
        try:
            # probabilistic mode looks up in the log only a whitelisted URL's rare "maybe": no per-run filters
            # (1 byte per URL), no runs held in memory too (16 bytes per URL of the smallest level), lazier
            # merges above level 0 (fewer writes per URL, more runs to search) and no hash set of the pending
            # fingerprints (their blobs, sorted for a lookup) there
            self._log = FingerprintLog(self.path, version_tag=rules.version_tag(), fsync=fsync,
                                       filter_bits=FILTER_BITS if exact else 0,
                                       cached_levels=CACHED_LEVELS if exact else 0,
                                       upper_fanout=None if exact else LAZY_FANOUT, pending_set=exact)
            self._size = len(self._log)
            self._parked = ParkedConfirms(self._log)
            self._sweep: _Sweep | None = None
            self._partitions = partitions
            self._bloom_name = bloom_name or default_bloom_name(self.path)
            self._filter_capacity = self._capacity_for(self._size)
            self._bloom = self._open_bloom(partitions, self._bloom_name)
        except BaseException:
            self.close()
            raise

    @classmethod
    def from_config(cls, cfg: "object", path: str | os.PathLike[str] | None = None) -> "URLSeen":
        """Build from a CrawlConfig: its dedup, canonical and storage sections."""
        storage = cfg.storage  # type: ignore[attr-defined]
        return cls.from_dedup(path or Path(storage.data_dir) / "state", cfg.dedup,  # type: ignore[attr-defined]
                              rules=cfg.canonical, fsync=storage.fsync)  # type: ignore[attr-defined]

    @classmethod
    def from_dedup(cls, path: str | os.PathLike[str], dedup: "object", *, rules: CanonicalRules = DEFAULT_RULES,
                   fsync: bool = False) -> "URLSeen":
        """Build from a DedupConfig (the dedup section) for the data dir `path`."""
        d = dedup
        whitelist = read_url_file(d.whitelist) if d.whitelist is not None else ()  # type: ignore[attr-defined]
        return cls(path, capacity=d.capacity, error_rate=d.error_rate, exact=d.exact,  # type: ignore[attr-defined]
                   lru_size=d.lru_size, partitions=d.partitions, rules=rules, fsync=fsync,  # type: ignore[attr-defined]
                   deletable=d.deletable, whitelist=whitelist, blocked=d.blocked)  # type: ignore[attr-defined]

    def allow(self, urls: Iterable[str]) -> None:
        """Whitelist URLs (InvalidURL for one that cannot be canonicalised): in probabilistic mode a Bloom "maybe"
        for them is confirmed in the log, so a false positive never drops them. Exact mode confirms every URL."""
        check_batch(urls)
        self._whitelist.update(fingerprint(canonicalize(url, rules=self._rules)) for url in urls)

    # -- the Bloom filter: snapshot or rebuild -------------------------------------------------

    def _capacity_for(self, count: int) -> int:
        """The counting filter's capacity for `count` URLs: the configured one, doubled until they fit (it does
        not grow by itself). SharedBloom grows by itself: its capacity stays the configured one."""
        capacity = self.capacity
        while self.deletable and capacity < count:
            capacity *= 2
        return capacity

    def _marker(self, partitions: int) -> dict[str, object]:
        """What a snapshot was taken of: it is loaded only if this matches (else the filter is rebuilt)."""
        marker = {"capacity": self._filter_capacity, "error_rate": self.error_rate, "partitions": partitions,
                  "count": self._size, "deletable": self.deletable}
        return {**marker, "blocked": True} if self.blocked else marker  # a marker written before it still matches

    def _open_bloom(self, partitions: int, name: str) -> Filter:
        unlink_all(name)  # we hold the data dir lock: a segment by this name is a killed run's leftover
        marker = json.loads(self._log.get_meta(SNAPSHOT_KEY) or "null")
        snapshot = self.path / SNAPSHOT_NAME
        bloom = None
        snapshot_id = marker.pop(MARKER_ID, None) if isinstance(marker, dict) else None
        if snapshot_id is not None and marker == self._marker(partitions) and snapshot.exists():
            try:
                bloom = (CountingBloom if self.deletable else SharedBloom).load(
                    snapshot, name=name, snapshot_id=bytes.fromhex(snapshot_id))
            except (StorageError, OSError):
                bloom = None
        if bloom is None:
            bloom = self._rebuilt_bloom(partitions, name)
        try:  # from now on the snapshot is stale until a clean close writes a new one: it goes
            self._log.write(lambda txn: self._log.put_meta(txn, SNAPSHOT_KEY, None))
            snapshot.unlink(missing_ok=True)
        except BaseException:
            bloom.close()
            bloom.unlink()
            raise
        return bloom

    def _rebuilt_bloom(self, partitions: int, name: str) -> Filter:
        started = time.perf_counter()
        bloom: Filter
        if self.deletable:
            bloom = CountingBloom.create(self._filter_capacity, self.error_rate, partitions=partitions, name=name)
            fill = bloom.count_many  # every URL of the log counted once, also one that tests present
        else:
            bloom = SharedBloom.create(self.capacity, self.error_rate, partitions=partitions, name=name,
                                       blocked=self.blocked)
            fill = bloom.add_many
        try:
            for chunk in self._log.iter_chunks():
                fill(chunk)
        except BaseException:
            bloom.close()
            bloom.unlink()
            raise
        self._rebuild = {"rebuilt_items": self._size, "rebuild_seconds": time.perf_counter() - started}
        return bloom

    def _grow_counting(self) -> None:
        """Rebuild the counting filter from the log at twice its capacity, once the log holds more URLs than it
        was sized for (caller holds the lock). The old filter goes first: the log is the authority meanwhile."""
        bloom, self._bloom = self._bloom, None
        bloom.close()
        bloom.unlink()
        unlink_all(self._bloom_name)
        self._filter_capacity = self._capacity_for(self._size)
        self._bloom = self._rebuilt_bloom(self._partitions, self._bloom_name)
        self._counts["filter_rebuilds"] += 1

    # -- the seen-test ------------------------------------------------------------------------

    def add(self, url: str) -> bool:
        """True if the URL is new (crawl it), False if seen before; InvalidURL if it cannot be canonicalised."""
        return self.add_fingerprints([fingerprint(canonicalize(url, rules=self._rules))])[0]

    def add_many(self, urls: Sequence[str], *, canonical: bool = False) -> SeenBatch:
        """Check-and-add a batch in one LMDB write transaction: True for a new URL. False for a duplicate and
        for an invalid URL alike; `.invalid` of the result ({index: InvalidURL}) tells the invalid ones apart.
        `canonical=True` skips canonicalisation for URLs that are canonical already (the crawl's workers
        canonicalise before sending)."""
        check_batch(urls)
        if canonical:
            return SeenBatch(self._add_joined(digests(urls)), {})
        canon, invalid = canonicalize_batch(urls, self._rules)
        if not invalid:
            return SeenBatch(self._add_joined(digests(canon)), {})  # type: ignore[arg-type]
        valid = [c for c in canon if c is not None]
        flags = iter(self._add_joined(digests(valid)))
        self._counts["invalid"] += len(invalid)
        return SeenBatch([False if c is None else next(flags) for c in canon], invalid)

    def add_fingerprints(self, fps: Sequence[bytes], *, also: AlsoWrite | None = None,
                         confirm: Collection[bytes] = (), defer: Payloads | None = None) -> list[bool]:
        """The seen-test on fingerprints. `also(txn, new_fps)` runs inside the same write transaction (the
        crawl store enqueues there); it may run more than once if the map grows, so it must only write.
        `confirm`: fingerprints whitelisted for this call (the crawl's seeds): a Bloom "maybe" for them is
        confirmed in the log in probabilistic mode too, and never deferred.
        `defer` (exact mode): a confirmation that would read a run on disk is parked instead (answered False
        now), with the payload `defer(fps)` gives each; `sweep` answers them later (frontier.seen.parked)."""
        check_batch(fps)
        return self._add_joined(joined(fps), also=also, confirm=confirm, defer=defer)

    def _add_joined(self, fps: bytes, *, also: AlsoWrite | None = None, confirm: Collection[bytes] = (),
                    defer: Payloads | None = None) -> list[bool]:
        """`add_fingerprints` on the fingerprints joined into one buffer. Per batch, not per URL: masks over
        the buffer (numpy bool arrays) pick what each tier sees, in batch order, so the new fingerprints come
        out in first-seen order (queues keep page order) with no sort and no bytes object per URL."""
        n = len(fps) // FP
        trusted = not self.exact and not (self._whitelist or confirm)  # no Bloom "maybe" is looked up in the log
        with self._lock:
            # The merge work earned by earlier batches, before this one's transaction: if it fails (a full
            # disk), this batch has committed nothing; once it commits, its answers are returned.
            self.log.maintain()
            if trusted:  # no LRU in probabilistic mode: the filter's call tells the batch's repeats apart
                unique = rest_mask = None
                rest = fps
            else:
                unique = firsts(fps)  # each distinct fingerprint once: its first occurrence
                rest_mask = self._lru.misses_mask(fps, unique)
                rest = select(fps, rest_mask)
            new: bytes | None = None
            try:
                # One atomic check-and-add in two phases: "new" to the filter is certainly new; the bits
                # are set only if the log's transaction commits, so a failed batch stays new (both modes).
                with self.bloom.admitting(rest) as seen:
                    negative = seen.mask
                    by_log = None if trusted else self._by_log(rest, negative, confirm)

                    def body(txn: lmdb.Transaction) -> tuple[bytes, np.ndarray | None, bytes]:
                        fresh, parked, batch_new = None, b"", seen.new  # in batch order: first-seen order
                        if by_log is not None:
                            fresh = np.zeros(len(negative), dtype=bool)
                            fresh[by_log], parked = self._confirm(txn, select(rest, by_log), confirm, defer)
                            batch_new = select(rest, negative | fresh)
                        self._log.record_joined(txn, batch_new)
                        if also is not None:
                            also(txn, split(batch_new))
                        return batch_new, fresh, parked

                    new, fresh, parked = self.log.write(body)
                    self._parked.committed(parked)
                if self.deletable and fresh is not None and fresh.any():  # new to the log, present to the filter
                    self.bloom.count_many(split(select(rest, fresh)))  # type: ignore[union-attr]
            except BaseException:
                if new is not None:  # committed, but setting its bits failed: this filter must not be saved
                    self._bloom_matches_log = False
                    self.log.committed_joined(new)
                raise
            self.log.committed_joined(new)
            self._lru.add_blob(fps)
            added = len(new) // FP
            self._size += added
            # Python ints (numpy's int64 reads as a str in summary.json), as few numpy calls as the batch needs
            looked = seen.distinct
            negatives = len(seen.new) // FP
            confirmed = 0 if by_log is None else int(np.count_nonzero(by_log))
            caught = 0 if fresh is None else int(np.count_nonzero(fresh))
            maybes = looked - negatives
            c = self._counts
            c["checked"] += n
            c["new"] += added
            distinct = looked if unique is None or rest_mask is unique else int(np.count_nonzero(unique))
            c["batch_repeats"] += n - distinct
            c["bloom_negative"] += negatives
            c["bloom_maybe"] += maybes
            deferred = len(parked) // FP
            c["false_positives_caught"] += caught  # Bloom "maybe"s the log did not hold
            c["log_confirmed"] += confirmed - caught - deferred
            c["trusted_maybe"] += maybes - confirmed
            c["parked"] += deferred
            if self._size > self._filter_capacity and self.deletable:
                self._grow_counting()
            if rest_mask is None:  # trusted: the filter's answers are the batch's
                return seen.flags
            if added == n:
                return [True] * n
            out = np.zeros(n, dtype=bool)
            out[np.flatnonzero(rest_mask)[negative if fresh is None else negative | fresh]] = True
            return out.tolist()

    def _confirm(self, txn: lmdb.Transaction, probes: bytes, confirm: Collection[bytes],
                 defer: Payloads | None) -> tuple[np.ndarray, bytes]:
        """Which probes (Bloom "maybe"s) the log does not hold, and the ones parked instead of read on disk."""
        if defer is None or not self.exact:
            return ~self._log.known_joined(txn, probes), b""
        held, unsure = self._log.sift(probes)
        eligible = unsure.copy()  # seeds and recrawls are answered now
        if confirm and unsure.any():
            eligible[unsure] = [fp not in confirm for fp in split(select(probes, unsure))]
        known, now = held, unsure & ~eligible
        if now.any():
            known[now] = self._log.known_joined(txn, select(probes, now))
        parked = select(probes, eligible)
        if parked:
            self._parked.put(txn, parked, defer(split(parked)))
        return ~known & ~eligible, parked

    @property
    def parked(self) -> int:
        """Fingerprints parked (deferred by `add_fingerprints(defer=)`) and not swept yet; kept across restarts."""
        return len(self._parked)

    @property
    def sweeping(self) -> bool:
        """A sweep begun by `sweep(step=...)` has steps left."""
        return self._sweep is not None

    def sweep(self, enqueue: Enqueue, *, step: int | None = None,
              committed: Callable[[], None] | None = None) -> int:
        """Answer the parked confirmations: the log is searched for them sorted (one forward pass over each
        run), and the ones it does not hold are recorded and handed to `enqueue(txn, new_fps, their payloads)`
        in the same write transaction. `step`: answer at most that many fingerprints now, one transaction (the
        next call goes on from there; a sweep's records are dropped with its last step); None: every parked one,
        those parked while a stepped sweep ran included, which may take more than one transaction.
        `committed()` is called as soon as each transaction has committed (before anything else can fail): what
        `enqueue` wrote in it is in the log then. Like `also`, `enqueue` may run more than once for one
        transaction if the map grows (a rerun: what its first run wrote is void). Returns how many were new."""
        added = 0
        with self._lock:
            while True:
                if self._sweep is None:
                    if not self._parked:
                        return added
                    self.log.maintain()
                    waiting = self.log.read(self._parked.read)
                    hi, lo = halves(waiting.fps)
                    self._sweep = _Sweep(waiting, split(waiting.fps), np.lexsort((lo, hi)).tolist())
                added += self._sweep_step(enqueue, step or len(self._sweep.order), committed)
                if step is not None:
                    return added

    def _sweep_step(self, enqueue: Enqueue, step: int, committed: Callable[[], None] | None) -> int:
        """One transaction of a sweep: the next `step` fingerprints in key order (caller holds the lock)."""
        sweep = self._sweep
        assert sweep is not None
        at = sweep.order[sweep.done:sweep.done + step]
        last = sweep.done + step >= len(sweep.order)
        probes = [sweep.probes[i] for i in at]

        def body(txn: lmdb.Transaction) -> bytes:
            fresh = [i for i, known in zip(at, self._log.known(txn, probes)) if not known]
            new = [sweep.probes[i] for i in fresh]
            blob = b"".join(new)
            self._log.record_joined(txn, blob)
            enqueue(txn, new, sweep.waiting.payloads(fresh))
            if last:
                self._parked.clear(txn, sweep.waiting)
            return blob

        new = self.log.write(body)
        if committed is not None:
            committed()
        sweep.done += len(at)
        if last:
            self._sweep = None
            self._parked.swept(sweep.waiting)
            self._counts["sweeps"] += 1
        self.log.committed_joined(new)
        if new:  # each was a Bloom "maybe", but of a filter since rebuilt from the log, perhaps
            try:
                (self.bloom.count_many if self.deletable else self.bloom.add_many)(split(new))  # type: ignore[union-attr]
            except BaseException:
                self._bloom_matches_log = False
                raise
        added = len(new) // FP
        self._size += added
        c = self._counts
        c["new"] += added
        c["swept"] += len(at)
        c["swept_new"] += added
        c["false_positives_caught"] += added
        c["log_confirmed"] += len(at) - added
        if self._size > self._filter_capacity and self.deletable:
            self._grow_counting()
        return added

    def _by_log(self, rest: bytes, negative: np.ndarray, confirm: Collection[bytes]) -> np.ndarray | None:
        """Which Bloom "maybe"s the log decides (a mask over `rest`): all in exact mode, the whitelisted ones in
        probabilistic; None when there are none (the common batch then makes no mask at all)."""
        if len(negative) == 0 or negative.all():
            return None
        if self.exact:
            return ~negative
        whitelist = self._whitelist
        if not (whitelist or confirm):
            return None
        maybe = ~negative
        by_log = np.zeros(len(negative), dtype=bool)
        by_log[maybe] = [fp in whitelist or fp in confirm for fp in split(select(rest, maybe))]
        return by_log if by_log.any() else None

    def discard(self, url: str) -> bool:
        """Forget a URL reported new: True if it was held (its next `add` is new), False if not (nothing changes);
        InvalidURL if it cannot be canonicalised. Probabilistic mode needs `deletable=True`."""
        return self.discard_fingerprints([fingerprint(canonicalize(url, rules=self._rules))])[0]

    def discard_many(self, urls: Sequence[str], *, canonical: bool = False) -> SeenBatch:
        """`discard` for a batch, in one LMDB write transaction; an invalid URL is False and in `.invalid`."""
        check_batch(urls)
        if canonical:
            return SeenBatch(self.discard_fingerprints(fingerprints(urls)), {})
        canon, invalid = canonicalize_batch(urls, self._rules)
        flags = iter(self.discard_fingerprints(fingerprints([c for c in canon if c is not None])))
        return SeenBatch([False if c is None else next(flags) for c in canon], invalid)

    def discard_fingerprints(self, fps: Sequence[bytes], *,
                             also: Callable[[lmdb.Transaction], None] | None = None) -> list[bool]:
        """`discard` on fingerprints: entry i is True if fps[i] was held and is now forgotten (a repeat in the
        batch is False). Only what the log holds is discarded: a discard of anything else would decrement
        counters other URLs need. The counting filter is decremented after the commit (a crash in between
        loses the filter, which is rebuilt from the log). `also(txn)` runs inside the same write transaction
        (the URL Frontier store deletes the URLs' records there); like add_fingerprints' it must only write."""
        check_batch(fps)
        if not self.exact and not self.deletable:
            raise FrontierError("a plain Bloom filter cannot forget a URL: discard needs exact mode or "
                                "deletable=True (dedup.deletable: true)")
        with self._lock:
            self.log.maintain()
            unique = list(dict.fromkeys(fps))
            def body(txn: lmdb.Transaction) -> Removal:
                if also is not None:
                    also(txn)
                return self.log.discard(txn, unique)

            removal = self.log.write(body)
            self.log.discarded(removal)
            gone = removal.removed
            self._lru.discard_many(gone)
            self._size -= len(gone)
            self._counts["discarded"] += len(gone)
            if gone and self.deletable:
                try:
                    self.bloom.discard_many(gone)  # type: ignore[union-attr]
                except BaseException:
                    self._bloom_matches_log = False  # it still counts URLs the log dropped: no snapshot of it
                    raise
            pending = set(gone)
            out = []
            for fp in fps:
                out.append(fp in pending)
                pending.discard(fp)
            return out

    def __contains__(self, url: object) -> bool:
        fp = fingerprint_or_none(url, self._rules)
        return fp is not None and self.contains_fingerprint(fp)

    def contains_fingerprint(self, fp: bytes) -> bool:
        with self._lock:
            if fp in self._lru:
                return True
            if fp not in self.bloom:
                return False
            if not self.exact and fp not in self._whitelist:
                return True
            return self.log.read(lambda txn: self.log.known(txn, [fp])[0])

    def __len__(self) -> int:
        """Distinct URLs recorded (exact: the log's count)."""
        return self._size

    def stats(self) -> dict[str, float | int | str | bool]:
        """Per-tier counts, LRU hit rate, Bloom fill ratio, estimated and caught false positives."""
        bloom = self.bloom.stats()
        return {
            "mode": "exact" if self.exact else "probabilistic",
            "urls": self._size,
            **self._counts,
            "lru_size": self._lru.size,
            "lru_hits": self._lru.hits,
            "lru_hit_rate": self._lru.hit_rate,
            "bloom_bytes": bloom["bytes"],
            "bloom_generations": bloom.get("generations", 1),
            "deletable": self.deletable,
            "whitelisted": len(self._whitelist),
            "parked_now": len(self._parked),
            "fill_ratio": bloom["fill_ratio"],
            "estimated_false_positive_rate": bloom["estimated_false_positive_rate"],
            **self._rebuild,
        }

    # -- plumbing -----------------------------------------------------------------------------

    @property
    def bloom(self) -> Filter:
        if self._bloom is None:
            raise StorageError("URLSeen is closed")
        return self._bloom

    @property
    def log(self) -> FingerprintLog:
        if self._log is None:
            raise StorageError("URLSeen is closed")
        return self._log

    def close(self) -> None:
        """Snapshot the Bloom filter (marked valid for exactly this log), then release everything. Idempotent.

        No snapshot if a batch's bits could not be set after its commit: the marker stays cleared (since the
        open), so the next open rebuilds the filter from the log."""
        bloom, log = self._bloom, self._log
        self._bloom = self._log = None
        try:
            if bloom is not None and log is not None and self._bloom_matches_log:
                snapshot_id = bloom.save(self.path / SNAPSHOT_NAME)
                marker = json.dumps({**self._marker(bloom.partitions), MARKER_ID: snapshot_id.hex()}).encode()
                log.write(lambda txn: log.put_meta(txn, SNAPSHOT_KEY, marker))
                log.sync()
        finally:
            if bloom is not None:
                bloom.close()
                bloom.unlink()
            if log is not None:
                log.close()

    def __enter__(self) -> "URLSeen":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
