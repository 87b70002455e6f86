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

from frontier.blacklist import Blacklist
from frontier.bloom import SharedBloom
from frontier.canonical import CanonicalRules, canonicalize
from frontier.counting import CountingBloom
from frontier.errors import ConfigError, DiskFull, FrontierError, InvalidURL, StorageError, VersionMismatch
from frontier.fingerprint import fingerprint
from frontier.seen import MemorySeen, SeenBatch, SeenTest, URLSeen
from frontier.sizing import BloomParameters, bloom_parameters

from frontier.messages import FetchJob, FetchResult, Status
from frontier.crawl.scheduler import Frontier

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
