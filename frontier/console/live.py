"""What the console shows of a running crawl, built on the frontier loop's thread (which owns the crawl state).

    live = LiveView(frontier, stats=service.stats, started_at=run.started_at, supervisor_pid=pid)
    live.observe(record)          # each crawl log record, as it is written
    live.tick()                   # once a loop turn: a rate point each second
    live.snapshot()               # GET /api/snapshot's body
    live.host_rows()              # the hosts table's rows (frontier.console.reports.HOST_KEYS tuples)
    server.answer(live.handle)    # frontier.console.server: the requests waiting for the loop

Costs are bounded by what a turn can spare: the figures that cost more than reading counters (the seen-test's,
which counts the Bloom filter's set bits; the host table, one pass over every host) are rebuilt only when the
last one is older than REUSE_FACTOR times what it cost to build, so a page polling them takes at most about
1 / REUSE_FACTOR of the loop's time, whatever the crawl's size (a small crawl's are always fresh: 1 ms of work is
reused for 0.1 s).
"""

from __future__ import annotations

import json
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from frontier.console.procs import ProcessSampler
from frontier.console.reports import HostFacts, LogTally, host_rows, queue_rows, seed_rows
from frontier.console.server import ActionUnavailable
from frontier.crawl.scheduler import Frontier
from frontier.crawl.traps import TrapDetector
from frontier.state.controls import Orders
from frontier.state.hosts import HostRecord, HostSchedule

if TYPE_CHECKING:
    from frontier.console.control import Controls

RATE_POINTS = 600  # rate history: one point a second, the last 10 minutes
RATE_WINDOW = 5  # seconds the "now" rates average over
LOG_TAIL = 50  # crawl log lines the snapshot carries
AUDIT_TAIL = 50  # audit records the snapshot carries
REUSE_FACTOR = 100  # an expensive figure is reused for 100 x what it cost to build


class Cached:
    """A value rebuilt by `build` only when older than REUSE_FACTOR x its last build's time."""

    def __init__(self, build: Callable[[], Any]) -> None:
        self.build = build
        self.value: Any = None
        self.until = 0.0

    def get(self) -> Any:
        now = time.monotonic()
        if now >= self.until or self.value is None:
            self.value = self.build()
            done = time.monotonic()
            self.until = done + REUSE_FACTOR * (done - now)
        return self.value


NO_ORDERS = Orders()


def classify(host: HostRecord, sched: HostSchedule, now: float, obey_robots: bool,
             orders: Orders = NO_ORDERS) -> tuple[str, str | None]:
    """(host state, what its waiting URLs wait for: a key of the snapshot's "waiting", None if nothing waits).
    `orders`: the operator's (frontier.crawl.steering): a retired or blocked host is said so first."""
    policy = sched.policy
    waiting = host.queued - len(host.leased)
    if host.queued == 0:
        return "done", None
    if host.unreachable is not None:
        return "unreachable", "unreachable" if waiting else None
    busy = "active" if host.leased else None
    if waiting <= 0:
        return "active", None
    if host.name in orders.retired:
        return busy or "retired", "retired"
    if orders.blocks.get(host.name, 0.0) > now:
        return busy or "blocked", "blocked"
    if waiting <= len(host.held):
        return busy or "parked", "parked"
    if (policy.max_pages_per_host is not None and host.fetched + len(host.leased) >= policy.max_pages_per_host) or \
            (policy.max_pages is not None and sched.fetched + sched.page_leases >= policy.max_pages):
        return busy or "retired", "budget"
    if obey_robots and not host.robots_ready:
        return busy or "robots", "robots"
    group = host.group
    if group.pause_until > now:  # a Retry-After or an overload's backoff, on the host's politeness group
        return busy or "backing_off", "retry_backoff"
    if host.leased and len(host.leased) >= sched.cap(host):
        return "active", "host_cap"
    if host.next_time > now:
        return busy or "waiting", "host_delay"
    if host.waiting or group.next_time > now:  # its group's delay, or the group at its cap with other hosts
        return busy or "waiting", "group_delay"
    return "active", "ready"


def host_facts(sched: HostSchedule, now: float, obey_robots: bool, waiting: Counter[str],
               orders: Orders = NO_ORDERS) -> Iterator[HostFacts]:
    """HostFacts of every host record; adds each host's waiting URLs to `waiting` under what they wait for."""
    limit = sched.policy.max_pages_per_host
    for host in sched.hosts.values():
        state, reason = classify(host, sched, now, obey_robots, orders)
        if reason is not None:
            waiting[reason] += host.queued - len(host.leased)
        yield HostFacts(host=host.name, group=host.group.key, fetched=host.fetched, queued=host.queued, state=state,
                        low=host.low_queued,
                        held=len(host.held), in_flight=len(host.leased), delay=host.delay,
                        ready_in=max(0.0, host.ready_at - now),
                        budget_left=None if limit is None else max(0, limit - host.fetched))


def _host_schedule(frontier: Frontier) -> HostSchedule | None:
    """The crawl state's live host records (LMDB: one process owns them); None where they live on a server (Redis)."""
    return getattr(frontier.state, "host_schedule", None)


def pattern_figures(detector: TrapDetector | None) -> list[dict[str, object]]:
    """{"host", "pattern", the detector's growth figures, "budget" (traps.max_suspect_pages), "state": parked
    once its budget is spent while it grows, else suspected} of every pattern it suspects (no queue scan,
    unlike `Frontier.suspected`: cheap enough for a live page)."""
    if detector is None:
        return []
    budget = detector.max_suspect_pages
    rows: list[dict[str, object]] = []
    for host, pattern, pages in detector.traps():
        figures = detector.growth(host, pattern) or {"fetched": pages, "spent": 0, "growing": False}
        parked = budget is not None and int(figures["spent"]) >= budget and bool(figures["growing"])  # type: ignore[call-overload]
        rows.append({"host": host, "pattern": pattern, **figures, "budget": budget,
                     "state": "parked" if parked else "suspected"})
    return rows


class LiveView:
    """The console's figures of one frontier process's crawl (see the module docstring)."""

    def __init__(self, frontier: Frontier, *, stats: Callable[[], Mapping[str, Any]], started_at: float,
                 supervisor_pid: int | None = None, controls: Controls | None = None,
                 worker_in_flight: Sequence[int] | None = None, clock: Callable[[], float] = time.time) -> None:
        """`worker_in_flight`: each worker's fetches in flight, by worker id (frontier.crawl.process.Channels)."""
        self.frontier = frontier
        self.controls = controls  # the control actions (frontier.console.control); None: this process has none
        self._stats = stats
        self.clock = clock
        self.started_at = started_at  # wall clock: when this run started
        self.began = clock()  # when this frontier process began crawling
        self.tally = LogTally()
        self.tail: deque[Mapping[str, Any]] = deque(maxlen=LOG_TAIL)
        self.rate: deque[tuple[float, float, float]] = deque(maxlen=RATE_POINTS)
        self._points: deque[tuple[float, int, int]] = deque(maxlen=RATE_WINDOW + 1)  # (t, fetched, bytes)
        self._first_fetched = frontier.fetched
        self._next_point = 0.0
        self.state = "running"
        self.procs = ProcessSampler(supervisor_pid)
        self.worker_in_flight = worker_in_flight
        self._seen = Cached(lambda: dict(self._stats().get("seen") or {}))
        self._hosts = Cached(self._build_hosts)

    def observe(self, record: Mapping[str, Any]) -> None:
        """A crawl log record as it is written (a few dict updates: it runs for every attempt)."""
        self.tally.observe(record)
        self.tail.append(record)

    def tick(self) -> None:
        """Once a loop turn: at most one rate point a second (t, pages/s, bytes/s over the last second)."""
        now = self.clock()
        if now < self._next_point:
            return
        self._next_point = now + 1.0
        point = (now, self.frontier.fetched, self.tally.bytes)
        last = self._points[-1] if self._points else None
        self._points.append(point)
        if last is not None and now > last[0]:
            dt = now - last[0]
            self.rate.append((round(now, 3), round((point[1] - last[1]) / dt, 3), round((point[2] - last[2]) / dt, 1)))

    def _rates(self, now: float, fetched: int) -> dict[str, float]:
        elapsed = max(now - self.began, 1e-9)
        first = self._points[0] if self._points else (now, fetched, self.tally.bytes)
        window = max(now - first[0], 1e-9)
        return {
            "pages_per_s": round((fetched - first[1]) / window, 3) if self._points else 0.0,
            "pages_per_s_avg": round((fetched - self._first_fetched) / elapsed, 3),
            "bytes_per_s": round((self.tally.bytes - first[2]) / window, 1) if self._points else 0.0,
            "bytes_per_s_avg": round(self.tally.bytes / elapsed, 1),
        }

    def _build_hosts(self) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], dict[str, int]]:
        sched = _host_schedule(self.frontier)
        waiting: Counter[str] = Counter()
        if sched is None:  # hosts live on the server (Redis): this instance's log tallies only
            return host_rows((), self.tally, state_known=False), [], {}
        orders = NO_ORDERS if self.controls is None else self.controls.steering.orders
        facts = list(host_facts(sched, self.clock(), self.frontier.politeness.obey_robots, waiting, orders))
        return host_rows(facts, self.tally), queue_rows(facts), dict(waiting)

    def _workers(self) -> list[dict[str, Any]]:
        """The crawl's processes' CPU and memory, with each one's fetches in flight (the frontier process: its
        leases)."""
        rows = self.procs.sample()
        counts = self.worker_in_flight
        for row in rows:
            name = row["name"]
            if name == "frontier":
                row["in_flight"] = self.frontier.in_flight
            elif counts is not None and name.startswith("worker-") and name[7:].isdigit() and \
                    int(name[7:]) < len(counts):
                row["in_flight"] = counts[int(name[7:])]
        return rows

    def host_rows(self) -> list[tuple[Any, ...]]:
        """The hosts table (HOST_KEYS tuples), as old as Cached allows at most."""
        return self._hosts.get()[0]

    def queue_rows(self) -> list[tuple[Any, ...]]:
        return self._hosts.get()[1]

    def _groups(self) -> dict[str, Any]:
        """The politeness groups: politeness.queue_by, and how many groups the live host records form (LMDB)."""
        sched = _host_schedule(self.frontier)
        out: dict[str, Any] = {"queue_by": self.frontier.politeness.queue_by}
        if sched is not None:
            out["count"] = len(sched.groups)
        return out

    def snapshot(self, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """GET /api/snapshot's body (the console contract); `extra`: keys the caller adds (paused, audit)."""
        frontier = self.frontier
        now = self.clock()
        fetched = frontier.fetched
        seen = self._seen.get()
        checked = int(seen.get("checked", 0) or 0)
        reasons = dict(frontier.reasons)
        controls = self.controls
        paused = controls is not None and controls.paused
        waiting = self._hosts.get()[2]
        if paused:  # every queued URL not in flight waits for the resume first
            waiting = {"paused": max(0, frontier.queued - frontier.in_flight)}
        return {
            "crawl": {"state": "paused" if paused and self.state == "running" else self.state, "fetched": fetched, "attempts": frontier.attempts,
                      "queued": frontier.queued, "in_flight": frontier.in_flight,
                      **self._rates(now, fetched), "elapsed": round(now - self.started_at, 3),
                      "started_at": self.started_at},
            "rate": list(self.rate),
            "outcomes": dict(frontier.counts.page_outcomes),
            "reasons": reasons,
            "seen": {"bloom_fill": seen.get("fill_ratio"), "fp_rate": seen.get("estimated_false_positive_rate"),
                     "lru_hit_rate": round(int(seen.get("lru_hits", 0) or 0) / checked, 4) if checked else
                     seen.get("lru_hit_rate"),
                     "confirms": int(seen.get("log_confirmed", 0) or 0) + int(seen.get("false_positives_caught", 0)
                                                                             or 0),
                     **seen},
            "workers": self._workers(),
            "traps": pattern_figures(frontier.detector),
            "waiting": waiting,
            "groups": self._groups(),
            "log_tail": [json.dumps(record, default=str) for record in self.tail],
            "audit": [] if controls is None else controls.audit(AUDIT_TAIL),
            **(extra or {}),
        }

    def handle(self, what: str, params: dict[str, Any]) -> Any:
        """A console request (frontier.console.server), on the loop's thread: "snapshot", a table's rows, or
        "action" {"name", "params", "caller"} (ValueError for bad input; ActionUnavailable without actions)."""
        if what == "snapshot":
            return self.snapshot()
        if what == "hosts":
            return self.host_rows()
        if what == "queues":
            return self.queue_rows()
        if what == "seeds":
            return seed_rows(self.tally)
        if what == "action":
            if self.controls is None:
                raise ActionUnavailable("this crawl has no control actions")
            return self.controls.apply(params["name"], params["params"], params["caller"])
        raise ValueError(f"unknown request {what!r}")
