"""frontier's Redis Functions library: the Lua files under `frontier/state/lua/`, joined into the one text
FUNCTION LOAD takes, and the names of its functions.

Loaded with FUNCTION LOAD REPLACE (`frontier.state.redis_conn.load_library`): unlike SCRIPT LOAD, a function
library persists in RDB/AOF and replicates, so it survives a restart and a failover. URLs and fingerprints
reach it only as command arguments; its text never changes at run time.

A library is an entry file whose `--- @include "<path>"` lines (a path under the `frontier` package, without
`.lua`) each stand for that file's text, included once, where it is first named, as BullMQ's
`src/commands/*.lua` include their helpers. The joined text is headed by `#!lua name=<name>` and
`local VERSION = '<digest>'`: the version is the digest of the text, so a change of any file is a new version
(instances reload a library whose version differs; the crawl's meta pins it, so a crawl created by another
version is refused with one line). The seen-set's layout and its local functions (`seen_add`, `seen_has`, for
the functions of any library that includes `state/lua/seen`) are described in `state/lua/seen.lua`.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib.resources import files

LIBRARY_NAME = "frontier"
SEEN_LAYOUT = "1"  # bump when the seen-set's bytes change: a crawl written in another layout is refused
FUNCTION_VERSION = "frontier_version"
FUNCTION_SEEN_ADD = "frontier_seen_add"
FUNCTION_SEEN_HAS = "frontier_seen_has"
FUNCTION_LEASE = "frontier_lease"
FUNCTION_COMMIT = "frontier_commit"
FUNCTION_END = "frontier_end"
FUNCTION_RERUN = "frontier_rerun"
FUNCTION_REGROUP = "frontier_regroup"
FUNCTION_STORE_GROUPS = "frontier_store_groups"
FUNCTION_BUDGET = "frontier_budget"
FUNCTION_RANK = "frontier_rank"
FUNCTION_DUE = "frontier_due"
FINGERPRINT_BYTES = 8  # per fingerprint in a call's argument
MAX_CHUNK_ENTRIES = 65535  # lua/seen.lua's MAX_ENTRIES (u16 run starts): a call that would pass it fails
# (unreachable with load <= 16384)

_INCLUDE = re.compile(r'^--- @include "([\w/]+)"\n', re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Library:
    """A Functions library: its text, and the function that answers its version (`load_library` reloads a
    master whose answer differs)."""

    text: str
    version: str
    version_function: str


def _joined(path: str, included: set[str]) -> str:
    """The text of `path` (under the frontier package, without .lua) with its includes expanded; a file
    already in `included` is left out (each is included once)."""
    if path in included:
        return ""
    included.add(path)
    text = files("frontier").joinpath(f"{path}.lua").read_text(encoding="utf-8")
    return _INCLUDE.sub(lambda m: _joined(m.group(1), included), text)


def library(name: str, version_function: str, entry: str) -> Library:
    """The library `name` of the entry file `entry` (a path under the frontier package, without .lua) and its
    includes; its version is the digest of the joined text, answered by its function `version_function`."""
    body = _joined(entry, set())
    version = hashlib.sha256(f"{name}\n{body}".encode()).hexdigest()[:16]
    return Library(f"#!lua name={name}\nlocal VERSION = '{version}'\n{body}", version, version_function)


FRONTIER = library(LIBRARY_NAME, FUNCTION_VERSION, "state/lua/frontier")
LIBRARY = FRONTIER.text
LIBRARY_VERSION = FRONTIER.version
