"""Recently seen fingerprints, in front of the Bloom filter and the log: crawls repeat popular links in bursts.

Broder, Najork and Wiener (WWW 2003) found a cache of about 50k entries answered about 80% of
seen-tests; `URLSeen.stats()` reports the hit rate so the size can be tuned.

It is an approximate LRU in two generations of plain sets (as in a segmented LRU): inserts and hits
go into the young set; when it holds size/2 entries it becomes the old set and the previous old
set is dropped. An entry touched last is kept for at least size/2 and at most size further inserts.
Set operations run in C per batch; an exact OrderedDict LRU cost more per URL than the LMDB lookups
it saved (measured: about 1.9 us against 0.6 us per URL at 65,536 entries).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence, Set as AbstractSet


class FingerprintLRU:
    """A bounded set of recent fingerprints that forgets the least recently used first. Size 0 disables it."""

    def __init__(self, size: int) -> None:
        if size < 0:
            raise ValueError(f"LRU size must be >= 0, got {size}")
        self.size = size
        self._young: set[bytes] = set()
        self._old: set[bytes] = set()
        self.hits = 0
        self.lookups = 0

    def hits_of(self, fps: Sequence[bytes]) -> list[bool]:
        """For each fingerprint, True if it is cached. Call `add_many` with them afterwards to refresh."""
        young, old = self._young, self._old
        out = [fp in young or fp in old for fp in fps]
        self.hits += sum(out)
        self.lookups += len(fps)
        return out

    def misses(self, fps: AbstractSet[bytes]) -> list[bytes]:
        """The fingerprints of a set (or dict keys view) that are not cached, in no particular order."""
        if not self.size:
            return list(fps)
        missing = fps - self._young - self._old
        self.hits += len(fps) - len(missing)
        self.lookups += len(fps)
        return list(missing)

    def add_many(self, fps: Iterable[bytes]) -> None:
        """Cache (or refresh) fingerprints known to be in the durable log."""
        if not self.size:
            return
        self._young.update(fps)
        if len(self._young) >= max(1, self.size // 2):
            self._old = self._young
            self._young = set()

    def discard_many(self, fps: Iterable[bytes]) -> None:
        """Forget fingerprints removed from the durable log."""
        if self.size:
            gone = set(fps)
            self._young -= gone
            self._old -= gone

    def __contains__(self, fp: bytes) -> bool:
        return fp in self._young or fp in self._old

    def __len__(self) -> int:
        return len(self._young | self._old)

    @property
    def hit_rate(self) -> float:
        return self.hits / self.lookups if self.lookups else 0.0
