"""The crawl-state seam: what the scheduler (frontier.crawl) asks of a backend, and the messages it passes.

    state.commit(Commit(links=..., acks=...), now)              -> Committed: which links were new
    state.lease(max_jobs, now, allows)                          -> LeaseBatch: ready URLs, leased
    state.leased(keys)                                          -> the lease behind each result, or None
    state.expire(now) / state.abandon(now)                      -> leases that ended without a result

A backend owns everything that must be shared by every frontier instance of one crawl: the seen-set, the
per-host FIFO queues, the lease table (with deadlines), the per-host politeness clock (next allowed
time, in-flight count, delay), the robots.txt texts, the counters and the global limits. What it does
with them follows `StatePolicy`. The caller (frontier.crawl) keeps what is per-process: canonicalisation
and scope, parsed robots.txt rules, the retry/backoff decision, reasons and the crawl log events.

Guarantees every backend keeps (tests/test_state_contract.py runs one contract against each):
  * A link is new exactly once per crawl; a new link's queue entry is written in the same atomic step as
    its seen-set entry, so a URL is recorded seen if and only if it is queued or done. A forced link
    (`Link.force`) is the exception: queued every time, without the seen-set (Scrapy's dont_filter).
  * Recrawl: a URL seen and no longer queued (done) is queued once more by a `Link.recrawl`, or, with
    `recrawl_after`, by any link to it once its last result is older than that; while it is queued again,
    further links (recrawl ones included) leave it alone, so it is queued once however many ask.
  * A depth-0 link (a seed, or a URL a seed redirects to) is never dropped as seen by a false positive of
    a probabilistic seen-set: its "maybe seen" is confirmed exactly.
  * A link's `payload` stays with its queue entry, requeues and expiries included, and comes back in each
    `Lease` of it.
  * A leased URL stays queued until an ack removes or requeues it; a lease that expires (or is
    abandoned) counts an attempt and puts the URL back at the tail of its host's FIFO under a new key.
    A key is a lease handle: an ack or `leased` check of a key whose lease ended matches nothing.
  * A host's queue is leased in priority order (`Link.priority`, higher first), FIFO among equal priorities;
    a requeued URL keeps its priority and goes behind its equals. Among the hosts politeness allows now,
    pages are leased from the host whose best entry ranks highest (robots.txt leases first); a host that
    had `host_turn` page leases in a row goes behind the other ready hosts. A `Rescore` moves a queued URL
    to its new priority (one entry, its key changes; a leased one is left alone).
    A host's low queue (`Link.low`, the lowest band of priorities)
    is leased only when no normal entry of the host can be, by priority among its own, and at most
    `max_suspect_pages` of its entries per host ever (`low_fetched` + its low leases); a requeued low entry
    stays low. `done` holds when only low entries past that budget remain; `suspected()` lists them.
  * Counters and per-host fetched counts are committed with the acks they count.
  * Revisits (`StatePolicy.revisit`): a DONE ack's `revisit` is stored in the same atomic step; once its
    `due` time passes, a URL that is done (not queued) is queued again by the schedule itself (one step: the
    due entry goes as the queue entry comes), so `done` says no while a page is due now.
  * Everything written survives close() and reopening (and, for LMDB, kill -9).

Keys are opaque bytes to the caller. Times are wall-clock seconds (time.time()), passed in as `now` so a
test can drive a clock.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

Allows = Callable[[str, str], bool]  # (host, url) -> may this URL be fetched under the host's robots.txt?


@dataclass(frozen=True, slots=True, kw_only=True)
class StatePolicy:
    """The scheduling rules a backend applies (from LimitsConfig, PolitenessConfig and workers.lease_timeout,
    which check the values).

    `delay` is the default per-host delay; a host's own delay (robots.txt Crawl-delay) arrives with its
    `RobotsAck`. With a delay > 0 a host has one fetch in flight, else up to `max_per_host`.
    `max_pages` / `max_pages_per_host` count fetched pages plus page leases in flight, crawl-wide.
    `recrawl_after` (DedupConfig): seconds after a URL's last result from which a link to it queues it again;
    None: never.
    `max_suspect_pages` (traps.max_suspect_pages): entries of a host's low queue leased at most, leases in
    flight included; None: no limit. What it leaves stays queued: the crawl is done without them.
    `host_turn` (politeness.host_turn): page leases a host gets in a row while other hosts are ready; then it
    goes behind them (Heritrix's balanceReplenishAmount). None: no turns.
    `revisit` (revisit.after set): store each fetched page's `Ack.revisit` and queue it again when it is due;
    leases carry the stored record. `revisit_continuous`: a state with pages due later is not done.
    """

    lease_timeout: float = 120.0
    max_retries: int = 2
    max_per_host: int = 8
    delay: float = 0.0
    obey_robots: bool = True
    robots_ttl: float = 86400.0
    max_pages: int | None = None
    max_pages_per_host: int | None = None
    recrawl_after: float | None = None
    max_suspect_pages: int | None = 1000
    host_turn: int | None = 3000
    revisit: bool = False
    revisit_continuous: bool = False


PRIORITY_LIMIT = 1e12  # |priority| at most this: a finite float a Redis score keeps below the low band


def check_priority(priority: float) -> float:
    """A priority as a float; ValueError (the caller's bad input) unless finite and within PRIORITY_LIMIT."""
    value = float(priority)
    if not -PRIORITY_LIMIT <= value <= PRIORITY_LIMIT:  # NaN fails both
        raise ValueError(f"priority must be a finite number within +-{PRIORITY_LIMIT:g}, not {priority!r}")
    return value


class Link(NamedTuple):
    """A canonical, in-scope URL proposed for the queue: a seed (depth 0), an outlink or a redirect target.
    A NamedTuple rather than a frozen dataclass: one is built per link, and it costs half as much.

    `payload`: opaque bytes stored with the queue entry and returned in its leases (frontier.scrapy keeps
    the serialised Scrapy request there). `force`: queue it even if seen or already queued, neither
    checking nor recording it in the seen-set (Scrapy's dont_filter); it is always "new". `recrawl`: queue it
    unless it is queued now (leased included): new if never seen, queued again if done (frontier.cli.recrawl).
    `low`: queue a new link in its host's low queue (a suspected crawler trap, frontier.crawl.traps): leased after
    every normal entry of the host, at most `StatePolicy.max_suspect_pages` of them per host.
    `priority`: higher is leased first (see `check_priority`); a requeue keeps it."""

    url: str
    depth: int
    redirects: int = 0
    payload: bytes | None = None
    force: bool = False
    recrawl: bool = False
    low: bool = False
    priority: float = 0.0


class Revisit(NamedTuple):
    """A fetched URL's revisit schedule (frontier.crawl.revisit): when it is `due` again (wall clock), its
    `interval`, when it last changed, when its last full response was captured (what a WARC revisit record refers
    to), an 8-byte digest of that body (b"": none) and its validators exactly as received ("": none)."""

    url: str
    depth: int
    due: float
    interval: float
    changed_at: float
    captured_at: float
    digest: bytes = b""
    etag: str = ""
    last_modified: str = ""
    visits: float = 0.0  # revisits the change-rate estimate counts (frontier.crawl.revisit: recent ones, faded)
    changes: float = 0.0  # of those, the ones that found the page changed
    seconds: float = 0.0  # the time they cover


class Rescore(NamedTuple):
    """A new priority for a URL: `priority` itself, or (`add`) added to its present one. Applied to the URL's
    queue entry if it is queued and not leased; otherwise nothing happens (a URL not queued is not queued)."""

    url: str
    priority: float
    add: bool = False


class Outcome(enum.Enum):
    """What an ack does to a leased page's queue entry."""

    DONE = "done"  # dequeued; counts an attempt
    RETRY = "retry"  # requeued at the tail with attempt + 1, not leased before `not_before`; an attempt
    HOLD = "hold"  # an unreachable seed: requeued with attempt 0, not leased again by this run; an attempt
    DROP = "drop"  # dequeued without a fetch (robots.txt disallows it): no attempt, no counter
    LOW = "low"  # not fetched: moved to the tail of its host's low queue (a suspected trap); no attempt
    WAIT = "wait"  # not fetched: requeued in its band with its attempts, no attempt counted; the host is not leased
    #                again before the ack's `pause_until` (a host the operator blocked, frontier.crawl.steering)
    PARK = "park"  # not fetched: requeued in its band and not leased again by this run (a suspected trap pattern
    #                past its budget: `suspected` lists it, a later run leases it again); no attempt

PARKED = "trap_budget"  # the reason a PARK entry is held for, apart from the unreachable seeds' network errors


@dataclass(frozen=True, slots=True, kw_only=True)
class Ack:
    """The end of a page lease with a result, or (DROP) of a page `lease` returned as disallowed, or (LOW, PARK) of
    a page lease the caller moves to its host's low queue, or parks for the rest of the run, unfetched."""

    key: bytes
    outcome: Outcome
    fetched: bool = False  # the fetch got an HTTP response: counts in `fetched` and the host's page budget
    not_before: float = 0.0  # RETRY: wall-clock time before which the URL is not leased again
    reason: str = ""  # HOLD: the network error (a key of messages.NETWORK_ERRORS)
    pause_until: float = 0.0  # the host is not leased again before this time (Retry-After, adaptive delay)
    revisit: Revisit | None = None  # DONE, with StatePolicy.revisit: the page's next schedule, stored with the ack


class RobotsOutcome(enum.Enum):
    """What a robots.txt result does to its host."""

    OK = "ok"  # store the text (shared, persisted); the host's pages become leasable
    RETRY = "retry"  # a failure: lease robots.txt again at `not_before`
    DISALLOW = "disallow"  # given up, not a network error: pages become leasable (and are all refused
    #                        by `allows`, so dropped) for the rest of this run; nothing is stored
    UNREACHABLE = "unreachable"  # given up on a network error: the host is not leased again in this run;
    #                              its URLs stay queued for a rerun (`unreachable_seeds`)


@dataclass(frozen=True, slots=True, kw_only=True)
class RobotsAck:
    """The end of a robots.txt lease with a result. `delay`: the host's politeness delay from now on."""

    key: bytes
    outcome: RobotsOutcome
    delay: float
    text: str = ""  # OK: the robots.txt body
    fetched_at: float = 0.0  # OK: when it was fetched (its age counts against robots_ttl)
    not_before: float = 0.0  # RETRY
    reason: str = ""  # UNREACHABLE: the network error
    pause_until: float = 0.0  # Retry-After


@dataclass(frozen=True, slots=True, kw_only=True)
class Commit:
    """One atomic step: check-and-add `links`, queue the new ones, apply `acks` (pages and robots.txt), store
    `host_state` (opaque per-host bytes, e.g. the trap detector's; b"" deletes), update the counters.

    Order, for a backend that cannot make it one transaction (Redis: one step per hash slot): links and
    host_state first, then acks, so a crash in between refetches a page rather than losing its links."""

    links: Sequence[Link] = ()
    rescore: Sequence[Rescore] = ()  # applied after the links are queued
    acks: Sequence[Ack | RobotsAck] = ()  # in the order of the results
    host_state: Mapping[str, bytes] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Committed:
    """`new[i]` is True when links[i] was new to the crawl, or done and queued again (recrawl): it is now queued
    (committed with it). A link repeated within one commit is new at most once (its first occurrence); a
    forced link is new.
    `stale`: keys of acks whose lease had already ended (expired): ignored, nothing changed for them."""

    new: list[bool]
    stale: list[bytes] = field(default_factory=list)
    moved: int = 0  # queued entries a `Commit.rescore` moved to a new priority


@dataclass(frozen=True, slots=True)
class Lease:
    """A leased queue entry (robots=False) or robots.txt fetch (robots=True). `key` is the lease handle.
    For a robots lease, `url` is the host's robots.txt and `attempt` counts its earlier failures.
    `payload`: the entry's `Link.payload` (None for a robots lease). `low`: an entry of the host's low queue.
    `priority`: the entry's priority when leased. `revisit`: the URL's stored schedule (StatePolicy.revisit), None
    before its first fetch."""

    key: bytes
    host: str
    url: str
    depth: int = 0
    attempt: int = 0
    redirects: int = 0
    robots: bool = False
    payload: bytes | None = None
    low: bool = False
    priority: float = 0.0
    revisit: Revisit | None = None


@dataclass(frozen=True, slots=True)
class LeaseBatch:
    """`leases`: what may be fetched now, in the order granted. `disallowed`: pages `allows` refused,
    leased until the caller commits them as Outcome.DROP."""

    leases: list[Lease]
    disallowed: list[Lease] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Ended:
    """A lease that ended without a result (expired or abandoned). A page counted an attempt: `requeued`
    means it went back to its host's queue (new key, attempt + 1), else it was given up after
    1 + max_retries attempts. A robots lease was only released (`requeued` False)."""

    lease: Lease
    requeued: bool


@dataclass(frozen=True, slots=True)
class StateStats:
    """fetched: page results with an HTTP response; attempts: page results plus leases ended without one
    (both crawl-wide and persisted); queued: queue entries, leased ones included; in_flight: leases
    (robots ones included); hosts: hosts ever queued; unreachable_hosts: hosts held back in this run."""

    fetched: int
    attempts: int
    queued: int
    in_flight: int
    hosts: int
    unreachable_hosts: int
    held: int | None = None  # leases this instance holds, of a shared state; None: all of them (in_flight)


class CrawlState(Protocol):
    """The crawl state of one crawl. Single-owner (LMDB, `frontier.state.lmdb`) or shared by many frontier
    instances (Redis). Open it in the process that uses it; close() is idempotent."""

    policy: StatePolicy

    def commit(self, batch: Commit, now: float) -> Committed:
        """Apply `batch` atomically (see `Commit`); returns which links were new (queued with it) and
        which acks were stale. A page ack moves its host's next allowed time to now + the host's delay."""

    def lease(self, max_jobs: int, now: float, allows: Allows) -> LeaseBatch:
        """Up to `max_jobs` leases that politeness and the limits allow now, each until now +
        lease_timeout. A host without a fresh robots.txt (obey_robots) gets a robots lease first; its pages
        wait for the RobotsAck. Once a host has robots.txt, `allows(host, url)` screens its pages (a
        backend that cannot screen inside its atomic step screens what the step returned). Call `expire`
        first: `lease` does not end overdue leases."""

    def leased(self, keys: Sequence[bytes]) -> list[Lease | None]:
        """The live lease of each key, or None when it ended (expired: its result is stale). Reads only."""

    def renew(self, keys: Sequence[bytes], now: float) -> list[bool]:
        """Move the deadline of each of this instance's live leases in `keys` to now + lease_timeout: a holder
        that keeps a URL longer than the timeout (a Scrapy engine waiting on a download slot) keeps its lease.
        False for a key whose lease has ended (expired, or never this instance's): its result will be stale."""

    def expire(self, now: float) -> list[Ended]:
        """End the leases whose deadline passed (a dead or stuck worker, or a dead instance)."""

    def abandon(self, now: float) -> list[Ended]:
        """End every lease this instance holds, e.g. before restarting dead workers."""

    def next_ready_in(self, now: float) -> float | None:
        """Seconds until some host may be leased (0: now); None when no queued URL can be leased any
        more (within the limits), leases in flight aside."""

    def done(self, now: float) -> bool:
        """True when nothing is leased and no queued URL can still be leased (within the limits). A state
        that defers seen-tests (LmdbCrawlState: frontier.seen.parked) answers them first, which may queue URLs."""

    def robots_text(self, host: str) -> str | None:
        """The stored robots.txt body of a host, for rules this process has not parsed. None if none is
        stored: a host whose pages are leasable without one was given up (RobotsOutcome.DISALLOW), so the
        caller refuses them all."""

    def host_states(self) -> dict[str, bytes]:
        """Every host's stored `host_state` bytes (read once at start)."""

    def unreachable_seeds(self) -> list[tuple[str, str]]:
        """(URL, network error) of each queued depth-0 URL held back in this run: its host's robots.txt
        or the URL itself failed with a network error on every attempt."""

    def knows_host(self, host: str) -> bool:
        """True if a URL of `host` ("name[:port]") was ever queued in this crawl."""

    def queued_urls(self) -> list[tuple[str, str]]:
        """(host, URL) of every queued entry, leased and held ones included, host by host in queue order (an
        operator's exclusion counts what it purges from them)."""

    def suspected(self) -> list[tuple[str, str]]:
        """(host, URL) of every entry still in a low queue, leased ones included, host by host in FIFO order:
        at the end of a crawl, the URLs skipped as suspected traps."""

    def stats(self) -> StateStats:
        """Counters and sizes; see StateStats."""

    def seen_stats(self) -> dict[str, object]:
        """The seen-set's own figures (tiers, sizes), for progress lines and summary.json."""

    def close(self) -> None:
        """Release the handle; what is queued or leased stays for the next run."""
