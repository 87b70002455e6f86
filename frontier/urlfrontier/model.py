"""What the URL Frontier stores (LMDB: frontier/urlfrontier/store.py, Redis: redis_store.py) take and give: the
items the server checked, the records and queue settings they keep, GetStats' figures, and the seen-test key of
a URL (the fingerprint of its canonical form; the URL itself is kept as the client sent it)."""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from frontier.seen.fingerprint import fingerprint
from frontier.url.canonical import CanonicalRules, canonicalize

PRIORITY_KEY = "priority"  # the metadata key whose first value (a float) orders a queue: higher first

_QUEUE = struct.Struct(">iQIQQ")  # delay (-1: the default), blocked_until_ms, limit (0: none), completed, active


def url_key(url: str, rules: CanonicalRules) -> bytes:
    """The seen-test key of a URL: the fingerprint of its canonical form (InvalidURL if it has none)."""
    return fingerprint(canonicalize(url, rules=rules))


@dataclass(frozen=True, slots=True, kw_only=True)
class Item:
    """One checked URLItem: a discovered URL (added if the seen-test finds it new) or a known one (replaced).
    `fp`: its `url_key`. `next_fetch`: seconds since the epoch when it may be fetched, 0 = done for good.
    `created`: 0 = now (a known URL keeps the creation date it has). `priority`: higher is served first."""

    discovered: bool
    crawl: str
    queue: str
    url: str
    fp: bytes
    next_fetch: float
    created: int = 0
    metadata: bytes = b""
    priority: float = 0.0


@dataclass(frozen=True, slots=True)
class Record:
    """A URL as stored: `next_fetch` in seconds (0 = done)."""

    crawl: str
    queue: str
    url: str
    next_fetch: float
    created: int
    metadata: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueInfo:
    """A queue's settings and counters. `delay` -1: the server's default delay."""

    delay: int = -1
    blocked_until: float = 0.0
    limit: int = 0
    completed: int = 0
    active: int = 0

    def pack(self) -> bytes:
        return _QUEUE.pack(self.delay, int(self.blocked_until * 1000), self.limit, self.completed, self.active)

    @classmethod
    def unpack(cls, data: bytes) -> QueueInfo:
        delay, blocked, limit, completed, active = _QUEUE.unpack(data)
        return cls(delay=delay, blocked_until=blocked / 1000, limit=limit, completed=completed, active=active)


@dataclass(frozen=True, slots=True)
class Stats:
    """GetStats' figures over one queue or one crawl."""

    size: int
    in_process: int
    queues: int
    active_queues: int
    completed: int

    @classmethod
    def of(cls, queues: Iterable[tuple[QueueInfo | None, Callable[[], int]]]) -> Stats:
        """The figures over queues given as (its record, None if there is no such queue; how many of its URLs
        are in flight now)."""
        size = in_process = count = active_queues = completed = 0
        for info, in_flight in queues:
            if info is None:
                continue
            busy = in_flight()
            count += 1
            size += info.active
            in_process += busy
            completed += info.completed
            active_queues += bool(info.active or busy)
        return cls(size, in_process, count, active_queues, completed)


@dataclass(frozen=True, slots=True)
class Leased:
    """A URL handed out by `lease`."""

    crawl: str
    queue: str
    url: str
    metadata: bytes


