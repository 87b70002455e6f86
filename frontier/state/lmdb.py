"""The crawl state of one machine: a data dir's LMDB environment, owned by one process.

The seen-set (URLSeen: Bloom filter + fingerprint log), the durable per-host queues, robots.txt texts,
counters and per-host bytes share one LMDB environment (layout in frontier/state/crawlstore.py), so a
commit's seen-test, queue writes, acks and counters are one write transaction. Leases and the politeness
clock are in memory (frontier/state/leases.py, hosts.py): this process owns the data dir, and after a
crash every queued URL, leased or not, is leasable again.

Recrawl requests (`python -m frontier recrawl`) arrive as spool files in DATA_DIR/recrawl/ (frontier.cli.recrawl),
since the command cannot open a data dir this process holds. They are applied at open and then by `lease`,
at most once every SPOOL_POLL seconds: each file is one commit of `Link.recrawl` links that also records the
file's name as applied; the file is deleted after that commit, its record after the delete. A file found
recorded (a crash before its delete) is only deleted: nothing is applied twice, nothing lost. Against a power
loss too, each step is durable before the next undoes what guards it: the log is synced (storage.fsync false:
commits are not synced by themselves) before the poll's files are deleted, and the spool directory is fsynced
(the deletes made durable) before their records are deleted; one sync and one directory fsync per poll.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from itertools import chain
from operator import itemgetter
from pathlib import Path

import lmdb

from frontier.config import DEFAULT_DEDUP, CrawlConfig, DedupConfig
from frontier.errors import InvalidURL, StorageError
from frontier.seen.datadir import fsync_dir
from frontier.seen.fingerprint import fingerprint, fingerprints
from frontier.seen.urlseen import URLSeen, read_url_file
from frontier.state import recrawl_spool as spool
from frontier.state.base import (PARKED, PRIORITY_LIMIT, Ack, Allows, Commit, Committed, Ended, Lease, LeaseBatch,
                                 Link, Outcome, Rescore, RobotsAck, RobotsOutcome, StatePolicy, StateStats)
from frontier.state.crawlstore import (LOW_COUNTER, CrawlStore, decode_parked, encode_parked, host_key, host_of_key,
                                       is_low, priority_of)
from frontier.state.hosts import NO_PRIORITY, HostRecord, HostSchedule
from frontier.state.leases import LeaseRecord, LeaseTable
from frontier.url.canonical import DEFAULT_RULES, CanonicalRules, canonicalize, url_host

ROBOTS_KEY_PREFIX = b"R"
RETRY_LATER = 0.05  # a host with nothing leasable now (entries backing off or held) is looked at again after this
SPOOL_POLL = 1.0  # seconds between two looks for recrawl spool files while the crawl runs
DUE_BATCH = 4096  # revisits queued per transaction (a lease queues the rest of what is due in later calls)
SWEEP_STEP = 32_768  # parked seen-tests answered per commit while a sweep runs: a pause of about 0.1 s at 10^8

_DEPTH, _RECRAWL = itemgetter(Link._fields.index("depth")), itemgetter(Link._fields.index("recrawl"))

RobotsLoaded = Callable[[str, str], float]  # (host, robots.txt text) -> the host's delay; the caller parses it


def _first_of_each(links: Sequence[Link]) -> dict[str, Link]:
    """url -> link, in order, the first of links with the same URL."""
    out = {link.url: link for link in links}
    if len(out) < len(links):
        out = {}
        for link in links:
            out.setdefault(link.url, link)
    return out


def _is_drop(ack: Ack | RobotsAck) -> bool:
    return isinstance(ack, Ack) and ack.outcome is Outcome.DROP


_NO_ATTEMPT = (Outcome.DROP, Outcome.LOW, Outcome.PARK, Outcome.WAIT)


def _is_attempt(ack: Ack | RobotsAck) -> bool:
    """A page ack that counts an attempt: not DROP, LOW, PARK or WAIT."""
    return isinstance(ack, Ack) and ack.outcome not in _NO_ATTEMPT


class LmdbCrawlState:
    """`CrawlState` over a data dir (see frontier/state/base.py for the contract).

    `on_robots(host, text)` is called at open for each stored robots.txt still fresh (robots_ttl): the
    caller parses it (and keeps the rules for `allows`) and returns the host's delay. Without it such a
    host keeps the policy's delay."""

    def __init__(self, data_dir: str | Path, policy: StatePolicy, *, dedup: DedupConfig = DEFAULT_DEDUP,
                 canonical: CanonicalRules = DEFAULT_RULES, fsync: bool = False,
                 on_robots: RobotsLoaded | None = None, now: float | None = None) -> None:
        self.policy = policy
        self._data_dir = Path(data_dir)
        self._rules = canonical
        self._fsync = fsync
        self.recrawled = 0  # URLs done and queued again by this process (recrawl requests, recrawl_after)
        self.revisits_queued = 0  # URLs queued again by their revisit schedule, by this process
        self._next_due: float | None = None  # the earliest revisit due time stored (StatePolicy.revisit)
        self._next_spool = 0.0
        self._seen: URLSeen | None = None
        self._seen = URLSeen(Path(data_dir) / "state", capacity=dedup.capacity, error_rate=dedup.error_rate,
                             exact=dedup.exact, lru_size=dedup.lru_size, partitions=dedup.partitions,
                             rules=canonical, fsync=fsync, deletable=dedup.deletable, blocked=dedup.blocked,
                             whitelist=read_url_file(dedup.whitelist) if dedup.whitelist else ())
        # deferred confirmations: a sweep queues the parked links found new; a recrawl_after decision needs
        # each seen link's answer at once (is it done, and since when?), so it confirms at once
        self._sweep_at = dedup.defer_confirms if dedup.exact and policy.recrawl_after is None else 0
        try:
            self._store = CrawlStore(self._seen.log)
            self._sched = HostSchedule(policy)
            self._hosts = self._sched.hosts
            self._leases = LeaseTable()
            now = time.time() if now is None else now
            self._load(now, on_robots)
            if policy.revisit:
                self._next_due = self.seen.log.read(self._store.next_due)
            self._forget_applied()
            spool.remove_stale_tmp(self._data_dir, time.time())
            self.apply_recrawls(now)
        except BaseException:
            self._seen.close()
            raise

    @classmethod
    def from_config(cls, cfg: CrawlConfig, policy: StatePolicy, *,
                    on_robots: RobotsLoaded | None = None) -> LmdbCrawlState:
        """The state in a crawl config's data dir (storage: data_dir, fsync; its seen-test and canonical rules)
        under `policy` (the crawl's: frontier.crawl.scheduler.crawl_policy)."""
        return cls(cfg.storage.data_dir, policy, dedup=cfg.dedup, canonical=cfg.canonical, fsync=cfg.storage.fsync,
                   on_robots=on_robots)

    def _load(self, now: float, on_robots: RobotsLoaded | None) -> None:
        hosts, queued, low, robots, best = self._store.load()
        self._sched.fetched = self._store.counters.get("fetched", 0)
        self.attempts = self._store.counters.get("attempts", 0)
        for hid, (name, fetched) in hosts.items():
            host = HostRecord(hid, name, self.policy.delay, fetched=fetched, queued=queued.get(hid, 0),
                              low_queued=low.get(hid, 0), low_used=self._store.counters.get(f"{LOW_COUNTER}{hid}", 0),
                              best=best.get(hid, NO_PRIORITY))
            cached = robots.get(hid)
            if cached and cached[0] + self.policy.robots_ttl > now:
                host.robots_ready = True
                if on_robots is not None:
                    host.delay = on_robots(name, cached[1])
            self._sched.add(host)
            self._sched.schedule(host, now)

    @property
    def seen(self) -> URLSeen:
        if self._seen is None:
            raise StorageError("the crawl state is closed")
        return self._seen

    # -- leasing ------------------------------------------------------------------------------

    def lease(self, max_jobs: int, now: float, allows: Allows) -> LeaseBatch:
        if time.monotonic() >= self._next_spool:
            self.apply_recrawls(now)
        self.queue_due(now)
        jobs: list[Lease] = []
        disallowed: list[Lease] = []
        sched = self._sched
        while len(jobs) < max_jobs and (host := sched.pop_ready(now)) is not None:
            if host.ready_at > now:
                # queued before a result pushed its time on (a commit enqueues links, then sets the delay)
                sched.schedule(host, now)
                continue
            if self.policy.obey_robots and not host.robots_ready:
                if not host.robots_leased:
                    jobs.append(self._lease_robots(host, now))
                continue
            slots = sched.slots(host, max_jobs - len(jobs))
            turn = sched.turn_left(host)
            if turn is not None:
                slots = min(slots, turn)
            if slots > 0 and not self._lease_pages(host, slots, now, allows, jobs, disallowed):
                host.next_time = max(host.next_time, now + RETRY_LATER)
            sched.schedule(host, now)
        return LeaseBatch(jobs, disallowed)

    def _lease_pages(self, host: HostRecord, slots: int, now: float, allows: Allows, jobs: list[Lease],
                     disallowed: list[Lease]) -> int:
        """Lease up to `slots` of a host's queued URLs in priority order; returns how many were leased."""
        chosen: list[Lease] = []
        backing_off = float("inf")
        best = NO_PRIORITY  # of the entries left: the first normal one the scan passes without leasing it
        skip = host.leased | host.held.keys() if host.held else host.leased
        low_slots = self._sched.low_slots(host)
        entries = self._store.scan_host(host.hid, slots + 64, skip=skip)
        for entry in entries:
            if is_low(entry.key):
                if low_slots <= 0:
                    break
                low_slots -= 1
            if entry.not_before > now:
                backing_off = min(backing_off, entry.not_before)
                if best == NO_PRIORITY and not is_low(entry.key):
                    best = entry.priority
                continue
            lease = Lease(entry.key, host.name, entry.url, entry.depth, entry.attempt, entry.redirects,
                          low=is_low(entry.key), priority=entry.priority)
            if host.robots_ready and not allows(host.name, entry.url):
                disallowed.append(lease)
                host.leased.add(entry.key)  # held until the caller commits it as DROP
                continue
            chosen.append(lease)
            if len(chosen) == slots:
                break
        if best == NO_PRIORITY:
            following = next(entries, None)
            if following is not None and not is_low(following.key):
                best = following.priority
        self._sched.took(host, len(chosen), best)
        if self._store.payloads_used and chosen:
            payloads = self._store.payloads([lease.key for lease in chosen])
            chosen = [replace(lease, payload=payload) if payload is not None else lease
                      for lease, payload in zip(chosen, payloads)]
        if self.policy.revisit and chosen:
            revisits = self._store.revisits(fingerprints([lease.url for lease in chosen]))
            chosen = [replace(lease, revisit=revisit) if revisit is not None else lease
                      for lease, revisit in zip(chosen, revisits)]
        for lease in chosen:
            self._add_lease(host, lease, now)
        self._sched.page_leases += len(chosen)
        jobs.extend(chosen)
        if not chosen and backing_off != float("inf"):
            host.next_time = max(host.next_time, backing_off)
        return len(chosen)

    def _lease_robots(self, host: HostRecord, now: float) -> Lease:
        first = next(self._store.scan_host(host.hid, 1), None)
        scheme = first.url.split(":", 1)[0] if first is not None else "http"
        lease = Lease(ROBOTS_KEY_PREFIX + host_key(host.hid), host.name, f"{scheme}://{host.name}/robots.txt",
                      attempt=host.robots_failures, robots=True)
        host.robots_leased = True
        self._add_lease(host, lease, now)
        return lease

    def _add_lease(self, host: HostRecord, lease: Lease, now: float) -> None:
        self._leases.add(host.hid, lease, now + self.policy.lease_timeout)
        if not lease.robots:
            host.leased.add(lease.key)

    def _release(self, record: LeaseRecord) -> None:
        host = self._hosts[record.hid]
        if record.lease.robots:
            host.robots_leased = False
        else:
            host.leased.discard(record.lease.key)
            self._sched.page_leases -= 1

    def _refused(self, key: bytes) -> bool:
        """A key `allows` refused at lease time: held in its host's leased set, not in the lease table."""
        host = self._hosts.get(host_of_key(key))
        return host is not None and key in host.leased

    def leased(self, keys: Sequence[bytes]) -> list[Lease | None]:
        return [None if (record := self._leases.get(key)) is None else record.lease for key in keys]

    def renew(self, keys: Sequence[bytes], now: float) -> list[bool]:
        deadline = now + self.policy.lease_timeout
        return [self._leases.renew(key, deadline) for key in keys]

    def expire(self, now: float) -> list[Ended]:
        records = self._leases.pop_expired(now)
        for record in records:
            self._release(record)
        return self._return(records, now)

    def abandon(self, now: float) -> list[Ended]:
        records = self._leases.pop_all()
        for record in records:
            self._release(record)
        return self._return(records, now)

    def _return(self, records: list[LeaseRecord], now: float) -> list[Ended]:
        """Leases that ended without a result, an attempt each: a page goes back to the tail of its host's
        queue with attempt + 1 under a new key, or is given up once it has had 1 + max_retries attempts."""
        store = self._store
        pages = [r.lease for r in records if not r.lease.robots]
        new_keys = {p.key: store.next_key(host_of_key(p.key), is_low(p.key), p.priority)
                    for p in pages if p.attempt < self.policy.max_retries}
        low_used = self._low_used([p.key for p in pages])
        if pages:
            attempts = self.attempts + len(pages)

            def body(txn: lmdb.Transaction) -> None:
                for page in pages:
                    if page.key not in new_keys:
                        store.finish(txn, page.key, now)  # given up
                    elif store.delete(txn, page.key):
                        store.push(txn, new_keys[page.key], page.url, page.depth, attempt=page.attempt + 1,
                                   redirects=page.redirects, payload=page.payload)
                store.put_counters(txn, {"attempts": attempts, **low_used})

            self.seen.log.write(body)
            self.attempts = attempts
            self._set_low_used(low_used)
        for page in pages:
            host = self._hosts[host_of_key(page.key)]
            self._sched.count_queued(host, -1, is_low(page.key))
            if page.key in new_keys:
                self._sched.count_queued(host, 1, is_low(page.key))
                self._sched.pushed(host, page.priority, is_low(page.key))
        for record in records:
            self._sched.schedule(self._hosts[record.hid], now)
        return [Ended(r.lease, r.lease.key in new_keys) for r in records]

    # -- the commit ---------------------------------------------------------------------------

    def commit(self, batch: Commit, now: float) -> Committed:
        """One write transaction: seen-test, enqueue the new (and the done ones a recrawl asks for), delete or
        requeue the acked, store robots, host state and the counters. Then the politeness clock of every host
        concerned."""
        return self._commit(batch, now)

    def _commit(self, batch: Commit, now: float, applied: str | None = None) -> Committed:
        """`commit`; `applied`: a recrawl spool file whose links these are, recorded in the same transaction."""
        after = self.policy.recrawl_after
        acked: list[tuple[Ack | RobotsAck, LeaseRecord | None]] = []
        stale: list[bytes] = []
        for ack in batch.acks:
            record = self._leases.pop(ack.key)
            if record is not None:
                self._release(record)
            elif not (_is_drop(ack) and self._refused(ack.key)):
                stale.append(ack.key)
                continue
            acked.append((ack, record))
        pages = [(ack, record) for ack, record in acked if _is_attempt(ack)]
        forced = [link for link in batch.links if link.force]
        links = _first_of_each([link for link in batch.links if not link.force] if forced else batch.links)
        by_fp = dict(zip(fingerprints(list(links)), links))
        confirm: set[bytes] = set()  # seeds and recrawls: a Bloom "maybe" of them is confirmed in the log
        recrawl: set[bytes] = set()
        # the common batch (outlinks) has neither: found at C speed (a Python loop per link costs 140 ns)
        if True in map(_RECRAWL, links.values()) or not self.seen.exact and 0 in map(_DEPTH, links.values()):
            for fp, url in by_fp.items():
                link = links[url]
                if link.depth == 0 or link.recrawl:
                    confirm.add(fp)
                if link.recrawl:
                    recrawl.add(fp)
        forced_fps = fingerprints([link.url for link in forced]) if forced else []
        again: list[bytes] = []  # seen, done and queued again (recrawl)
        store = self._store
        pushed: list[tuple[int, bytes]] = []
        moved: list[tuple[int, bytes]] = []
        requeued: list[tuple[Ack, Lease, bytes]] = []
        fetched: Counter[int] = Counter(record.hid for ack, record in pages if ack.fetched)  # type: ignore[union-attr]
        counters = {"fetched": self._sched.fetched + fetched.total(), "attempts": self.attempts + len(pages),
                    **self._low_used([ack.key for ack, _ in pages])}

        def body(txn: lmdb.Transaction, new_fps: list[bytes]) -> None:
            store.rolled_back()
            pushed.clear()
            moved.clear()
            requeued.clear()
            again[:] = self._again(txn, by_fp, links, new_fps, recrawl, now) if recrawl or after is not None else ()
            for fp in chain(again, forced_fps):
                store.requeued(txn, fp)
            for fp in chain(new_fps, again):
                self._push(txn, links[by_fp[fp]], pushed, fp)
            for link in forced:
                self._push(txn, link, pushed)
            for ack, record in acked:
                if not isinstance(ack, Ack):
                    if ack.outcome is RobotsOutcome.OK:
                        store.put_robots(txn, record.hid, ack.fetched_at, ack.text)  # type: ignore[union-attr]
                    continue
                if ack.outcome in (Outcome.DONE, Outcome.DROP):
                    store.finish(txn, ack.key, now)
                    if ack.revisit is not None and self.policy.revisit:
                        store.put_revisit(txn, fingerprint(ack.revisit.url), ack.revisit)
                    continue
                store.delete(txn, ack.key)
                page = record.lease  # type: ignore[union-attr]
                key = store.next_key(host_of_key(ack.key), is_low(ack.key) or ack.outcome is Outcome.LOW, page.priority,
                                     parked=ack.outcome is Outcome.PARK)
                if ack.outcome is Outcome.RETRY:
                    store.push(txn, key, page.url, page.depth, attempt=page.attempt + 1, redirects=page.redirects,
                               not_before=ack.not_before, payload=page.payload)
                elif ack.outcome in (Outcome.LOW, Outcome.PARK, Outcome.WAIT):
                    store.push(txn, key, page.url, page.depth, attempt=page.attempt, redirects=page.redirects,
                               payload=page.payload)
                else:  # HOLD: a rerun gives it every attempt again
                    store.push(txn, key, page.url, page.depth, redirects=page.redirects, payload=page.payload)
                requeued.append((ack, page, key))
            if batch.rescore:  # after the acks: a URL acked in this commit is not queued any more
                self._rescore(txn, batch.rescore, {*new_fps, *again, *forced_fps}, moved)
            for hid, count in fetched.items():
                host = self._hosts[hid]
                store.set_host_fetched(txn, hid, host.name, host.fetched + count)
            for name, data in batch.host_state.items():
                store.put_host_state(txn, name, data)
            if pages:
                store.put_counters(txn, counters)
            if applied is not None:
                store.mark_applied(txn, applied, now)

        def park(fps: list[bytes]) -> list[bytes]:
            return [encode_parked(links[by_fp[fp]]) for fp in fps]

        new_flags = self.seen.add_fingerprints(list(by_fp), also=body, confirm=confirm,
                                               defer=park if self._sweep_at else None)
        self.recrawled += len(again)
        self._add_new_hosts()
        if pages:
            self._sched.fetched, self.attempts = counters["fetched"], counters["attempts"]
            self._set_low_used(counters)
        for hid, count in fetched.items():
            self._hosts[hid].fetched += count
        self._after_commit(acked, pushed, requeued, now, moved)
        for ack, _ in acked:
            revisit = getattr(ack, "revisit", None)
            if revisit is not None and self.policy.revisit and (self._next_due is None or revisit.due < self._next_due):
                self._next_due = revisit.due
        if self._sweep_at and (self.seen.sweeping or self.seen.parked >= self._sweep_at):
            self.sweep(now, step=SWEEP_STEP)
        new_urls = {by_fp[fp] for fp, new in zip(by_fp, new_flags) if new}
        new_urls.update(by_fp[fp] for fp in again)
        if len(links) == len(batch.links):
            return Committed([url in new_urls for url in links], stale, len(moved))
        flags = []
        for link in batch.links:  # a repeated link is new at most once; a forced one always
            if link.force:
                flags.append(True)
            else:
                flags.append(link.url in new_urls)
                new_urls.discard(link.url)
        return Committed(flags, stale, len(moved))

    def sweep(self, now: float, *, step: int | None = None) -> int:
        """Answer the parked seen-tests (frontier.seen.parked) and queue the links found new (`step`: at most that
        many now, one transaction; None: all); returns how many were new. Once `dedup.defer_confirms` wait,
        each `commit` takes a step; `done` sweeps the rest before it says yes."""
        pushed: list[tuple[int, bytes]] = []
        rerun = False  # enqueue ran in the transaction under way: a second call reruns it (the map grew)

        def enqueue(txn: lmdb.Transaction, fps: list[bytes], parked: list[bytes]) -> None:
            nonlocal rerun
            if rerun:  # never across transactions: a sweep of everything commits more than one
                self._store.rolled_back()
                pushed.clear()
            rerun = True
            for link in map(decode_parked, parked):
                self._push(txn, link, pushed)

        def committed() -> None:
            nonlocal rerun
            rerun = False
            self._add_new_hosts()
            self._after_commit([], pushed, [], now)
            pushed.clear()

        try:
            return self.seen.sweep(enqueue, step=step, committed=committed)
        except BaseException:
            self._store.rolled_back()  # a transaction that failed (a full disk): its host ids were never written
            # (every one that committed has been taken up already: `committed` runs right after its commit)
            raise

    def _push(self, txn: lmdb.Transaction, link: Link, pushed: list[tuple[int, bytes]], fp: bytes | None = None) -> None:
        """Queue a link behind its host's entries of its priority; (host id, key) goes to `pushed`."""
        hid = self._store.host_id(txn, url_host(link.url))
        key = self._store.next_key(hid, link.low, link.priority)
        self._store.push(txn, key, link.url, link.depth, redirects=link.redirects, payload=link.payload, fp=fp)
        pushed.append((hid, key))

    def _rescore(self, txn: lmdb.Transaction, rescores: Sequence[Rescore], fresh: set[bytes],
                 moved: list[tuple[int, bytes]]) -> None:
        """Move each rescored URL's queue entry (not one queued in this commit, `fresh`, nor a leased or held one)
        to its new priority; (host id, new key) goes to `moved`."""
        store = self._store
        for rescore, fp in zip(rescores, fingerprints([r.url for r in rescores])):
            key = None if fp in fresh else store.queued_key(txn, fp)
            if key is None:
                continue
            hid = host_of_key(key)
            host = self._hosts.get(hid)
            if host is None or key in host.leased or key in host.held:
                continue
            old = priority_of(key)
            priority = min(max(old + rescore.priority if rescore.add else rescore.priority, -PRIORITY_LIMIT),
                           PRIORITY_LIMIT)
            if priority != old:
                moved.append((hid, store.move(txn, key, fp, priority)))

    def _add_new_hosts(self) -> None:
        """After a commit: the hosts first seen in it join the schedule."""
        for name, hid in self._store.committed().items():
            self._sched.add(HostRecord(hid, name, self.policy.delay))

    def _again(self, txn: lmdb.Transaction, by_fp: dict[bytes, str], links: dict[str, Link], new_fps: list[bytes],
               recrawl: set[bytes], now: float) -> list[bytes]:
        """The links seen before that are queued again: a recrawl of a URL not queued now, or (recrawl_after) a
        link to a URL whose last result is older than recrawl_after. `done` tells a URL no longer queued without
        reading the queue; a recrawl of a URL without a `done` entry (queued, or done before `done` existed)
        looks for it in its host's queue."""
        store, after = self._store, self.policy.recrawl_after
        new = set(new_fps)
        out: list[bytes] = []
        unsure: dict[int, dict[str, bytes]] = {}  # host id -> {url: fp} to look for in the queue
        for fp in by_fp if after is not None else recrawl:
            if fp in new:
                continue
            done_at = store.done_at(txn, fp)
            if done_at is not None:
                if fp in recrawl or done_at + after <= now:  # type: ignore[operator]
                    out.append(fp)
            elif fp in recrawl:
                url = by_fp[fp]
                hid = store.known_host(url_host(url))
                if hid is None:
                    out.append(fp)
                else:
                    unsure.setdefault(hid, {})[url] = fp
        for hid, urls in unsure.items():
            queued = store.queued_of(txn, hid, urls.keys())
            out.extend(fp for url, fp in urls.items() if url not in queued)
        return out

    def _after_commit(self, acked: list[tuple[Ack | RobotsAck, LeaseRecord | None]], pushed: list[tuple[int, bytes]],
                      requeued: list[tuple[Ack, Lease, bytes]], now: float,
                      moved: Sequence[tuple[int, bytes]] = ()) -> None:
        """Queue counts, best priorities and held seeds, then each acked host's politeness clock, in the order of
        the results."""
        hosts, sched = self._hosts, self._sched
        for (hid, low), count in Counter((hid, is_low(key)) for hid, key in pushed).items():
            sched.count_queued(hosts[hid], count, low)
        for hid, key in chain(pushed, moved):
            sched.pushed(hosts[hid], priority_of(key), is_low(key))
        for ack, record in acked:
            if isinstance(ack, Ack) and not _is_drop(ack):
                sched.count_queued(hosts[record.hid], -1, is_low(ack.key))  # type: ignore[union-attr]
        for ack, page, key in requeued:
            host = hosts[host_of_key(key)]
            sched.count_queued(host, 1, is_low(key))
            sched.pushed(host, page.priority, is_low(key))
            if ack.outcome is Outcome.HOLD:
                host.held[key] = (page.url, ack.reason)
            elif ack.outcome is Outcome.PARK:
                host.held[key] = (page.url, PARKED)
                host.low_held += is_low(key)
        for hid in {hid for hid, _ in pushed} | {host_of_key(key) for _, _, key in requeued}:
            sched.schedule(hosts[hid], now)
        for ack, record in acked:
            sched.acked(hosts[host_of_key(ack.key) if record is None else record.hid], ack, now)

    # -- revisits -----------------------------------------------------------------------------

    def queue_due(self, now: float) -> int:
        """Queue the done URLs whose revisit is due by `now` (at most DUE_BATCH a call), each in the transaction that
        deletes its due entry, so a kill -9 loses none and queues none twice; returns how many were queued. A due
        URL queued already (a recrawl request) is left alone: its fetch stores its next schedule."""
        if self._next_due is None or self._next_due > now:
            return 0
        store = self._store
        pushed: list[tuple[int, bytes]] = []

        def body(txn: lmdb.Transaction) -> float | None:
            store.rolled_back()
            pushed.clear()
            for fp, revisit in store.take_due(txn, now, DUE_BATCH):
                if store.done_at(txn, fp) is None:
                    continue
                store.requeued(txn, fp)
                self._push(txn, Link(revisit.url, revisit.depth), pushed, fp)
            return store.next_due(txn)

        self._next_due = self.seen.log.write(body)
        self._add_new_hosts()
        self._after_commit([], pushed, [], now)
        self.revisits_queued += len(pushed)
        return len(pushed)

    def next_due(self) -> float | None:
        """The earliest revisit due time stored (None: none, or revisits off)."""
        return self._next_due

    # -- recrawl requests ---------------------------------------------------------------------

    def apply_recrawls(self, now: float) -> int:
        """Apply the recrawl spool files waiting in the data dir (see the module doc); returns the URLs queued."""
        self._next_spool = time.monotonic() + SPOOL_POLL
        queued = 0
        done: list[str] = []
        for path in spool.pending_spool(self._data_dir):
            name = path.name
            if not self.seen.log.read(lambda txn: self._store.applied(txn, name)):
                urls = spool.read_spool(path)
                if urls is None:  # not written by `recrawl`: set aside, not looked at again
                    path.rename(path.with_name(f".{name}.rejected"))
                    continue
                links = []
                for url in urls:  # canonical already; checked again, so a hand-made file cannot stop the crawl
                    try:
                        links.append(Link(canonicalize(url, rules=self._rules), 0, recrawl=True))
                    except InvalidURL:
                        continue
                queued += sum(self._commit(Commit(links=links), now, applied=name).new)
            done.append(name)
        if done:
            if not self._fsync:
                self.seen.log.sync()  # the commits that recorded them, durable before the files go
            directory = spool.spool_dir(self._data_dir)
            for name in done:
                (directory / name).unlink(missing_ok=True)
            fsync_dir(directory)  # the deletes durable before their records go: else a file is applied twice
            self.seen.log.write(lambda txn: self._store.forget_applied(txn, done))
        return queued

    def _forget_applied(self) -> None:
        """Records of spool files deleted already (a crash came between the delete and the record's)."""
        gone = [name for name in self._store.applied_names() if not (spool.spool_dir(self._data_dir) / name).exists()]
        if gone:
            self.seen.log.write(lambda txn: self._store.forget_applied(txn, gone))

    # -- reads --------------------------------------------------------------------------------

    def next_ready_in(self, now: float) -> float | None:
        ready = self._sched.next_ready_in(now)
        due = self._next_due
        if due is None or ready == 0:
            return ready
        if due <= now:
            return 0.0  # the next lease queues them
        if not self.policy.revisit_continuous:
            return ready
        return due - now if ready is None else min(ready, due - now)

    def done(self, now: float) -> bool:
        if len(self._leases) or self.next_ready_in(now) is not None:
            return False
        return not (self.seen.parked and self.sweep(now) and self.next_ready_in(now) is not None)

    def robots_text(self, host: str) -> str | None:
        hid = self._store.known_host(host)
        return None if hid is None else self._store.robots_text(hid)

    def host_states(self) -> dict[str, bytes]:
        return self._store.host_states()

    def unreachable_seeds(self) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for host in self._hosts.values():
            if host.unreachable is not None:
                out.extend((e.url, host.unreachable) for e in self._store.scan_host(host.hid, host.queued)
                           if e.depth == 0)
            out.extend(held for held in host.held.values() if held[1] != PARKED)
        return out

    def _low_used(self, keys: Sequence[bytes]) -> dict[str, int]:
        """The "low:<host id>" counters after an attempt of each key that is a low entry's."""
        used = Counter(host_of_key(key) for key in keys if is_low(key))
        return {f"{LOW_COUNTER}{hid}": self._hosts[hid].low_used + n for hid, n in used.items()}

    def _set_low_used(self, counters: dict[str, int]) -> None:
        for name, value in counters.items():
            if name.startswith(LOW_COUNTER):
                self._hosts[int(name[len(LOW_COUNTER):])].low_used = value

    def knows_host(self, host: str) -> bool:
        return self._store.known_host(host) is not None

    def queued_urls(self) -> list[tuple[str, str]]:
        return [(host.name, e.url) for host in self._hosts.values() if host.queued
                for e in self._store.scan_host(host.hid, host.queued)]

    def suspected(self) -> list[tuple[str, str]]:
        return [(host.name, e.url) for host in self._hosts.values() if host.low_queued
                for e in self._store.scan_host(host.hid, host.queued) if is_low(e.key)]

    @property
    def host_schedule(self) -> HostSchedule:
        """The live host records and the page budget (frontier.state.hosts): read on this state's thread only."""
        return self._sched

    def stats(self) -> StateStats:
        sched = self._sched
        return StateStats(fetched=sched.fetched, attempts=self.attempts, queued=sched.queued,
                          in_flight=len(self._leases), hosts=len(self._hosts), unreachable_hosts=sched.unreachable)

    def seen_stats(self) -> dict[str, object]:
        return {**self.seen.stats(), "recrawled": self.recrawled}

    def close(self) -> None:
        """Snapshot the Bloom filter and close the data dir. Leased URLs stay queued for the next run."""
        if self._seen is not None:
            seen, self._seen = self._seen, None
            seen.close()

    def __enter__(self) -> "LmdbCrawlState":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
