"""`RedisSeen`: the seen-test in Redis or Valkey, exact, shared by every process and machine of a crawl.

    with RedisSeen("redis://127.0.0.1:6379/0", crawl="mycrawl") as seen:
        seen.add("http://example.com/a")        # True: first time seen, crawl it
        flags = seen.add_many(links)            # SeenBatch (list[bool]) with .invalid; a few round trips
        "http://example.com/a" in seen, len(seen), seen.stats()

A batch is canonicalised (skipped with canonical=True), fingerprinted (the first 8 bytes of xxh3_128: 64
bits, kept exactly: no URL is ever dropped by a probabilistic filter) and cut by slot group (the URL's
host decides it: frontier.state.redis_keys); each group's fingerprints, sorted and unique, go to one FCALL
of frontier's Functions library (frontier.state.redis_lua), which checks and adds them server-side,
atomically; the calls of a batch are pipelined (one round trip on one server; one per master on a
Cluster). Any number of RedisSeen on any machines may share a crawl: each URL is new to exactly one. A
URL a handle has checked before is answered by its LRU of recent fingerprints (a set that only grows
never un-sees a URL), without a round trip.

The server stores 7 bytes per URL plus its allocator's rounding and a little bookkeeping (measured:
frontier.bench.redis). `len` reads one counter per group. A crawl remembers the number of groups and the
canonicalisation rules it was created with; opening it with others is a VersionMismatch.

One caveat: if the connection drops after the server ran a batch but before its answer arrived, redis-py
retries and the retry reports those URLs as seen: the URLs are recorded but no caller was told they were
new. The crawl engine's commit (seen-test and enqueue in one function) is immune; a RedisSeen caller that
must not lose URLs should treat a StorageError as "this batch's fate is unknown".
"""

from __future__ import annotations

import secrets
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import redis
from redis.cluster import RedisCluster

from frontier.errors import ConfigError, InvalidURL, StorageError, VersionMismatch
from frontier.seen.fingerprint import fingerprints
from frontier.seen.lru import FingerprintLRU
from frontier.seen.urlseen import DEFAULT_LRU_SIZE, SeenBatch, canonicalize_batch
from frontier.state.redis_conn import (
    DEFAULT_TIMEOUT,
    URLs,
    Client,
    ClusterMode,
    check_servers,
    connect,
    first_reachable,
    load_library,
    redact,
    redis_errors,
    uses_jemalloc,
)
from frontier.state.redis_keys import KeySpace, fcall_keys
from frontier.state.redis_lua import (FINGERPRINT_BYTES, FUNCTION_SEEN_ADD, FUNCTION_SEEN_HAS, LIBRARY_VERSION,
                                      SEEN_LAYOUT)
from frontier.url.canonical import DEFAULT_RULES, CanonicalRules, canonicalize, url_host

DEFAULT_GROUPS = 64  # slot groups: see the README's "Redis layout" for the trade-off
DEFAULT_LOAD = 2048  # URLs per chunk before the next chunk splits: bigger saves memory, costs merge time
MIN_LOAD, MAX_LOAD = 64, 16384
MAX_CALL = 2048  # fingerprints per FCALL: bounds how long one call holds the (single-threaded) server


@dataclass(frozen=True, slots=True)
class GroupBatch:
    """One slot group's share of a batch: its fingerprints, sorted and unique, and where each first occurs."""

    group: int
    fingerprints: list[bytes]  # 8 bytes each, ascending
    firsts: list[int]  # index in the batch of each fingerprint's first occurrence


def plan_batch(keys: KeySpace, canonical_urls: Sequence[str], fps: Sequence[bytes]) -> list[GroupBatch]:
    """Cut a batch of canonical URLs (and their 16-byte fingerprints) by slot group; a URL repeated in the
    batch is planned once."""
    group_of = keys.group_of
    groups = [group_of(url_host(u)) for u in canonical_urls]
    pairs = [(g, fp[:FINGERPRINT_BYTES]) for g, fp in zip(groups, fps)]
    first = dict(zip(reversed(pairs), range(len(pairs) - 1, -1, -1)))  # (group, fp) -> first index
    by_group: defaultdict[int, list[tuple[bytes, int]]] = defaultdict(list)
    for (g, fp), i in first.items():
        by_group[g].append((fp, i))
    plans = []
    for g, items in by_group.items():
        items.sort()
        plans.append(GroupBatch(g, [fp for fp, _ in items], [i for _, i in items]))
    return plans


class RedisSeen:
    """The seen-test of crawl `crawl` on the Redis / Valkey server or Cluster at `url` (see the module doc).

    Args:
        url: the server's URL (redis://, rediss://, unix://), or several: the first that answers.
        crawl: the crawl's name, the prefix of its keys.
        cluster: "auto" (ask the server), True or False.
        groups: slot groups, a power of two fixed when the crawl is created.
        load: URLs per chunk.
        rules: the canonicalisation rules, fixed when the crawl is created.
        lru_size: fingerprints of URLs this handle has checked that it keeps to answer repeats locally (0: none).
        allow_unauthenticated: accept a remote server without a password.
        allow_plaintext: accept a password over plain redis:// to one.
        timeout: seconds to connect and to wait for a reply.
    """

    def __init__(self, url: URLs, *, crawl: str, cluster: ClusterMode = "auto", groups: int = DEFAULT_GROUPS,
                 load: int = DEFAULT_LOAD, rules: CanonicalRules = DEFAULT_RULES,
                 lru_size: int = DEFAULT_LRU_SIZE, allow_unauthenticated: bool = False,
                 allow_plaintext: bool = False, timeout: float = DEFAULT_TIMEOUT) -> None:
        self._client: Client | None = None
        url = first_reachable(url, allow_unauthenticated=allow_unauthenticated, allow_plaintext=allow_plaintext,
                              timeout=timeout)
        self._url = url
        self.url = redact(url) if isinstance(url, str) else "<not a URL>"
        self.keys = KeySpace(crawl=crawl, groups=groups)
        if type(load) is not int or not MIN_LOAD <= load <= MAX_LOAD:
            raise ConfigError(f"must be an integer from {MIN_LOAD} to {MAX_LOAD}, got {load!r}",
                              key="storage.redis.load")
        if type(lru_size) is not int or lru_size < 0:
            raise ConfigError(f"must be an integer >= 0, got {lru_size!r}", key="dedup.lru_size")
        self.load = load
        self._rules = rules
        self._lru = FingerprintLRU(lru_size)
        self._counts = dict.fromkeys(("checked", "new", "batch_repeats", "invalid", "calls", "round_trips"), 0)
        self._client = connect(url, cluster=cluster, allow_unauthenticated=allow_unauthenticated,
                               allow_plaintext=allow_plaintext, timeout=timeout)
        try:
            self.cluster = isinstance(self._client, RedisCluster)
            with redis_errors(url, "opening the crawl"):
                check_servers(self._client, url)
                self.allocator = "jemalloc" if uses_jemalloc(self._client) else "other"
                self._check_meta()  # first: an instance of another library version must not replace the crawl's
            load_library(self._client, url)
        except BaseException:
            self.close()
            raise

    def _check_meta(self) -> None:
        """Record the crawl's settings on first use; refuse settings that differ from the recorded ones. The
        library version is pinned too: instances of two versions would replace each other's library."""
        wanted = {"seen_layout": SEEN_LAYOUT, "library": LIBRARY_VERSION, "groups": str(self.keys.groups),
                  "canonical": self._rules.version_tag()}
        # the fingerprint seed: a secret drawn when the crawl is created (0, unseeded, for a crawl created
        # before seeds); set first, so an instance that finds the meta also finds its seed
        seed = "0" if self.client.exists(self.keys.meta_key) else str(secrets.randbits(63) + 1)
        self.seed = int(self.client.pipeline(transaction=False).hsetnx(self.keys.meta_key, "seed", seed)
                        .hget(self.keys.meta_key, "seed").execute()[1])
        pipe = self.client.pipeline(transaction=False)
        for field, value in wanted.items():
            pipe.hsetnx(self.keys.meta_key, field, value)
        pipe.hmget(self.keys.meta_key, list(wanted))
        stored = [v.decode() for v in pipe.execute()[-1]]
        differ = {f: (s, wanted[f]) for f, s in zip(wanted, stored) if s != wanted[f]}
        if differ:
            what = ", ".join(f"{f}={s} (asked: {w})" for f, (s, w) in differ.items())
            raise VersionMismatch(f"crawl {self.keys.crawl!r} on {self.url} was created with {what}: open it "
                                  "with the same settings, or use another crawl name")

    # -- the seen-test ------------------------------------------------------------------------

    def add(self, url: str) -> bool:
        """True if the URL is new (crawl it), False if seen before; InvalidURL if it cannot be canonicalised."""
        return self._check_add([canonicalize(url, rules=self._rules)])[0]

    def add_many(self, urls: Sequence[str], *, canonical: bool = False) -> SeenBatch:
        """Check-and-add a batch; an invalid URL is False and listed in `.invalid`. `canonical=True` skips
        canonicalisation for URLs that are canonical already (the crawl's workers canonicalise)."""
        if canonical:
            return SeenBatch(self._check_add(list(urls)), {})
        canon, invalid = canonicalize_batch(urls, self._rules)
        self._counts["invalid"] += len(invalid)
        if not invalid:
            return SeenBatch(self._check_add(canon), {})  # type: ignore[arg-type]
        flags = iter(self._check_add([c for c in canon if c is not None]))
        return SeenBatch([False if c is None else next(flags) for c in canon], invalid)

    def fingerprints(self, canonical_urls: list[str]) -> list[bytes]:
        """The URLs' fingerprints keyed by the crawl's seed: where one sits in the seen-set (its chunk) cannot be
        chosen by whoever writes the URLs."""
        return fingerprints(canonical_urls, self.seed)

    def _check_add(self, canonical_urls: list[str]) -> list[bool]:
        fps = self.fingerprints(canonical_urls)
        # A URL this handle has seen stays seen (the set only grows): the LRU answers it without a round trip.
        asked = [i for i, known in enumerate(self._lru.hits_of(fps)) if not known] if self._lru.size else None
        if asked is None:
            plans = plan_batch(self.keys, canonical_urls, fps)
        else:
            plans = plan_batch(self.keys, [canonical_urls[i] for i in asked], [fps[i] for i in asked])
        out = [False] * len(canonical_urls)
        new = 0
        for plan, answer in zip(plans, self._run(FUNCTION_SEEN_ADD, plans, self.load, self.allocator)):
            for i, flag in zip(plan.firsts, answer):
                if flag == 49:  # b"1"
                    out[i if asked is None else asked[i]] = True
                    new += 1
        self._lru.add_many(fps)
        c = self._counts
        c["checked"] += len(canonical_urls)
        c["new"] += new
        c["batch_repeats"] += (len(canonical_urls) if asked is None else len(asked)) - sum(len(p.firsts) for p in plans)
        return out

    def _run(self, function: str, plans: list[GroupBatch], *args: object) -> list[bytes]:
        """One FCALL per group (per MAX_CALL fingerprints), pipelined; each group's answer, joined."""
        calls = [(p.group, p.fingerprints[i:i + MAX_CALL]) for p in plans
                 for i in range(0, len(p.fingerprints), MAX_CALL)]
        if not calls:
            return []
        answers = self._pipeline(function, [(self.keys.seen_key(g), b"".join(fps)) for g, fps in calls], args)
        joined: dict[int, list[bytes]] = defaultdict(list)
        for (g, _), answer in zip(calls, answers):
            joined[g].append(answer)
        return [b"".join(joined[p.group]) for p in plans]

    def _pipeline(self, function: str, calls: list[tuple[str, bytes]], args: tuple[object, ...]) -> list[bytes]:
        """Run the FCALLs; a master that lost the library (a failover to a node that never had it, a new
        master, a FUNCTION FLUSH) gets it again and its calls are retried once."""
        todo = list(range(len(calls)))
        answers: list[bytes] = [b""] * len(calls)
        with redis_errors(self._url, "checking URLs"):
            for attempt in (1, 2):
                pipe = self.client.pipeline(transaction=False)
                for i in todo:
                    pipe.fcall(function, *fcall_keys(calls[i][0]), calls[i][1], *args)
                replies = pipe.execute(raise_on_error=False)
                self._counts["round_trips"] += 1
                self._counts["calls"] += len(todo)
                missing = []
                for i, reply in zip(todo, replies):
                    if isinstance(reply, redis.ResponseError) and "Function not found" in str(reply) and attempt == 1:
                        missing.append(i)
                    elif isinstance(reply, Exception):
                        raise reply
                    else:
                        answers[i] = reply
                if not missing:
                    break
                load_library(self.client, self._url)
                todo = missing
        return answers

    def __contains__(self, url: object) -> bool:
        if not isinstance(url, str):
            return False
        try:
            canon = canonicalize(url, rules=self._rules)
        except InvalidURL:
            return False
        fps = self.fingerprints([canon])
        if fps[0] in self._lru:
            return True
        return self._run(FUNCTION_SEEN_HAS, plan_batch(self.keys, [canon], fps))[0] == b"1"

    def __len__(self) -> int:
        """Distinct URLs recorded in the crawl, by every instance: the sum of the groups' counters."""
        with redis_errors(self._url, "counting URLs"):
            pipe = self.client.pipeline(transaction=False)
            for g in range(self.keys.groups):
                pipe.hget(self.keys.seen_key(g), "n")
            return sum(int(n) for n in pipe.execute() if n is not None)

    def stats(self, *, count: bool = True) -> dict[str, float | int | str | bool]:
        """This handle's counts (checked, new, batch_repeats, invalid, calls, round_trips, LRU hits) and the
        crawl's size (`urls`; left out with count=False: the caller counts, retrying)."""
        return {"backend": "redis", "server": self.url, "cluster": self.cluster, "crawl": self.keys.crawl,
                "groups": self.keys.groups, "load": self.load, **({"urls": len(self)} if count else {}),
                **self._counts, "lru_size": self._lru.size, "lru_hits": self._lru.hits,
                "lru_hit_rate": self._lru.hit_rate}

    # -- plumbing -----------------------------------------------------------------------------

    @property
    def client(self) -> Client:
        if self._client is None:
            raise StorageError(f"RedisSeen of {self.url} is closed")
        return self._client

    def close(self) -> None:
        """Close the connections; idempotent. The crawl's state stays on the server."""
        client, self._client = self._client, None
        if client is not None:
            client.close()

    def __enter__(self) -> "RedisSeen":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RedisSeen({self.url!r}, crawl={self.keys.crawl!r}, groups={self.keys.groups})"
