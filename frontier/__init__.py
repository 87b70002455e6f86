"""frontier: "have we seen this URL?" at crawl speed, shared by every process on the machine, and durable.

    from frontier import URLSeen
    with URLSeen("data/seen", capacity=10_000_000, error_rate=1e-4, exact=True) as seen:
        seen.add("http://example.com/a")                 # True: first time seen, crawl it
        seen.add("HTTP://Example.COM:80/./a#top")        # False: the same canonical URL
        seen.add_many(["http://example.com/b", "ftp://x/"])  # [True, False]; .invalid == {1: InvalidURL(...)}

`Frontier` is the crawl scheduler (seeds in, leased jobs out, results back), `SharedBloom` is the
shared-memory filter on its own, `CountingBloom` its deletable sibling, `Blacklist` a filter in a
memory-mapped file that many processes check, `bloom_parameters` sizes one, `canonicalize` and
`fingerprint` are the URL -> string -> 16 bytes steps, `RedisSeen` the seen-test shared through Redis or Valkey
(`pip install "frontier-crawl[redis]"`), and every error is a `FrontierError`. The Scrapy plugin is
`frontier.scrapy.DupeFilter` and `frontier.scrapy.Scheduler`.
`import frontier` imports no HTTP, YAML, HTML, Redis or Scrapy library and starts no process.

The names in `__all__` (and the two Scrapy settings' names) are the public API; every module under frontier/ is
internal: its place may change (docs/design.md draws the parts and which may import which).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

# Eager: light, and `fingerprint` must be the function, not the submodule of the same name (importing the
# submodule binds it as an attribute of the package, which a lazy name would not overwrite).
from frontier.errors import ConfigError, DiskFull, FrontierError, InvalidURL, StorageError, VersionMismatch
from frontier.lazy import lazy_getattr
from frontier.seen.fingerprint import fingerprint

if TYPE_CHECKING:
    from frontier.crawl.messages import FetchJob, FetchResult, Status
    from frontier.crawl.scheduler import Frontier
    from frontier.seen.blacklist import Blacklist
    from frontier.seen.bloom import SharedBloom
    from frontier.seen.counting import CountingBloom
    from frontier.seen.sizing import BloomParameters, bloom_parameters
    from frontier.seen.urlseen import MemorySeen, SeenBatch, SeenTest, URLSeen
    from frontier.state.redis_seen import RedisSeen
    from frontier.url.canonical import CanonicalRules, canonicalize

# Names are imported on first use (PEP 562): a process that only needs, say, frontier.url.canonical (a fetcher
# worker) does not pay for numpy and LMDB, which the de-dup core imports, nor for redis (RedisSeen).
_LAZY = {
    "Blacklist": "frontier.seen.blacklist",
    "SharedBloom": "frontier.seen.bloom",
    "CanonicalRules": "frontier.url.canonical",
    "canonicalize": "frontier.url.canonical",
    "CountingBloom": "frontier.seen.counting",
    "Frontier": "frontier.crawl.scheduler",
    "FetchJob": "frontier.crawl.messages",
    "FetchResult": "frontier.crawl.messages",
    "Status": "frontier.crawl.messages",
    "MemorySeen": "frontier.seen.urlseen",
    "SeenBatch": "frontier.seen.urlseen",
    "SeenTest": "frontier.seen.urlseen",
    "URLSeen": "frontier.seen.urlseen",
    "RedisSeen": "frontier.state.redis_seen",
    "BloomParameters": "frontier.seen.sizing",
    "bloom_parameters": "frontier.seen.sizing",
}


__getattr__ = lazy_getattr(__name__, _LAZY, globals())


def __dir__() -> list[str]:
    return sorted(__all__)


__version__ = "0.1.0"  # the one place the version is written: pyproject.toml and `frontier --version` read it

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
    "RedisSeen",
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
