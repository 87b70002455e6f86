"""The operator's standing orders for a crawl, kept in the crawl state so a kill -9 keeps them and every instance
of a shared crawl follows them: pause, exclusions, host blocks and delays, retired hosts, released trap patterns.

    store.put("paused", "1")        one order: a field and its value (text), set in one atomic write
    store.delete("paused")          -> True if it was set
    store.orders()                  -> {field: value} of every order in force
    store.append_audit(record)      one applied action (a JSON-able dict); store.audit(limit) reads the newest

An order is one field, so two instances writing different orders at once never lose either (no read-modify-write).
Field names (`Orders` parses them; frontier.crawl.steering applies them):

    paused                      "1"
    exclude:re:<regex>          ""          URLs matching the regex: refused as links, dropped from the queue
    exclude:host:<host>         ""          the same for every URL of a host ("name[:port]")
    block:<host>                <until>     the host is not leased before this wall-clock time
    delay:<host>                <seconds>   the host waits at least this long after each result
    retire:<host>               ""          the host's queued URLs are not fetched in this run
    release:<host> <pattern>    ""          a suspected trap pattern is never suspected again

`LmdbControls` keeps them in a named database of the data dir's LMDB environment (written and read in the
environment's own transactions, so a copy of it, `checkpoint`, takes them along) and the audit log in
DATA_DIR/audit.jsonl; `frontier.state.redis_controls` keeps them in the crawl's Redis keys. `MemoryControls`
is the in-memory one, for tests and a library user's frontier.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

CONTROLS_DB = b"controls"
AUDIT_FILE = "audit.jsonl"

PAUSED = "paused"
EXCLUDE_RE = "exclude:re:"
EXCLUDE_HOST = "exclude:host:"
BLOCK = "block:"
DELAY = "delay:"
RETIRE = "retire:"
RELEASE = "release:"


class ControlStore(Protocol):
    """Where a crawl's standing orders and audit log live (see the module docstring for the fields)."""

    def orders(self) -> dict[str, str]:
        """Every order in force: field -> value."""

    def put(self, name: str, value: str) -> None:
        """Set one order (durable when this returns)."""

    def delete(self, name: str) -> bool:
        """Remove one order; True if it was set."""

    def append_audit(self, record: Mapping[str, Any]) -> None:
        """Append one applied action to the audit log (durable when this returns)."""

    def audit(self, limit: int) -> list[dict[str, Any]]:
        """The newest `limit` audit records, oldest first."""


@dataclass(frozen=True, slots=True)
class Orders:
    """The orders of a `ControlStore.orders()` mapping, parsed."""

    paused: bool = False
    exclude_patterns: tuple[str, ...] = ()
    exclude_hosts: frozenset[str] = frozenset()
    blocks: dict[str, float] = field(default_factory=dict)
    delays: dict[str, float] = field(default_factory=dict)
    retired: frozenset[str] = frozenset()
    released: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, orders: Mapping[str, str]) -> Orders:
        patterns, hosts, retired, released = [], set(), set(), []
        blocks: dict[str, float] = {}
        delays: dict[str, float] = {}
        for name, value in sorted(orders.items()):
            if name.startswith(EXCLUDE_RE):
                patterns.append(name[len(EXCLUDE_RE):])
            elif name.startswith(EXCLUDE_HOST):
                hosts.add(name[len(EXCLUDE_HOST):])
            elif name.startswith(BLOCK):
                blocks[name[len(BLOCK):]] = float(value)
            elif name.startswith(DELAY):
                delays[name[len(DELAY):]] = float(value)
            elif name.startswith(RETIRE):
                retired.add(name[len(RETIRE):])
            elif name.startswith(RELEASE):
                host, _, pattern = name[len(RELEASE):].partition(" ")
                released.append((host, pattern))
        return cls(paused=orders.get(PAUSED) == "1", exclude_patterns=tuple(patterns),
                   exclude_hosts=frozenset(hosts), blocks=blocks, delays=delays, retired=frozenset(retired),
                   released=tuple(released))


def read_audit_file(path: Path, limit: int) -> list[dict[str, Any]]:
    """The newest `limit` records of an audit.jsonl, oldest first; a torn last line (a kill -9 mid-write) is left
    out."""
    try:
        lines = path.read_bytes().splitlines()
    except FileNotFoundError:
        return []
    records = []
    for line in lines[-limit:] if limit > 0 else []:
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    return records


class JsonlAudit:
    """An append-only audit log file: one JSON object a line, flushed and fsynced per record."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, record: Mapping[str, Any]) -> None:
        line = json.dumps(record, sort_keys=True, separators=(",", ":")).encode() + b"\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)

    def read(self, limit: int) -> list[dict[str, Any]]:
        return read_audit_file(self.path, limit)


class LmdbControls:
    """The orders in the `controls` database of a data dir's LMDB environment (`log`: its
    frontier.seen.fplog.FingerprintLog), the audit log in DATA_DIR/audit.jsonl."""

    def __init__(self, log: Any, data_dir: str | Path) -> None:
        self._log = log
        self._db = log.open_db(CONTROLS_DB)
        self._audit = JsonlAudit(Path(data_dir) / AUDIT_FILE)

    def orders(self) -> dict[str, str]:
        def body(txn: Any) -> dict[str, str]:
            return {bytes(k).decode(): bytes(v).decode() for k, v in txn.cursor(db=self._db)}

        return self._log.read(body)

    def put(self, name: str, value: str) -> None:
        self._log.write(lambda txn: txn.put(name.encode(), value.encode(), db=self._db))
        self._log.sync()

    def delete(self, name: str) -> bool:
        gone = bool(self._log.write(lambda txn: txn.delete(name.encode(), db=self._db)))
        self._log.sync()
        return gone

    def append_audit(self, record: Mapping[str, Any]) -> None:
        self._audit.append(record)

    def audit(self, limit: int) -> list[dict[str, Any]]:
        return self._audit.read(limit)


class MemoryControls:
    """Orders and audit records in memory (gone with the process)."""

    def __init__(self) -> None:
        self._orders: dict[str, str] = {}
        self._audit: list[dict[str, Any]] = []

    def orders(self) -> dict[str, str]:
        return dict(self._orders)

    def put(self, name: str, value: str) -> None:
        self._orders[name] = value

    def delete(self, name: str) -> bool:
        return self._orders.pop(name, None) is not None

    def append_audit(self, record: Mapping[str, Any]) -> None:
        self._audit.append(dict(record))

    def audit(self, limit: int) -> list[dict[str, Any]]:
        return self._audit[-limit:] if limit > 0 else []
