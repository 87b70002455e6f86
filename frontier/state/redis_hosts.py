"""The hosts table of a Redis crawl (`RedisCrawlState.host_report`): each host's queue group and politeness state,
as LMDB's `HostSchedule.host_report` gives them, read from the records the server functions keep.

Read only and paged: each slot group's host set is walked with SSCAN (PAGE names a step, every group's step in
one pipeline), then one pipelined HMGET per host record of the page and per queue group not read yet
(frontier/state/lua/crawl_hosts.lua, crawl_groups.lua). Never KEYS, never a whole set in one reply. A report
taken while instances run is a near-instant view, not one transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from frontier.state.base import ACTIVE, BACKING_OFF, WAITING
from frontier.url.groups import group_key

PAGE = 500  # host names per SSCAN step of a slot group
_HOST = ("queued", "inflight", "gate", "next", "pause", "bo", "addr", "grp")
_GROUP = ("inflight", "next", "pause", "bo")

Run = Callable[[Sequence[tuple[Any, ...]]], list[Any]]


def _num(x: bytes | None) -> float:
    return float(x) if x else 0.0


def _text(x: bytes | None) -> str:
    return x.decode() if x else ""


def _group_of(host: str, queue_by: str, record: dict[str, bytes | None]) -> str:
    """The host's queue group as crawl_groups.lua's group_of keys it: under domain the stored key (the host itself
    while it has none), under ip the learnt address."""
    if queue_by == "domain":
        return _text(record["grp"]) or host
    return group_key(host, queue_by, _text(record["addr"]))


def host_pages(run: Run, slot_keys: Sequence[str]) -> Iterator[list[tuple[int, str]]]:
    """Every host of the crawl as (slot group, name), a page at a time: one SSCAN step of each slot group per page
    (a name added meanwhile may be missed, none is given twice but by SSCAN's own guarantee: rarely)."""
    cursors = dict.fromkeys(range(len(slot_keys)), 0)
    while cursors:
        asked = list(cursors)
        replies = run([("sscan", (f"{slot_keys[g]}:hosts", cursors[g]), {"count": PAGE}) for g in asked])
        page: list[tuple[int, str]] = []
        for g, (cursor, names) in zip(asked, replies):
            page.extend((g, name.decode()) for name in names)
            if int(cursor) == 0:
                del cursors[g]
            else:
                cursors[g] = int(cursor)
        yield page


def host_report(run: Run, slot_keys: Sequence[str], queue_prefix: str, queue_by: str,
                now: float) -> list[dict[str, object]]:
    """One row per host (host, group, state, backoff, in_flight, queued); `now` on the server's clock. `run` runs
    commands in one pipeline and returns their replies; `slot_keys`: each slot group's key prefix; `queue_prefix`:
    the queue groups' (frontier.state.redis_keys.KeySpace)."""
    rows: list[dict[str, object]] = []
    groups: dict[str, dict[str, float]] = {}
    for page in host_pages(run, slot_keys):
        records = [dict(zip(_HOST, reply))
                   for reply in run([("hmget", (f"{slot_keys[g]}:h:{host}", list(_HOST))) for g, host in page])]
        keys = [_group_of(host, queue_by, record) for (_, host), record in zip(page, records)]
        if queue_by != "host":
            new = sorted({key for key in keys if key not in groups})
            for key, reply in zip(new, run([("hmget", (queue_prefix + key, list(_GROUP))) for key in new])):
                groups[key] = {field: _num(value) for field, value in zip(_GROUP, reply)}
        for (_, host), record, key in zip(page, records, keys):
            rows.append(_row(host, key, record, groups.get(key), now))
    return rows


def _row(host: str, key: str, record: dict[str, bytes | None], group: dict[str, float] | None,
         now: float) -> dict[str, object]:
    """A host's row; `group`: its queue group's hash (None under queue_by host, where the host's record holds its
    clock, pause and backoff level)."""
    clock = group if group is not None else {field: _num(record[field]) for field in ("next", "pause", "bo")}
    gate = _text(record["gate"])
    if clock["pause"] > now:
        state = BACKING_OFF
    elif gate == "gwait" or clock["next"] > now:
        state = WAITING
    else:
        state = ACTIVE
    return {"host": host, "group": key, "state": state, "backoff": int(clock["bo"]),
            "in_flight": int(_num(record["inflight"])) + (gate == "leased"), "queued": int(_num(record["queued"]))}
