"""Key names of one crawl in Redis, and the slot groups that spread them over a Redis Cluster.

Every key of crawl C starts with "frontier:C:" (C is a plain name: no braces, so it is never taken for a
hash tag). A host (the netloc of a canonical URL, the politeness key) belongs to one of G slot groups,
xxh3_64(host) mod G. A group's keys share its hash tag, so they live in one Cluster hash slot and one
atomic step on a host's state (its share of the seen-set now, its queue later) touches one slot.

    frontier:C:meta                hash: the layout and settings the crawl was created with
    frontier:C:{tag}:seen          hash of the group's seen-set: n (URLs) and m (chunks)
    frontier:C:{tag}:seen:<h>      string: chunk h of it (layout in frontier.state.redis_lua)
    frontier:C:{tag}:<name>        the group's crawl state: queues, hosts, leases, done times (frontier.state.redis_lua)
    frontier:C:budget              hash: used (pages fetched or leased crawl-wide, when limits.max_pages is set)
                                   and epoch (the crawl's: a budget lost is noticed)

The tags are chosen, not hashed: group i's tag is the first "i.k" (k = 0, 1, ...) whose slot lies in
[i * 16384 / G, (i + 1) * 16384 / G). The contiguous slot ranges a Cluster gives its masters then hold
equal numbers of groups (3 masters, G = 64: 21, 21 and 22), where hashed tags would leave them to chance.
G is a power of two up to 1024 and fixed for the life of a crawl (it decides where each host's keys are).
"""

from __future__ import annotations

import binascii
import functools
from dataclasses import dataclass

import xxhash

from frontier.config.checks import check_crawl_name
from frontier.errors import ConfigError

CLUSTER_SLOTS = 16384
MAX_GROUPS = 1024
PREFIX = "frontier"


def key_slot(tag: str) -> int:
    """The Cluster hash slot of a hash tag: CRC16 (XMODEM) mod 16384, as Redis computes it."""
    return binascii.crc_hqx(tag.encode(), 0) % CLUSTER_SLOTS


@functools.cache
def slot_tags(groups: int) -> tuple[str, ...]:
    """The hash tag of each group, group i's slot in the i-th of `groups` equal slot ranges."""
    tags = []
    for i in range(groups):
        lo, hi = i * CLUSTER_SLOTS // groups, (i + 1) * CLUSTER_SLOTS // groups
        k = 0
        while not lo <= key_slot(f"{i}.{k}") < hi:
            k += 1
        tags.append(f"{i}.{k}")
    return tuple(tags)


def check_groups(groups: int) -> int:
    if type(groups) is not int or not 1 <= groups <= MAX_GROUPS or groups & (groups - 1):
        raise ConfigError(f"must be a power of two from 1 to {MAX_GROUPS}, got {groups!r}",
                          key="storage.redis.groups")
    return groups


@dataclass(frozen=True, kw_only=True, slots=True)
class KeySpace:
    """The key names of crawl `crawl` with `groups` slot groups."""

    crawl: str
    groups: int

    def __post_init__(self) -> None:
        check_crawl_name(self.crawl)
        check_groups(self.groups)

    @property
    def meta_key(self) -> str:
        return f"{PREFIX}:{self.crawl}:meta"

    def group_of(self, host: str) -> int:
        """The slot group of a host (netloc), stable across processes and machines."""
        return xxhash.xxh3_64_intdigest(host.encode("utf-8", "surrogatepass")) & (self.groups - 1)

    def tag(self, group: int) -> str:
        return slot_tags(self.groups)[group]

    @property
    def queue_group_prefix(self) -> str:
        """The prefix of the politeness queue groups' keys (queue_by ip or domain, frontier/state/lua/crawl_groups.lua):
        outside every slot group's hash tag, as a group's hosts lie in any slot group (a single node only)."""
        return f"{PREFIX}:{self.crawl}:G:"

    @property
    def budget_key(self) -> str:
        return f"{PREFIX}:{self.crawl}:budget"

    def group_key(self, group: int) -> str:
        """The prefix of the group's crawl-state keys (its seen-set is this + ":seen")."""
        return f"{PREFIX}:{self.crawl}:{{{self.tag(group)}}}"

    def seen_key(self, group: int) -> str:
        """The group's seen-set hash; its chunks are this name + ":<h>"."""
        return f"{PREFIX}:{self.crawl}:{{{self.tag(group)}}}:seen"


def fcall_keys(key: str) -> tuple[int, str, str]:
    """numkeys and keys of an FCALL on a slot group's key: the key and its guard `<key>:guard`, never written.
    A Cluster refuses a call whose declared keys are not all present while their slot migrates (TRYAGAIN, on
    the source and on the target alike; retried), so a Function never runs while its group's keys are split
    between two masters: on the source it would fail at a key already moved after earlier writes, and on the
    target it would create a key still on the source (the migration then fails with BUSYKEY, or replaces it)."""
    return 2, key, f"{key}:guard"
