"""The crawl's durable state, in the fingerprint log's LMDB environment.

Named databases beside `seen`:

    queue      host id (u32 BE) + band (u8: 0 normal,    ->  depth u32, attempt u8, redirects u8,
               0x80 low) + rank (u64 BE: the priority,       not_before f64 (wall clock), URL (UTF-8)
               inverted, see `rank`) + sequence (u64 BE)
    qindex     fingerprint (16 bytes)                ->  the queue key of the URL's latest entry: a re-score
                                                         finds and moves a queued URL without a scan
    hosts      host id (u32 BE)                      ->  pages fetched so far u64 + host name (UTF-8), then, once
                                                         a fetch told it, NUL + the IP address its last fetch
                                                         connected to (ASCII): its queue group under queue_by ip
    robots     host id (u32 BE)                      ->  fetched_at f64 + robots.txt body (UTF-8)
    hoststate  host name (UTF-8)                     ->  opaque per-host bytes of the caller (trap detector)
    payloads   queue key                             ->  the entry's opaque payload (`Link.payload`: a
                                                         serialised Scrapy request), only for entries that
                                                         have one; it moves with the entry to a new key
    counters   name                                  ->  u64: "fetched" (page results with an HTTP
                                                         response), "attempts" (page results and
                                                         leases that ended without one), "low:<host id>"
                                                         (attempts of the host's low queue entries)
    done       fingerprint (16 bytes, frontier.seen.fingerprint)  ->  f64: when the URL left the queue for good
                                                         (its last result: fetched, given up or refused by
                                                         robots.txt); written with that ack, deleted when
                                                         the URL is queued again (recrawl), so an entry
                                                         here means "seen and not queued"
    recrawl    spool file name (UTF-8)               ->  f64: when it was applied (frontier.cli.recrawl), so a
                                                         file applied but not yet deleted is not applied twice
    revisit    fingerprint (16 bytes)                ->  a fetched URL's schedule (`encode_revisit`, revisit.after),
                                                         version 2: an 8-byte NaN tag, due, interval, changed_at,
                                                         captured_at (f64 each), depth u32, body digest (8 bytes),
                                                         ETag and Last-Modified lengths (u16 each), visits and
                                                         changes (f32 each), seconds (f64: the change-rate
                                                         estimate's counts), then the ETag, Last-Modified and URL
                                                         (UTF-8). Version 1 (no tag, no counts: it begins with the
                                                         due time, never NaN) is still read, its counts 0, and
                                                         rewritten as version 2 at the URL's next fetch
    due        due time (u64 BE, ms) + fingerprint   ->  b"": the revisit schedule in due order, one entry per
                                                         `revisit` entry (its due time), so "what is due now" is
                                                         the start of a cursor

The `queue`, `done` and parked-link (`encode_parked`) values carry a version each, recorded in the log's meta
and checked at open (ENCODINGS, FingerprintLog.check_encoding): a change to one bumps its version, so code
that reads another refuses the dir with one line instead of misreading it. A version this code still reads
(STILL_READ: `revisit` 1) is upgraded in place at open: the record says 2 from then on, so older code refuses the
dir rather than misread a version 2 value.

`decode_entry`, `decode_host` and `decode_counter` read these values for a reader that opens the environment
itself, read-only (frontier.cli.crawlinfo, while a crawl runs).

A data dir written before "fetched" and "attempts" has one counter, "pages", that counted every
page result (and per-host counts of the same kind): `load` turns it into attempts = fetched =
pages, an upper bound of the pages fetched, so a page limit is never exceeded after the upgrade
(a resumed crawl may stop short by the old run's failed attempts).

A queued URL stays in `queue` while it is leased; the result's transaction deletes it (done, recorded in
`done`) or moves it to the tail with a later not_before (retry). Every write here happens inside the
seen-test's transaction (`URLSeen.add_fingerprints(..., also=...)`), so a URL is recorded seen if and
only if it is queued or done. Keys sort by host, then band, then priority (higher first), then arrival: a
cursor range is a host's queue in lease order. A low entry (a suspected trap, `Link.low`) has band LOW_BAND,
so a host's low queue is the tail of its range, by priority among its own, after every normal entry; one parked
past its pattern's budget (Outcome.PARK) has band PARKED_BAND, the tail of that.
These keys are format 4's (frontier.seen.fplog.FORMAT_VERSION). A format 3 dir's keys (host id + sequence, LOW_BIT
marking a low one) are rewritten to them at its first open, all in one transaction (`migrate_keys`): a dir holds
keys of one layout only, so its first key tells which.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

import lmdb

from frontier.seen.fingerprint import fingerprint
from frontier.seen.fplog import ENCODING_KEY, FingerprintLog
from frontier.state.base import Link, Revisit

_ENTRY = struct.Struct("<IBBd")
_HOST = struct.Struct("<Q")
_ROBOTS = struct.Struct("<d")
_U64 = struct.Struct("<Q")
_TIME = struct.Struct("<d")
_PARKED = struct.Struct("<IBBI")  # depth, redirects, flags (1 a payload, 2 low, 4 a priority), URL bytes; then the
#                                   URL, the priority (f64, if not 0) and the payload
HOST_ID_SIZE = 4
LOW_BAND = 0x80  # the band byte of a low entry's key
PARKED_BAND = 0xC0  # a low entry parked past its pattern's budget: after every other low entry (it is one)
KEY_SIZE = HOST_ID_SIZE + 1 + 8 + 8
LEGACY_KEY_SIZE = HOST_ID_SIZE + 8
LOW_BIT = 1 << 63  # of a legacy queue key's sequence: a low entry
_RANK = struct.Struct(">Q")
_F64 = struct.Struct(">d")
_SIGN = 1 << 63
_MASK = (1 << 64) - 1
LOW_COUNTER = "low:"  # + host id: attempts of the host's low entries
LEGACY_PAGES = "pages"  # the one counter of data dirs written before "fetched" and "attempts"
QUEUE_DB, HOSTS_DB, ROBOTS_DB, COUNTERS_DB, HOST_STATE_DB, PAYLOADS_DB, DONE_DB, RECRAWL_DB, QINDEX_DB = (
    b"queue", b"hosts", b"robots", b"counters", b"hoststate", b"payloads", b"done", b"recrawl", b"qindex")
REVISIT_DB, DUE_DB = b"revisit", b"due"
_REVISIT_V1 = struct.Struct("<ddddI8sHH")
_REVISIT = struct.Struct("<8sddddI8sHHffd")
_REVISIT_TAG = struct.pack("<Q", 0x7FF8_0000_5245_5632)  # a NaN: what no version 1 value (due time first) begins with
_DUE = struct.Struct(">Q")
ENCODINGS = {"queue": 1, "done": 1, "parked_link": 1, "revisit": 2}  # _ENTRY, _TIME, _PARKED, _REVISIT (+ their
#                                                                       trailing bytes) as above
STILL_READ = {"revisit": (b"1",)}  # older versions these decoders read too: a dir of one is upgraded at open


def rank(priority: float) -> bytes:
    """8 bytes that sort in the opposite order of the priorities (higher first): the float's bits made
    order-preserving as an unsigned integer, then inverted."""
    bits = _RANK.unpack(_F64.pack(priority + 0.0))[0]  # + 0.0: -0.0 ranks as 0.0
    ordered = bits | _SIGN if not bits & _SIGN else ~bits & _MASK
    return _RANK.pack(~ordered & _MASK)


def priority_of(key: bytes) -> float:
    """The priority a queue key was written with (`rank` undone)."""
    ordered = ~_RANK.unpack_from(key, HOST_ID_SIZE + 1)[0] & _MASK
    bits = ordered & ~_SIGN if ordered & _SIGN else ~ordered & _MASK
    return _F64.unpack(_RANK.pack(bits))[0]


@dataclass(frozen=True, slots=True)
class QueueEntry:
    """One queued URL."""

    key: bytes
    url: str
    depth: int
    attempt: int = 0
    redirects: int = 0
    not_before: float = 0.0

    @property
    def priority(self) -> float:
        return priority_of(self.key)


def decode_entry(key: bytes, value: bytes) -> QueueEntry:
    depth, attempt, redirects, not_before = _ENTRY.unpack_from(value)
    url = bytes(value[_ENTRY.size:]).decode("utf-8", "surrogatepass")
    return QueueEntry(bytes(key), url, depth, attempt, redirects, not_before)


def encode_parked(link: Link) -> bytes:
    """A link waiting for a deferred seen-test answer (frontier.seen.parked): what `push` needs if it is new."""
    raw = link.url.encode("utf-8", "surrogatepass")
    payload = link.payload
    flags = (payload is not None) | 2 * link.low | 4 * (link.priority != 0)
    return (_PARKED.pack(link.depth, link.redirects, flags, len(raw)) + raw
            + (_TIME.pack(link.priority) if flags & 4 else b"") + (payload or b""))


def decode_parked(value: bytes) -> Link:
    """The link `encode_parked` wrote (url, depth, redirects, payload, low, priority)."""
    depth, redirects, flags, size = _PARKED.unpack_from(value)
    end = at = _PARKED.size + size
    priority = 0.0
    if flags & 4:
        priority, at = _TIME.unpack_from(value, end)[0], end + _TIME.size
    return Link(bytes(value[_PARKED.size:end]).decode("utf-8", "surrogatepass"), depth, redirects,
                bytes(value[at:]) if flags & 1 else None, low=bool(flags & 2), priority=priority)


def encode_revisit(revisit: Revisit) -> bytes:
    etag, modified = revisit.etag.encode("utf-8", "surrogateescape"), revisit.last_modified.encode("utf-8", "surrogateescape")
    return (_REVISIT.pack(_REVISIT_TAG, revisit.due, revisit.interval, revisit.changed_at, revisit.captured_at,
                          revisit.depth, revisit.digest, len(etag), len(modified), revisit.visits, revisit.changes,
                          revisit.seconds)
            + etag + modified + revisit.url.encode("utf-8", "surrogatepass"))


def decode_revisit(value: bytes) -> Revisit:
    """A `revisit` value of version 2, or of version 1 (its counts 0)."""
    if bytes(value[:len(_REVISIT_TAG)]) == _REVISIT_TAG:
        (_, due, interval, changed, captured, depth, digest, etag_size, modified_size, visits, changes,
         seconds) = _REVISIT.unpack_from(value)
        at = _REVISIT.size
    else:
        due, interval, changed, captured, depth, digest, etag_size, modified_size = _REVISIT_V1.unpack_from(value)
        visits = changes = seconds = 0.0
        at = _REVISIT_V1.size
    etag = bytes(value[at:at + etag_size]).decode("utf-8", "surrogateescape")
    at += etag_size
    modified = bytes(value[at:at + modified_size]).decode("utf-8", "surrogateescape")
    url = bytes(value[at + modified_size:]).decode("utf-8", "surrogatepass")
    return Revisit(url, depth, due, interval, changed, captured, digest.rstrip(b"\0") and digest, etag, modified,
                   visits, changes, seconds)


def due_key(due: float, fp: bytes) -> bytes:
    return _DUE.pack(max(0, round(due * 1000))) + fp


def due_of_key(key: bytes) -> float:
    return _DUE.unpack_from(key)[0] / 1000


def decode_host(value: bytes) -> tuple[str, int]:
    """A `hosts` value: (host name, pages fetched)."""
    return host_address(value)[0], _HOST.unpack_from(value)[0]


def host_address(value: bytes) -> tuple[str, str]:
    """A `hosts` value: (host name, the address its last fetch connected to, "" if none is known)."""
    name, _, address = bytes(value[_HOST.size:]).decode().partition("\0")
    return name, address


def decode_counter(value: bytes) -> int:
    return _U64.unpack(value)[0]


def host_key(host_id: int) -> bytes:
    return host_id.to_bytes(HOST_ID_SIZE, "big")


def host_of_key(key: bytes) -> int:
    return int.from_bytes(key[:HOST_ID_SIZE], "big")


def is_low(key: bytes) -> bool:
    """A queue key of a low entry."""
    return key[HOST_ID_SIZE] >= LOW_BAND


class CrawlStore:
    """Reads and writes of the crawl state; writes take the caller's transaction."""

    def __init__(self, log: FingerprintLog) -> None:
        for name, version in ENCODINGS.items():
            key = ENCODING_KEY + name.encode()
            if log.get_meta(key) in STILL_READ.get(name, ()):  # its values read as they are: the record moves on
                log.write(lambda txn: log.put_meta(txn, key, str(version).encode()))  # noqa: B023 (runs now)
            log.check_encoding(name, version)
        self._log = log
        self._queue = log.open_db(QUEUE_DB)
        self._hosts = log.open_db(HOSTS_DB)
        self._robots = log.open_db(ROBOTS_DB)
        self._counters = log.open_db(COUNTERS_DB)
        self._host_state = log.open_db(HOST_STATE_DB)
        self._payloads = log.open_db(PAYLOADS_DB)
        self._done = log.open_db(DONE_DB)
        self._recrawl = log.open_db(RECRAWL_DB)
        self._qindex = log.open_db(QINDEX_DB)
        self._revisit = log.open_db(REVISIT_DB)
        self._due = log.open_db(DUE_DB)
        self.payloads_used = False  # some entry has (or had, in this process) a payload: deletes look there too
        self._host_ids: dict[str, int] = {}
        self._pending_hosts: dict[str, int] = {}  # assigned in a transaction not yet committed
        self.counters: dict[str, int] = {}
        self._seq = 0

    # -- loading ------------------------------------------------------------------------------

    def load(self) -> tuple[dict[int, tuple[str, int]], dict[int, int], dict[int, int], dict[int, tuple[float, str]],
                            dict[int, float]]:
        """Hosts {id: (name, fetched)}, queued counts {id: n}, low queued counts {id: n}, robots
        {id: (fetched_at, text)}, the priority of each host's best normal entry {id: priority}.

        Migrates a legacy "pages" counter (see the module docstring) in its own transaction.
        """

        def body(txn: lmdb.Transaction):
            hosts = {}
            for key, value in txn.cursor(db=self._hosts):
                hosts[int.from_bytes(key, "big")] = decode_host(value)
            queued: dict[int, int] = {}
            low: dict[int, int] = {}
            best: dict[int, float] = {}
            last_seq = 0
            for key in txn.cursor(db=self._queue).iternext(keys=True, values=False):
                hid = host_of_key(key)
                queued[hid] = queued.get(hid, 0) + 1
                if is_low(key):
                    low[hid] = low.get(hid, 0) + 1
                elif hid not in best:  # a host's keys sort best first
                    best[hid] = priority_of(key)
                last_seq = max(last_seq, int.from_bytes(key[-8:], "big") & ~LOW_BIT)
            robots = {}
            for key, value in txn.cursor(db=self._robots):
                robots[int.from_bytes(key, "big")] = (_ROBOTS.unpack_from(value)[0], bytes(value[_ROBOTS.size:]).decode())
            counters = {bytes(k).decode(): decode_counter(v) for k, v in txn.cursor(db=self._counters)}
            self.payloads_used = txn.stat(self._payloads)["entries"] > 0
            return hosts, queued, low, robots, counters, last_seq, best

        self.migrate_keys()
        hosts, queued, low, robots, counters, last_seq, best = self._log.read(body)
        if LEGACY_PAGES in counters:
            pages = counters.pop(LEGACY_PAGES)
            counters = {"fetched": pages, "attempts": pages, **counters}

            def migrate(txn: lmdb.Transaction) -> None:
                self.put_counters(txn, counters)
                txn.delete(LEGACY_PAGES.encode(), db=self._counters)

            self._log.write(migrate)
        self._host_ids = {name: hid for hid, (name, _) in hosts.items()}
        self.counters = counters
        self._seq = last_seq
        return hosts, queued, low, robots, best

    def migrate_keys(self) -> int:
        """Rewrite a format 3 dir's queue keys (priority 0, low as LOW_BIT said) and index them, in one
        transaction (a crash leaves the old layout, migrated again); returns how many."""

        def legacy(txn: lmdb.Transaction) -> list[tuple[bytes, bytes]]:
            cursor = txn.cursor(db=self._queue)
            if not cursor.first() or len(cursor.key()) != LEGACY_KEY_SIZE:
                return []
            return [(bytes(k), bytes(v)) for k, v in cursor]

        old = self._log.read(legacy)
        if not old:
            return 0

        def body(txn: lmdb.Transaction) -> None:
            for key, value in old:
                seq = int.from_bytes(key[HOST_ID_SIZE:], "big")
                new = (key[:HOST_ID_SIZE] + bytes([LOW_BAND if seq & LOW_BIT else 0]) + rank(0.0)
                       + (seq & ~LOW_BIT).to_bytes(8, "big"))
                txn.delete(key, db=self._queue)
                txn.put(new, value, db=self._queue)
                payload = txn.pop(key, db=self._payloads)
                if payload is not None:
                    txn.put(new, payload, db=self._payloads)
                txn.put(fingerprint(decode_entry(new, value).url), new, db=self._qindex)

        self._log.write(body)
        return len(old)

    # -- hosts --------------------------------------------------------------------------------

    def host_id(self, txn: lmdb.Transaction, host: str) -> int:
        """The id of a host, assigned (and written) on first use within this transaction."""
        hid = self._host_ids.get(host) or self._pending_hosts.get(host)
        if hid is None:
            hid = len(self._host_ids) + len(self._pending_hosts) + 1
            self._pending_hosts[host] = hid
            txn.put(host_key(hid), _HOST.pack(0) + host.encode(), db=self._hosts)
        return hid

    def known_host(self, host: str) -> int | None:
        """The id of a host recorded in a committed transaction, None if it never was."""
        return self._host_ids.get(host)

    def committed(self) -> dict[str, int]:
        """After a commit: hosts first assigned in it become known. Returns them."""
        new, self._pending_hosts = self._pending_hosts, {}
        self._host_ids.update(new)
        return new

    def rolled_back(self) -> None:
        """The transaction is being rerun (map grew): forget assignments made in it."""
        self._pending_hosts = {}

    def set_host_fetched(self, txn: lmdb.Transaction, hid: int, host: str, fetched: int, address: str = "") -> None:
        """Store a host's record: its pages fetched and the address its last fetch connected to ("": none known)."""
        txn.put(host_key(hid), _HOST.pack(fetched) + host.encode() + (b"\0" + address.encode() if address else b""),
                db=self._hosts)

    def addresses(self) -> dict[int, str]:
        """{host id: address} of the hosts whose record holds one."""

        def body(txn: lmdb.Transaction) -> dict[int, str]:
            out = {}
            for key, value in txn.cursor(db=self._hosts):
                address = host_address(value)[1]
                if address:
                    out[int.from_bytes(key, "big")] = address
            return out

        return self._log.read(body)

    # -- queue --------------------------------------------------------------------------------

    def next_key(self, hid: int, low: bool = False, priority: float = 0.0, parked: bool = False) -> bytes:
        """The key behind the host's entries of equal priority, in its normal or its low band (`parked`: the low
        band's tail, behind every low entry, so a lease never scans past parked entries to reach the others)."""
        self._seq += 1
        band = PARKED_BAND if parked else LOW_BAND if low else 0
        return host_key(hid) + bytes((band,)) + rank(priority) + self._seq.to_bytes(8, "big")

    def push(self, txn: lmdb.Transaction, key: bytes, url: str, depth: int, *, attempt: int = 0,
             redirects: int = 0, not_before: float = 0.0, payload: bytes | None = None,
             fp: bytes | None = None) -> None:
        """Write a queue entry and index it (`fp`: the URL's fingerprint, if the caller has it)."""
        txn.put(key, _ENTRY.pack(depth, attempt, redirects, not_before) + url.encode("utf-8", "surrogatepass"),
                db=self._queue)
        txn.put(fingerprint(url) if fp is None else fp, key, db=self._qindex)
        if payload is not None:
            txn.put(key, payload, db=self._payloads)
            self.payloads_used = True

    def _unindex(self, txn: lmdb.Transaction, key: bytes, fp: bytes) -> None:
        """Drop the index entry of `fp` if it names `key` (a forced link's later entry keeps its own)."""
        if txn.get(fp, db=self._qindex) == key:
            txn.delete(fp, db=self._qindex)

    def delete(self, txn: lmdb.Transaction, key: bytes) -> bool:
        """Remove a queue entry (and its payload and index); False if there was none."""
        value = txn.pop(key, db=self._queue)
        if value is None:
            return False
        if self.payloads_used:
            txn.delete(key, db=self._payloads)
        self._unindex(txn, key, fingerprint(decode_entry(key, value).url))
        return True

    def finish(self, txn: lmdb.Transaction, key: bytes, at: float) -> bool:
        """Remove a queue entry for good (done, given up, refused) and record when in `done`; False if none."""
        value = txn.pop(key, db=self._queue)
        if value is None:
            return False
        if self.payloads_used:
            txn.delete(key, db=self._payloads)
        fp = fingerprint(decode_entry(key, value).url)
        self._unindex(txn, key, fp)
        txn.put(fp, _TIME.pack(at), db=self._done)
        return True

    def queued_key(self, txn: lmdb.Transaction, fp: bytes) -> bytes | None:
        """The queue key of a URL queued now (leased included), None if it is not queued."""
        key = txn.get(fp, db=self._qindex)
        return None if key is None else bytes(key)

    def move(self, txn: lmdb.Transaction, key: bytes, fp: bytes, priority: float) -> bytes:
        """Give a queue entry a new priority: the same entry (payload and index moved with it) under a new key,
        behind the entries of that priority already queued. Returns the new key."""
        value = txn.pop(key, db=self._queue)
        new = self.next_key(host_of_key(key), is_low(key), priority)
        txn.put(new, value, db=self._queue)
        if self.payloads_used:
            payload = txn.pop(key, db=self._payloads)
            if payload is not None:
                txn.put(new, payload, db=self._payloads)
        txn.put(fp, new, db=self._qindex)
        return new

    def done_at(self, txn: lmdb.Transaction, fp: bytes) -> float | None:
        """When a URL left the queue for good; None while it is queued (or never was, or before `done` existed)."""
        value = txn.get(fp, db=self._done)
        return None if value is None else _TIME.unpack(value)[0]

    def requeued(self, txn: lmdb.Transaction, fp: bytes) -> None:
        """A URL is queued again: it is no longer done."""
        txn.delete(fp, db=self._done)

    def queued_of(self, txn: lmdb.Transaction, hid: int, urls: AbstractSet[str]) -> set[str]:
        """Which of `urls` (all of host `hid`) its queue holds, leased ones included: one scan of the host's FIFO."""
        prefix = host_key(hid)
        cursor = txn.cursor(db=self._queue)
        found: set[str] = set()
        if cursor.set_range(prefix):
            for key, value in cursor:
                if key[:HOST_ID_SIZE] != prefix:
                    break
                url = decode_entry(key, value).url
                if url in urls:
                    found.add(url)
                    if len(found) == len(urls):
                        break
        return found

    # -- recrawl spool files applied ----------------------------------------------------------

    def mark_applied(self, txn: lmdb.Transaction, name: str, at: float) -> None:
        txn.put(name.encode(), _TIME.pack(at), db=self._recrawl)

    def applied(self, txn: lmdb.Transaction, name: str) -> bool:
        return txn.get(name.encode(), db=self._recrawl) is not None

    def applied_names(self) -> list[str]:
        return self._log.read(lambda txn: [bytes(k).decode() for k in
                                           txn.cursor(db=self._recrawl).iternext(keys=True, values=False)])

    def forget_applied(self, txn: lmdb.Transaction, names: list[str]) -> None:
        for name in names:
            txn.delete(name.encode(), db=self._recrawl)

    # -- revisits ------------------------------------------------------------------------------

    def put_revisit(self, txn: lmdb.Transaction, fp: bytes, revisit: Revisit) -> None:
        """Store a URL's schedule, replacing its last one (and that one's due entry)."""
        old = txn.get(fp, db=self._revisit)
        if old is not None:
            txn.delete(due_key(decode_revisit(old).due, fp), db=self._due)
        txn.put(fp, encode_revisit(revisit), db=self._revisit)
        txn.put(due_key(revisit.due, fp), b"", db=self._due)

    def revisits(self, fps: list[bytes]) -> list[Revisit | None]:
        """The stored schedule of each URL (None: never fetched with revisits on)."""

        def body(txn: lmdb.Transaction) -> list[Revisit | None]:
            return [None if (v := txn.get(fp, db=self._revisit)) is None else decode_revisit(v) for fp in fps]

        return self._log.read(body)

    def take_due(self, txn: lmdb.Transaction, now: float, limit: int) -> list[tuple[bytes, Revisit]]:
        """Up to `limit` schedules due by `now`, earliest first, their due entries deleted (the records stay: the
        next fetch's result replaces them)."""
        out: list[tuple[bytes, Revisit]] = []
        cursor = txn.cursor(db=self._due)
        end = _DUE.pack(max(0, round(now * 1000)) + 1)
        taken: list[bytes] = []
        if cursor.first():
            for key in cursor.iternext(keys=True, values=False):
                if key[:_DUE.size] >= end or len(out) == limit:
                    break
                key = bytes(key)
                value = txn.get(key[_DUE.size:], db=self._revisit)
                taken.append(key)
                if value is not None:
                    out.append((key[_DUE.size:], decode_revisit(value)))
        for key in taken:
            txn.delete(key, db=self._due)
        return out

    def next_due(self, txn: lmdb.Transaction) -> float | None:
        """The earliest due time stored, None if none."""
        cursor = txn.cursor(db=self._due)
        return due_of_key(cursor.key()) if cursor.first() else None

    def payloads(self, keys: list[bytes]) -> list[bytes | None]:
        """The payload of each queue entry (None: it has none)."""
        if not self.payloads_used:
            return [None] * len(keys)

        def body(txn: lmdb.Transaction) -> list[bytes | None]:
            return [txn.get(key, db=self._payloads) for key in keys]

        return self._log.read(body)

    def scan_host(self, hid: int, limit: int, skip: AbstractSet[bytes] = frozenset()) -> Iterator[QueueEntry]:
        """Up to `limit` entries of a host's FIFO, oldest first, leaving out the keys in `skip`. They are read in
        one transaction and decoded as the caller takes them (a lease of one reads ahead but decodes one)."""

        def body(txn: lmdb.Transaction) -> tuple[list[bytes], list[bytes]]:
            prefix = host_key(hid)
            cursor = txn.cursor(db=self._queue)
            keys: list[bytes] = []
            values: list[bytes] = []
            if not cursor.set_range(prefix):
                return keys, values
            for key in cursor.iternext(keys=True, values=False):
                if key[:HOST_ID_SIZE] != prefix or len(keys) >= limit:
                    break
                if key not in skip:
                    keys.append(key)
                    values.append(cursor.value())
            return keys, values

        return map(decode_entry, *self._log.read(body))

    # -- robots and counters ------------------------------------------------------------------

    def put_robots(self, txn: lmdb.Transaction, hid: int, fetched_at: float, text: str) -> None:
        txn.put(host_key(hid), _ROBOTS.pack(fetched_at) + text.encode("utf-8", "replace"), db=self._robots)

    def put_counters(self, txn: lmdb.Transaction, counters: dict[str, int]) -> None:
        for name, value in counters.items():
            txn.put(name.encode(), _U64.pack(value), db=self._counters)

    def robots_text(self, hid: int) -> str | None:
        value = self._log.read(lambda txn: txn.get(host_key(hid), db=self._robots))
        return None if value is None else bytes(value[_ROBOTS.size:]).decode()

    # -- per-host state of the caller ---------------------------------------------------------

    def put_host_state(self, txn: lmdb.Transaction, host: str, data: bytes) -> None:
        """Store a host's bytes; b"" deletes them."""
        if data:
            txn.put(host.encode(), data, db=self._host_state)
        else:
            txn.delete(host.encode(), db=self._host_state)

    def host_states(self) -> dict[str, bytes]:
        return self._log.read(lambda txn: {bytes(k).decode(): bytes(v) for k, v in txn.cursor(db=self._host_state)})
