"""A Redis crawl seen from outside: what `python -m frontier status` shows of it, and `run_frontier.py --fresh`.

    with CrawlKeys.open(url, crawl="mycrawl") as crawl:   # cluster="auto", allow_unauthenticated=False
        crawl.status(top=10)       # counts, queue and top hosts, leases by instance, seen URLs: plain JSON values
        crawl.hosts()              # (host, queued, fetched) of every host
        crawl.count_keys()         # the crawl's keys on every master (SCAN by its prefix)
        crawl.live_leases()        # leases whose deadline has not passed: an instance is working on the crawl
        crawl.revisits()           # revisit.after: URLs scheduled, due now, the next due time
        crawl.due()                # (URL, due time, interval, last change) of each scheduled revisit, earliest first
        crawl.delete()             # UNLINK every key of the crawl; returns how many

Reads only (status): a few pipelined reads per slot group, then one HMGET per host (for the top hosts), so it
runs beside live instances without touching what they do. The counters are each group's own (B:c, see
frontier.state.redis_lua), summed; a status taken while instances run is a near-instant view, not one
transaction (each group is read atomically, the groups one after another).

`delete` removes keys "frontier:<crawl>:*" only (frontier.state.redis_keys: every key of a crawl has this
prefix, and a crawl name holds no ':' or glob character), never another crawl's or the Functions library.
"""

from __future__ import annotations

import heapq
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

from frontier.config.checks import check_crawl_name
from frontier.errors import StorageError
from frontier.state.crawlstore import decode_revisit
from frontier.state.redis_conn import (URLs, Client, ClusterMode, connect, first_reachable, primaries, redact,
                                      redis_errors)
from frontier.state.redis_keys import PREFIX, KeySpace

__all__ = ["CrawlKeys"]

SCAN_COUNT = 1000
_COUNTERS = ("fetched", "attempts", "queued", "inflight", "hosts", "unreach")
_SEP = b"\0"


class CrawlKeys:
    """Crawl `crawl` on the server or Cluster at `url`, for an operator: status and deletion (see the module doc)."""

    def __init__(self, client: Client, url: str, crawl: str) -> None:
        self.client = client
        self.url = url
        self.crawl = check_crawl_name(crawl)
        self.pattern = f"{PREFIX}:{crawl}:*"

    @classmethod
    def open(cls, url: URLs, *, crawl: str, cluster: ClusterMode = "auto",
             allow_unauthenticated: bool = False, allow_plaintext: bool = False) -> "CrawlKeys":
        url = first_reachable(url, allow_unauthenticated=allow_unauthenticated, allow_plaintext=allow_plaintext)
        return cls(connect(url, cluster=cluster, allow_unauthenticated=allow_unauthenticated,
                           allow_plaintext=allow_plaintext), url, crawl)

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> "CrawlKeys":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- status -------------------------------------------------------------------------------

    def meta(self) -> dict[str, str]:
        """The settings the crawl was created with (empty: no such crawl on the server)."""
        with redis_errors(self.url, "reading the crawl's settings"):
            raw = self.client.hgetall(KeySpace(crawl=self.crawl, groups=1).meta_key)
        return {k.decode(): v.decode() for k, v in raw.items()}

    def _keyspace(self) -> KeySpace:
        meta = self.meta()
        if "groups" not in meta:
            raise StorageError(f"{redact(self.url)}: no crawl {self.crawl!r} on this server (storage.redis.crawl)")
        return KeySpace(crawl=self.crawl, groups=int(meta["groups"]))

    def status(self, *, top: int = 10, now: float | None = None) -> dict[str, Any]:
        """server, crawl, created (its settings), pages (fetched, attempts), queue (queued, hosts with a queue,
        top hosts by queued URLs), hosts (known, unreachable), leases (in_flight, overdue, by_instance),
        seen (urls), budget (pages fetched or leased crawl-wide, when limits.max_pages is set)."""
        keys = self._keyspace()
        now = time.time() if now is None else now
        groups = [keys.group_key(g) for g in range(keys.groups)]
        with redis_errors(self.url, "reading the crawl"):
            pipe = self.client.pipeline(transaction=False)
            for g, b in enumerate(groups):
                pipe.hmget(f"{b}:c", list(_COUNTERS))
                pipe.zcount(f"{b}:leases", "-inf", now)
                pipe.hvals(f"{b}:L")
                pipe.smembers(f"{b}:hosts")
                pipe.hget(keys.seen_key(g), "n")
            pipe.hget(keys.budget_key, "used")
            replies = pipe.execute()
            totals: Counter[str] = Counter()
            overdue, seen = 0, 0
            instances: Counter[str] = Counter()
            hosts: list[tuple[str, str]] = []
            for i, b in enumerate(groups):
                counters, late, leases, members, n = replies[5 * i:5 * i + 5]
                totals.update({name: int(v or 0) for name, v in zip(_COUNTERS, counters)})
                overdue += int(late)
                instances.update(data.split(_SEP, 1)[0].decode() for data in leases)
                hosts.extend((b, h.decode()) for h in members)
                seen += int(n or 0)
            budget = replies[-1]
            per_host = self._host_counts(hosts)
        queued = [h for h in per_host if h[1] > 0]
        queued.sort(key=lambda h: (-h[1], h[0]))
        return {
            "backend": "redis",
            "server": redact(self.url),
            "crawl": self.crawl,
            "created": self.meta(),
            "pages": {"fetched": totals["fetched"], "attempts": totals["attempts"]},
            "queue": {"queued": totals["queued"], "hosts": len(queued),
                      "top_hosts": [{"host": h, "queued": q, "fetched": f} for h, q, f in queued[:max(0, top)]]},
            "hosts": {"known": totals["hosts"], "unreachable": totals["unreach"]},
            "leases": {"in_flight": totals["inflight"], "overdue": overdue, "by_instance": dict(instances)},
            "seen": {"urls": seen},
            "budget": None if budget is None else int(budget),
        }

    def _host_counts(self, hosts: list[tuple[str, str]]) -> list[tuple[str, int, int]]:
        """(host, queued, fetched) of each (group key, host): one pipelined HMGET per host."""
        pipe = self.client.pipeline(transaction=False)
        for b, host in hosts:
            pipe.hmget(f"{b}:h:{host}", ["queued", "fetched"])
        return [(host, int(q or 0), int(f or 0)) for (_, host), (q, f) in zip(hosts, pipe.execute())]

    def hosts(self) -> list[tuple[str, int, int]]:
        """(host, queued, fetched) of every host the crawl knows (reads only, beside running instances)."""
        keys = self._keyspace()
        groups = [keys.group_key(g) for g in range(keys.groups)]
        with redis_errors(self.url, "reading the crawl's hosts"):
            pipe = self.client.pipeline(transaction=False)
            for b in groups:
                pipe.smembers(f"{b}:hosts")
            members = pipe.execute()
            return self._host_counts([(b, h.decode()) for b, hs in zip(groups, members) for h in hs])

    # -- revisits (frontier.state.redis_lua: B:due, B:rv) ---------------------------------------

    def revisits(self, now: float | None = None) -> dict[str, Any]:
        """URLs with a revisit scheduled (not queued again yet), how many are due by `now`, and the next due time
        after it (the server's clock; None if none)."""
        keys = self._keyspace()
        now = time.time() if now is None else now
        with redis_errors(self.url, "reading the revisits"):
            pipe = self.client.pipeline(transaction=False)
            for g in range(keys.groups):
                due = f"{keys.group_key(g)}:due"
                pipe.zcard(due)
                pipe.zcount(due, "-inf", now)
                pipe.zrangebyscore(due, f"({now}", "+inf", 0, 1, withscores=True)
            replies = pipe.execute()
        later = [reply[0][1] for reply in replies[2::3] if reply]
        return {"scheduled": sum(replies[0::3]), "due_now": sum(replies[1::3]), "next_due": min(later, default=None)}

    def due(self) -> Iterator[tuple[str, float, float, float]]:
        """(URL, due time, interval, last change) of every scheduled revisit, earliest due first: each group's due
        set read SCAN_COUNT at a time, merged."""
        keys = self._keyspace()
        return heapq.merge(*(self._due_of(keys.group_key(g)) for g in range(keys.groups)), key=lambda row: row[1])

    def _due_of(self, group: str) -> Iterator[tuple[str, float, float, float]]:
        start = 0
        while True:
            with redis_errors(self.url, "reading the revisits"):
                fps = self.client.zrange(f"{group}:due", start, start + SCAN_COUNT - 1, withscores=True)
                records = self.client.hmget(f"{group}:rv", [fp for fp, _ in fps]) if fps else []
            for (_, due), record in zip(fps, records):
                if record is not None:
                    r = decode_revisit(record)
                    yield r.url, due, r.interval, r.changed_at
            if len(fps) < SCAN_COUNT:
                return
            start += SCAN_COUNT

    # -- start over ---------------------------------------------------------------------------

    def _keys(self) -> list[tuple[Any, list[bytes]]]:
        """(master, the crawl's keys on it) for every master."""
        with redis_errors(self.url, "listing the crawl's keys"):
            return [(node, list(node.scan_iter(match=self.pattern, count=SCAN_COUNT)))
                    for node in primaries(self.client)]

    def count_keys(self) -> int:
        return sum(len(keys) for _, keys in self._keys())

    def live_leases(self, now: float | None = None) -> int:
        """Leases whose deadline has not passed: some instance is crawling (or died less than a lease ago)."""
        meta = self.meta()
        if "groups" not in meta:
            return 0
        keys = KeySpace(crawl=self.crawl, groups=int(meta["groups"]))
        now = time.time() if now is None else now
        with redis_errors(self.url, "reading the crawl's leases"):
            pipe = self.client.pipeline(transaction=False)
            for g in range(keys.groups):
                pipe.zcount(f"{keys.group_key(g)}:leases", f"({now}", "+inf")
            return sum(int(n) for n in pipe.execute())

    def delete(self) -> int:
        """UNLINK every key of the crawl (one key per command: a Cluster master refuses keys of several slots
        in one); returns how many."""
        deleted = 0
        for node, keys in self._keys():
            with redis_errors(self.url, "deleting the crawl's keys"):
                for i in range(0, len(keys), SCAN_COUNT):
                    pipe = node.pipeline(transaction=False)
                    for key in keys[i:i + SCAN_COUNT]:
                        pipe.unlink(key)
                    deleted += sum(pipe.execute())
        return deleted
