"""The trap detector's per-host records and their byte format (frontier.crawl.traps judges; this keeps).

    HostTraps: a host's soft-404 probe answer, its look-alikes and its URL patterns (PatternGrowth)
    host.pack() -> bytes, HostTraps.unpack(bytes)           one host's state, committed with the crawl
    pack_hosts({host: bytes}) -> bytes, unpack_hosts(bytes)  every host's state in one blob

A pattern keeps the counts its verdict is judged by (frontier.crawl.traps, "TrapDetector"): pages fetched, URLs
discovered, its own and elsewhere, and the three counts after each of its last WINDOW pages, plus the sketches of
its last REFERENCES pages. Each pattern keeps its packed bytes until it changes (`raw`, set to None by whoever
changes it), and a host its packed head, so a host's state is re-joined, not re-packed, on each commit.

Host record layout (little-endian), version 4; a record of an older version (1, 2: the drop-on-similarity
detector; 3: the likeness verdict) is read as a host never observed:

    u8  version (4)         u8 probe (0 not answered, 1 answered without a look-alike, 2 look-alikes)
    u8  n, n x look-alike: (u64 simhash, u32 shingles, u16 links, links x (u64 xxh3-64 of an outlink,
        u64 xxh3-64 of its shape))
    u16 pattern count, then per pattern, least recently observed first:
        u16 length + UTF-8 pattern, u32 pages, u32 discovered, u32 own, u32 elsewhere, u32 used, i16 streak,
        u16 alike, u8 flags (1 suspected, 2 a fan), u8 w, u8 r,
        w x (u32 own, u32 discovered, u32 elsewhere) after each of its last pages (at most WINDOW + 1), oldest
        first, r x (u64 simhash, u32 shingles) of the reference pages, oldest first

Pure Python, no I/O; imports nothing of frontier.crawl (traps imports this).
"""

from __future__ import annotations

import struct
import sys
from array import array
from dataclasses import dataclass, field
from typing import NamedTuple

from frontier.errors import StorageError

__all__ = ["REFERENCES", "STATE_VERSION", "WINDOW", "HostTraps", "LookAlike", "PageSketch", "PatternGrowth",
           "pack_hosts", "unpack_hosts"]

REFERENCES = 8  # sketches kept per pattern
WINDOW = 16  # pages of a pattern its growth is judged over (the sliding window)
STATE_VERSION = 4  # 1 and 2: the detector that dropped pages; 3: the likeness verdict; read as empty
_LITTLE = sys.byteorder == "little"


class PageSketch(NamedTuple):
    """What a page's text looks like: its 64-bit simhash and the number of shingles behind it."""

    simhash: int
    shingles: int


class LookAlike(NamedTuple):
    """A host's "not found" answer: its sketch and {xxh3-64 of an outlink: xxh3-64 of its shape} (`link_shape`)."""

    page: PageSketch
    links: dict[int, int]


@dataclass(slots=True)
class PatternGrowth:
    """What the detector knows of one (host, URL pattern): its counts, window and reference sketches."""

    pages: int = 0  # pages fetched (200s observed)
    discovered: int = 0  # URLs of the pattern new to the crawl, found on any page
    own: int = 0  # of them, found on the pattern's own pages
    used: int = 0  # low-band fetches spent while suspected and growing: what counts against the budget
    streak: int = 0  # pages in a row whose window grew (`growing`)
    alike: int = 0  # latest sketched pages in a row that were near-duplicates of most references
    suspect: bool = False
    fan: bool = False  # one page linked FAN_OUT or more new URLs of it at once
    released: bool = False  # the user released it (traps.release): never suspected again
    elsewhere: int = 0  # URLs of other patterns new to the crawl, found on its pages
    window: array[int] = field(default_factory=lambda: array("I"))  # own, discovered, elsewhere after each page
    refs: list[PageSketch] = field(default_factory=list)  # oldest first, at most REFERENCES
    raw: bytes | None = None  # its packed state, None once changed (`HostTraps.pack`)

    @property
    def queued(self) -> int:
        """URLs of it discovered and not fetched (an estimate: failures and other statuses are not counted)."""
        return max(0, self.discovered - self.pages)

    def rate(self) -> float:
        """New URLs of the pattern per fetched page of it, found on its own pages over the window."""
        w = self.window
        return (w[-3] - w[0]) / (len(w) // 3 - 1) if len(w) > 3 else 0.0

    def growing(self) -> bool:
        """Over the last WINDOW pages of it, its own pages found at least one new URL of it for every two
        fetched, and its queue did not shrink (as many new URLs of it found, from anywhere, as pages fetched)."""
        w = self.window
        if len(w) <= 3 * WINDOW:
            return False
        return 2 * (w[-3] - w[0]) >= WINDOW and w[-2] - w[1] >= WINDOW

    def feeds(self) -> bool:
        """Over the window its pages found at least one new URL of another pattern per page: content, as a
        listing's pages find items. It lowers suspicion to none (a calendar or a search finds only itself)."""
        w = self.window
        return len(w) > 3 * WINDOW and w[-1] - w[2] >= WINDOW

    def watched(self) -> bool:
        """Its pages are sketched: likeness can change its verdict (it grows, is suspected, or is a fan)."""
        return self.suspect or self.fan or (self.streak >= WINDOW // 2 and not self.feeds())

    def figures(self) -> dict[str, object]:
        """Its growth figures: pages fetched, new URLs of it per page over the window, URLs of it discovered and
        not fetched, budget spent, growing, suspected (`TrapDetector.growth`)."""
        return {"fetched": self.pages, "new_per_page": round(self.rate(), 2), "queued": self.queued,
                "spent": self.used, "growing": self.streak > 0, "suspected": self.suspect}

    def add_page(self, own: int, elsewhere: int) -> None:
        """Count one fetched page of it that found `own` new URLs of it and `elsewhere` of other patterns, and
        slide the window over it."""
        self.pages += 1
        self.own += own
        self.elsewhere += elsewhere
        window = self.window
        window.extend((self.own, self.discovered, self.elsewhere))
        if len(window) > 3 * (WINDOW + 1):
            del window[:3]

    def add_reference(self, page: PageSketch, alike: bool) -> None:
        """Keep a sketched page of it as a reference (the last REFERENCES); `alike`: it was a near-duplicate of
        most of the references before it (`alike` counts such pages in a row)."""
        self.alike = min(self.alike + 1, 65535) if alike else 0
        self.refs.append(page)
        if len(self.refs) > REFERENCES:
            del self.refs[0]

    def pack(self, key: str) -> bytes:
        """Its bytes in a host record, under its pattern `key` (layout in the module docstring)."""
        raw = key.encode("utf-8", "surrogatepass")
        flags = int(self.suspect) | 2 * self.fan
        return b"".join([_U16.pack(len(raw)), raw,
                         _PAT.pack(self.pages, self.discovered, self.own, self.elsewhere, self.used, self.streak,
                                   self.alike, flags, len(self.window) // 3, len(self.refs)),
                         _le(self.window), *(_REF.pack(*ref) for ref in self.refs)])


@dataclass(slots=True)
class HostTraps:
    """What the detector knows of one host: its soft-404 probe answer, look-alikes and URL patterns."""

    probe: int = 0  # 0 not answered, 1 answered without a look-alike, 2 look-alikes known
    look_alikes: list[LookAlike] = field(default_factory=list)  # the probe's answer first, at most LOOK_ALIKES
    patterns: dict[str, PatternGrowth] = field(default_factory=dict)  # least recently observed first
    suspects: int = 0  # patterns suspected
    watched: int = 0  # patterns watched (PatternGrowth.watched)
    head: bytes | None = None  # its packed probe state and look-alikes, None once changed

    def watch(self, before: bool, pattern: PatternGrowth) -> None:
        """Keep `watched` right after a change to `pattern`, which was watched (`before`) or not."""
        after = pattern.watched()
        if after != before:
            self.watched += 1 if after else -1

    def pattern(self, key: str, limit: int, released: bool, *, touch: bool = True) -> PatternGrowth:
        """Its record of pattern `key`, a new one (`released` or not) if it has none, after `evict` when it holds
        `limit`; `touch`: it becomes the most recently observed."""
        patterns = self.patterns
        pattern = patterns.pop(key, None) if touch else patterns.get(key)
        if pattern is None:
            if len(patterns) >= limit:
                self.evict()
            pattern = PatternGrowth(released=released)
        patterns[key] = pattern  # most recently observed last
        return pattern

    def suspect(self, pattern: PatternGrowth, suspect: bool) -> bool:
        """Mark one of its patterns suspected or not; True if that changed its verdict."""
        if pattern.suspect == suspect:
            return False
        self.suspects += 1 if suspect else -1
        pattern.suspect = suspect
        pattern.raw = None
        return True

    def evict(self) -> None:
        """Drop the least recently observed pattern that is not suspected (if all are, the least recent)."""
        patterns = self.patterns
        victim = next((k for k, p in patterns.items() if not p.suspect), None)
        if victim is None:
            victim = next(iter(patterns))
        pattern = patterns.pop(victim)
        self.suspects -= pattern.suspect
        self.watched -= pattern.watched()

    def pack(self) -> bytes:
        """Its state as bytes (layout in the module docstring). Only what changed since the last call is packed
        again (a commit of a one-host crawl writes its state each time)."""
        if self.head is None:
            parts = [_HEAD.pack(STATE_VERSION, self.probe, len(self.look_alikes))]
            for look in self.look_alikes:
                parts.append(_LOOK.pack(*look.page, len(look.links)))
                parts += [_PAIR.pack(h, shape) for h, shape in look.links.items()]
            self.head = b"".join(parts)
        parts = [self.head, _U16.pack(len(self.patterns))]
        for key, p in self.patterns.items():
            raw = p.raw
            if raw is None:
                raw = p.raw = p.pack(key)
            parts.append(raw)
        return b"".join(parts)

    @classmethod
    def unpack(cls, data: bytes, name: str) -> HostTraps:
        """The record of host `name` from `pack` bytes of version STATE_VERSION. StorageError if corrupt."""
        try:
            return cls._unpack(data)
        except (struct.error, UnicodeDecodeError, ValueError) as exc:
            raise StorageError(f"corrupt trap-detector state for host {name!r}: {exc}") from None

    @classmethod
    def _unpack(cls, data: bytes) -> HostTraps:
        version, probe, n = _HEAD.unpack_from(data)
        if version != STATE_VERSION or probe > 2:
            raise ValueError(f"unknown version {version} or probe state {probe}")
        host, pos = cls(probe=probe), _HEAD.size
        for _ in range(n):
            simhash, shingles, links = _LOOK.unpack_from(data, pos)
            pos += _LOOK.size
            hashes = dict(_PAIR.unpack_from(data, pos + i * _PAIR.size) for i in range(links))
            pos += links * _PAIR.size
            host.look_alikes.append(LookAlike(PageSketch(simhash, shingles), hashes))
        host.head = data[:pos]
        (count,), pos = _U16.unpack_from(data, pos), pos + _U16.size
        for _ in range(count):
            at = pos
            (size,), pos = _U16.unpack_from(data, pos), pos + _U16.size
            key, pos = data[pos : pos + size].decode("utf-8", "surrogatepass"), pos + size
            if pos > len(data):
                raise ValueError("truncated")
            pages, discovered, own, elsewhere, used, streak, alike, flags, nw, nr = _PAT.unpack_from(data, pos)
            pos += _PAT.size
            if nw > WINDOW + 1 or nr > REFERENCES:
                raise ValueError(f"{nw} window entries, {nr} references")
            window = array("I", data[pos : pos + nw * 12])
            if not _LITTLE:
                window.byteswap()
            pos += nw * 12
            refs = [PageSketch(*_REF.unpack_from(data, pos + i * _REF.size)) for i in range(nr)]
            pos += nr * _REF.size
            pattern = host.patterns[key] = PatternGrowth(pages, discovered, own, used, streak, alike, bool(flags & 1),
                                                         bool(flags & 2), False, elsewhere, window, refs, data[at:pos])
            host.suspects += pattern.suspect
            host.watched += pattern.watched()
        if pos != len(data):
            raise ValueError(f"{len(data) - pos} trailing bytes")
        return host


def pack_hosts(states: dict[str, bytes]) -> bytes:
    """Every host's state in one blob: u32 count, then per host u16 length + name, u32 length + state."""
    parts = [_U32.pack(len(states))]
    for name, state in states.items():
        raw = name.encode("utf-8", "surrogatepass")
        parts += [_U16.pack(len(raw)), raw, _U32.pack(len(state)), state]
    return b"".join(parts)


def unpack_hosts(data: bytes) -> list[tuple[str, bytes]]:
    """(host, state bytes) of a `pack_hosts` blob, in its order. StorageError if corrupt."""
    hosts = []
    try:
        (count,), pos = _U32.unpack_from(data), _U32.size
        for _ in range(count):
            (size,), pos = _U16.unpack_from(data, pos), pos + _U16.size
            name, pos = bytes(data[pos : pos + size]).decode("utf-8", "surrogatepass"), pos + size
            (size,), pos = _U32.unpack_from(data, pos), pos + _U32.size
            if pos + size > len(data):
                raise ValueError("truncated")
            hosts.append((name, bytes(data[pos : pos + size])))
            pos += size
        if pos != len(data):
            raise ValueError(f"{len(data) - pos} trailing bytes")
    except (struct.error, UnicodeDecodeError, ValueError) as exc:
        raise StorageError(f"corrupt trap-detector state: {exc}") from None
    return hosts


def _le(values: array[int]) -> bytes:
    """An array of u32 as little-endian bytes."""
    if _LITTLE:
        return values.tobytes()
    swapped = array("I", values)
    swapped.byteswap()
    return swapped.tobytes()


_HEAD = struct.Struct("<BBB")  # version, probe, look-alikes
_LOOK = struct.Struct("<QIH")
_PAT = struct.Struct("<IIIIIhHBBB")  # pages, discovered, own, elsewhere, used, streak, alike, flags, window, refs
_REF = struct.Struct("<QI")
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_PAIR = struct.Struct("<QQ")
