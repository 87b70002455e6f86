"""The URL Frontier state in Redis / Valkey: the FrontierStore interface (frontier/urlfrontier/store.py), shared
by every `serve` process pointed at the same server, so several of them serve one crawl together.

Each write is one call of a Redis Function (lua/urlfrontier.lua: atomic on the server); a put's items, a
queue's lease, a queue's deletion or purge each touch the keys of one crawl, which share one hash tag (a crawl lives in one slot of a
Cluster). An ack is sent after its script returned: what the server's persistence keeps (appendonly) is what
survives; a kill -9 of a `serve` process loses nothing acknowledged. Politeness (the time a queue last
served URLs) and leases are in the server, so they hold across the processes. Times are the calling
server's clock (`now`): the processes of one crawl need synchronised clocks.

Keys, K = "<prefix>:{<crawl ID in hex>}", Q = a queue key, fp = the URL's 16-byte fingerprint:
    K:seen, K:seen:<h>   the crawl's seen-set: 8-byte fingerprints of the canonical URLs, in the chunks of the
                crawl state's seen-set (frontier.state.redis_lua: seen_add), checked and added in the put's call
    K:index     HASH fp -> Q                         where a URL's record is
    K:queues    HASH Q -> "delay blocked_ms limit completed active last_ms"
    K:seq       counter of arrivals (FIFO among URLs due at the same time)
    K:u:Q       HASH fp -> "next_ms due_ms seq created priority"     next_ms 0 = done
    K:l:Q / K:m:Q  HASH fp -> URL / metadata
    K:s:Q       ZSET "%016x" % seq + fp, score = due time (ms): waiting (a future date, or leased until due)
    K:r:Q       ZSET "%016x%016x" % (due, seq) + fp, score = -priority: due, served in member order
                within a score (earliest due, then arrival); `lease` moves a queue's URLs from K:s:Q once due
    K:h:Q       HASH fp -> held until (ms)
    <prefix>:crawls  SET of crawl IDs;  <prefix>:nodes  HASH address -> last heartbeat (ms)
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from itertools import islice
from typing import Any

import redis

from frontier.config import DEFAULT_CANONICAL
from frontier.errors import StorageError
from frontier.state.redis_conn import load_library, uses_jemalloc
from frontier.state.redis_lua import FINGERPRINT_BYTES, library
from frontier.state.redis_seen import DEFAULT_LOAD
from frontier.url.canonical import CanonicalRules
from frontier.urlfrontier.model import Item, Leased, QueueInfo, Record, Stats, url_key

DEFAULT_PREFIX = "uf"
NODE_TTL = 30.0  # seconds without a heartbeat after which a node is no longer listed
HEARTBEAT = 10.0  # seconds between two heartbeats of a node
LIBRARY_NAME = "frontier_urlfrontier"
FUNCTION_PREFIX = "frontier_uf_"

LIBRARY = library(LIBRARY_NAME, FUNCTION_PREFIX + "version", "urlfrontier/lua/urlfrontier")


def _queue(raw: bytes) -> QueueInfo:
    delay, blocked, limit, completed, active, _ = map(int, raw.split())
    return QueueInfo(delay=delay, blocked_until=blocked / 1000, limit=limit, completed=completed, active=active)


def _ms(seconds: float) -> int:
    return int(round(seconds * 1000))


class RedisFrontierStore:
    """FrontierStore over one Redis / Valkey server (`client`, redis-py with decode_responses off), under
    `prefix`; several processes may share it. `path`: what the banner names (the server, redacted)."""

    def __init__(self, client: redis.Redis, *, prefix: str = DEFAULT_PREFIX, path: str = "redis",
                 rules: CanonicalRules = DEFAULT_CANONICAL) -> None:
        self._r = client
        self.rules = rules
        self._prefix = prefix
        self.path = path
        self._load = DEFAULT_LOAD
        self._allocator = self._do(lambda: "jemalloc" if uses_jemalloc(client) else "other")
        load_library(client, path, LIBRARY)
        self._order: OrderedDict[tuple[str, str], None] = OrderedDict()  # this process's turns over the queues

    def key(self, url: str) -> bytes:
        """The seen-test key of a URL (`url_key` with this store's rules); InvalidURL if it has none."""
        return url_key(url, self.rules)

    def close(self) -> None:
        self._r.close()

    def __enter__(self) -> RedisFrontierStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _key(self, crawl: str) -> str:
        return f"{self._prefix}:{{{crawl.encode().hex()}}}"

    def _call(self, name: str, crawl: str, *args: Any) -> Any:
        """FCALL of this library's function `name` on the crawl's keys; a master that lost the library (a
        failover to a node that never had it, a FUNCTION FLUSH) gets it again and the call is retried once."""
        key = self._key(crawl)
        for attempt in (1, 2):
            try:
                return self._r.fcall(FUNCTION_PREFIX + name, 1, key + ":queues", key, *args)
            except redis.ResponseError as e:
                if attempt == 2 or "Function not found" not in str(e):
                    raise StorageError(f"URL Frontier store {self.path}: {e}") from None
            except redis.RedisError as e:
                raise StorageError(f"URL Frontier store {self.path}: {e}") from None
            load_library(self._r, self.path, LIBRARY)
        raise AssertionError("not reached")

    def _do(self, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except redis.RedisError as e:
            raise StorageError(f"URL Frontier store {self.path}: {e}") from None

    # -- writes ----------------------------------------------------------------------------------------------

    def put(self, items: Sequence[Item], now: float) -> list[bool]:
        """As FrontierStore.put; one script call per crawl of the items (the items of one crawl are atomic)."""
        by_crawl: dict[str, list[int]] = {}
        for i, item in enumerate(items):
            by_crawl.setdefault(item.crawl, []).append(i)
        out = [False] * len(items)
        for crawl, positions in by_crawl.items():
            packed = b"".join(sorted({items[i].fp[:FINGERPRINT_BYTES] for i in positions}))
            args: list[Any] = [_ms(now), packed, self._load, self._allocator]
            for i in positions:
                item = items[i]
                args += ["1" if item.discovered else "0", item.queue, item.fp, _ms(item.next_fetch), item.created,
                         item.url, item.metadata, repr(item.priority)]
            self._do(lambda: self._r.sadd(f"{self._prefix}:crawls", crawl))
            for i, changed in zip(positions, self._call("put", crawl, *args)):
                out[i] = bool(changed)
        return out

    def lease(self, *, crawl: str | None, queue: str | None, max_queues: int, max_per_queue: int,
              hold: float, default_delay: float, now: float) -> list[Leased]:
        """As FrontierStore.lease: one script call per queue tried."""
        if queue is not None:
            assert crawl is not None
            candidates = [(crawl, queue)]
        else:
            for c in ([crawl] if crawl is not None else self.crawls()):
                for q in self._queue_names(c):
                    self._order.setdefault((c, q), None)
            candidates = [key for key in self._order if crawl is None or key[0] == crawl]
        out: list[Leased] = []
        served = 0
        for c, q in candidates:
            if served >= max_queues:
                break
            self._order.pop((c, q), None)
            self._order[(c, q)] = None  # its turn is taken
            got = self._call("lease", c, q, _ms(now), _ms(now + hold), min(max_per_queue, 2**31),
                             _ms(default_delay))
            if not got:
                if not self._do(lambda: self._r.hexists(self._key(c) + ":queues", q)):
                    self._order.pop((c, q), None)
                continue
            served += 1
            out += [Leased(c, q, url.decode(), meta) for url, meta in zip(got[::2], got[1::2])]
        return out

    def update_queue(self, crawl: str, queue: str, *, delay: int | None = None, blocked_until: float | None = None,
                     limit: int | None = None) -> bool:
        return bool(self._call("update", crawl, queue, "" if delay is None else delay,
                               "" if blocked_until is None else _ms(blocked_until), "" if limit is None else limit))

    def delete_queue(self, crawl: str, queue: str) -> int | None:
        active = self._call("delete_queue", crawl, queue)
        self._order.pop((crawl, queue), None)
        return None if active < 0 else active

    def delete_crawl(self, crawl: str) -> int:
        total = sum(self.delete_queue(crawl, q) or 0 for q in self._queue_names(crawl))
        self._call("drop_seen", crawl)
        self._do(lambda: self._r.srem(f"{self._prefix}:crawls", crawl))
        return total

    def purge(self, crawl: str, queue: str | None, created_before: float) -> int:
        queues = self._queue_names(crawl) if queue is None else [queue]
        return sum(self._call("purge", crawl, q, int(created_before)) for q in queues)

    def nodes(self, address: str, now: float) -> list[str]:
        """Record this node's heartbeat; the nodes heard from within NODE_TTL seconds."""
        key = f"{self._prefix}:nodes"
        self._do(lambda: self._r.hset(key, address, _ms(now)))
        beats = self._do(lambda: self._r.hgetall(key))
        return sorted(a.decode() for a, t in beats.items() if int(t) >= _ms(now - NODE_TTL))

    # -- reads -----------------------------------------------------------------------------------------------

    def _queue_names(self, crawl: str) -> list[str]:
        return sorted(q.decode() for q in self._do(lambda: self._r.hkeys(self._key(crawl) + ":queues")))

    def crawls(self) -> list[str]:
        names = self._do(lambda: self._r.smembers(f"{self._prefix}:crawls"))
        return sorted(c.decode() for c in names if self._do(lambda c=c: self._r.hlen(self._key(c.decode()) + ":queues")))

    def queues(self, crawl: str, *, include_inactive: bool, now: float) -> list[str]:
        raw = self._do(lambda: self._r.hgetall(self._key(crawl) + ":queues"))
        infos = {q.decode(): _queue(v) for q, v in raw.items()}
        return sorted(q for q, i in infos.items() if include_inactive or (i.active and now >= i.blocked_until))

    def queue_info(self, crawl: str, queue: str) -> QueueInfo | None:
        raw = self._do(lambda: self._r.hget(self._key(crawl) + ":queues", queue))
        return None if raw is None else _queue(raw)

    def stats(self, crawl: str, queue: str | None, now: float) -> Stats:
        key = self._key(crawl)

        def in_flight(q: str) -> int:
            return sum(int(v) > _ms(now) for v in self._do(lambda: self._r.hvals(f"{key}:h:{q}")))

        return Stats.of((self.queue_info(crawl, q), lambda q=q: in_flight(q))
                        for q in (self._queue_names(crawl) if queue is None else [queue]))

    def _queue_records(self, crawl: str, queue: str) -> list[Record]:
        key = self._key(crawl)
        pipe = self._r.pipeline(transaction=False)
        for part in ("u", "l", "m"):
            pipe.hgetall(f"{key}:{part}:{queue}")
        recs, urls, metas = self._do(pipe.execute)
        out = []
        for fp in sorted(recs):
            next_ms, _, _, created, _ = recs[fp].split()
            next_ms, created = int(next_ms), int(created)
            out.append(Record(crawl, queue, urls[fp].decode(), next_ms / 1000, created, metas.get(fp, b"")))
        return out

    def status(self, crawl: str, fp: bytes) -> Record | None:
        key = self._key(crawl)
        queue = self._do(lambda: self._r.hget(key + ":index", fp))
        if queue is None:
            return None
        q = queue.decode()
        pipe = self._r.pipeline(transaction=False)
        for part in ("u", "l", "m"):
            pipe.hget(f"{key}:{part}:{q}", fp)
        rec, stored_url, meta = self._do(pipe.execute)
        next_ms, _, _, created, _ = rec.split()
        return Record(crawl, q, stored_url.decode(), int(next_ms) / 1000, int(created), meta or b"")

    def records(self, crawl: str, queue: str | None, match: Callable[[str], bool], *, start: int = 0,
                limit: int | None = None) -> list[Record]:
        queues = self._queue_names(crawl) if queue is None else [queue]
        matching = (r for q in queues for r in self._queue_records(crawl, q) if match(r.url))
        return list(islice(matching, start, None if limit is None else start + limit))

    def count(self, crawl: str, queue: str | None, match: Callable[[str], bool]) -> int:
        return len(self.records(crawl, queue, match))
