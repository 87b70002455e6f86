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
fingerprints (count x 16 bytes), then each payload as length (u32 LE) + bytes. Appended, never rewritten:
parking costs a sequential write, whatever the size of the log.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import lmdb

from frontier.errors import StorageError
from frontier.fingerprint import FINGERPRINT_SIZE as FP
from frontier.fplog import FingerprintLog

PARKED_DB = b"parked"
_U32 = struct.Struct("<I")


def encode(blob: bytes, payloads: Sequence[bytes]) -> bytes:
    """One parked record: joined fingerprints and one payload each."""
    count = len(blob) // FP
    if len(payloads) != count:
        raise ValueError(f"{count} fingerprints but {len(payloads)} payloads")
    parts = [_U32.pack(count), blob]
    for payload in payloads:
        parts += (_U32.pack(len(payload)), payload)
    return b"".join(parts)


def decode(value: bytes) -> list[tuple[bytes, bytes]]:
    """A parked record's (fingerprint, payload) pairs, in the order parked."""
    (count,) = _U32.unpack_from(value)
    at = _U32.size + count * FP
    out = []
    for i in range(count):
        (size,) = _U32.unpack_from(value, at)
        start = _U32.size + i * FP
        out.append((bytes(value[start:start + FP]), bytes(value[at + _U32.size:at + _U32.size + size])))
        at += _U32.size + size
    return out


class ParkedConfirms:
    """The parked records of one fingerprint log. Writes happen in the caller's transaction; the in-memory
    count follows only once it commits (`parked`, `swept`), as the log's pending batches do."""

    def __init__(self, log: FingerprintLog) -> None:
        self._db = log.open_db(PARKED_DB)
        self.count, self._next = log.read(self._load)

    def _load(self, txn: lmdb.Transaction) -> tuple[int, int]:
        count, last = 0, -1
        for key, value in txn.cursor(db=self._db):
            count += _U32.unpack_from(value)[0]
            last = int.from_bytes(key, "big")
        return count, last + 1

    def put(self, txn: lmdb.Transaction, blob: bytes, payloads: Sequence[bytes]) -> None:
        """Park joined fingerprints with their payloads; call `parked` once the transaction commits."""
        if blob and not txn.put(self._next.to_bytes(8, "big"), encode(blob, payloads), db=self._db, append=True):
            raise StorageError(f"parked batch {self._next} is not after the last one (parked without `parked`)")

    def parked(self, blob: bytes) -> None:
        if blob:
            self._next += 1
            self.count += len(blob) // FP

    def read(self, txn: lmdb.Transaction) -> dict[bytes, bytes]:
        """Every parked fingerprint once, with the payload it was first parked with, in the order parked."""
        out: dict[bytes, bytes] = {}
        for _, value in txn.cursor(db=self._db):
            for fp, payload in decode(value):
                out.setdefault(fp, payload)
        return out

    def clear(self, txn: lmdb.Transaction) -> None:
        """Drop every parked record; call `swept` once the transaction commits."""
        txn.drop(self._db, delete=False)

    def swept(self) -> None:
        self.count = 0

    def __len__(self) -> int:
        return self.count
