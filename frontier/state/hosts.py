"""Per-host politeness and limits in memory: the host records and the ready heaps of a single-owner store.

One process owns an LMDB data dir, so the politeness clock can live in that process. Mercator's back queues:
a heap of hosts with leasable work keyed by the time each may be leased next; the hosts whose time has come
move to a second heap keyed by rank, where the host whose best queued entry has the highest priority comes
first (`HostRecord.best`), a host that used up its turn (`StatePolicy.host_turn`) behind those that did not,
and equals by their time. (A store shared by several processes keeps the same facts in the store instead;
see frontier/state/base.py.)

A host is on the heap at most once (`in_heap`). With a delay, it has at most one fetch in flight and is
ready `delay` after its previous result; without, up to `max_per_host` in flight. A host waiting for its
robots.txt, held back as unreachable, at its in-flight cap or past a page limit stays off the heap until a
result or a returning lease reschedules it.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field

from frontier.state.base import Ack, Outcome, RobotsAck, RobotsOutcome, StatePolicy
from frontier.state.crawlstore import is_low

NO_PRIORITY = float("-inf")  # the best priority of a host with no normal entry (only low ones, or none)


@dataclass(slots=True)
class HostRecord:
    hid: int
    name: str
    delay: float  # the politeness delay: the configured one, or robots.txt Crawl-delay (capped) once known
    fetched: int = 0  # pages fetched so far, with an HTTP response (persisted)
    queued: int = 0  # entries in the durable queue, leased and held ones included
    low_queued: int = 0  # of them, entries of the low queue (suspected traps)
    low_used: int = 0  # attempts of low entries so far (persisted): what counts against max_suspect_pages
    leased: set[bytes] = field(default_factory=set)
    held: dict[bytes, tuple[str, str]] = field(default_factory=dict)  # key -> (url, reason): unreachable seeds, parked
    low_held: int = 0  # of them, low entries (parked past their pattern's budget)
    unreachable: str | None = None  # the network error its robots.txt failed with: not tried again this run
    next_time: float = 0.0
    retry_after_until: float = 0.0
    robots_ready: bool = False  # robots.txt known (fetched, loaded fresh, or given up as disallow-all)
    robots_leased: bool = False
    robots_failures: int = 0
    in_heap: bool = False  # on the time heap or the ready heap
    on_ready: bool = False  # on the ready heap
    best: float = NO_PRIORITY  # the priority of its best normal entry not leased (may be stale high)
    turn_used: int = 0  # page leases since its turn began
    turn_end: int = 0  # when its last turn ended (a count): 0 ranks before every host that used up a turn

    @property
    def ready_at(self) -> float:
        return max(self.next_time, self.retry_after_until)

    def low_leased(self) -> int:
        return sum(map(is_low, self.leased)) if self.low_queued else 0


class HostSchedule:
    """The host records, the ready heap, and the crawl-wide page budget (fetched + page leases)."""

    def __init__(self, policy: StatePolicy) -> None:
        self.policy = policy
        self.hosts: dict[int, HostRecord] = {}
        self.fetched = 0  # crawl-wide, as committed
        self.page_leases = 0
        self.queued = 0  # the sum of the hosts' `queued`
        self.unreachable = 0  # hosts held back as unreachable in this run
        self._heap: list[tuple[float, int, int]] = []
        self._ready: list[tuple[int, float, float, int, int]] = []  # (turn_end, -best, time, tick, host id)
        self._tick = itertools.count()
        self._turns = itertools.count(1)

    def pushed(self, host: HostRecord, priority: float, low: bool) -> None:
        """A normal entry of this priority joined the host's queue (queued, requeued or moved)."""
        if not low and priority > host.best:
            host.best = priority
            if host.on_ready:  # ranked higher now: a new place; the old one is skipped as stale
                heapq.heappush(self._ready, (host.turn_end, -priority, host.ready_at, next(self._tick), host.hid))

    def took(self, host: HostRecord, leased: int, best: float) -> None:
        """After leasing `leased` of a host's pages: `best` is now its best entry left; its turn may end."""
        host.best = best
        turn = self.policy.host_turn
        if turn is not None and leased:
            host.turn_used += leased
            if host.turn_used >= turn:
                host.turn_used = 0
                host.turn_end = next(self._turns)

    def turn_left(self, host: HostRecord) -> int | None:
        """Page leases left in the host's turn; None: no turns."""
        turn = self.policy.host_turn
        return None if turn is None else turn - host.turn_used

    def add(self, host: HostRecord) -> None:
        self.hosts[host.hid] = host
        self.queued += host.queued

    def count_queued(self, host: HostRecord, delta: int, low: bool = False) -> None:
        host.queued += delta
        self.queued += delta
        if low:
            host.low_queued += delta

    def low_slots(self, host: HostRecord) -> int:
        """How many more of the host's low entries its max_suspect_pages budget lets be leased."""
        budget = self.policy.max_suspect_pages
        if not host.low_queued:
            return 0
        in_flight = host.low_leased()
        waiting = host.low_queued - in_flight - host.low_held
        return waiting if budget is None else min(waiting, budget - host.low_used - in_flight)

    def cap(self, host: HostRecord) -> int:
        """Fetches the host may have in flight."""
        return 1 if host.delay > 0 else self.policy.max_per_host

    def slots(self, host: HostRecord, wanted: int) -> int:
        """How many of the host's URLs may be leased now, at most `wanted`."""
        policy = self.policy
        in_flight = len(host.leased)
        slots = self.cap(host) - in_flight
        if policy.max_pages is not None:
            slots = min(slots, policy.max_pages - self.fetched - self.page_leases)
        if policy.max_pages_per_host is not None:
            slots = min(slots, policy.max_pages_per_host - host.fetched - in_flight)
        return min(slots, wanted)

    def has_work(self, host: HostRecord) -> bool:
        policy = self.policy
        if host.unreachable is not None or host.queued - len(host.leased) - len(host.held) <= 0:
            return False
        if policy.max_pages is not None and self.fetched + self.page_leases >= policy.max_pages:
            return False
        if policy.max_pages_per_host is not None and host.fetched + len(host.leased) >= policy.max_pages_per_host:
            return False
        held = len(host.held) - host.low_held
        normal = host.queued - host.low_queued - (len(host.leased) - host.low_leased()) - held
        return normal > 0 or self.low_slots(host) > 0

    def schedule(self, host: HostRecord, now: float) -> None:
        """Put a host with leasable work on the ready heap at its next allowed time."""
        if host.in_heap or host.robots_leased or not self.has_work(host):
            return  # a robots result or a returning lease reschedules it
        if len(host.leased) >= self.cap(host):
            return
        host.in_heap = True
        heapq.heappush(self._heap, (host.ready_at, next(self._tick), host.hid))

    def acked(self, host: HostRecord, ack: Ack | RobotsAck, now: float) -> None:
        """After a committed ack: a dropped URL frees its place; a result moves the host's next allowed
        time to now + its delay (a Retry-After pauses it; a robots result may open, retry or close it)."""
        if isinstance(ack, Ack) and ack.outcome in (Outcome.DROP, Outcome.LOW, Outcome.PARK, Outcome.WAIT):
            host.leased.discard(ack.key)
            host.retry_after_until = max(host.retry_after_until, ack.pause_until)
            if ack.outcome is Outcome.DROP:
                self.count_queued(host, -1, is_low(ack.key))  # LOW, PARK, WAIT: counted by the caller, out and back in
            self.schedule(host, now)
            return
        if ack.pause_until:
            host.retry_after_until = max(host.retry_after_until, ack.pause_until)
        if isinstance(ack, RobotsAck):
            if ack.outcome is not RobotsOutcome.OK:
                host.robots_failures += 1
            if ack.outcome is RobotsOutcome.RETRY:
                host.next_time = ack.not_before
            elif ack.outcome is RobotsOutcome.UNREACHABLE:
                self.unreachable += host.unreachable is None
                host.unreachable = ack.reason
            else:
                host.robots_ready = True
            host.delay = ack.delay
        host.next_time = max(host.next_time, now + host.delay)
        self.schedule(host, now)

    def pop_ready(self, now: float) -> HostRecord | None:
        """The best ranked host whose time has come, taken off the heaps; None if none."""
        heap, ready = self._heap, self._ready
        while heap and heap[0][0] <= now:
            when, tick, hid = heapq.heappop(heap)
            host = self.hosts[hid]
            host.on_ready = True
            heapq.heappush(ready, (host.turn_end, -host.best, when, tick, hid))
        host = self._ready_top()
        if host is not None:
            heapq.heappop(ready)
            host.in_heap = host.on_ready = False
        return host

    def _ready_top(self) -> HostRecord | None:
        """The host at the top of the ready heap, its stale places (an older rank) dropped first."""
        ready = self._ready
        while ready:
            turn_end, neg_best, _, _, hid = ready[0]
            host = self.hosts[hid]
            if host.on_ready and (turn_end, neg_best) == (host.turn_end, -host.best):
                return host
            heapq.heappop(ready)
        return None

    def next_ready_in(self, now: float) -> float | None:
        """Seconds until a host may be leased again (0 if one is ready now); None if none has work."""
        while (host := self._ready_top()) is not None and not self.has_work(host):
            heapq.heappop(self._ready)
            host.in_heap = host.on_ready = False  # no work: stays out
        if host is not None:
            return 0.0
        heap = self._heap
        while heap:
            when, _, hid = heap[0]
            host = self.hosts[hid]
            if self.has_work(host) and host.ready_at <= when:
                break
            heapq.heappop(heap)
            host.in_heap = False
            self.schedule(host, now)  # no work: stays out; queued too early (see lease): back at its time
        if not heap:
            return None
        return max(0.0, heap[0][0] - now)
