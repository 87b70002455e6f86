"""Seen-test confirmations put off to a sweep: exact mode's answer to random reads at scale.

In exact mode a Bloom "maybe" (most links of a crawl: they point to pages seen before) is confirmed in the
fingerprint log. Memory answers most of it (`FingerprintLog.sift`: the pending set, the cached runs, the
runs' filters); what is left is one page read of a run on disk per URL, a random read once the log outgrows
the page cache. A caller that can wait for the answer parks those fingerprints here instead, each with an
opaque payload (the crawl store: the link to queue if it is new), in the same transaction as its batch.
A sweep then confirms all of them at once, sorted, in one forward pass over each run (a merge-join, as in
IRLbot's DRUM, Lee et al., WWW 2008): dense probes read each chunk once, in key order. The new ones are
recorded and handed back with their payloads, and the parked records are dropped, in one transaction.

Records in the `parked` database of the log's environment: batch number (u64 BE) -> count (u32 LE), the
fingerprints (count x 16 bytes), the payloads' end offsets (count x u32, native order), the payloads.
Appended, never rewritten: parking costs a sequential write, whatever the size of the log.
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

import lmdb
import numpy as np

from frontier.errors import StorageError
from frontier.fingerprint import FINGERPRINT_SIZE as FP
from frontier.seen.fplog import FingerprintLog
from frontier.seen.fpset import firsts, select

PARKED_DB = b"parked"
_U32 = struct.Struct("<I")
_END = struct.Struct("=I")  # a payload's end offset: array("I")'s native order


def encode(blob: bytes, payloads: Sequence[bytes]) -> bytes:
    """One parked record: joined fingerprints and one payload each."""
    count = len(blob) // FP
    if len(payloads) != count:
        raise ValueError(f"{count} fingerprints but {len(payloads)} payloads")
    ends = array("I", accumulate(map(len, payloads)))
    return b"".join((_U32.pack(count), blob, ends.tobytes(), *payloads))


def record_count(value: bytes) -> int:
    """Fingerprints in a parked record."""
    return _U32.unpack_from(value)[0]


def record_fps(value: bytes) -> bytes:
    """A parked record's fingerprints, joined."""
    return value[_U32.size:_U32.size + record_count(value) * FP]


def record_payload(value: bytes, i: int) -> bytes:
    """The payload of a parked record's `i`th fingerprint."""
    ends = _U32.size + record_count(value) * FP
    base = ends + 4 * record_count(value)
    start = _END.unpack_from(value, ends + 4 * (i - 1))[0] if i else 0
    return value[base + start:base + _END.unpack_from(value, ends + 4 * i)[0]]


@dataclass(frozen=True, slots=True)
class Waiting:
    """The parked fingerprints, each once (its first parking wins), in the order parked. Payloads are decoded
    only for the ones asked for: a sweep needs those of the few found new, not of the many repeats."""

    records: list[bytes]
    firsts: list[int]  # the index, among all parked fingerprints, of each record's first one
    fps: bytes  # joined, each once
    index: np.ndarray  # for each of `fps`: its index among all parked fingerprints
    through: bytes = b""  # the key of the last record read: records parked later are not these
    count: int = 0  # fingerprints in the records, repeats included

    def payloads(self, which: Sequence[int]) -> list[bytes]:
        """The payloads of `fps`' fingerprints number `which`."""
        out = []
        for u in which:
            at = int(self.index[u])
            r = bisect_right(self.firsts, at) - 1
            out.append(record_payload(self.records[r], at - self.firsts[r]))
        return out


class ParkedConfirms:
    """The parked records of one fingerprint log. Writes happen in the caller's transaction; the in-memory
    count follows only once it commits (`committed`, `swept`), as the log's pending batches do."""

    def __init__(self, log: FingerprintLog) -> None:
        self._db = log.open_db(PARKED_DB)
        self.count, self._next = log.read(self._load)

    def _load(self, txn: lmdb.Transaction) -> tuple[int, int]:
        count, last = 0, -1
        for key, value in txn.cursor(db=self._db):
            count += record_count(value)
            last = int.from_bytes(key, "big")
        return count, last + 1

    def put(self, txn: lmdb.Transaction, blob: bytes, payloads: Sequence[bytes]) -> None:
        """Park joined fingerprints with their payloads; call `committed` once the transaction commits."""
        if blob and not txn.put(self._next.to_bytes(8, "big"), encode(blob, payloads), db=self._db, append=True):
            raise StorageError(f"parked batch {self._next} is not after the last one (parked without `committed`)")

    def committed(self, blob: bytes) -> None:
        if blob:
            self._next += 1
            self.count += len(blob) // FP

    def read(self, txn: lmdb.Transaction) -> Waiting:
        """Every parked fingerprint once (`Waiting`)."""
        items = list(txn.cursor(db=self._db))
        records = [value for _, value in items]
        counts = [record_count(value) for value in records]
        joined = b"".join(map(record_fps, records))
        first = firsts(joined)
        return Waiting(records, [0, *accumulate(counts)][:-1], select(joined, first), np.flatnonzero(first),
                       items[-1][0] if items else b"", sum(counts))

    def clear(self, txn: lmdb.Transaction, waiting: Waiting) -> None:
        """Drop the records `waiting` was read from (not those parked since); `swept(waiting)` after the commit."""
        cursor = txn.cursor(db=self._db)
        while cursor.first() and cursor.key() <= waiting.through:
            cursor.delete()

    def swept(self, waiting: Waiting) -> None:
        self.count -= waiting.count

    def __len__(self) -> int:
        return self.count
