"""frontier: "have we seen this URL?" at crawl speed, shared by every process on the machine, and durable.

    from frontier import URLSeen
    with URLSeen("data/seen", capacity=10_000_000, error_rate=1e-4, exact=True) as seen:
        seen.add("http://example.com/a")                 # True: first time seen, crawl it
        seen.add("HTTP://Example.COM:80/./a#top")        # False: the same canonical URL
        seen.add_many(["http://example.com/b", "ftp://x/"])  # [True, False]; .invalid == {1: InvalidURL(...)}

`Frontier` is the crawl scheduler (seeds in, leased jobs out, results back), `SharedBloom` is the
shared-memory filter on its own, `CountingBloom` its deletable sibling, `Blacklist` a filter in a
memory-mapped file that many processes check, `bloom_parameters` sizes one, `canonicalize` and
`fingerprint` are the URL -> string -> 16 bytes steps, and every error is a `FrontierError`.
`import frontier` imports no HTTP, YAML or HTML library and starts no process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

# Eager: light, and `fingerprint` must be the function, not the submodule of the same name (importing the
# submodule binds it as an attribute of the package, which a lazy name would not overwrite).
from frontier.errors import ConfigError, DiskFull, FrontierError, InvalidURL, StorageError, VersionMismatch
from frontier.fingerprint import fingerprint
from frontier.lazy import lazy_getattr

if TYPE_CHECKING:
    from frontier.blacklist import Blacklist
    from frontier.bloom import SharedBloom
    from frontier.canonical import CanonicalRules, canonicalize
    from frontier.counting import CountingBloom
    from frontier.crawl.scheduler import Frontier
    from frontier.messages import FetchJob, FetchResult, Status
    from frontier.seen import MemorySeen, SeenBatch, SeenTest, URLSeen
    from frontier.sizing import BloomParameters, bloom_parameters

# Names are imported on first use (PEP 562): a process that only needs, say, frontier.canonical (a fetcher
# worker) does not pay for numpy and LMDB, which the de-dup core imports.
_LAZY = {
    "Blacklist": "frontier.blacklist",
    "SharedBloom": "frontier.bloom",
    "CanonicalRules": "frontier.canonical",
    "canonicalize": "frontier.canonical",
    "CountingBloom": "frontier.counting",
    "Frontier": "frontier.crawl.scheduler",
    "FetchJob": "frontier.messages",
    "FetchResult": "frontier.messages",
    "Status": "frontier.messages",
    "MemorySeen": "frontier.seen",
    "SeenBatch": "frontier.seen",
    "SeenTest": "frontier.seen",
    "URLSeen": "frontier.seen",
    "BloomParameters": "frontier.sizing",
    "bloom_parameters": "frontier.sizing",
}


__getattr__ = lazy_getattr(__name__, _LAZY, globals())


def __dir__() -> list[str]:
    return sorted(__all__)


__version__ = "0.1.0"

__all__ = [
    "Blacklist",
    "BloomParameters",
    "CanonicalRules",
    "ConfigError",
    "CountingBloom",
    "DiskFull",
    "FetchJob",
    "FetchResult",
    "Frontier",
    "FrontierError",
    "InvalidURL",
    "MemorySeen",
    "SeenBatch",
    "SeenTest",
    "SharedBloom",
    "Status",
    "StorageError",
    "URLSeen",
    "VersionMismatch",
    "__version__",
    "bloom_parameters",
    "canonicalize",
    "fingerprint",
]
