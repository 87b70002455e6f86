"""The console's tables, one builder each for the live page (frontier.console.live) and `frontier report`
(frontier.cli.report): hosts, queues, seeds; and their paging and their CSV / JSON forms.

    tally = LogTally()                    # per-host figures the crawl state does not keep
    tally.observe(record)                 # each crawl log record (frontier.crawl.events), live or read back
    rows = host_rows(facts, tally)        # facts: HostFacts, from the live host records or a stored data dir
    chosen = select_rows(rows, HOST_KEYS, sort="fetched", desc=True, q="example")
    page = page_rows(chosen, HOST_KEYS, offset=0, limit=100)      # {"total", "rows": [dict, ...]}

The crawl state keeps, per host, its pages fetched and its queue; bytes, robots.txt refusals, 304s and errors
exist only as crawl log records, so `LogTally` counts them (the frontier process as the records are written, a
report by reading crawl.jsonl). A row is a tuple in the order of its table's KEYS: 10^5 of them sort as tuples
(one key function, no per-row dict) and only the rows of the asked page become dicts.

Host states: active (fetches in flight, or ready to lease), waiting (its politeness delay), backing_off (a
Retry-After), blocked (held by an operator), retired (its page budget spent), robots (its robots.txt not known
yet), parked (only entries held for a rerun: parked trap URLs, unreachable seeds), unreachable (its robots.txt
failed with a network error in this run), done (nothing queued). A stored data dir read by a report knows
only queued (then "queued") or done.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from frontier.crawl.revisit import NOT_MODIFIED
from frontier.url.canonical import url_host

HOST_KEYS = ("host", "group", "fetched", "bytes", "robots_refused", "queued", "not_modified", "errors", "delay",
             "state")
QUEUE_KEYS = ("host", "queued", "low", "held", "retrying", "in_flight", "ready_in", "delay", "fetched", "budget_left",
              "state")
SEED_KEYS = ("url", "host", "state", "http_status", "reason", "attempts", "links", "fetched_at")
TABLES = {"hosts": HOST_KEYS, "queues": QUEUE_KEYS, "seeds": SEED_KEYS}
MAX_LIMIT = 1000  # rows of one page at most
_BYTES, _ROBOTS, _NOT_MODIFIED, _ERRORS = range(4)


class ReportError(ValueError):
    """A bad sort key, offset or limit: the message is one line for the caller (HTTP 400, or the CLI's error)."""


@dataclass(frozen=True, slots=True)
class HostFacts:
    """What the crawl state knows of one host. `group`: its politeness group (the host itself unless
    politeness groups are on); `delay`: None where unknown (a stored data dir); `ready_in`: seconds until it may
    be leased (0 ready, None unknown); `held`: entries held for a rerun; `retrying`: entries waiting for a
    retry's backoff (None: not counted, the live view); `budget_left`: pages its max_pages_per_host still allows
    (None: no limit)."""

    host: str
    fetched: int
    queued: int
    state: str
    group: str = ""
    low: int = 0
    held: int = 0
    retrying: int | None = None
    in_flight: int = 0
    delay: float | None = None
    ready_in: float | None = None
    budget_left: int | None = None


class LogTally:
    """Per-host counts from crawl log records (`observe`), and the records of seeds (depth 0) by URL."""

    def __init__(self) -> None:
        self.hosts: dict[str, list[int]] = {}
        self.seeds: dict[str, dict[str, Any]] = {}
        self.bytes = 0
        self.bad_lines = 0  # crawl log lines `read` could not parse (a torn last line after a kill -9)

    def observe(self, record: Mapping[str, Any]) -> None:
        url = record.get("url")
        if not isinstance(url, str):
            return
        host = url_host(url)
        counts = self.hosts.get(host)
        if counts is None:
            counts = self.hosts[host] = [0, 0, 0, 0]
        size = record.get("bytes") or 0
        counts[_BYTES] += size
        self.bytes += size
        reason, status = record.get("reason"), record.get("http_status")
        if reason == "robots_disallowed":
            counts[_ROBOTS] += 1
        elif reason == NOT_MODIFIED or status == 304:
            counts[_NOT_MODIFIED] += 1
        elif record.get("status") == "fail" or (status is not None and status >= 400):
            counts[_ERRORS] += 1
        if record.get("depth") == 0 and not url.endswith("/robots.txt") and "sitemap" not in record \
                and reason != "soft_404_probe":
            self._seed(url, host, record)

    def _seed(self, url: str, host: str, record: Mapping[str, Any]) -> None:
        seed = self.seeds.get(url)
        attempts = 0 if seed is None else seed["attempts"]
        status = record.get("status")
        self.seeds[url] = {
            "url": url, "host": host,
            "state": "fetched" if record.get("http_status") is not None else "failed" if status == "fail" else
                     "skipped" if status == "skip" else "attempted",
            "http_status": record.get("http_status"), "reason": record.get("reason"),
            "attempts": attempts + (status != "skip"), "links": record.get("links", 0),
            "fetched_at": record.get("fetched_at"),
        }

    def read(self, lines: Iterable[str | bytes]) -> "LogTally":
        """Observe every record of crawl log lines (a line that is not a JSON object is counted in bad_lines)."""
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                self.bad_lines += bool(line.strip())
                continue
            if isinstance(record, dict):
                self.observe(record)
            else:
                self.bad_lines += 1
        return self

    def counts(self, host: str) -> Sequence[int]:
        return self.hosts.get(host) or (0, 0, 0, 0)


def host_rows(facts: Iterable[HostFacts], tally: LogTally, *, state_known: bool = True) -> list[tuple[Any, ...]]:
    """One HOST_KEYS row per host the state knows, and per host only the log knows: with `state_known`, one
    whose every URL was refused before it got a queue (done); without (the state's hosts were not read: a Redis
    crawl's live view), its queue and state unknown (None)."""
    rows = []
    known = set()
    for f in facts:
        known.add(f.host)
        c = tally.counts(f.host)
        rows.append((f.host, f.group or f.host, f.fetched, c[_BYTES], c[_ROBOTS], f.queued, c[_NOT_MODIFIED],
                     c[_ERRORS], f.delay, f.state))
    for host, c in tally.hosts.items():
        if host not in known:
            rows.append((host, host, 0 if state_known else None, c[_BYTES], c[_ROBOTS], 0 if state_known else None,
                         c[_NOT_MODIFIED], c[_ERRORS], None, "done" if state_known else None))
    return rows


def queue_rows(facts: Iterable[HostFacts]) -> list[tuple[Any, ...]]:
    """One QUEUE_KEYS row per host with a queue (the frontier summary of Heritrix: items, wake time, budget)."""
    return [(f.host, f.queued, f.low, f.held, f.retrying, f.in_flight,
             None if f.ready_in is None else round(f.ready_in, 3), f.delay, f.fetched, f.budget_left, f.state)
            for f in facts if f.queued]


def seed_rows(tally: LogTally, queued: Iterable[str] = ()) -> list[tuple[Any, ...]]:
    """One SEED_KEYS row per seed: its last record in the log; a seed still queued and never attempted, "queued"."""
    rows = [tuple(seed[key] for key in SEED_KEYS) for seed in tally.seeds.values()]
    rows += [(url, url_host(url), "queued", None, None, 0, 0, None) for url in queued if url not in tally.seeds]
    return rows


def select_rows(rows: Sequence[tuple[Any, ...]], keys: Sequence[str], *, sort: str | None = None, desc: bool = False,
                q: str = "") -> list[tuple[Any, ...]]:
    """The rows whose first column holds `q` (case-insensitive), sorted by `sort` (a key of `keys`; None: as
    given; unknown values last, ties by the first column). ReportError for a bad sort key."""
    if sort is not None and sort not in keys:
        raise ReportError(f"sort: expected one of {', '.join(keys)}, got {sort!r}")
    needle = q.strip().lower()
    chosen = [row for row in rows if needle in row[0].lower()] if needle else list(rows)
    if sort is not None:
        column = keys.index(sort)
        unknown = sorted((row for row in chosen if row[column] is None), key=lambda row: row[0])
        chosen = sorted((row for row in chosen if row[column] is not None), key=itemgetter(0))
        chosen.sort(key=itemgetter(column), reverse=desc)  # stable, also reversed: ties stay in host order
        chosen += unknown
    return chosen


def page_rows(chosen: Sequence[tuple[Any, ...]], keys: Sequence[str], *, offset: int = 0,
              limit: int = 100) -> dict[str, Any]:
    """{"total": len(chosen), "rows": the page from `offset`, at most `limit`, as dicts}. ReportError for a bad
    offset or limit."""
    if offset < 0 or not 1 <= limit <= MAX_LIMIT:
        raise ReportError(f"offset must be >= 0 and limit within 1..{MAX_LIMIT}, got offset {offset}, limit {limit}")
    return {"total": len(chosen), "rows": [dict(zip(keys, row)) for row in chosen[offset:offset + limit]]}


def to_json(rows: Sequence[tuple[Any, ...]], keys: Sequence[str]) -> str:
    """A JSON array of row objects."""
    return json.dumps([dict(zip(keys, row)) for row in rows], indent=1)


def to_csv(rows: Sequence[tuple[Any, ...]], keys: Sequence[str]) -> str:
    """CSV with a header line; an unknown value is an empty field."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(keys)
    writer.writerows(["" if value is None else value for value in row] for row in rows)
    return out.getvalue()
