"""A Redis crawl's standing orders and audit log (frontier.state.controls), in the crawl's keys:

    frontier:C:controls     hash: field -> value, one field per order
    frontier:C:audit        list: one JSON record per applied action, oldest first (at most AUDIT_MAX kept)

Every instance of the crawl reads the same hash, so an order given through one reaches all of them; one order
is one HSET or HDEL, atomic on the server. The calls go through the crawl state's retrying runner, so a server
restart or a failover is waited out as for any other step.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from frontier.state.redis_keys import PREFIX
from frontier.state.redis_state import RedisCrawlState

AUDIT_MAX = 100_000  # records kept in the audit list; older ones are trimmed


class RedisControls:
    """The orders of the crawl `state` (a RedisCrawlState) in its Redis keys."""

    def __init__(self, state: RedisCrawlState) -> None:
        self._state = state
        crawl = state.keys.crawl
        self._orders = f"{PREFIX}:{crawl}:controls"
        self._audit = f"{PREFIX}:{crawl}:audit"

    def orders(self) -> dict[str, str]:
        reply = self._state._run([("hgetall", (self._orders,))], "reading the crawl's orders")[0]
        return {bytes(k).decode(): bytes(v).decode() for k, v in reply.items()}

    def put(self, name: str, value: str) -> None:
        self._state._run([("hset", (self._orders, name, value))], "writing an order")

    def delete(self, name: str) -> bool:
        return bool(self._state._run([("hdel", (self._orders, name))], "removing an order")[0])

    def append_audit(self, record: Mapping[str, Any]) -> None:
        line = json.dumps(record, sort_keys=True, separators=(",", ":"))
        self._state._run([("rpush", (self._audit, line)), ("ltrim", (self._audit, -AUDIT_MAX, -1))],
                         "writing the audit log")

    def audit(self, limit: int) -> list[dict[str, Any]]:
        if limit <= 0:
            return []
        reply = self._state._run([("lrange", (self._audit, -limit, -1))], "reading the audit log")[0]
        return [json.loads(line) for line in reply]
