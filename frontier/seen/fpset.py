"""Batches of 16-byte fingerprints as one joined buffer (b"".join of them), and a set that takes them whole.

The seen-test's batch path works on joined buffers (frontier._native hashes a batch into one); a Python set
would need a bytes object per fingerprint, which cost more than the rest of the batch (measured: building
them, set.update and the set algebra were half of URLSeen's time per URL). With frontier._native the set is
an open-addressing hash table in one bytearray (layout in _native.c, "fingerprint sets"), kept at most half
full; without it, a Python set of bytes. Both behave alike, so callers need not know which path runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from frontier.fingerprint import FINGERPRINT_SIZE as FP, fingerprints
from frontier.native import native

MIN_SLOTS = 64


def split(blob: bytes) -> list[bytes]:
    """A joined buffer as a list of fingerprints."""
    return [blob[i:i + FP] for i in range(0, len(blob), FP)]


def joined(fps: Sequence[bytes]) -> bytes:
    """b"".join(fps), checked: ValueError unless every item is a 16-byte fingerprint."""
    compiled = native()
    blob = compiled.join(fps) if compiled is not None else None
    if blob is None:
        blob = b"".join(fps)
        if len(blob) != FP * len(fps) or any(len(fp) != FP for fp in fps):
            raise ValueError(f"fingerprints are {FP} bytes each")
    return blob


def digests(urls: Sequence[str]) -> bytes:
    """The fingerprints of URL strings, joined (frontier._native: without a bytes object per URL)."""
    compiled = native()
    return compiled.digests(urls) if compiled is not None else b"".join(fingerprints(urls))


def firsts(blob: bytes) -> np.ndarray:
    """For each fingerprint of a joined buffer, True if no earlier one of the buffer is equal (a numpy bool array)."""
    n = len(blob) // FP
    compiled = native()
    if compiled is not None:
        return np.frombuffer(compiled.firsts(blob, b"\x01" * n), dtype=bool)
    fps = split(blob)
    mask = np.zeros(n, dtype=bool)
    mask[list(dict(zip(reversed(fps), range(n - 1, -1, -1))).values())] = True
    return mask


def select(blob: bytes, mask: np.ndarray) -> bytes:
    """The fingerprints of a joined buffer where `mask` (numpy bool) is True, joined, in order."""
    compiled = native()
    if compiled is not None:
        return compiled.select(blob, mask)
    return np.frombuffer(blob, dtype="V16")[mask].tobytes()


def _slots_for(entries: int, slots: int) -> int:
    """The table size, doubling from `slots`, that holds `entries` at most half full."""
    while entries > slots // 2:
        slots *= 2
    return slots


class FingerprintSet:
    """A set of fingerprints (`in`, `len`, iteration, `update`), with batch methods on joined buffers."""

    __slots__ = ("_native", "_table", "_set")

    def __init__(self, fps: Iterable[bytes] = (), *, expected: int = 0) -> None:
        """`expected`: entries to make room for at once (the table grows past them, at a rehash each doubling)."""
        self._native = native()
        self._table = bytearray((1 + _slots_for(expected, MIN_SLOTS)) * FP) if self._native is not None else None
        self._set: set[bytes] | None = None if self._native is not None else set()
        self.update(fps)

    def add_blob(self, blob: bytes) -> int:
        """Add the fingerprints of a joined buffer; returns how many were not in the set."""
        if self._set is not None:
            before = len(self._set)
            self._set.update(split(blob))
            return len(self._set) - before
        self._reserve(len(blob) // FP)
        return self._native.set_add(self._table, blob)

    def contains_blob(self, blob: bytes, *others: "FingerprintSet", mask: np.ndarray | None = None) -> np.ndarray:
        """For each fingerprint of a joined buffer, True if this set or one of `others` holds it (a numpy bool
        array); with `mask`, only the fingerprints where it is True are looked up (the others are False)."""
        if self._set is None:
            tables = [self._table, *(other._table for other in others)]
            return np.frombuffer(self._native.set_has(blob, tables, mask), dtype=bool)
        fps = split(blob)
        held = self._set
        found = np.array([fp in held for fp in fps], dtype=bool)
        for other in others:
            held = other._set
            found |= np.array([fp in held for fp in fps], dtype=bool)
        return found if mask is None else found & mask

    def discard_blob(self, blob: bytes) -> None:
        """Remove the fingerprints of a joined buffer (those held)."""
        if self._set is not None:
            self._set.difference_update(split(blob))
        else:
            self._native.set_remove(self._table, blob)

    def blob(self) -> bytes:
        """Every fingerprint of the set, joined, in no particular order."""
        if self._set is not None:
            return b"".join(self._set)
        return self._native.set_items(self._table)

    def update(self, fps: Iterable[bytes]) -> None:
        self.add_blob(b"".join(fps))

    def difference_update(self, fps: Iterable[bytes]) -> None:
        self.discard_blob(b"".join(fps))

    def _reserve(self, more: int) -> None:
        """Grow the table (doubling, rehashed in C) so that `more` additions keep it at most half full."""
        slots = len(self._table) // FP - 1
        need = len(self) + more
        if need <= slots // 2:
            return
        old, self._table = self._table, bytearray((1 + _slots_for(need, slots)) * FP)
        self._native.set_add(self._table, self._native.set_items(old))

    @property
    def table(self) -> bytearray | None:
        """The C path's buffer (for frontier._native.set_has over several sets), None on the Python path."""
        return self._table

    def __contains__(self, fp: object) -> bool:
        if self._set is not None:
            return fp in self._set
        return isinstance(fp, bytes) and len(fp) == FP and self._native.set_has(fp, [self._table])[0] == 1

    def __len__(self) -> int:
        if self._set is not None:
            return len(self._set)
        return int.from_bytes(self._table[:8], "little")

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._set) if self._set is not None else iter(split(self.blob()))
