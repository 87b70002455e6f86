"""The crawl state in Redis or Valkey: one crawl shared by any number of frontier instances on any machines.

    state = RedisCrawlState("redis://127.0.0.1:6379/0", policy, crawl="mycrawl")   # a CrawlState

Everything about a host lives in its slot group (frontier.state.redis_keys), so each atomic step is one
FCALL of frontier's Functions library (frontier.state.redis_lua) on one hash slot: a commit runs one step
per group its links and acks touch (links first, then acks; with replicas, WAIT for one replica between
them, so a page is never acked before the links it produced are on a replica), a lease walks the groups
that have a ready host, `expire` the groups with an overdue lease. Politeness (a host's next allowed time,
in-flight count and delay), robots.txt texts, per-host budgets and the counters live server-side and hold
across instances; limits.max_pages is enforced by a crawl-wide budget counter (pages fetched or leased):
a lease reserves pages from it first and gives back what it did not use, a lease ending without a fetch
gives its page back. (An instance killed between a reservation and its give-back leaves those pages
reserved: max_pages is never exceeded, at worst a few pages short.)

Leases carry the instance's id: `abandon` ends this instance's only, any instance expires any overdue
lease (a dead instance's leases are taken over after lease_timeout), and `close` puts this instance's
leases back in place without counting an attempt (a stopped instance's fetches are lost, not failed).
Hosts and seeds held back as unreachable stay held while the crawl runs; an instance that opens a crawl
that is done (nothing leased, nothing leasable) starts a new run: they are tried again.

dedup.recrawl_after: a URL queued while it is set carries its fingerprint in its queue entry, so the step that
ends the entry for good (an ack, or an expiry that gives up) records the URL's done time in its group; a link
to a URL seen before looks it up, and a stale one is queued again and its done time deleted in the same step.

Revisits (StatePolicy.revisit): a fetched page's schedule (crawlstore.encode_revisit's bytes) and its due entry
live in its host's group, stored by its DONE ack's step; `lease` first has the groups with pages due queue them
(frontier_due, DUE_BATCH per group and call: only a URL that is done, so never twice) and then reads the leased
URLs' schedules (a schedule changes only with its URL's ack, so that is the one it was leased with). Due times are
on the server's clock; a schedule keeps the times of the instance that fetched the page.

Connection errors (a server restarting, a Cluster failing over, BUSY), and any other exception raised inside
redis-py's code (a bug of the client: redis_conn.raised_by_client), are retried with backoff for up to
`give_up_after` seconds, then raised as StorageError. Every step is safe to repeat: each call carries a
request id (this instance's id and its own counter), and a call sent again after its reply was lost gets the
first call's reply (kept server-side for lease_timeout) instead of a second effect. Lease keys are made of
request ids, so they are unique forever (a failover or an older RDB that rolls the server back cannot hand
another instance a key still out), and an ack ends only this instance's lease of the same kind.

Every time the state keeps (lease deadlines, expiry, politeness, backoff, pauses, robots.txt ages, done times)
is the server's. An instance sends its times on the server's clock as it estimates it: its own plus its offset
to the server's, measured at start (warned past SKEW_WARN, refused past lease_timeout / 4) and again every
SKEW_REFRESH seconds. Each Function reads TIME and keeps the caller's time only within SKEW_WARN of it (moved by
how far the caller's `now` is from its clock: tests inject times); farther off, as from an instance whose clock
jumped since it was measured or a call sent again after an outage, it runs at the server's time and moves the
times the acks carry by as much. So no instance's clock steals leases or breaks politeness. The crawl's epoch,
written to its meta, every group and the page budget when it is created, is checked by every call, `done` and
`next_ready_in`: a server restarted empty or flushed stops the crawl with a StorageError instead of a crawl
"done". The policy is pinned in the meta too: an instance with another one warns (one line naming the fields) and pins its own.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import redis
from redis.cluster import RedisCluster

from frontier.errors import ConfigError, StorageError
from frontier.state import redis_hosts
from frontier.state.base import (PARKED, RETIRED, Ack, Allows, Commit, Committed, Ended, Lease, LeaseBatch, Link,
                                 Outcome, RobotsAck, StatePolicy, StateStats)
from frontier.state.crawlstore import decode_revisit, encode_revisit
from frontier.state.redis_conn import (DEFAULT_TIMEOUT, URLs, ClusterMode, first_reachable, load_library, primaries,
                                      raised_by_client, redact, redis_errors, scrub)
from frontier.state.redis_keys import KeySpace, fcall_keys
from frontier.state.redis_lua import (FINGERPRINT_BYTES, FUNCTION_BUDGET, FUNCTION_COMMIT, FUNCTION_DUE, FUNCTION_END,
                                      FUNCTION_LEASE, FUNCTION_RANK, FUNCTION_REGROUP, FUNCTION_RERUN,
                                      FUNCTION_STORE_GROUPS)
from frontier.state.redis_seen import DEFAULT_GROUPS, DEFAULT_LOAD, RedisSeen
from frontier.url.canonical import DEFAULT_RULES, CanonicalRules, url_host
from frontier.url.groups import registered_domain

if TYPE_CHECKING:
    from frontier.config import CrawlConfig

DEFAULT_GIVE_UP_AFTER = 60.0  # seconds of a server unreachable before an instance gives up
EXPIRE_BATCH = 1000  # leases one expire step ends at most
UNREPLICATED = {  # a step that waits for a replica -> (what it waits for, what is held back meanwhile)
    "committing links": ("a commit's links", "its pages are not acked"),
    "acking": ("a commit's acks", "they do not count yet"),
    "leasing": ("new leases", "their pages are not fetched"),
}
WAIT_TIMEOUT_MS = 2000  # how long one WAIT waits for a replica to confirm a lease, a commit's links or its acks
LEASE_ROUNDS = 3
DUE_BATCH = 1024  # revisits one step queues per group at most (a lease queues the rest in later calls)
DUE_POLL = 1.0  # seconds between two looks for due revisits by `lease` at most (sooner when one is due sooner)
SKEW_WARN = 1.0  # seconds between this machine's clock and the server's that are reported (redis_lua: TRUST)
SKEW_REFRESH = 5.0  # seconds between two readings of the server's clock (to tell when to ask for work)
_TRANSIENT_REPLIES = ("READONLY", "LOADING", "CLUSTERDOWN", "MASTERDOWN", "TRYAGAIN", "MOVED", "ASK",
                      "Function not found", "NOREPLICAS", "BUSY", "non local key",
                      "UNBLOCKED")  # a WAIT on a master demoted to replica (a healed partition, a failover)
_OUTCOMES = {Outcome.DONE: "done", Outcome.RETRY: "retry", Outcome.HOLD: "hold", Outcome.DROP: "drop",
             Outcome.LOW: "low", Outcome.PARK: "park", Outcome.WAIT: "wait",
             Outcome.SHELVE: "shelve"}

_PARKED = PARKED.encode()
_HELD_FOR_THE_RUN = (_PARKED, RETIRED.encode())  # held entries that are not unreachable seeds

T = TypeVar("T")


def _first_of_each(links: Sequence[Link]) -> dict[str, Link]:
    """url -> link, in order, the first of links with the same URL."""
    out: dict[str, Link] = {}
    for link in links:
        out.setdefault(link.url, link)
    return out


LOW_SCORE = 2**49  # queue scores from here on are a host's low queue: 2^50 - priority (frontier.state.redis_lua: push)


def _num(x: float) -> str:
    return repr(float(x))


ENTRY_SEQ = 6  # bytes of a queue entry's sequence, then its flag byte (frontier.state.redis_lua: make_entry)
_FLAGS = 64  # the flag byte: _FLAGS + 1 (low) + 2 (fingerprint) + 4 (URL without http://host) or 8 (https://host)


def _entry_low(entry: bytes) -> bool:
    return (entry[ENTRY_SEQ] - _FLAGS) & 1 == 1


def _entry(entry: bytes, host: str) -> tuple[int, int, int, bytes | None, str]:
    """A queue entry's depth, attempt, redirects, payload and URL (layout: frontier.state.redis_lua)."""
    flags = entry[ENTRY_SEQ] - _FLAGS
    head = ENTRY_SEQ + 1 + (FINGERPRINT_BYTES if flags & 2 else 0)  # the URL's fingerprint (recrawl_after)
    depth, attempt, redirects, _, plen, tail = entry[head:].split(b"\0", 5)
    size = int(plen) if plen else 0
    prefix = "http://" + host if flags & 4 else "https://" + host if flags & 8 else ""
    return int(depth), int(attempt), int(redirects), tail[:size] if plen else None, prefix + tail[size:].decode()


def _record(position: int, host: str, link: Link, group: str) -> bytes:
    """A link as the commit step reads it; `group`: its host's queue group, stored when the step creates the host
    ("": none but the server's own, queue_by host or ip)."""
    payload = link.payload
    plen = b"" if payload is None else str(len(payload)).encode()
    return b"\0".join((str(position).encode(), host.encode(), str(link.depth).encode(), str(link.redirects).encode(),
                       b"1" if link.low else b"0", _num(link.priority).encode(), plen, group.encode(),
                       (payload or b"") + link.url.encode()))


def _no_group(host: str) -> str:
    return ""


def _group_of_key(key: bytes) -> int | None:
    head, sep, _ = key.partition(b":")
    return int(head) if sep and head.isdigit() else None


def _transient(e: BaseException) -> bool:
    """An error that retrying (after reading a Cluster's slot map again) may cure."""
    if raised_by_client(e):
        return True  # a bug of redis-py's (8.1, 8.2: an ASK to a master that owns no slot yet): as a fault
    if isinstance(e, (redis.ConnectionError, redis.TimeoutError, redis.exceptions.ClusterError,
                      redis.exceptions.ClusterDownError, redis.exceptions.TryAgainError,
                      redis.exceptions.MasterDownError, redis.exceptions.ReadOnlyError)):
        return True  # ReadOnlyError: redis-py strips READONLY from its text (a master demoted to replica)
    return isinstance(e, redis.ResponseError) and any(word in str(e) for word in _TRANSIENT_REPLIES)


class RedisCrawlState:
    """`CrawlState` of crawl `crawl` on the server or Cluster at `url` (see the module doc; frontier/state/base.py
    for the contract). `groups`, `load`, `canonical`: as RedisSeen's, fixed when the crawl is created."""

    def __init__(self, url: URLs, policy: StatePolicy, *, crawl: str, cluster: ClusterMode = "auto",
                 groups: int = DEFAULT_GROUPS, load: int = DEFAULT_LOAD, canonical: CanonicalRules = DEFAULT_RULES,
                 allow_unauthenticated: bool = False, allow_plaintext: bool = False, timeout: float = DEFAULT_TIMEOUT,
                 give_up_after: float = DEFAULT_GIVE_UP_AFTER, now: float | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.policy = policy
        self.give_up_after = give_up_after
        self.instance = uuid.uuid4().hex[:16]
        self._requests = itertools.count(1)  # with the instance's id: a request id, unique forever
        self._epoch = ""
        self._skew = 0.0  # the server's clock minus this machine's, measured at start and every SKEW_REFRESH
        self._skew_at = 0.0  # when it was measured last, on this machine's clock
        self._clock = clock
        url = first_reachable(url, allow_unauthenticated=allow_unauthenticated, allow_plaintext=allow_plaintext,
                              timeout=timeout)
        self._url = url
        self._seen: RedisSeen | None = RedisSeen(
            url, crawl=crawl, cluster=cluster, groups=groups, load=load, rules=canonical, lru_size=0,
            allow_unauthenticated=allow_unauthenticated, allow_plaintext=allow_plaintext, timeout=timeout)
        self.keys: KeySpace = self._seen.keys
        self._groups = range(self.keys.groups)
        self._gkeys = [self.keys.group_key(g) for g in self._groups]
        self._policy = "\0".join([str(policy.max_per_host), _num(policy.delay), "1" if policy.obey_robots else "0",
                                  _num(policy.robots_ttl), str(-1 if policy.max_pages_per_host is None
                                                               else policy.max_pages_per_host),
                                  str(policy.max_retries), _num(policy.lease_timeout), self.instance,
                                  "" if policy.recrawl_after is None else _num(policy.recrawl_after),
                                  str(-1 if policy.max_suspect_pages is None else policy.max_suspect_pages),
                                  str(-1 if policy.host_turn is None else policy.host_turn),
                                  _num(policy.backoff_max), policy.queue_by, self.keys.queue_group_prefix])
        # a host's queue group as the commit that creates it stores it: the Public Suffix List is Python's, not Lua's
        self._group_of_host: Callable[[str], str] = registered_domain if policy.queue_by == "domain" else _no_group
        self._mine: dict[bytes, float] = {}  # this instance's leases -> deadline
        self._due_look = float("-inf")  # revisits: `lease` looks for due URLs from this time (its `now`) on
        self._outage: float | None = None
        self._gave_up = False  # the server stayed unreachable for give_up_after: later calls fail at once
        self._last: dict[str, Any] = {}  # the last stats read, what a run that gave up reports
        try:
            if policy.queue_by != "host" and isinstance(self.client, RedisCluster):
                raise ConfigError(f"{policy.queue_by} groups on Redis need a single node (a group's hosts lie in "
                                  "many hash slots); on a Cluster use host", key="politeness.queue_by")
            self._replicas = self._retrying("opening the crawl", self._has_replicas)
            self._skew = self._retrying("reading the server's clock", lambda: self._check_clock(clock))
            self._regroup = False
            self._epoch = self._retrying("opening the crawl", self._open_epoch)
            now = clock() if now is None else now
            if self._regroup:
                self._run([self._fcall(FUNCTION_REGROUP, g, now=now) for g in self._groups], "regrouping the hosts")
                if policy.queue_by == "domain":
                    self._store_domains(now)
            if self.done(now):  # a new run of a finished crawl: what was held back as unreachable is tried again
                self._run([self._fcall(FUNCTION_RERUN, g, now=now) for g in self._groups])
        except BaseException:
            self.close()
            raise

    @classmethod
    def from_config(cls, cfg: CrawlConfig, policy: StatePolicy) -> RedisCrawlState:
        """The crawl a config's storage.redis names (its server, crawl name, security options) under `policy`
        (the crawl's: frontier.crawl.scheduler.crawl_policy), with its canonical rules."""
        r = cfg.storage.redis
        cluster: ClusterMode = "auto" if r.cluster == "auto" else bool(r.cluster)
        return cls(r.url, policy, crawl=r.crawl, cluster=cluster, canonical=cfg.canonical,
                   allow_unauthenticated=r.allow_unauthenticated, allow_plaintext=r.allow_plaintext,
                   give_up_after=r.give_up_after)

    # -- plumbing -----------------------------------------------------------------------------

    @property
    def client(self) -> redis.Redis | RedisCluster:
        if self._seen is None:
            raise StorageError("the crawl state is closed")
        return self._seen.client

    def _check_clock(self, clock: Callable[[], float]) -> float:
        """The server's clock minus `clock` (every time the state keeps is the server's; this machine's is used
        only to tell when to ask). Warned past SKEW_WARN; refused past lease_timeout / 4 (results would come
        back after their leases ended)."""
        skew = self._measure_skew(clock)
        if abs(skew) > self.policy.lease_timeout / 4:
            raise StorageError(f"{redact(self._url)}: this machine's clock is {skew:+.1f}s off the server's, more "
                               f"than lease_timeout / 4 ({self.policy.lease_timeout / 4:g}s): sync the clocks (NTP)")
        if abs(skew) > SKEW_WARN:
            print(f"frontier: {redact(self._url)}: this machine's clock is {skew:+.1f}s off the server's; "
                  "the crawl keeps the server's time", file=sys.stderr, flush=True)
        return skew

    def _measure_skew(self, clock: Callable[[], float]) -> float:
        """The server's clock minus `clock`, read now."""
        before = clock()
        seconds, micros = self.client.time()
        self._skew_at = after = clock()
        return seconds + micros / 1e6 - (before + after) / 2

    def _open_epoch(self) -> str:
        """The crawl's epoch: recorded in its meta when it is created and in every group, so each call can tell
        the crawl from an empty server (restarted without persistence, flushed, or evicting keys). The policy
        is pinned beside it: an instance with another one (e.g. max_pages raised for a rerun) warns with one
        line naming the differing fields and pins its own. The groups get the epoch only while the meta does not
        say they all have it (`groups_epoch`): an instance opening a crawl with a group emptied since (a master
        restarted empty) stops instead of giving the empty group the epoch again and crawling on without it."""
        meta = self.keys.meta_key
        policy = " ".join(f"{k}={v}" for k, v in dataclasses.asdict(self.policy).items())
        epoch, pinned, stamped = self._pipeline([("hsetnx", (meta, "epoch", uuid.uuid4().hex)),
                                                 ("hsetnx", (meta, "policy", policy)),
                                                 ("hmget", (meta, ["epoch", "policy", "groups_epoch"]))])[2]
        if pinned.decode() != policy:  # e.g. max_pages raised for a rerun: the new policy is the crawl's now
            mine = dict(item.split("=", 1) for item in policy.split())
            theirs = dict(item.split("=", 1) for item in pinned.decode().split())
            differ = [f"{k}={theirs.get(k)} -> {mine.get(k)}" for k in sorted(mine.keys() | theirs.keys())
                      if mine.get(k) != theirs.get(k)]
            print(f"frontier: crawl {self.keys.crawl!r} on {redact(self._url)}: policy changed: "
                  f"{', '.join(differ)}; the crawl's policy is updated (every instance should use the same)",
                  file=sys.stderr, flush=True)
            self._pipeline([("hset", (meta, "policy", policy))])
            # queue groups derive from host names and addresses: the hosts waiting for one are let go
            self._regroup = theirs.get("queue_by") not in (None, mine["queue_by"])
        if stamped is None:  # the crawl is being created (or was, before groups_epoch)
            self._run([("hsetnx", (f"{k}:c", "epoch", epoch)) for k in self._gkeys], "opening the crawl")
            self._pipeline([("hset", (meta, "groups_epoch", "1"))])
        self._epoch = epoch.decode()
        self._stamp_budget(meta, epoch)
        self._check_epoch(self._run([("hget", (f"{k}:c", "epoch")) for k in self._gkeys]
                                    + [("hget", (self.keys.budget_key, "epoch"))], "opening the crawl"))
        return self._epoch

    def _stamp_budget(self, meta: str, epoch: bytes) -> None:
        """Give the page budget (limits.max_pages) the epoch, while the meta does not say it has it
        (`budget_epoch`: a crawl being created, or created before the budget carried it, whose budget was a plain
        counter: its count is kept). Later a budget without the epoch is a budget lost: the crawl stops."""
        if self._pipeline([("hget", (meta, "budget_epoch"))])[0] is not None:
            return
        budget = self.keys.budget_key
        if self._pipeline([("type", (budget,))])[0] in (b"string", "string"):
            used = self._pipeline([("get", (budget,))])[0]
            self._pipeline([("delete", (budget,)), ("hsetnx", (budget, "used", used))])
        self._pipeline([("hsetnx", (budget, "epoch", epoch)), ("hset", (meta, "budget_epoch", "1"))])

    def _check_epoch(self, epochs: Sequence[bytes | None]) -> None:
        """Raise if a group's epoch (as read) is not the crawl's: its state is gone."""
        if any(e is None or e.decode() != self._epoch for e in epochs):
            raise StorageError(f"{redact(self._url)}: the state of crawl {self.keys.crawl!r} is gone from the "
                               "server (restarted empty, flushed, or evicting keys): stopping")

    def _server(self, t: float) -> float:
        """A time of this machine's clock on the server's, as last measured (0, no time, stays 0)."""
        return t + self._skew if t else t

    def _server_now(self, now: float) -> float:
        """`now` on the server's clock, to tell which groups to ask. The offset is measured again every
        SKEW_REFRESH seconds and taken when it moved by more than SKEW_WARN (a clock that jumped: a VM resumed, a
        step of NTP; said on stderr), kept otherwise (one offset, so the times of the steps stay one clock); the
        Functions correct a call sent before that themselves."""
        if abs(self._clock() - self._skew_at) > SKEW_REFRESH:
            skew = self._retrying("reading the server's clock", lambda: self._measure_skew(self._clock))
            if abs(skew - self._skew) > SKEW_WARN:
                print(f"frontier: {redact(self._url)}: this machine's clock moved {self._skew - skew:+.1f}s against "
                      "the server's; the crawl keeps the server's time", file=sys.stderr, flush=True)
                self._skew = skew
        return self._server(now)

    def _has_replicas(self) -> bool:
        """True if a master has a replica, as the masters say (INFO replication): redis-py's RedisCluster lists
        replicas (get_replicas) only when it reads from them, so its node table has none here."""
        return any(int(node.info("replication").get("connected_slaves", 0)) > 0 for node in primaries(self.client))

    def _retrying(self, doing: str, step: Callable[[], T]) -> T:
        """Run `step`, retrying transient errors with backoff for up to give_up_after seconds (said once on
        stderr); a missing Functions library is loaded again. Other errors are a StorageError at once."""
        pause, reloaded = 0.05, False
        while True:
            try:
                with redis_errors(self._url, doing):
                    try:
                        result = step()
                    except Exception as e:
                        if not _transient(e):
                            raise
                        if "Function not found" in str(e) and not reloaded:
                            load_library(self.client, self._url)  # a new master, or a FUNCTION FLUSH
                            reloaded = True
                            continue
                        if self._outage is None:
                            self._outage = time.monotonic()
                            print(f"frontier: {redact(self._url)}: {doing}: {type(e).__name__}: "
                                  f"{scrub(str(e), self._url)}; retrying for up to {self.give_up_after:g}s",
                                  file=sys.stderr, flush=True)
                        if self._gave_up or time.monotonic() - self._outage >= self.give_up_after:
                            self._gave_up = True
                            raise
                        time.sleep(pause)
                        self._refresh_slots()
                        pause = min(2.0, pause * 2)
                        continue
                if self._outage is not None:
                    print(f"frontier: {redact(self._url)}: reachable again after "
                          f"{time.monotonic() - self._outage:.1f}s", file=sys.stderr, flush=True)
                    self._outage = None
                return result
            except StorageError:
                if not self._gave_up:
                    self._outage = None
                raise

    def _refresh_slots(self) -> None:
        """A Cluster's slot map read again (a failover or resharding moved slots); in vain while it is down."""
        client = self.client
        if isinstance(client, RedisCluster):
            try:
                client.nodes_manager.initialize()
            except (redis.RedisError, redis.exceptions.RedisClusterException):
                pass

    def _pipeline(self, commands: Sequence[tuple[Any, ...]], pipe: Any = None) -> list[Any]:
        pipe = self.client.pipeline(transaction=False) if pipe is None else pipe
        for name, args, *options in commands:
            getattr(pipe, name)(*args, **(options[0] if options else {}))
        replies = pipe.execute(raise_on_error=False)
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        return replies

    def _run(self, commands: Sequence[tuple[Any, ...]], doing: str = "updating the crawl") -> list[Any]:
        """Run independent commands in one pipeline (one round trip per master); the replies, in order. After a
        transient error only the commands that failed run again (a lease step that succeeded is not repeated,
        which would leave its leases to expire)."""
        replies: dict[int, Any] = {}

        def step() -> list[Any]:
            todo = [i for i in range(len(commands)) if i not in replies]
            pipe = self.client.pipeline(transaction=False)
            for i in todo:
                name, args, *options = commands[i]
                getattr(pipe, name)(*args, **(options[0] if options else {}))
            failed = None
            for i, reply in zip(todo, pipe.execute(raise_on_error=False)):
                if not isinstance(reply, Exception):
                    replies[i] = reply
                elif failed is None or not _transient(reply):
                    failed = reply
            if failed is not None:
                raise failed
            return [replies[i] for i in range(len(commands))]

        return self._retrying(doing, step) if commands else []

    def _run_then_wait(self, commands: list[tuple[str, tuple[Any, ...]]], doing: str) -> list[Any]:
        """Run FCALLs (keys of one group each), then WAIT until one replica of each master concerned has them.
        A write of the group's `:w` key goes just before each WAIT, so the WAIT covers the calls whatever
        connection ran them (a call sent again after a lost reply is answered without a write). A master whose
        replica does not confirm is asked again, up to give_up_after seconds; then a StorageError: the pages
        are not acked (their leases expire and they are fetched again) rather than acked unreplicated. A master
        cut off from its replicas never confirms: once the Cluster fails it over it is demoted (the WAIT is
        UNBLOCKED, or the call refused), and the whole step runs again on the new master, which never saw it."""

        def on(pipe: Any, commands: list[tuple[str, tuple[Any, ...]]], name: str) -> list[Any]:
            probe = ("set", (commands[0][1][2][:-len(":c")] + ":w", self.instance))
            replies = self._pipeline([*commands, probe, ("wait", (1, WAIT_TIMEOUT_MS))], pipe)
            if not replies[-1]:
                self._await_replica(lambda: self._pipeline([probe, ("wait", (1, WAIT_TIMEOUT_MS))], pipe)[-1], name,
                                    doing)
            return replies[:-2]

        client = self.client
        if not isinstance(client, RedisCluster):
            return self._retrying(doing, lambda: on(client.pipeline(transaction=False), commands, ""))

        def step() -> list[Any]:
            by_node: defaultdict[str, list[int]] = defaultdict(list)
            nodes = {}
            for i, (_, args) in enumerate(commands):
                node = client.get_node_from_key(args[2])
                by_node[node.name].append(i)
                nodes[node.name] = node
            replies: list[Any] = [None] * len(commands)
            for name, indexes in by_node.items():
                got = on(nodes[name].redis_connection.pipeline(transaction=False), [commands[i] for i in indexes], name)
                for i, reply in zip(indexes, got):
                    replies[i] = reply
            return replies

        return self._retrying(doing, step)

    def _replicated(self, commands: list[tuple[str, tuple[Any, ...]]], doing: str) -> list[Any]:
        """Leases and acks: with replicas, used only once a replica holds them (_run_then_wait). A master cut off
        from its replicas takes writes until the Cluster declares it failed (cluster-node-timeout); a lease or an
        ack it took that no replica holds is gone when it is demoted: the page would be leased again, or its
        lease expire, and be fetched twice. Waiting makes the instance use only what survives a failover, so a
        partition refetches at most the pages in flight, not what the cut master took meanwhile."""
        if not commands:
            return []
        return self._run_then_wait(commands, doing) if self._replicas else self._run(commands, doing)

    def _await_replica(self, wait: Callable[[], int], name: str, doing: str) -> None:
        """Repeat `wait` (a write, then WAIT: the replicas that confirmed it) until one replica confirms, for up
        to give_up_after seconds (said once on stderr); then a StorageError naming the master."""
        where = f"the master {name}" if name else "the server"
        what, unused = UNREPLICATED[doing]
        print(f"frontier: {redact(self._url)}: no replica of {where} confirmed {what} within "
              f"{WAIT_TIMEOUT_MS / 1000:g}s (WAIT returned 0): {unused}; asking again for up to "
              f"{self.give_up_after:g}s", file=sys.stderr, flush=True)
        started = time.monotonic()
        while time.monotonic() - started < self.give_up_after:
            if wait():
                print(f"frontier: {redact(self._url)}: a replica of {where} confirmed after "
                      f"{time.monotonic() - started:.1f}s", file=sys.stderr, flush=True)
                return
        raise StorageError(f"{redact(self._url)}: no replica of {where} confirmed {what} for "
                           f"{self.give_up_after:g}s (WAIT returned 0): stopping without {doing}; restore a "
                           "replica (a restarted node rejoins as one) or run without replicas")

    def _fcall(self, function: str, group: int, *args: Any, now: float,
               first: tuple[Any, ...] = ()) -> tuple[str, tuple[Any, ...]]:
        """An FCALL of a crawl function on the group: args `first`, the call's context (the policy; a request id
        of its own: a call sent again after a lost reply is answered, not run twice; the epoch; `now` and this
        machine's clock, on the server's clock as last measured: redis_lua checks them against TIME), then
        `args`."""
        context = (f"{self._policy}\0{self.instance}.{next(self._requests)}\0{self._epoch}"
                   f"\0{_num(self._server(now))}\0{_num(self._server(self._clock()))}")
        return "fcall", (function, *fcall_keys(f"{self._gkeys[group]}:c"), *first, context, *args)

    def _budget(self, delta: int) -> int:
        """Reserve up to delta pages of max_pages (delta > 0; returns how many) or give back -delta."""
        if self.policy.max_pages is None or delta == 0:
            return delta
        return int(self._run([("fcall", (FUNCTION_BUDGET, 1, self.keys.budget_key, delta, self.policy.max_pages,
                                          self._epoch))])[0])

    def _budget_spent(self) -> bool:
        if self.policy.max_pages is None:
            return False
        epoch, used = self._run([("hmget", (self.keys.budget_key, ["epoch", "used"]))], "reading the page budget")[0]
        self._check_epoch([epoch])
        return int(used or 0) >= self.policy.max_pages

    def _lease_of(self, key: bytes, data: bytes) -> Lease:
        _, host, kind, priority, entry = data.split(b"\0", 4)
        depth, attempt, redirects, payload, url = _entry(entry, host.decode())
        return Lease(key, host.decode(), url, depth, attempt, redirects, robots=kind == b"r", payload=payload,
                     low=_entry_low(entry), priority=float(priority))

    def _groups_with(self, zset: str, now: float) -> list[int]:
        """The groups whose zset `zset` (ready or leases) has a member scored <= now."""
        at = _num(self._server_now(now))
        replies = self._run([("zrangebyscore", (f"{k}:{zset}", "-inf", at, 0, 1)) for k in self._gkeys],
                            "looking for work")
        return [g for g, reply in zip(self._groups, replies) if reply]

    # -- leasing ------------------------------------------------------------------------------

    def lease(self, max_jobs: int, now: float, allows: Allows) -> LeaseBatch:
        if self.policy.revisit and max_jobs > 0:
            self.queue_due(now)
        groups = self._groups_with("ready", now) if max_jobs > 0 else []
        if not groups:
            return LeaseBatch([])
        if len(groups) > max_jobs:  # not every group is asked: the best ranked ones (Mercator across groups)
            groups = self._ranked(groups, now)
        else:
            start = random.randrange(len(groups))
            groups = groups[start:] + groups[:start]
        granted = self._budget(max_jobs) if self.policy.max_pages is not None else -1
        pages_left, remaining = granted, max_jobs
        got: list[Lease] = []
        for _ in range(LEASE_ROUNDS):
            if remaining <= 0 or not groups:
                break
            asked = groups[:remaining]
            quotas = [remaining // len(asked) + (i < remaining % len(asked)) for i in range(len(asked))]
            budgets = [-1] * len(asked) if granted < 0 else \
                [min(quota, pages_left // len(asked) + (i < pages_left % len(asked))) for i, quota in enumerate(quotas)]
            pages_left -= sum(max(budget, 0) for budget in budgets)
            replies = self._replicated([self._fcall(FUNCTION_LEASE, g, quota, budget, now=now, first=(str(g),))
                                        for g, quota, budget in zip(asked, quotas, budgets)], "leasing")
            groups = []
            for g, quota, budget, reply in zip(asked, quotas, budgets, replies):
                pages, items = int(reply[0]), reply[1:]
                if budget >= 0:
                    pages_left += budget - pages
                leases = [self._lease_of(items[i], items[i + 1]) for i in range(0, len(items), 2)]
                got.extend(leases)
                remaining -= len(leases)
                if len(leases) == quota or 0 <= budget == pages < quota:  # it may have more
                    groups.append(g)
        if granted > 0 and pages_left > 0:
            self._budget(-pages_left)
        deadline = now + self.policy.lease_timeout
        jobs, disallowed = [], []
        for lease in self._with_revisits(got):
            self._mine[lease.key] = deadline
            if self.policy.obey_robots and not lease.robots and not allows(lease.host, lease.url):
                disallowed.append(lease)
            else:
                jobs.append(lease)
        return LeaseBatch(jobs, disallowed)

    def _ranked(self, groups: list[int], now: float) -> list[int]:
        """The groups, the one whose best ready host ranks highest first (redis_lua: ranked_hosts)."""
        replies = self._run([self._fcall(FUNCTION_RANK, g, now=now) for g in groups], "ranking hosts")
        ranks = {g: (int(r[0]), int(r[1]), -float(r[2])) if r else (2, 0, 0.0) for g, r in zip(groups, replies)}
        return sorted(groups, key=ranks.__getitem__)

    def leased(self, keys: Sequence[bytes]) -> list[Lease | None]:
        by_group: defaultdict[int, list[int]] = defaultdict(list)
        for i, key in enumerate(keys):
            g = _group_of_key(key)
            if g is not None and g < self.keys.groups:
                by_group[g].append(i)
        out: list[Lease | None] = [None] * len(keys)
        groups = list(by_group)
        replies = self._run([("hmget", (f"{self._gkeys[g]}:L", [keys[i] for i in by_group[g]])) for g in groups],
                            "reading leases")
        for g, reply in zip(groups, replies):
            for i, data in zip(by_group[g], reply):
                if data is not None:
                    out[i] = self._lease_of(keys[i], data)
        if self.policy.revisit:
            found = [lease for lease in out if lease is not None]
            carried = iter(self._with_revisits(found))
            out = [None if lease is None else next(carried) for lease in out]
        return out

    def renew(self, keys: Sequence[bytes], now: float) -> list[bool]:
        """ZADD XX: a lease that ended (its key gone from the group's lease set) is not brought back; a key is
        unique forever, so no other lease can be moved. The deadline is on the server's clock, as lease's."""
        mine = [key for key in keys if key in self._mine]
        if not mine:
            return [False] * len(keys)
        deadline = self._server_now(now) + self.policy.lease_timeout
        replies = self._run([("zadd", (f"{self._gkeys[_group_of_key(key)]}:leases", {key: _num(deadline)}),
                              {"xx": True, "ch": True}) for key in mine], "renewing leases")
        renewed = {key for key, changed in zip(mine, replies) if changed}
        local = now + self.policy.lease_timeout
        for key in renewed:
            self._mine[key] = local
        return [key in renewed for key in keys]

    def _end(self, mode: str, groups: Sequence[int], now: float) -> list[Ended]:
        replies = self._run([self._fcall(FUNCTION_END, g, EXPIRE_BATCH, now=now, first=(mode,))
                             for g in groups], "ending leases")
        ended = []
        for reply in replies:
            for i in range(0, len(reply), 3):
                ended.append(Ended(self._lease_of(reply[i], reply[i + 1]), reply[i + 2] == b"1"))
                self._mine.pop(reply[i], None)
        self._budget(-sum(not e.lease.robots for e in ended))
        return ended

    def expire(self, now: float) -> list[Ended]:
        self._mine = {key: deadline for key, deadline in self._mine.items() if deadline > now}
        groups = self._groups_with("leases", now)
        return self._end("expire", groups, now) if groups else []

    def abandon(self, now: float) -> list[Ended]:
        return self._end("abandon", self._groups, now)

    # -- the commit ---------------------------------------------------------------------------

    def commit(self, batch: Commit, now: float) -> Committed:
        """One step per group: its links (seen-test, enqueue) and host states, then its acks."""
        forced = [(len(batch.links) + i, link) for i, link in enumerate(batch.links) if link.force]
        links = _first_of_each([link for link in batch.links if not link.force] if forced else batch.links)
        urls = list(links)
        fps = [fp[:FINGERPRINT_BYTES] for fp in self._seen.fingerprints(urls)]  # type: ignore[union-attr]
        group_of = self.keys.group_of
        link_groups: defaultdict[int, list[int]] = defaultdict(list)
        hosts = [url_host(url) for url in urls]
        for i, host in enumerate(hosts):
            link_groups[group_of(host)].append(i)
        forced_groups: defaultdict[int, list[bytes]] = defaultdict(list)
        forced_fps: defaultdict[int, list[bytes]] = defaultdict(list)
        forced_fp = self._seen.fingerprints([link.url for _, link in forced])  # type: ignore[union-attr]
        for (position, link), fp in zip(forced, forced_fp):
            host = url_host(link.url)  # queued after the others, as LMDB does
            forced_groups[group_of(host)].append(_record(position, host, link, self._group_of_host(host)))
            forced_fps[group_of(host)].append(fp[:FINGERPRINT_BYTES])
        states: defaultdict[int, list[Any]] = defaultdict(list)
        for host, data in batch.host_state.items():
            states[group_of(host)].extend((host, data))
        rescores: defaultdict[int, list[bytes]] = defaultdict(list)
        for rescore in batch.rescore:
            host = url_host(rescore.url)
            rescores[group_of(host)].append(b"\0".join((host.encode(), b"1" if rescore.add else b"0",
                                                         _num(rescore.priority).encode(), rescore.url.encode())))
        ack_groups: defaultdict[int, list[Ack | RobotsAck]] = defaultdict(list)
        stale: list[bytes] = []
        for ack in batch.acks:
            g = _group_of_key(ack.key)
            if g is None or g >= self.keys.groups:
                stale.append(ack.key)
            else:
                ack_groups[g].append(ack)
        order = {g: sorted(members, key=fps.__getitem__) for g, members in link_groups.items()}
        recrawl = {g: [n for n, i in enumerate(members, 1) if links[urls[i]].recrawl] for g, members in order.items()}
        first = [(g, [*self._links_args(order.get(g, []), urls, fps, hosts, links, self._group_of_host),
                      len(forced_groups[g]),
                      b"".join(forced_fps[g]), *forced_groups[g], 0, *self._states_args(states[g]),
                      len(recrawl.get(g, ())), *recrawl.get(g, ()), len(rescores[g]), *rescores[g]])
                 for g in sorted(set(order) | set(forced_groups) | set(states) | set(rescores))]
        second = [(g, self._ack_args(ack_groups[g])) for g in sorted(ack_groups)]
        calls = [self._fcall(FUNCTION_COMMIT, g, self._seen.load, self._seen.allocator,  # type: ignore[union-attr]
                             *args, now=now) for g, args in first + second]
        links_step = self._replicated if first and second else self._run
        replies = links_step(calls[:len(first)], "committing links") + self._replicated(calls[len(first):], "acking")
        new_urls: set[str] = set()
        released = moved = 0
        for (g, _), reply in zip(first + second, replies):
            flags, moved_here, released_here, stale_here = reply[0], int(reply[1]), int(reply[2]), reply[3:]
            released += released_here
            moved += moved_here
            stale.extend(stale_here)
            for i, flag in zip(order.get(g, ()), flags):
                if flag == 49:  # b"1"
                    new_urls.add(urls[i])
        for ack in batch.acks:
            self._mine.pop(ack.key, None)
            if isinstance(ack, Ack) and ack.revisit is not None:
                self._due_look = min(self._due_look, ack.revisit.due)
        self._budget(-released)
        flags_out = []
        for link in batch.links:  # a repeated link is new at most once; a forced one always
            flags_out.append(link.force or link.url in new_urls)
            if not link.force:
                new_urls.discard(link.url)
        return Committed(flags_out, stale, moved)

    @staticmethod
    def _links_args(members: list[int], urls: list[str], fps: list[bytes], hosts: list[str],
                    links: dict[str, Link], group_of_host: Callable[[str], str]) -> list[Any]:
        records = [_record(i, hosts[i], links[urls[i]], group_of_host(hosts[i])) for i in members]
        return [b"".join(fps[i] for i in members), len(records), *records]

    @staticmethod
    def _states_args(states: list[Any]) -> list[Any]:
        return [len(states) // 2, *states]

    def _ack_args(self, acks: list[Ack | RobotsAck]) -> list[Any]:
        """The acks as the commit step reads them, their times on the server's clock as last measured (the step
        moves them with the call's time when that is off)."""
        at = self._server
        args: list[Any] = [b"", 0, 0, b"", len(acks)]
        for ack in acks:
            if isinstance(ack, Ack):
                head = ["p", ack.key, _OUTCOMES[ack.outcome], "1" if ack.fetched else "0", _num(at(ack.not_before)),
                        _num(at(ack.pause_until)), ack.reason, "0", "0",
                        _num(0.5 + random.random() / 2) if ack.overload else "0", ack.address]
                text = self._revisit_arg(ack)
            else:
                head = ["r", ack.key, ack.outcome.value, "0", _num(at(ack.not_before)), _num(at(ack.pause_until)),
                        ack.reason, _num(ack.delay), _num(at(ack.fetched_at)), "0", ack.address]
                text = ack.text
            args.append(b"\0".join(x if isinstance(x, bytes) else x.encode() for x in head))
            args.append(text)
        return [*args, 0]

    # -- revisits (StatePolicy.revisit; redis_lua: store_revisit, queue_due) --------------------

    def queue_due(self, now: float) -> int:
        """Queue the done URLs whose revisit is due by `now` (at most DUE_BATCH per group and call, each in the step
        that takes its due entry: none lost, none queued twice, whichever instances ask); returns how many. Between
        two calls that queue nothing it waits for the earliest due time it saw (and this instance's acks), at most
        DUE_POLL seconds (another instance's acks)."""
        if now < self._due_look:
            return 0
        at = self._server_now(now)
        heads = self._due_heads()
        groups = [g for g, due in heads if due <= at]
        later = [due for _, due in heads if due > at]
        replies = self._run([self._fcall(FUNCTION_DUE, g, DUE_BATCH, now=now) for g in groups], "queueing revisits")
        more = any(int(taken) >= DUE_BATCH for _, taken in replies)
        self._due_look = float("-inf") if more else min([now + DUE_POLL] + [now + due - at for due in later])
        return sum(int(queued) for queued, _ in replies)

    def next_due(self) -> float | None:
        """The earliest revisit due time stored (this machine's clock; None: none)."""
        due = self._first_due()
        return None if due is None else due - self._skew

    def _due_heads(self) -> list[tuple[int, float]]:
        """(group, its earliest due time on the server's clock) of every group with a revisit scheduled."""
        replies = self._run([("zrange", (f"{k}:due", 0, 0), {"withscores": True}) for k in self._gkeys],
                            "reading revisits")
        return [(g, reply[0][1]) for g, reply in zip(self._groups, replies) if reply]

    def _first_due(self) -> float | None:
        """The earliest due time of every group's due set, on the server's clock; None if none."""
        return min((due for _, due in self._due_heads()), default=None)

    def _with_due(self, ready: float | None, now: float) -> float | None:
        """`next_ready_in` with revisits: 0 when a page is due now (the next lease queues it), else with
        revisit_continuous the wait for the next due page if that comes first."""
        if ready == 0:
            return ready
        due = self._first_due()
        if due is None:
            return ready
        wait = due - self._server(now)
        if wait <= 0:
            self._due_look = float("-inf")
            return 0.0
        if not self.policy.revisit_continuous:
            return ready
        return wait if ready is None else min(ready, wait)

    def _revisit_arg(self, ack: Ack) -> bytes:
        """A page ack's text as the commit step reads it: a DONE ack's schedule (its due time on the server's clock
        NUL the URL's fingerprint, then crawlstore.encode_revisit's bytes), b"" for none."""
        revisit = ack.revisit
        if revisit is None or not self.policy.revisit or ack.outcome is not Outcome.DONE:
            return b""
        fp = self._seen.fingerprints([revisit.url])[0][:FINGERPRINT_BYTES]  # type: ignore[union-attr]
        return _num(self._server(revisit.due)).encode() + b"\0" + fp + encode_revisit(revisit)

    def _with_revisits(self, leases: list[Lease]) -> list[Lease]:
        """The leases with their URLs' stored schedules (StatePolicy.revisit), read in one round trip: a schedule
        changes only with its URL's DONE ack, so what is read while the URL is leased is what it was leased with."""
        pages = [i for i, lease in enumerate(leases) if not lease.robots]
        if not self.policy.revisit or not pages:
            return leases
        fps = self._seen.fingerprints([leases[i].url for i in pages])  # type: ignore[union-attr]
        group_of = self.keys.group_of
        records = self._run([("hget", (f"{self._gkeys[group_of(leases[i].host)]}:rv", fp[:FINGERPRINT_BYTES]))
                             for i, fp in zip(pages, fps)], "reading revisits")
        out = list(leases)
        for i, record in zip(pages, records):
            if record is not None:
                out[i] = dataclasses.replace(out[i], revisit=decode_revisit(record))
        return out

    # -- reads --------------------------------------------------------------------------------

    def next_ready_in(self, now: float) -> float | None:
        replies = self._run([c for k in self._gkeys for c in (("zrange", (f"{k}:ready", 0, 0), {"withscores": True}),
                                                               ("hget", (f"{k}:c", "epoch")))], "looking for work")
        self._check_epoch(replies[1::2])
        times = [reply[0][1] for reply in replies[0::2] if reply]
        if self.policy.revisit and not self._budget_spent():
            return self._with_due(max(0.0, min(times) - self._server_now(now)) if times else None, now)
        if not times or self._budget_spent():
            return None
        return max(0.0, min(times) - self._server_now(now))

    def done(self, now: float) -> bool:
        """Also checks the crawl's epoch: an emptied server is an error, never a crawl that is done."""
        replies = self._run([c for k in self._gkeys for c in (("zcard", (f"{k}:leases",)), ("zcard", (f"{k}:ready",)),
                                                               ("hget", (f"{k}:c", "epoch")))], "looking for work")
        self._check_epoch(replies[2::3])
        if any(replies[0::3]):
            return False
        if self.policy.revisit and not any(replies[1::3]) and self._with_due(None, now) is not None:
            return self._budget_spent()  # a page due now (or, continuous, later) is work
        return not any(replies[1::3]) or self._budget_spent()

    def robots_text(self, host: str) -> str | None:
        text = self._run([("get", (f"{self._gkeys[self.keys.group_of(host)]}:r:{host}",))], "reading robots.txt")[0]
        return None if text is None else text.decode("utf-8", "replace")

    def _store_domains(self, now: float) -> None:
        """Each host created under another queue_by gets its registered domain stored (redis_lua: store_groups),
        a page of hosts per step: the Public Suffix List is this side's."""
        for page in redis_hosts.host_pages(self._pipeline, self._gkeys):
            by_group: defaultdict[int, list[str]] = defaultdict(list)
            for g, host in page:
                by_group[g].extend((host, registered_domain(host)))
            self._run([self._fcall(FUNCTION_STORE_GROUPS, g, *pairs, now=now) for g, pairs in by_group.items()],
                      "storing the hosts' domains")

    def host_report(self, now: float) -> list[dict[str, object]]:
        """Each host's queue group and politeness state (frontier.state.redis_hosts)."""
        return self._retrying("reading the hosts", lambda: redis_hosts.host_report(
            self._pipeline, self._gkeys, self.keys.queue_group_prefix, self.policy.queue_by, self._server(now)))

    def host_states(self) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        for reply in self._run([("hgetall", (f"{k}:ts",)) for k in self._gkeys], "reading host states"):
            out.update((host.decode(), data) for host, data in reply.items())
        return out

    def _or_last(self, what: str, read: Callable[[], T], default: Any = None) -> T:
        """`read()`, remembered; once the server is given up on, the last value read, else `default` (a run
        that failed still writes its records)."""
        try:
            self._last[what] = value = read()
        except StorageError:
            if not self._gave_up or self._last.get(what, default) is None:
                raise
            return self._last.get(what, default)
        return value

    def unreachable_seeds(self) -> list[tuple[str, str]]:
        return self._or_last("unreachable", self._unreachable_seeds, [])

    def _unreachable_seeds(self) -> list[tuple[str, str]]:
        replies = self._run([(name, (f"{k}:{what}",)) for k in self._gkeys for name, what in
                             (("hgetall", "held"), ("hgetall", "unr"))], "reading unreachable seeds")
        out: list[tuple[str, str]] = []
        queues = []
        for k, held, unreachable in zip(self._gkeys, replies[0::2], replies[1::2]):
            for key, reason in held.items():
                if reason not in _HELD_FOR_THE_RUN:
                    host, entry = key.split(b"\0", 1)
                    out.append((_entry(entry, host.decode())[4], reason.decode()))
            queues.extend((k, host.decode(), reason) for host, reason in unreachable.items())
        entries = self._queues([(k, host) for k, host, _ in queues], "-inf", "reading unreachable seeds")
        for (_, host, reason), members in zip(queues, entries):
            for entry in members:
                depth, _, _, _, url = _entry(entry, host)
                if depth == 0:
                    out.append((url, reason.decode()))
        return out

    def _queues(self, queues: list[tuple[str, str]], least: Any, doing: str) -> list[list[bytes]]:
        """The entries scored from `least` on of each (group key, host)'s queue, in the queue's order: two
        round trips (the segments from each host's index, then the segments: redis_lua's B:qi and B:q)."""
        names = self._run([("zrange", (f"{k}:qi:{host}", 0, -1)) for k, host in queues], doing)
        segments = [(i, f"{k}:q:{host}:{name.decode()}") for i, ((k, host), found) in enumerate(zip(queues, names))
                    for name in found]
        replies = self._run([("zrangebyscore", (key, least, "+inf"), {"withscores": True}) for _, key in segments],
                            doing)
        scored: list[list[tuple[float, bytes]]] = [[] for _ in queues]
        for (i, _), members in zip(segments, replies):
            scored[i].extend((score, entry) for entry, score in members)
        return [[entry for _, entry in sorted(found)] for found in scored]

    def knows_host(self, host: str) -> bool:
        key = self._gkeys[self.keys.group_of(host)]
        return bool(self._run([("sismember", (f"{key}:hosts", host))], "reading the hosts")[0])

    def queued_urls(self) -> list[tuple[str, str]]:
        hosts = self._run([("smembers", (f"{k}:hosts",)) for k in self._gkeys], "reading queued URLs")
        queues = [(k, host.decode()) for k, members in zip(self._gkeys, hosts) for host in sorted(members)]
        entries = self._queues(queues, "-inf", "reading queued URLs")
        return [(host, _entry(entry, host)[4]) for (_, host), members in zip(queues, entries) for entry in members]

    def suspected(self) -> list[tuple[str, str]]:
        return self._or_last("suspected", self._suspected, [])

    def _suspected(self) -> list[tuple[str, str]]:
        hosts = self._run([("smembers", (f"{k}:hosts",)) for k in self._gkeys], "reading suspected URLs")
        queues = [(k, host.decode()) for k, members in zip(self._gkeys, hosts) for host in sorted(members)]
        lows = self._run([("hget", (f"{k}:h:{host}", "lowq")) for k, host in queues], "reading suspected URLs")
        queues = [q for q, low in zip(queues, lows) if int(low or 0)]
        entries = self._queues(queues, LOW_SCORE, "reading suspected URLs")
        return [(host, _entry(entry, host)[4]) for (_, host), members in zip(queues, entries) for entry in members]

    def stats(self) -> StateStats:
        return self._or_last("stats", self._stats)

    def _stats(self) -> StateStats:
        names = ("fetched", "attempts", "queued", "inflight", "hosts", "unreach")
        totals = dict.fromkeys(names, 0)
        for reply in self._run([("hmget", (f"{k}:c", list(names))) for k in self._gkeys], "reading counters"):
            for name, value in zip(names, reply):
                totals[name] += int(value or 0)
        return StateStats(fetched=totals["fetched"], attempts=totals["attempts"], queued=totals["queued"],
                          in_flight=totals["inflight"], hosts=totals["hosts"], unreachable_hosts=totals["unreach"],
                          held=len(self._mine))

    def seen_stats(self) -> dict[str, object]:
        seen = self._seen
        if seen is None:
            raise StorageError("the crawl state is closed")
        def read() -> dict[str, object]:  # the count retried like every call (a failover at the final stats)
            counts = self._run([("hget", (seen.keys.seen_key(g), "n")) for g in range(seen.keys.groups)],
                               "counting URLs")
            return {**seen.stats(count=False), "urls": sum(int(n) for n in counts if n is not None)}

        return self._or_last("seen", read, {"backend": "redis", "server": seen.url})

    def close(self) -> None:
        """Put this instance's leases back in place (no attempt: another instance may lease them at once) and
        close the connections. Idempotent."""
        seen = self._seen
        if seen is None:
            return
        try:
            groups = sorted({g for key in self._mine if (g := _group_of_key(key)) is not None})
            if groups:
                self._end("release", groups, self._clock())
        except StorageError:
            pass  # their leases expire instead
        finally:
            self._seen = None
            seen.close()

    def __enter__(self) -> "RedisCrawlState":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
