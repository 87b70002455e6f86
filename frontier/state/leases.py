"""The lease table of a single-owner store, in memory: key -> (host id, deadline, lease), oldest deadline first.

Leases need not be durable there: after a crash nothing is leased, and every queued URL (a leased one
stays in its queue until acked) is leasable again.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from frontier.state.base import Lease


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    hid: int
    deadline: float
    lease: Lease


class LeaseTable:
    def __init__(self) -> None:
        self._leases: dict[bytes, LeaseRecord] = {}
        self._deadlines: list[tuple[float, bytes]] = []

    def __len__(self) -> int:
        return len(self._leases)

    def get(self, key: bytes) -> LeaseRecord | None:
        return self._leases.get(key)

    def add(self, hid: int, lease: Lease, deadline: float) -> None:
        self._leases[lease.key] = LeaseRecord(hid, deadline, lease)
        heapq.heappush(self._deadlines, (deadline, lease.key))

    def renew(self, key: bytes, deadline: float) -> bool:
        """Move a live lease's deadline to `deadline` (the old heap entry is skipped by `pop_expired`)."""
        record = self._leases.get(key)
        if record is None:
            return False
        self._leases[key] = LeaseRecord(record.hid, deadline, record.lease)
        heapq.heappush(self._deadlines, (deadline, key))
        return True

    def pop(self, key: bytes) -> LeaseRecord | None:
        return self._leases.pop(key, None)

    def pop_expired(self, now: float) -> list[LeaseRecord]:
        """Remove and return the leases whose deadline is <= now, oldest deadline first."""
        out: list[LeaseRecord] = []
        while self._deadlines and self._deadlines[0][0] <= now:
            deadline, key = heapq.heappop(self._deadlines)
            record = self._leases.get(key)
            if record is None or record.deadline != deadline:
                continue
            del self._leases[key]
            out.append(record)
        return out

    def pop_all(self) -> list[LeaseRecord]:
        """Remove and return every lease, in the order they were granted."""
        out = list(self._leases.values())
        self._leases.clear()
        self._deadlines.clear()
        return out
